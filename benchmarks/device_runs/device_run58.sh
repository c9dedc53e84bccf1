#!/usr/bin/env bash
# Session 10, third call: the mHC GLUON mix kernel with its 20 post / comb coefficients loaded
# once (run 57's ncu: long-scoreboard stalls 2.48 cycles an issue, lg_throttle 0.56, with 32
# coefficient loads a thread a step in the loop) and its fn copies one row a thread. GPU tests,
# the seam at T = 1024 / 4096 (ring depths, SYNC 0 / 2), then Nsight Compute on SYNC 0 at
# T = 4096: stall reasons and the per-instruction stall samples of the SASS.
set -u
. benchmarks/device_runs/env.sh
timeout 180 python3 -m pytest -q tests/test_mhc.py -m gpu -k gluon -p no:cacheprovider > "$L/mhc_tests.log" 2>&1
rc=$?; echo "[$((SECONDS-t0)) s] mhc gluon tests rc=$rc"; grep -E "passed|failed|Error|assert" "$L/mhc_tests.log" | head -8 | cut -c1-300
G='"GLUON": true, "BLOCK_T": 64, "BLOCK_D": 32, "DOT_PRECISION": "tf32", "num_warps": 4'
V="{\"g0\": {$G, \"SYNC\": 0}, \"g0st2\": {$G, \"SYNC\": 0, \"num_stages\": 2}, \"g0st4\": {$G, \"SYNC\": 0, \"num_stages\": 4},
\"g0k8\": {$G, \"SYNC\": 0, \"SPLIT_K\": 8}, \"g2\": {$G, \"SYNC\": 2}, \"g2st2\": {$G, \"SYNC\": 2, \"num_stages\": 2}}"
timeout 150 python3 benchmarks/mhc.py $P --op seam --tokens 1024,4096 --dim 5120 --no-baselines --reps 40 \
    --variants "$V" > "$L/mhc_seam.log" 2>&1; echo "[$((SECONDS-t0)) s] mhc seam rc=$?"
M=$(echo smsp__average_warps_issue_stalled_{long_scoreboard,short_scoreboard,wait,barrier,mio_throttle,lg_throttle,math_pipe_throttle,selected,not_selected,dispatch_stall,no_instruction}_per_issue_active.ratio | tr ' ' ',')
M="$M,dram__throughput.avg.pct_of_peak_sustained_elapsed,gpu__time_duration.sum,smsp__inst_executed.sum,smsp__issue_active.avg.pct_of_peak_sustained_active,sm__warps_active.avg.pct_of_peak_sustained_active"
W=op=seam,tokens=4096,dim=5120
C="{$G, \"SYNC\": 0}"
timeout 100 ncu --clock-control none -k "regex:_gl_mix" -s 1 -c 1 --metrics "$M" python3 benchmarks/ncu_probe.py mhc --workload $W \
    --config "$C" --calls 2 > "$L/ncu_gl.log" 2>&1; echo "[$((SECONDS-t0)) s] ncu rc=$?"
timeout 150 ncu --clock-control none -k "regex:_gl_mix" -s 1 -c 1 --section WarpStateStats --section SourceCounters \
    --page source --print-source sass --csv python3 benchmarks/ncu_probe.py mhc --workload $W --config "$C" --calls 2 \
    > "$L/ncu_source.csv" 2>&1; echo "[$((SECONDS-t0)) s] ncu source rc=$?"
cd "$OUT" && tar czf run58.tgz logs *.json 2>/dev/null; rm -rf logs *.json
echo "== mhc"; tar xzf run58.tgz -O logs/mhc_seam.log | grep " us (\|FAILED\|skipped\|Error" | cut -c1-100
echo "== ncu"; tar xzf run58.tgz -O logs/ncu_gl.log | grep -E "stalled|dram__|duration|inst_executed|warps_active|issue_active" | sed 's/  */ /g' | cut -c1-110
