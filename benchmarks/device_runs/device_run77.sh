#!/usr/bin/env bash
# Session 14, second call: Nsight Compute on the sparse scoring kernel at dsv32 B=1 512K (56% of its
# floor) against B=32 512K (87%): stall reasons, achieved DRAM throughput and occupancy, and the
# per-instruction stall samples of the B=1 kernel; the bound path's three small kernels' stalls.
set -u
. benchmarks/device_runs/env.sh
C='{"TOPK_ALGO": "bound", "BOUND_GROUP": 64, "RANK_STEP": 8192, "TOPK_BLOCK": 2048, "RADIX_FIRST": "byte", "PLACE_CHUNK": 0, "PLACE_SORT": false}'
M=$(echo smsp__average_warps_issue_stalled_{long_scoreboard,short_scoreboard,wait,barrier,math_pipe_throttle,mio_throttle,lg_throttle,dispatch_stall,no_instruction,membar,sleeping,selected,not_selected,drain,branch_resolving,imc_miss,tex_throttle,misc}_per_issue_active.ratio | tr ' ' ',')
M="$M,smsp__inst_executed.sum,sm__cycles_elapsed.avg,gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,dram__bytes_read.sum,sm__warps_active.avg.pct_of_peak_sustained_active,sm__warps_active.avg.per_cycle_active,launch__registers_per_thread,launch__occupancy_limit_registers,launch__occupancy_limit_shared_mem,launch__grid_size,smsp__issue_active.avg.pct_of_peak_sustained_active,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum,lts__t_sectors_srcunit_tex_op_read.sum"
NCU="ncu --clock-control none -s 2 -c 1"
PR="python3 benchmarks/ncu_probe.py sparse_mqa --calls 4"
timeout 120 $NCU -k "regex:_score_kernel" --metrics "$M" $PR --workload batch=1,context=524288,next_n=1,profile=dsv32 --config "$C" > "$L/ncu_b1.log" 2>&1
echo "[$((SECONDS-t0)) s] ncu b1 rc=$?"
timeout 150 $NCU -k "regex:_score_kernel" --metrics "$M" $PR --workload batch=32,context=524288,next_n=1,profile=dsv32 > "$L/ncu_b32.log" 2>&1
echo "[$((SECONDS-t0)) s] ncu b32 rc=$?"
timeout 150 $NCU -k "regex:_score_kernel" --section WarpStateStats --section SourceCounters --page source --print-source sass --csv \
    $PR --workload batch=1,context=524288,next_n=1,profile=dsv32 --config "$C" > "$L/ncu_b1_source.csv" 2>&1
echo "[$((SECONDS-t0)) s] ncu source rc=$?"
timeout 150 ncu --clock-control none -s 6 -c 3 -k "regex:_bound_" --metrics "$M" $PR --workload batch=1,context=524288,next_n=1,profile=dsv32 --config "$C" > "$L/ncu_bound.log" 2>&1
echo "[$((SECONDS-t0)) s] ncu bound rc=$?"
cd "$OUT" && tar czf run77.tgz logs; rm -rf logs
for f in ncu_b1 ncu_b32 ncu_bound; do echo "== $f"; tar xzf run77.tgz -O logs/$f.log | grep -E "_kernel|stalled|inst_executed|cycles_elapsed|duration|pct|bytes|registers|limit|grid_size|warps_active|wavefronts|conflicts|sectors" | grep -v "  0$\|0.0[0-9]$" | sed 's/smsp__average_warps_issue_stalled_//; s/_per_issue_active.ratio//' | cut -c1-130; done
