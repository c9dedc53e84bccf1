#!/usr/bin/env bash
# Session 12, second benchmark call: the bound top-k with its bound computed once a row
# (_bound_threshold_kernel) instead of in every filter program. GPU tests, then B=1 at
# 32K / 128K / 512K with the baseline (the pack's radix config vs bound variants), B=32 128K.
set -u
. benchmarks/device_runs/env.sh
timeout 200 python3 -m pytest -q -x tests/test_sparse_mqa.py -m gpu -k "bound" -p no:cacheprovider > "$L/sparse_tests.log" 2>&1
rc=$?; echo "[$((SECONDS-t0)) s] sparse bound gpu tests rc=$rc"; tail -3 "$L/sparse_tests.log" | cut -c1-300
if [ $rc = 0 ]; then
B="TOPK_ALGO=bound,RADIX_FIRST=byte,RADIX_FUSED=0,PLACE_CHUNK=0,PLACE_SORT=0"
timeout 250 python3 benchmarks/sparse_mqa.py $P --reps 30 --next-n 1 --batch 1 --context 32768,131072,524288 \
    --variant b64:$B,BOUND_GROUP=64 --variant b32:$B,BOUND_GROUP=32 --variant b16:$B,BOUND_GROUP=16 \
    --variant b64p128:$B,BOUND_GROUP=64,TOPK_SPLITS=128 > "$L/sparse_b1.log" 2>&1; echo "[$((SECONDS-t0)) s] sparse B=1 rc=$?"
timeout 100 python3 benchmarks/sparse_mqa.py $P --reps 20 --next-n 1 --batch 32 --context 131072 --no-baseline \
    --variant b64:$B,BOUND_GROUP=64 > "$L/sparse_b32.log" 2>&1; echo "[$((SECONDS-t0)) s] sparse B=32 rc=$?"
fi
cd "$OUT" && tar czf run70.tgz logs *.json 2>/dev/null; rm -rf logs *.json
for f in sparse_b1 sparse_b32; do echo "== $f"; tar xzf run70.tgz -O logs/$f.log 2>/dev/null | grep -A12 "^top-k paths" | cut -c1-200; done
