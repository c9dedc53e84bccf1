#!/usr/bin/env bash
# Session 13, second call: the bound path's new threshold (three nested 32-bin histograms),
# BOUND_FUSED (the filter programs derive the bound), RANK_STEP (bigger ranking steps) and
# LAUNCH_PDL (programmatic dependent launches) on the GPU: tests, then B=1 next_n 1 at 32K /
# 128K / 512K, both profiles (radix / bound / variants), and a breakdown of the best guess.
set -u
. benchmarks/device_runs/env.sh
timeout 250 python3 -m pytest -q -x tests/test_sparse_mqa.py -m gpu -k "bound or pdl or default_configs" -p no:cacheprovider > "$L/sparse_tests.log" 2>&1
rc=$?; echo "[$((SECONDS-t0)) s] sparse gpu tests rc=$rc"; tail -3 "$L/sparse_tests.log" | cut -c1-300
if [ $rc = 0 ]; then
B="TOPK_ALGO=bound,RADIX_FIRST=byte,RADIX_FUSED=0,PLACE_CHUNK=0,PLACE_SORT=0"
timeout 280 python3 benchmarks/sparse_mqa.py $P --reps 30 --next-n 1 --batch 1 --context 524288 --algos radix,bound \
    --variant bf:$B,BOUND_GROUP=64,BOUND_FUSED=1 --variant bp:$B,BOUND_GROUP=64,LAUNCH_PDL=1 \
    --variant bfp:$B,BOUND_GROUP=64,BOUND_FUSED=1,LAUNCH_PDL=1 \
    --variant bfps:$B,BOUND_GROUP=64,BOUND_FUSED=1,LAUNCH_PDL=1,RANK_STEP=8192 \
    --variant bfps32:$B,BOUND_GROUP=32,BOUND_FUSED=1,LAUNCH_PDL=1,RANK_STEP=8192 \
    --variant rp:LAUNCH_PDL=1 > "$L/sparse_512k.log" 2>&1; echo "[$((SECONDS-t0)) s] 512K rc=$?"
timeout 250 python3 benchmarks/sparse_mqa.py $P --reps 30 --next-n 1 --batch 1 --context 32768,131072 --algos radix,bound \
    --variant bf:$B,BOUND_FUSED=1 --variant bp:$B,LAUNCH_PDL=1 --variant bfp:$B,BOUND_FUSED=1,LAUNCH_PDL=1 \
    --variant bfps:$B,BOUND_FUSED=1,LAUNCH_PDL=1,RANK_STEP=8192 > "$L/sparse_128k.log" 2>&1; echo "[$((SECONDS-t0)) s] 32K/128K rc=$?"
KB="python3 benchmarks/kernel_breakdown.py sparse_mqa --pack packs/nvidia-h200 --out $OUT --calls 20"
timeout 100 $KB --workload batch=1,context=524288,next_n=1,profile=dsv32 --workload batch=1,context=131072,next_n=1,profile=dsv32 \
    --config $B,BOUND_GROUP=64,RANK_STEP=8192 > "$L/bd_bs.log" 2>&1; echo "[$((SECONDS-t0)) s] breakdown rc=$?"
fi
cd "$OUT" && tar czf run74.tgz logs *.json 2>/dev/null; rm -rf logs *.json
for f in sparse_512k sparse_128k; do echo "== $f"; tar xzf run74.tgz -O logs/$f.log 2>/dev/null | grep -B2 -A40 "^top-k paths" | grep -v "^\s*$" | cut -c1-600 | head -60; done
tar xzf run74.tgz -O logs/bd_bs.log 2>/dev/null | grep -v "^WARNING\|Warn\|warn_once" | cut -c1-160
