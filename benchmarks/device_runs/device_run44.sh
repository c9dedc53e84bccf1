#!/usr/bin/env bash
# Session 8, last call (information for the next session): the mHC default's 3 stages at an
# untuned shape (T = 8192, D = 5120) against 2; sparse B=1 512K radix knobs (quarter first digit,
# 512-key blocks, 128 programs a row).
set -u
. benchmarks/device_runs/env.sh
timeout 90 python3 benchmarks/mhc.py --out "$OUT" --op seam --tokens 8192 --dim 5120 --no-baselines --reps 30 \
    --variants '{"st2": {"num_stages": 2}}' > "$L/mhc8192.log" 2>&1; echo "[$((SECONDS-t0)) s] mhc rc=$?"
timeout 120 python3 benchmarks/sparse_mqa.py $P --no-baseline --reps 30 --next-n 1 --batch 1 --context 524288 \
    --variant quarter:RADIX_FIRST=quarter --variant tb512:TOPK_BLOCK=512 --variant ts128:TOPK_SPLITS=128 \
    > "$L/sparse_b1.log" 2>&1; echo "[$((SECONDS-t0)) s] sparse rc=$?"
cd "$OUT" && tar czf run44.tgz logs *.json 2>/dev/null; rm -rf logs *.json
echo "== mhc"; tar xzf run44.tgz -O logs/mhc8192.log | grep " us (" | cut -c1-200
echo "== sparse"; tar xzf run44.tgz -O logs/sparse_b1.log | grep -v "Warning\|warn(" | sed -n "/^top-k paths/,/^variants/p" | cut -c1-220
