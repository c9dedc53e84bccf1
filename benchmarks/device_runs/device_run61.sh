#!/usr/bin/env bash
# Session 10, last call (information for the next session): where the GLUON mix kernel still
# waits after run 59 (per-instruction stall samples, T = 4096, the pack's config), and the finish
# launch's DRAM throughput and stalls (29% of the seam call at T = 4096).
set -u
. benchmarks/device_runs/env.sh
W=op=seam,tokens=4096,dim=5120
C='{"GLUON": true, "BLOCK_T": 64, "BLOCK_D": 32, "DOT_PRECISION": "tf32", "num_warps": 4, "SYNC": 0, "SPLIT_K": 4, "num_stages": 2}'
timeout 150 ncu --clock-control none -k "regex:_gl_mix" -s 1 -c 1 --section WarpStateStats --section SourceCounters \
    --page source --print-source sass --csv python3 benchmarks/ncu_probe.py mhc --workload $W --config "$C" --calls 2 \
    > "$L/ncu_source.csv" 2>&1; echo "[$((SECONDS-t0)) s] ncu source rc=$?"
M=$(echo smsp__average_warps_issue_stalled_{long_scoreboard,short_scoreboard,wait,barrier,mio_throttle,lg_throttle,selected,not_selected}_per_issue_active.ratio | tr ' ' ',')
M="$M,dram__throughput.avg.pct_of_peak_sustained_elapsed,dram__bytes_read.sum,dram__bytes_write.sum,gpu__time_duration.sum,smsp__issue_active.avg.pct_of_peak_sustained_active,sm__warps_active.avg.pct_of_peak_sustained_active,launch__grid_size,launch__registers_per_thread"
timeout 100 ncu --clock-control none -k "regex:_mhc_finish" -s 1 -c 1 --metrics "$M" python3 benchmarks/ncu_probe.py mhc \
    --workload $W --config "$C" --calls 2 > "$L/ncu_finish.log" 2>&1; echo "[$((SECONDS-t0)) s] ncu finish rc=$?"
cd "$OUT" && tar czf run61.tgz logs 2>/dev/null; rm -rf logs
echo "== finish"; tar xzf run61.tgz -O logs/ncu_finish.log | grep -E "stalled|dram__|duration|issue_active|warps_active|launch__" | sed 's/  */ /g' | sed 's/smsp__average_warps_issue_stalled_//' | cut -c1-90
