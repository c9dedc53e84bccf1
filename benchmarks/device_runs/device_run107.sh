#!/usr/bin/env bash
# Session 20, call 3 (information). Why the sparse radix path's MODE-2 pass (every score of the row against the
# sampled bin) takes ~22 us at dsv32 B=32 128K whatever its block size or programs a row (run 106): Nsight Compute on
# the second call's first five radix passes (MODE 1, 2, 3, the digit-1 histogram, the digit-1 pick), with source
# counters; the bound path's filter at B=1 512K beside it (the same job over 0.5M keys).
set -u
. benchmarks/device_runs/env.sh
ncu --version | tail -1
SECS="--section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats --section SchedulerStats --section InstructionStats --section MemoryWorkloadAnalysis"
timeout 200 ncu --clock-control none -k regex:_radix_pass_kernel -s 9 -c 5 $SECS --section SourceCounters --import-source no \
    python3 benchmarks/ncu_probe.py sparse_mqa --workload batch=32,context=131072,next_n=1,profile=dsv32 --calls 3 \
    > "$L/ncu_radix.log" 2>&1; echo "[$((SECONDS-t0)) s] ncu radix rc=$?"
grep -E "^  _radix|Duration|DRAM Throughput|Memory Throughput|Achieved Occupancy|Registers Per|Issue Slots Busy|Executed Ipc A|Warp Cycles Per Issued|No Eligible|Executed Instructions  " "$L/ncu_radix.log" | head -70
timeout 100 ncu --clock-control none -k regex:_bound_topk_kernel -s 2 -c 1 $SECS \
    python3 benchmarks/ncu_probe.py sparse_mqa --workload batch=1,context=524288,next_n=1,profile=dsv32 --calls 3 \
    > "$L/ncu_bound.log" 2>&1; echo "[$((SECONDS-t0)) s] ncu bound rc=$?"
grep -E "Duration|DRAM Throughput|Achieved Occupancy|Issue Slots Busy|Warp Cycles Per Issued|Executed Instructions  " "$L/ncu_bound.log" | head -8
cd "$OUT" && tar czf run107.tgz logs 2>/dev/null; rm -rf logs
