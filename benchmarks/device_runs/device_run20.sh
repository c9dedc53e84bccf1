#!/usr/bin/env bash
# Device call (session 4, call 7): MoE direct kernel (one warp per token, T <= 32) against
# the pack, small-T re-tune, export, final MoE and sparse_mqa benchmarks, GPU tests.
set -u
. benchmarks/device_runs/env.sh
timeout 60 python3 benchmarks/moe_routing.py --tokens 1 2 4 8 16 32 64 --out "$OUT" > "$L/moe_defaults.log" 2>&1; echo "[$((SECONDS-t0)) s] moe defaults rc=$?"
timeout 30 python3 -m pytest -q -m gpu tests/test_moe_routing.py tests/test_sparse_mqa.py > "$L/gpu_tests.log" 2>&1; echo "[$((SECONDS-t0)) s] gpu tests rc=$?"
timeout 150 $T moe-routing --tokens 1,4,16,64 --profile dsv3,dsv41-flash,dsv4-flash --budget 110s --retune > "$L/moe_tune.log" 2>&1; echo "[$((SECONDS-t0)) s] moe tune rc=$?"
cp results.db "$OUT/results.db"
$T export --out packs/nvidia-h200 > "$L/export.log" 2>&1 && $T verify-pack packs/nvidia-h200 >> "$L/export.log" 2>&1; echo "export rc=$?"; cp -r packs/nvidia-h200 "$OUT/pack"
timeout 45 python3 benchmarks/moe_routing.py $P > "$L/moe_bench.log" 2>&1; echo "[$((SECONDS-t0)) s] moe rc=$?"
left=$((560 - SECONDS + t0)); timeout $left python3 benchmarks/sparse_mqa.py $P --quick > "$L/sparse_mqa_bench.log" 2>&1; echo "[$((SECONDS-t0)) s] sparse rc=$?"
cd "$OUT" && tar czf run20.tgz logs *.json 2>/dev/null; rm -rf logs *.json
tar xzf run20.tgz -O logs/moe_tune.log | grep "│ " | cut -c1-150
for f in moe_defaults gpu_tests moe_bench sparse_mqa_bench; do echo "== $f"; tar xzf run20.tgz -O logs/$f.log | grep -v "^{\|Warning\|warn(\|MISS\|  ok" | tail -22 | cut -c1-170; done
