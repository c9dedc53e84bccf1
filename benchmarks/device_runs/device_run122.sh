#!/usr/bin/env bash
# Session 23, call 3. nvfp4 (issue 3): why one decoder warpgroup takes ~4.6 us a 64-entry tile (run 121: GL_WS gave
# 1.08x at H64 B16 32K, 1.19x at B64; two decoders at H16 no faster than the plain kernel's two programs an SM).
# Nsight Compute, one call each: the GL_WS kernel at H64 (one decoder) and H16 (two), the plain GLUON kernel at H16.
# Raw metrics (stall samples by reason) and per-SASS-instruction stall samples come back as CSV.
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
prof ws16 $W16 '{"GLUON": true, "GL_WS": 2, "BLOCK_N": 64, "BLOCK_H": 16, "NUM_SPLITS": 8}' _gl_ws_kernel
prof gl16 $W16 '{"GLUON": true, "BLOCK_N": 64, "BLOCK_H": 16, "NUM_SPLITS": 8, "GL_AHEAD": 2, "num_warps": 4}' _gl_split_kernel
cd "$OUT" && tar czf run122.tgz logs *.csv *.ncu-rep 2>/dev/null; rm -rf logs *.csv *.ncu-rep
