#!/usr/bin/env bash
# Session 10, second call: is the mHC mix kernel held back by DRAM row locality? Each split
# program reads 32-64 B of each of its 256 rows a step (64 tokens x 4 streams), rows 40 KB
# apart. SPLIT_STRIDED gives split k every SPLIT_K-th step instead of one chunk, so a token
# block's splits (started together) read adjacent pieces of the same rows together. A/B for
# the Triton kernel and GLUON (both SYNC modes), then Nsight Compute on GLUON SYNC 0 at T = 4096
# (DRAM throughput, L2 hit rate, stall reasons), contiguous vs strided.
set -u
. benchmarks/device_runs/env.sh
timeout 180 python3 -m pytest -q tests/test_mhc.py -m gpu -k gluon -p no:cacheprovider > "$L/mhc_tests.log" 2>&1
rc=$?; echo "[$((SECONDS-t0)) s] mhc gluon tests rc=$rc"; grep -E "passed|failed|Error|assert" "$L/mhc_tests.log" | head -8 | cut -c1-300
G='"GLUON": true, "BLOCK_T": 64, "BLOCK_D": 32, "DOT_PRECISION": "tf32", "num_warps": 4'
S='"SPLIT_STRIDED": true'
V="{\"tri_s\": {$S}, \"g0\": {$G, \"SYNC\": 0}, \"g0s\": {$G, \"SYNC\": 0, $S}, \"g0sk8\": {$G, \"SYNC\": 0, \"SPLIT_K\": 8, $S},
\"g2\": {$G, \"SYNC\": 2}, \"g2s\": {$G, \"SYNC\": 2, $S}, \"g2sk8\": {$G, \"SYNC\": 2, \"SPLIT_K\": 8, $S},
\"g2sk16\": {$G, \"SYNC\": 2, \"SPLIT_K\": 16, $S}, \"g2sk32@1024\": {$G, \"SYNC\": 2, \"SPLIT_K\": 32, $S}}"
timeout 240 python3 benchmarks/mhc.py $P --op seam --tokens 1024,4096,8192 --dim 5120 --no-baselines --reps 40 \
    --variants "$V" > "$L/mhc_seam.log" 2>&1; echo "[$((SECONDS-t0)) s] mhc seam rc=$?"
M=$(echo smsp__average_warps_issue_stalled_{long_scoreboard,short_scoreboard,wait,barrier,mio_throttle,lg_throttle,math_pipe_throttle,selected,not_selected}_per_issue_active.ratio | tr ' ' ',')
M="$M,dram__throughput.avg.pct_of_peak_sustained_elapsed,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sector_hit_rate.pct,gpu__time_duration.sum,smsp__inst_executed.sum,sm__warps_active.avg.pct_of_peak_sustained_active,smsp__issue_active.avg.pct_of_peak_sustained_active"
W=op=seam,tokens=4096,dim=5120
for s in false true; do
timeout 100 ncu --clock-control none -k "regex:_gl_mix" -s 1 -c 1 --metrics "$M" python3 benchmarks/ncu_probe.py mhc --workload $W \
    --config "{$G, \"SYNC\": 0, \"SPLIT_STRIDED\": $s}" --calls 2 > "$L/ncu_gl_$s.log" 2>&1; echo "[$((SECONDS-t0)) s] ncu $s rc=$?"
done
cd "$OUT" && tar czf run57.tgz logs *.json 2>/dev/null; rm -rf logs *.json
echo "== mhc"; tar xzf run57.tgz -O logs/mhc_seam.log | grep " us (\|FAILED\|skipped\|Error" | cut -c1-100
for s in false true; do echo "== ncu strided=$s"; tar xzf run57.tgz -O logs/ncu_gl_$s.log | grep -E "stalled|dram__|lts__|duration|inst_executed|warps_active|issue_active" | sed 's/  */ /g' | cut -c1-110; done
