#!/usr/bin/env bash
# Session 9, fifth call: where the GLUON kernel's warps wait. Nsight Compute on the GLUON split
# kernel (H16 B16 128K): the stall reasons as metrics, and the SASS source page with the
# warp-stall samples per instruction.
set -u
. benchmarks/device_runs/env.sh
W=batch=16,context=131072,heads=16,kv_dtype=nvfp4,mode=dense
C='{"GLUON": true, "BLOCK_N": 64, "BLOCK_H": 16}'
M=$(echo smsp__average_warps_issue_stalled_{long_scoreboard,short_scoreboard,wait,barrier,math_pipe_throttle,mio_throttle,lg_throttle,dispatch_stall,no_instruction,membar,sleeping,selected,not_selected,drain,branch_resolving,imc_miss,tex_throttle,misc}_per_issue_active.ratio | tr ' ' ',')
timeout 150 ncu --clock-control none -k "regex:_gl_split" -s 2 -c 1 --metrics "$M,smsp__inst_executed.sum,sm__cycles_elapsed.avg" \
    python3 benchmarks/ncu_probe.py nvfp4_attention --workload $W --config "$C" > "$L/ncu_stalls.log" 2>&1
echo "[$((SECONDS-t0)) s] ncu stalls rc=$?"
timeout 200 ncu --clock-control none -k "regex:_gl_split" -s 2 -c 1 --section WarpStateStats --section SourceCounters \
    --page source --print-source sass --csv python3 benchmarks/ncu_probe.py nvfp4_attention --workload $W --config "$C" \
    > "$L/ncu_source.csv" 2>&1
echo "[$((SECONDS-t0)) s] ncu source rc=$?"
cd "$OUT" && tar czf run49.tgz logs 2>/dev/null; rm -rf logs
tar xzf run49.tgz -O logs/ncu_stalls.log | grep -E "stalled|inst_executed|cycles_elapsed" | cut -c1-150
tar xzf run49.tgz -O logs/ncu_source.csv | head -3 | cut -c1-400
