#!/usr/bin/env bash
# Session 13, third call: the bound launch in parts of <= 1024 maxima, histograms by compares
# (no tl.histogram): GPU tests, breakdown, then B=1 next_n 1 at 512K and 32K / 128K.
set -u
. benchmarks/device_runs/env.sh
timeout 200 python3 -m pytest -q -x tests/test_sparse_mqa.py -m gpu -k "bound or pdl or default_configs" -p no:cacheprovider > "$L/sparse_tests.log" 2>&1
rc=$?; echo "[$((SECONDS-t0)) s] sparse gpu tests rc=$rc"; tail -3 "$L/sparse_tests.log" | cut -c1-300
if [ $rc = 0 ]; then
B="TOPK_ALGO=bound,RADIX_FIRST=byte,RADIX_FUSED=0,PLACE_CHUNK=0,PLACE_SORT=0"
KB="python3 benchmarks/kernel_breakdown.py sparse_mqa --pack packs/nvidia-h200 --out $OUT --calls 20"
timeout 80 $KB --workload batch=1,context=524288,next_n=1,profile=dsv32 --config $B,BOUND_GROUP=64,RANK_STEP=8192 > "$L/bd_64.log" 2>&1
timeout 80 $KB --workload batch=1,context=524288,next_n=1,profile=dsv32 --config $B,BOUND_GROUP=32,RANK_STEP=8192 > "$L/bd_32.log" 2>&1
timeout 80 $KB --workload batch=1,context=131072,next_n=1,profile=dsv32 --config RANK_STEP=8192 > "$L/bd_128k.log" 2>&1
echo "[$((SECONDS-t0)) s] breakdowns"
timeout 200 python3 benchmarks/sparse_mqa.py $P --reps 30 --next-n 1 --batch 1 --context 524288 --algos radix,bound \
    --variant b64s:$B,BOUND_GROUP=64,RANK_STEP=8192 --variant b32s:$B,BOUND_GROUP=32,RANK_STEP=8192 \
    --variant bf64s:$B,BOUND_GROUP=64,BOUND_FUSED=1,RANK_STEP=8192 \
    --variant b64sp:$B,BOUND_GROUP=64,RANK_STEP=8192,LAUNCH_PDL=1 > "$L/sparse_512k.log" 2>&1; echo "[$((SECONDS-t0)) s] 512K rc=$?"
timeout 200 python3 benchmarks/sparse_mqa.py $P --reps 30 --next-n 1 --batch 1 --context 32768,131072 --algos radix,bound \
    --variant s:$B,RANK_STEP=8192 --variant fs:$B,BOUND_FUSED=1,RANK_STEP=8192 --variant sp:$B,RANK_STEP=8192,LAUNCH_PDL=1 \
    > "$L/sparse_128k.log" 2>&1; echo "[$((SECONDS-t0)) s] 32K/128K rc=$?"
fi
cd "$OUT" && tar czf run75.tgz logs *.json 2>/dev/null; rm -rf logs *.json
for f in bd_64 bd_32 bd_128k; do tar xzf run75.tgz -O logs/$f.log 2>/dev/null | grep -v "^WARNING\|Warn\|warn_once\|^raw" | cut -c1-160; done
for f in sparse_512k sparse_128k; do echo "== $f"; tar xzf run75.tgz -O logs/$f.log 2>/dev/null | grep -A30 "^top-k paths" | grep -v "^\s*$\|MISS" | cut -c1-600 | head -40; done
