#!/usr/bin/env bash
# Session 7, information for the next session (no pack change): the sampled first digit's
# block and split sizes at B=32 128K / 512K, its per-launch breakdown at 128K, and an engram
# T=4096 sample (overlap at 4096 has been 87-89%).
set -u
. benchmarks/device_runs/env.sh
V=""
for v in tb1024:TOPK_BLOCK=1024 tb2048:TOPK_BLOCK=2048 ts64:TOPK_SPLITS=64 ts256:TOPK_SPLITS=256; do V="$V --variant $v"; done
timeout 150 python3 benchmarks/sparse_mqa.py $P --batch 32 --context 131072,524288 --next-n 1 --no-baseline --reps 30 $V \
    > "$L/sparse_variants.log" 2>&1; echo "[$((SECONDS-t0)) s] variants rc=$?"
timeout 60 python3 benchmarks/kernel_breakdown.py sparse_mqa --workload batch=32,context=131072,next_n=1,profile=dsv32 \
    --workload batch=32,context=131072,next_n=1,profile=dsv41-flash --pack packs/nvidia-h200 --out "$OUT" \
    > "$L/bd_sparse.log" 2>&1; echo "[$((SECONDS-t0)) s] breakdown rc=$?"
left=$((200 - SECONDS + t0)); [ $left -gt 20 ] && timeout $left python3 benchmarks/engram.py $P --tokens 4096 --table-rows 8M \
    > "$L/engram_bench.log" 2>&1; echo "[$((SECONDS-t0)) s] engram rc=$?"
cd "$OUT" && tar czf run36.tgz logs *.json 2>/dev/null; rm -rf logs *.json
echo "== variants"; tar xzf run36.tgz -O logs/sparse_variants.log | grep -v "Warning\|warn(" | grep -A6 "top-k paths" | cut -c1-200
echo "== breakdown"; tar xzf run36.tgz -O logs/bd_sparse.log | grep "call\|in order" | cut -c1-300
echo "== engram"; tar xzf run36.tgz -O logs/engram_bench.log | tail -9
