#!/usr/bin/env bash
# Session 14, first call: the bound held in registers (_group_bound ONE_LOAD; BOUND_FUSED filters with
# every maximum in registers at 16 warps), deeper scoring pipelines (num_stages 7 / 9). GPU tests,
# breakdown, then dsv32 B=1 next_n 1 at 512K and 128K.
set -u
. benchmarks/device_runs/env.sh
timeout 240 python3 -m pytest -q -x tests/test_sparse_mqa.py -m gpu -k "bound or pdl or default_configs" -p no:cacheprovider > "$L/sparse_tests.log" 2>&1
rc=$?; echo "[$((SECONDS-t0)) s] sparse gpu tests rc=$rc"; tail -3 "$L/sparse_tests.log" | cut -c1-300
if [ $rc = 0 ]; then
B="TOPK_ALGO=bound,RADIX_FIRST=byte,RADIX_FUSED=0,PLACE_CHUNK=0,PLACE_SORT=0,BOUND_GROUP=64,RANK_STEP=8192"
KB="python3 benchmarks/kernel_breakdown.py sparse_mqa --pack packs/nvidia-h200 --out $OUT --calls 20"
W5=batch=1,context=524288,next_n=1,profile=dsv32
timeout 60 $KB --workload $W5 --config $B > "$L/bd_parts.log" 2>&1
timeout 60 $KB --workload $W5 --config $B,BOUND_FUSED=1 > "$L/bd_fused.log" 2>&1
timeout 60 $KB --workload $W5 --config $B,num_stages=9 > "$L/bd_s9.log" 2>&1
echo "[$((SECONDS-t0)) s] breakdowns"
timeout 240 python3 benchmarks/sparse_mqa.py $P --reps 30 --profiles dsv32 --next-n 1 --batch 1 --context 524288 --algos radix \
    --variant p:$B,LAUNCH_PDL=1 --variant s7:$B,LAUNCH_PDL=1,num_stages=7 --variant s9:$B,LAUNCH_PDL=1,num_stages=9 \
    --variant tb2k:$B,LAUNCH_PDL=1,TOPK_BLOCK=2048 --variant f:$B,LAUNCH_PDL=1,BOUND_FUSED=1 \
    --variant f128:$B,LAUNCH_PDL=1,BOUND_FUSED=1,TOPK_SPLITS=128 --variant f9:$B,LAUNCH_PDL=1,BOUND_FUSED=1,num_stages=9 \
    > "$L/sparse_512k.log" 2>&1; echo "[$((SECONDS-t0)) s] 512K rc=$?"
B2="TOPK_ALGO=bound,RADIX_FIRST=byte,RADIX_FUSED=0,PLACE_CHUNK=0,PLACE_SORT=0,RANK_STEP=8192"
timeout 200 python3 benchmarks/sparse_mqa.py $P --reps 30 --next-n 1 --batch 1 --context 131072 --algos radix,bound \
    --variant p:$B2,LAUNCH_PDL=1 --variant s9:$B2,LAUNCH_PDL=1,num_stages=9 --variant f:$B2,LAUNCH_PDL=1,BOUND_FUSED=1 \
    > "$L/sparse_128k.log" 2>&1; echo "[$((SECONDS-t0)) s] 128K rc=$?"
fi
cd "$OUT" && tar czf run76.tgz logs *.json 2>/dev/null; rm -rf logs *.json
for f in bd_parts bd_fused bd_s9; do tar xzf run76.tgz -O logs/$f.log 2>/dev/null | grep -v "^WARNING\|Warn\|warn_once\|^raw" | cut -c1-160; done
for f in sparse_512k sparse_128k; do echo "== $f"; tar xzf run76.tgz -O logs/$f.log 2>/dev/null | grep -A30 "^top-k paths" | grep -v "^\s*$\|MISS" | cut -c1-600 | head -40; done
