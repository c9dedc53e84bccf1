#!/usr/bin/env bash
# Device call prepared in session 5 (no GPU time that session): checks its predictions
# (benchmarks/NOTES.md, "Session 5"). In order of value per second:
#  1. sparse_mqa B=1 / 32: the pack's configs vs num_stages 5 (two key tiles in flight) and,
#     at B=1, 512 splits (the new defaults; the 8K points have no pack entry: defaults run);
#  2. MoE floor ladder: what the unavoidable steps cost against the empty launch;
#  3. engram: the benchmark with the layer sized to the lookup's time; the host gather probe;
#  4. MoE T=16 dsv3 re-tune (re-times the earlier 6.9 us config first), export, MoE benchmark.
set -u
. benchmarks/device_runs/env.sh
timeout 60 python3 -m pytest -q -m gpu -x tests/test_sparse_mqa.py > "$L/gpu_tests.log" 2>&1
echo "[$((SECONDS-t0)) s] sparse gpu tests (new defaults: 512 splits, stages 5) rc=$?"
timeout 160 python3 benchmarks/sparse_mqa.py $P --batch 1,32 --next-n 1 --context 8192,131072,524288 --no-baseline \
    --variant st5:num_stages=5 --variant s512:NUM_SPLITS=512 --variant s512st5:NUM_SPLITS=512,num_stages=5 \
    > "$L/sparse_b1.log" 2>&1; echo "[$((SECONDS-t0)) s] sparse rc=$?"
timeout 60 python3 benchmarks/moe_floor_ladder.py --pack packs/nvidia-h200 --out "$OUT" > "$L/moe_ladder.log" 2>&1
echo "[$((SECONDS-t0)) s] moe ladder rc=$?"
timeout 100 python3 benchmarks/engram.py $P --tokens 256,4096 --table-rows 8M > "$L/engram_bench.log" 2>&1
echo "[$((SECONDS-t0)) s] engram rc=$?"
timeout 90 python3 benchmarks/host_gather_probe.py --out "$OUT" > "$L/host_gather.log" 2>&1; echo "[$((SECONDS-t0)) s] probe rc=$?"
left=$((470 - SECONDS + t0)); [ $left -gt 40 ] && timeout $((left < 90 ? left : 90)) $T moe-routing --tokens 16 \
    --profile dsv3 --budget 45s --retune > "$L/moe_tune.log" 2>&1; echo "[$((SECONDS-t0)) s] moe tune rc=$?"
cp results.db "$OUT/results.db"
$T export --out packs/nvidia-h200 > "$L/export.log" 2>&1 && $T verify-pack packs/nvidia-h200 >> "$L/export.log" 2>&1
echo "export rc=$?"; cp -r packs/nvidia-h200 "$OUT/pack"
left=$((580 - SECONDS + t0)); [ $left -gt 20 ] && timeout $left python3 benchmarks/moe_routing.py $P > "$L/moe_bench.log" 2>&1
echo "[$((SECONDS-t0)) s] moe rc=$?"
cd "$OUT" && tar czf run22.tgz logs *.json 2>/dev/null; rm -rf logs *.json
for f in gpu_tests sparse_b1 moe_ladder engram_bench host_gather moe_bench; do
    echo "== $f"; tar xzf run22.tgz -O logs/$f.log | grep -v "^{\|Warning\|warn(" | tail -18 | cut -c1-170
done
tar xzf run22.tgz -O logs/moe_tune.log | grep "│ " | cut -c1-150
