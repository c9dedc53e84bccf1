#!/usr/bin/env bash
# Session 10, fourth call: the mHC GLUON mix kernel with fn in the MMA's K order (one small
# permutation launch a call: its tiles then come in 16 B a thread, 18 cp.async a thread a step
# instead of 42) and the bf16 rounding of the new residual packed (cvt.rn.bf16x2; 934 SASS a
# step, was 1056). GPU tests; the seam at T = 256 .. 8192 and pre at T = 1024 / 4096 against the
# pack; where the time goes (kernel_breakdown); Nsight Compute stall reasons at T = 4096.
set -u
. benchmarks/device_runs/env.sh
timeout 180 python3 -m pytest -q tests/test_mhc.py -m gpu -k gluon -p no:cacheprovider > "$L/mhc_tests.log" 2>&1
rc=$?; echo "[$((SECONDS-t0)) s] mhc gluon tests rc=$rc"; grep -E "passed|failed|Error|assert" "$L/mhc_tests.log" | head -8 | cut -c1-300
G='"GLUON": true, "BLOCK_T": 64, "BLOCK_D": 32, "DOT_PRECISION": "tf32", "num_warps": 4'
V="{\"g0\": {$G, \"SYNC\": 0}, \"g0k4\": {$G, \"SYNC\": 0, \"SPLIT_K\": 4}, \"g0k8\": {$G, \"SYNC\": 0, \"SPLIT_K\": 8},
\"g0k16\": {$G, \"SYNC\": 0, \"SPLIT_K\": 16}, \"g0st2\": {$G, \"SYNC\": 0, \"num_stages\": 2}, \"g2\": {$G, \"SYNC\": 2},
\"g2k8\": {$G, \"SYNC\": 2, \"SPLIT_K\": 8}}"
timeout 200 python3 benchmarks/mhc.py $P --op seam,pre --tokens 256,1024,4096,8192 --dim 5120 --no-baselines --reps 40 \
    --variants "$V" > "$L/mhc.log" 2>&1; echo "[$((SECONDS-t0)) s] mhc rc=$?"
GB=GLUON=true,BLOCK_T=64,BLOCK_D=32,DOT_PRECISION=tf32,num_warps=4,SYNC=0
timeout 90 python3 benchmarks/kernel_breakdown.py mhc --workload op=seam,tokens=1024,dim=5120 \
    --workload op=seam,tokens=4096,dim=5120 --config $GB,SPLIT_K=8 --calls 10 --out "$OUT" > "$L/breakdown.log" 2>&1
echo "[$((SECONDS-t0)) s] breakdown rc=$?"
M=$(echo smsp__average_warps_issue_stalled_{long_scoreboard,short_scoreboard,wait,barrier,mio_throttle,lg_throttle,math_pipe_throttle,selected,not_selected,dispatch_stall}_per_issue_active.ratio | tr ' ' ',')
M="$M,dram__throughput.avg.pct_of_peak_sustained_elapsed,gpu__time_duration.sum,smsp__inst_executed.sum,smsp__issue_active.avg.pct_of_peak_sustained_active"
timeout 100 ncu --clock-control none -k "regex:_gl_mix" -s 1 -c 1 --metrics "$M" python3 benchmarks/ncu_probe.py mhc \
    --workload op=seam,tokens=4096,dim=5120 --config "{$G, \"SYNC\": 0, \"SPLIT_K\": 4}" --calls 2 > "$L/ncu_gl.log" 2>&1
echo "[$((SECONDS-t0)) s] ncu rc=$?"
cd "$OUT" && tar czf run59.tgz logs *.json 2>/dev/null; rm -rf logs *.json
echo "== mhc"; tar xzf run59.tgz -O logs/mhc.log | grep " us (\|FAILED\|skipped\|Error" | sed 's/{.BLOCK_T.*//' | cut -c1-90
echo "== breakdown"; tar xzf run59.tgz -O logs/breakdown.log | grep -v "^\s*$" | tail -14 | cut -c1-140
echo "== ncu"; tar xzf run59.tgz -O logs/ncu_gl.log | grep -E "stalled|dram__|duration|inst_executed|issue_active" | sed 's/  */ /g' | sed 's/smsp__average_warps_issue_stalled_//' | cut -c1-90
