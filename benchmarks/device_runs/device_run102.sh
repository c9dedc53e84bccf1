#!/usr/bin/env bash
# Session 19, call 3. Engram host tables: does the lookup slow with the table's size (run 101: 32M rows ~2x slower than
# 8M at T = 4096), and does host memory mapped through the driver's VMM API (cuMemCreate at a host NUMA location, its
# own allocation granularity) gather faster than cudaHostAlloc'd pinned memory? benchmarks/engram_page_probe.py.
set -u
. benchmarks/device_runs/env.sh
nvidia-smi --query-gpu=driver_version --format=csv,noheader > "$L/driver.txt" 2>&1; cat "$L/driver.txt"
timeout 420 python3 benchmarks/engram_page_probe.py --rows 1M,8M,32M,64M --tokens 256,4096 --out "$OUT" \
    > "$L/page_probe.log" 2>&1; echo "[$((SECONDS-t0)) s] probe rc=$?"
grep -v "^ *[0-9]*M *[0-9]* \(pinned\|vmm\)" "$L/page_probe.log" | tail -8 | cut -c1-300
grep -A40 "^ rows" "$L/page_probe.log" | tail -40
cd "$OUT" && tar czf run102.tgz logs *.json 2>/dev/null; rm -rf logs *.json
