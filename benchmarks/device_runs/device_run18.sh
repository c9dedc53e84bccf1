#!/usr/bin/env bash
# Device call (session 4, call 5): sparse_mqa dsv32 re-tune at B=32, export, then every
# family's benchmark with that pack (engram's prefetch now two 2-CTA clusters), GPU tests.
set -u
. benchmarks/device_runs/env.sh
timeout 150 $T sparse-mqa --profile dsv32 --batch 32 --context 131072,524288 --next-n 1 --budget 100s --retune > "$L/sparse_tune.log" 2>&1; echo "[$((SECONDS-t0)) s] sparse tune rc=$?"
cp results.db "$OUT/results.db"
$T export --out packs/nvidia-h200 > "$L/export.log" 2>&1 && $T verify-pack packs/nvidia-h200 >> "$L/export.log" 2>&1; echo "export rc=$?"; cp -r packs/nvidia-h200 "$OUT/pack"
timeout 80 python3 benchmarks/sparse_mqa.py $P --quick > "$L/sparse_mqa_bench.log" 2>&1; echo "[$((SECONDS-t0)) s] sparse rc=$?"
timeout 80 python3 benchmarks/engram.py $P --tokens 256,4096 --table-rows 8M > "$L/engram_bench.log" 2>&1; echo "[$((SECONDS-t0)) s] engram rc=$?"
timeout 40 python3 benchmarks/moe_routing.py $P > "$L/moe_bench.log" 2>&1; echo "[$((SECONDS-t0)) s] moe rc=$?"
timeout 40 python3 benchmarks/mhc.py $P --op seam --tokens 1,64,256,1024,4096 --dim 5120 > "$L/mhc_bench.log" 2>&1; echo "[$((SECONDS-t0)) s] mhc rc=$?"
left=$((520 - SECONDS + t0)); [ $left -gt 20 ] && timeout $left python3 benchmarks/nvfp4_attention.py $P --quick --modes dense --no-baseline > "$L/nvfp4_bench.log" 2>&1; echo "[$((SECONDS-t0)) s] nvfp4 rc=$?"
left=$((580 - SECONDS + t0)); [ $left -gt 20 ] && timeout $left python3 -m pytest -q -m gpu -x tests/test_engram.py tests/test_moe_routing.py tests/test_sparse_mqa.py > "$L/gpu_tests.log" 2>&1; echo "[$((SECONDS-t0)) s] gpu tests rc=$?"
cd "$OUT" && tar czf run18.tgz logs *.json 2>/dev/null; rm -rf logs *.json
tar xzf run18.tgz -O logs/sparse_tune.log | grep "│ " | cut -c1-150
for f in sparse_mqa_bench engram_bench moe_bench mhc_bench nvfp4_bench gpu_tests; do echo "== $f"; tar xzf run18.tgz -O logs/$f.log | grep -v "^{\|Warning\|warn(" | tail -14 | cut -c1-170; done
