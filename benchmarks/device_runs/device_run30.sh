#!/usr/bin/env bash
# Session 7, third call: the radix top-k's parameters at B=32 512K, where every pack entry is
# still the default: TOPK_SPLITS, TOPK_BLOCK, the ranking (PLACE_SORT / RANK_BLOCK) as
# --variant overrides of the pack config, each verified and timed beside scoring alone;
# the per-launch breakdown of both profiles' pack configs.
set -u
. benchmarks/device_runs/env.sh
V=""
for v in ts16:TOPK_SPLITS=16 ts64:TOPK_SPLITS=64 ts128:TOPK_SPLITS=128 tb512:TOPK_BLOCK=512 tb2048:TOPK_BLOCK=2048 \
         sort:PLACE_SORT=1,RANK_BLOCK=64 rank16:PLACE_SORT=0,RANK_BLOCK=16 rank32:PLACE_SORT=0,RANK_BLOCK=32 \
         rank128:PLACE_SORT=0,RANK_BLOCK=128; do V="$V --variant $v"; done
timeout 300 python3 benchmarks/sparse_mqa.py $P --batch 32 --context 524288 --next-n 1 --no-baseline --reps 30 $V \
    > "$L/sparse_variants.log" 2>&1; echo "[$((SECONDS-t0)) s] variants rc=$?"
timeout 90 python3 benchmarks/kernel_breakdown.py sparse_mqa --workload batch=32,context=524288,next_n=1,profile=dsv32 \
    --workload batch=32,context=524288,next_n=1,profile=dsv41-flash --pack packs/nvidia-h200 --out "$OUT" > "$L/bd_sparse.log" 2>&1
echo "[$((SECONDS-t0)) s] breakdown rc=$?"
cd "$OUT" && tar czf run30.tgz logs *.json 2>/dev/null; rm -rf logs *.json
echo "== variants"; tar xzf run30.tgz -O logs/sparse_variants.log | grep -v "Warning\|warn(" | tail -12 | tr ";" "\n" | cut -c1-200
echo "== breakdown"; tar xzf run30.tgz -O logs/bd_sparse.log | grep "call\|in order" | cut -c1-300
