#!/usr/bin/env bash
# Session 25, call 4. sparse (issue 4): where RADIX_TAIL's one program a row spends its 33-47 us (run 136): ncu stall
# samples by SASS instruction of _radix_tail_kernel at B32 128K (dsv32, dsv41-flash), for benchmarks/ncu_stalls.py.
set -u
. benchmarks/device_runs/env.sh
for p in dsv32 dsv41-flash; do
  timeout 120 ncu --clock-control none -s 2 -c 1 -k "regex:_radix_tail_kernel" --section WarpStateStats \
      --section SourceCounters --page source --print-source sass --csv \
      python3 benchmarks/ncu_probe.py sparse_mqa --calls 4 --workload batch=32,context=131072,next_n=1,profile=$p \
      --config '{"RADIX_TAIL": 16384}' > "$L/ncu_tail_$p.csv" 2>&1
  echo "[$((SECONDS-t0)) s] ncu $p rc=$?"; python3 benchmarks/ncu_stalls.py "$L/ncu_tail_$p.csv" --top 12 2>&1 | head -40
done
cd "$OUT" && tar czf run137.tgz logs 2>/dev/null; rm -rf logs
