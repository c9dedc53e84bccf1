#!/usr/bin/env bash
# Session 8, call 3: scoring-kernel shapes the tuner never drew for dsv41-flash (its 50 trials
# at B=32 512K all ran NUM_SPLITS 16 with 4 warps): more splits, 8 warps, 128-key tiles with 8
# warps, 4 stages; the same at B=1 and for dsv32 B=1 (57% of floor at 512K).
set -u
. benchmarks/device_runs/env.sh
B="python3 benchmarks/sparse_mqa.py $P --no-baseline --reps 30 --next-n 1"
timeout 150 $B --profiles dsv41-flash --batch 32 --context 131072,524288 --variant ns32:NUM_SPLITS=32 \
    --variant w8:num_warps=8 --variant ns32w8:NUM_SPLITS=32,num_warps=8 --variant bn128w8:BLOCK_N=128,num_warps=8 \
    --variant st4:num_stages=4 > "$L/dsv41_b32.log" 2>&1; echo "[$((SECONDS-t0)) s] dsv41 b32 rc=$?"
timeout 150 $B --batch 1 --context 131072,524288 --variant ns256:NUM_SPLITS=256 --variant w8:num_warps=8 \
    --variant ns256w8:NUM_SPLITS=256,num_warps=8 --variant bn128w8:BLOCK_N=128,num_warps=8 \
    > "$L/b1.log" 2>&1; echo "[$((SECONDS-t0)) s] b1 rc=$?"
cd "$OUT" && tar czf run39.tgz logs *.json 2>/dev/null; rm -rf logs *.json
for f in dsv41_b32 b1; do echo "== $f"
  tar xzf run39.tgz -O logs/$f.log | grep -v "Warning\|warn(" | sed -n "/^variants/,/^targets/p" | cut -c1-330; done
