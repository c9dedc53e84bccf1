#!/usr/bin/env bash
# Session 12, first call: sparse_mqa TOPK_ALGO=bound (one filter-and-select launch at the
# k-th group max instead of six or more radix passes). GPU tests (bound vs the radix path,
# the defaults), then B=1 next_n 1 at every context with the baseline (the pack's radix
# config vs bound variants), then B=32 at 128K / 512K without the baseline.
set -u
. benchmarks/device_runs/env.sh
timeout 240 python3 -m pytest -q -x tests/test_sparse_mqa.py -m gpu -k "bound or default_configs" -p no:cacheprovider > "$L/sparse_tests.log" 2>&1
rc=$?; echo "[$((SECONDS-t0)) s] sparse bound gpu tests rc=$rc"; tail -3 "$L/sparse_tests.log" | cut -c1-300
if [ $rc = 0 ]; then
B="TOPK_ALGO=bound,RADIX_FIRST=byte,RADIX_FUSED=0,PLACE_CHUNK=0,PLACE_SORT=0"
timeout 330 python3 benchmarks/sparse_mqa.py $P --reps 30 --next-n 1 --batch 1 \
    --variant b64:$B,BOUND_GROUP=64 --variant b16:$B,BOUND_GROUP=16 --variant b64p128:$B,BOUND_GROUP=64,TOPK_SPLITS=128 \
    --variant b64r64:$B,BOUND_GROUP=64,RANK_BLOCK=64 > "$L/sparse_b1.log" 2>&1; echo "[$((SECONDS-t0)) s] sparse B=1 rc=$?"
timeout 150 python3 benchmarks/sparse_mqa.py $P --reps 20 --next-n 1 --batch 32 --context 131072,524288 --no-baseline \
    --variant b64:$B,BOUND_GROUP=64 --variant b16:$B,BOUND_GROUP=16 > "$L/sparse_b32.log" 2>&1; echo "[$((SECONDS-t0)) s] sparse B=32 rc=$?"
fi
cd "$OUT" && tar czf run69.tgz logs *.json 2>/dev/null; rm -rf logs *.json
for f in sparse_b1 sparse_b32; do echo "== $f"; tar xzf run69.tgz -O logs/$f.log 2>/dev/null | grep -v "Warning\|warn(" | tail -40 | cut -c1-200; done
