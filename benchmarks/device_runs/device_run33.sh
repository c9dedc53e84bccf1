#!/usr/bin/env bash
# Session 7, sixth call: the radix top-k's quarter-binade first digit (RADIX_FINE0, one more
# digit pass, ~5x fewer candidates after the first pick) as a --variant of every --quick
# workload's pack config; the per-launch breakdown of it at B=32 512K.
set -u
. benchmarks/device_runs/env.sh
timeout 300 python3 benchmarks/sparse_mqa.py $P --quick --no-baseline --reps 30 --variant fine:RADIX_FINE0=1 \
    > "$L/sparse_fine.log" 2>&1; echo "[$((SECONDS-t0)) s] variants rc=$?"
timeout 90 python3 benchmarks/kernel_breakdown.py sparse_mqa --workload batch=32,context=524288,next_n=1,profile=dsv32 \
    --workload batch=32,context=524288,next_n=1,profile=dsv41-flash --pack packs/nvidia-h200 --config RADIX_FINE0=1 \
    --out "$OUT" > "$L/bd_sparse.log" 2>&1; echo "[$((SECONDS-t0)) s] breakdown rc=$?"
cd "$OUT" && tar czf run33.tgz logs *.json 2>/dev/null; rm -rf logs *.json
echo "== variants"; tar xzf run33.tgz -O logs/sparse_fine.log | grep -v "Warning\|warn(" | grep -A18 "top-k paths" | cut -c1-200
echo "== breakdown"; tar xzf run33.tgz -O logs/bd_sparse.log | grep "call\|in order" | cut -c1-300
