#!/usr/bin/env bash
# Session 9, eighth call: GLUON v6 profile: tensor-pipe and shared-memory utilisation and the per-instruction stall samples. Nsight Compute on the GLUON split
# kernel (H16 B16 128K): the stall reasons as metrics, and the SASS source page with the
# warp-stall samples per instruction.
set -u
. benchmarks/device_runs/env.sh
W=batch=16,context=131072,heads=16,kv_dtype=nvfp4,mode=dense
C='{"GLUON": true, "BLOCK_N": 64, "BLOCK_H": 16}'
M=$(echo smsp__average_warps_issue_stalled_{long_scoreboard,short_scoreboard,wait,barrier,math_pipe_throttle,mio_throttle,lg_throttle,dispatch_stall,no_instruction,membar,sleeping,selected,not_selected,drain,branch_resolving,imc_miss,tex_throttle,misc}_per_issue_active.ratio | tr ' ' ',')
timeout 150 ncu --clock-control none -k "regex:_gl_split" -s 2 -c 1 --metrics "$M,smsp__inst_executed.sum,sm__cycles_elapsed.avg,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_tensor_op_gmma.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum,sm__pipe_shared_cycles_active.avg.pct_of_peak_sustained_active,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.pct_of_peak_sustained_active" \
    python3 benchmarks/ncu_probe.py nvfp4_attention --workload $W --config "$C" > "$L/ncu_stalls.log" 2>&1
echo "[$((SECONDS-t0)) s] ncu stalls rc=$?"
timeout 200 ncu --clock-control none -k "regex:_gl_split" -s 2 -c 1 --section WarpStateStats --section SourceCounters \
    --page source --print-source sass --csv python3 benchmarks/ncu_probe.py nvfp4_attention --workload $W --config "$C" \
    > "$L/ncu_source.csv" 2>&1
echo "[$((SECONDS-t0)) s] ncu source rc=$?"
cd "$OUT" && tar czf run52.tgz logs 2>/dev/null; rm -rf logs
tar xzf run52.tgz -O logs/ncu_stalls.log | grep -E "stalled|inst_executed|cycles_elapsed|pct|wavefronts|conflicts|gmma" | cut -c1-150
tar xzf run52.tgz -O logs/ncu_source.csv | head -3 | cut -c1-400
