#!/usr/bin/env bash
# Session 23, call 5. nvfp4 (issue 3): the rewritten GL_WS (run 123: 1.17x / 1.32x the pack at H64 B16 / B64 32K, slower
# at H16) under Nsight Compute: which partition waits on which barrier now, and where the busy one stalls.
set -u
. benchmarks/device_runs/env.sh
ncu --version | tail -1
prof() { local n=$1 w=$2 c=$3 k=$4
  timeout 150 ncu --clock-control none -k regex:$k -s 1 -c 1 --section SpeedOfLight --section WarpStateStats \
      --section SchedulerStats --section SourceCounters --section LaunchStats --section Occupancy --import-source no \
      -o "$OUT/$n" python3 benchmarks/ncu_probe.py nvfp4_attention --workload $w --config "$c" --calls 2 \
      > "$L/ncu_$n.log" 2>&1; echo "[$((SECONDS-t0)) s] ncu $n rc=$?"
  ncu --import "$OUT/$n.ncu-rep" --page details > "$L/details_$n.txt" 2>&1
  ncu --import "$OUT/$n.ncu-rep" --page raw --csv > "$OUT/raw_$n.csv" 2>&1
  ncu --import "$OUT/$n.ncu-rep" --page source --print-source sass --csv > "$OUT/sass_$n.csv" 2>&1
  grep -E "Duration|Registers Per|Issue Slots Busy|Warp Cycles Per Issued|No Eligible|Active Warps Per|Eligible Warps" \
      "$L/details_$n.txt" | head -12 | cut -c1-120; }
W16="batch=16,context=32768,heads=16,kv_dtype=nvfp4,mode=dense"
prof ws64 batch=16,context=32768,heads=64,kv_dtype=nvfp4,mode=dense \
    '{"GLUON": true, "GL_WS": 1, "BLOCK_N": 64, "BLOCK_H": 64, "NUM_SPLITS": 8}' _gl_ws_kernel
prof ws16 $W16 '{"GLUON": true, "GL_WS": 1, "BLOCK_N": 64, "BLOCK_H": 16, "NUM_SPLITS": 8}' _gl_ws_kernel
cd "$OUT" && tar czf run124.tgz logs *.csv *.ncu-rep 2>/dev/null; rm -rf logs *.csv *.ncu-rep
