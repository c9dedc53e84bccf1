#!/usr/bin/env bash
# Session 6, third call: the sparse radix digit-0 histogram in the scoring kernel and the
# whole-chunk tile loop without lists; the nvfp4 reduce rewrite; a second engram sample.
# Predictions: benchmarks/NOTES.md, "Prediction for run 26".
set -u
. benchmarks/device_runs/env.sh
B="python3 benchmarks/kernel_breakdown.py"
S=next_n=1,profile=dsv32
timeout 60 python3 -m pytest -q -m gpu -x tests/test_sparse_mqa.py tests/test_nvfp4_attention.py > "$L/gpu_tests.log" 2>&1
echo "[$((SECONDS-t0)) s] gpu tests rc=$?"
timeout 150 python3 benchmarks/sparse_mqa.py $P --quick > "$L/sparse_bench.log" 2>&1; echo "[$((SECONDS-t0)) s] sparse rc=$?"
timeout 80 $B sparse_mqa --pack packs/nvidia-h200 --out "$OUT" --workload batch=1,context=8192,$S \
    --workload batch=1,context=524288,$S --workload batch=32,context=524288,$S > "$L/bd_sparse.log" 2>&1
timeout 60 $B sparse_mqa --pack packs/nvidia-h200 --out "$OUT" --inputs top_k=0,return_logits=true \
    --workload batch=1,context=524288,$S --workload batch=32,context=524288,$S > "$L/bd_sparse_score.log" 2>&1
echo "[$((SECONDS-t0)) s] sparse breakdowns rc=$?"
timeout 80 $B nvfp4_attention --pack packs/nvidia-h200 --out "$OUT" \
    --workload batch=8,context=131072,heads=16,kv_dtype=nvfp4,mode=dense \
    --workload batch=8,context=131072,heads=16,kv_dtype=fp8,mode=dense \
    --workload batch=8,context=131072,heads=64,kv_dtype=nvfp4,mode=dense > "$L/bd_nvfp4.log" 2>&1
echo "[$((SECONDS-t0)) s] nvfp4 breakdown rc=$?"
timeout 90 python3 benchmarks/nvfp4_attention.py --pack packs/nvidia-h200 --quick --modes dense --out "$OUT" \
    > "$L/nvfp4_bench.log" 2>&1; echo "[$((SECONDS-t0)) s] nvfp4 rc=$?"
left=$((560 - SECONDS + t0)); [ $left -gt 30 ] && timeout $left python3 benchmarks/engram.py $P --tokens 256,4096 \
    --table-rows 8M > "$L/engram_bench.log" 2>&1; echo "[$((SECONDS-t0)) s] engram rc=$?"
cd "$OUT" && tar czf run26.tgz logs *.json 2>/dev/null; rm -rf logs *.json
echo "== gpu_tests"; tar xzf run26.tgz -O logs/gpu_tests.log | tail -3
for f in bd_sparse bd_sparse_score bd_nvfp4; do
    echo "== $f"; tar xzf run26.tgz -O logs/$f.log | grep -v "^{\|Warning\|warn(\|raw results\|_warn_once" | cut -c1-250
done
echo "== sparse_bench"; tar xzf run26.tgz -O logs/sparse_bench.log | grep -A17 "^profile" | head -18
echo "== nvfp4_bench"; tar xzf run26.tgz -O logs/nvfp4_bench.log | grep -v "^{\|Warning\|warn(" | tail -22 | cut -c1-200
echo "== engram"; tar xzf run26.tgz -O logs/engram_bench.log | grep "overlap\|x eager\|^ *256\|^ *4096\|target" | cut -c1-160
