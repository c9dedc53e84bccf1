#!/usr/bin/env bash
# Session 7, fourth call: combinations of run 30's winners (TOPK_SPLITS 64 / 128 with
# TOPK_BLOCK 2048, the ranking) at B=32, 128K and 512K, both profiles (the search space now
# admits 128 radix programs a row at B=32).
set -u
. benchmarks/device_runs/env.sh
V=""
for v in ts64:TOPK_SPLITS=64 ts128:TOPK_SPLITS=128 ts64b2k:TOPK_SPLITS=64,TOPK_BLOCK=2048 \
         ts128b2k:TOPK_SPLITS=128,TOPK_BLOCK=2048 ts128b512:TOPK_SPLITS=128,TOPK_BLOCK=512 \
         ts64b2kr128:TOPK_SPLITS=64,TOPK_BLOCK=2048,PLACE_SORT=0,RANK_BLOCK=128 \
         ts128b2kr128:TOPK_SPLITS=128,TOPK_BLOCK=2048,PLACE_SORT=0,RANK_BLOCK=128; do V="$V --variant $v"; done
timeout 400 python3 benchmarks/sparse_mqa.py $P --batch 32 --context 131072,524288 --next-n 1 --no-baseline --reps 30 $V \
    > "$L/sparse_variants.log" 2>&1; echo "[$((SECONDS-t0)) s] variants rc=$?"
cd "$OUT" && tar czf run31.tgz logs *.json 2>/dev/null; rm -rf logs *.json
echo "== variants"; tar xzf run31.tgz -O logs/sparse_variants.log | grep -v "Warning\|warn(" | grep -B2 -A6 "top-k paths" | cut -c1-260
