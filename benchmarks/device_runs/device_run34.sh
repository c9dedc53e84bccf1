#!/usr/bin/env bash
# Session 7, seventh call: the radix first digit, "quarter" (run 33's RADIX_FINE0) and
# "sampled" (digit-0 threshold from every 16th key, every key above it kept, a fallback pass)
# as --variant of every --quick workload's pack config; breakdown of "sampled" at B=32 512K.
set -u
. benchmarks/device_runs/env.sh
timeout 300 python3 benchmarks/sparse_mqa.py $P --quick --no-baseline --reps 30 --variant quarter:RADIX_FIRST=quarter \
    --variant sampled:RADIX_FIRST=sampled > "$L/sparse_first.log" 2>&1; echo "[$((SECONDS-t0)) s] variants rc=$?"
timeout 90 python3 benchmarks/kernel_breakdown.py sparse_mqa --workload batch=32,context=524288,next_n=1,profile=dsv32 \
    --workload batch=32,context=524288,next_n=1,profile=dsv41-flash --pack packs/nvidia-h200 --config RADIX_FIRST=sampled \
    --out "$OUT" > "$L/bd_sparse.log" 2>&1; echo "[$((SECONDS-t0)) s] breakdown rc=$?"
cd "$OUT" && tar czf run34.tgz logs *.json 2>/dev/null; rm -rf logs *.json
echo "== variants"; tar xzf run34.tgz -O logs/sparse_first.log | grep -v "Warning\|warn(" | grep -A18 "top-k paths" | cut -c1-200
echo "== breakdown"; tar xzf run34.tgz -O logs/bd_sparse.log | grep "call\|in order" | cut -c1-300
