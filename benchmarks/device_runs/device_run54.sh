#!/usr/bin/env bash
# Session 9, tenth call: (1) sparse_mqa RADIX_FUSED (one launch for every radix pass, per-row
# grid barriers): GPU tests under a timeout (a deadlock shows as one), then B=1 512K fused
# (the new default at <= 4 rows) against one launch a pass at 256 and 128 programs a row, no
# pack; (2) nvfp4 at the H16 target points with the new pack: nvfp4 (GLUON) vs fp8 vs bf16.
set -u
. benchmarks/device_runs/env.sh
timeout 120 python3 -m pytest -q -x tests/test_sparse_mqa.py -m gpu -k "fused" -p no:cacheprovider > "$L/sparse_tests.log" 2>&1
rc=$?; echo "[$((SECONDS-t0)) s] sparse fused tests rc=$rc"; tail -3 "$L/sparse_tests.log" | cut -c1-300
if [ $rc = 0 ]; then
timeout 150 python3 benchmarks/sparse_mqa.py --out "$OUT" --no-baseline --reps 30 --next-n 1 --batch 1 --context 524288 \
    --variant unfused256:RADIX_FUSED=0,TOPK_SPLITS=256 --variant unfused128:RADIX_FUSED=0,TOPK_SPLITS=128 \
    > "$L/sparse_b1.log" 2>&1; echo "[$((SECONDS-t0)) s] sparse rc=$?"
fi
timeout 150 python3 benchmarks/nvfp4_attention.py $P --kv-dtypes nvfp4,fp8,bf16 --modes dense --heads 16 --batch 16,64 \
    --context 32768,131072 --no-baseline --reps 20 > "$L/nvfp4.log" 2>&1; echo "[$((SECONDS-t0)) s] nvfp4 rc=$?"
cd "$OUT" && tar czf run54.tgz logs *.json 2>/dev/null; rm -rf logs *.json
echo "== sparse"; tar xzf run54.tgz -O logs/sparse_b1.log 2>/dev/null | grep -v "Warning\|warn(" | tail -14 | cut -c1-220
echo "== nvfp4"; tar xzf run54.tgz -O logs/nvfp4.log | grep -A30 "^mode" | cut -c1-150
