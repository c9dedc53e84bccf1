#!/usr/bin/env bash
# Session 14, third call: the scoring kernel loads each tile's key scales a tile ahead (_tile_scales).
# GPU tests, ncu stall samples of the B=1 scoring kernel again, breakdown, then B=1 / B=32 at 128K / 512K.
set -u
. benchmarks/device_runs/env.sh
timeout 300 python3 -m pytest -q -x tests/test_sparse_mqa.py -m gpu -p no:cacheprovider > "$L/sparse_tests.log" 2>&1
rc=$?; echo "[$((SECONDS-t0)) s] sparse gpu tests rc=$rc"; tail -3 "$L/sparse_tests.log" | cut -c1-300
if [ $rc = 0 ]; then
C='{"TOPK_ALGO": "bound", "BOUND_GROUP": 64, "RANK_STEP": 8192, "TOPK_BLOCK": 2048, "RADIX_FIRST": "byte", "PLACE_CHUNK": 0, "PLACE_SORT": false}'
timeout 100 ncu --clock-control none -s 2 -c 1 -k "regex:_score_kernel" --section WarpStateStats --section SourceCounters --page source --print-source sass --csv \
    python3 benchmarks/ncu_probe.py sparse_mqa --calls 4 --workload batch=1,context=524288,next_n=1,profile=dsv32 --config "$C" > "$L/ncu_b1_source.csv" 2>&1
timeout 100 ncu --clock-control none -s 2 -c 1 -k "regex:_score_kernel" --metrics gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed \
    python3 benchmarks/ncu_probe.py sparse_mqa --calls 4 --workload batch=1,context=524288,next_n=1,profile=dsv41-flash --config "$C" > "$L/ncu_mx.log" 2>&1
echo "[$((SECONDS-t0)) s] ncu"
B="TOPK_ALGO=bound,RADIX_FIRST=byte,RADIX_FUSED=0,PLACE_CHUNK=0,PLACE_SORT=0,RANK_STEP=8192"
timeout 60 python3 benchmarks/kernel_breakdown.py sparse_mqa --pack packs/nvidia-h200 --out $OUT --calls 20 \
    --workload batch=1,context=524288,next_n=1,profile=dsv32 --config $B,BOUND_GROUP=64,TOPK_BLOCK=2048 > "$L/bd.log" 2>&1
timeout 300 python3 benchmarks/sparse_mqa.py $P --reps 30 --next-n 1 --batch 1 --context 131072,524288 --algos radix,bound \
    --variant tb2k:$B,BOUND_GROUP=64,TOPK_BLOCK=2048,LAUNCH_PDL=1 --variant p:$B,LAUNCH_PDL=1 > "$L/sparse_b1.log" 2>&1
echo "[$((SECONDS-t0)) s] B=1 rc=$?"
timeout 200 python3 benchmarks/sparse_mqa.py $P --reps 20 --next-n 1 --batch 32 --context 524288 > "$L/sparse_b32.log" 2>&1
echo "[$((SECONDS-t0)) s] B=32 rc=$?"
fi
cd "$OUT" && tar czf run78.tgz logs *.json 2>/dev/null; rm -rf logs *.json
tar xzf run78.tgz -O logs/bd.log 2>/dev/null | grep -v "^WARNING\|Warn\|warn_once\|^raw" | cut -c1-160
tar xzf run78.tgz -O logs/ncu_mx.log 2>/dev/null | grep -E "duration|throughput"
for f in sparse_b1 sparse_b32; do echo "== $f"; tar xzf run78.tgz -O logs/$f.log 2>/dev/null | grep -B2 -A30 "^profile " | grep -v "^\s*$" | cut -c1-400 | head -40; done
