#!/usr/bin/env bash
# Session 19, call 5. After run 102 (host-table lookups slow with the table's size, VMM-mapped host memory at a 2 MB
# granularity changes nothing): the host's IOMMU mode, and the 64M table's rows folded into its first 1M rows
# (the same table, the addresses of a small one).
set -u
. benchmarks/device_runs/env.sh
{ cat /proc/cmdline; ls /sys/class/iommu/ 2>&1; cat /sys/kernel/iommu_groups/*/type 2>&1 | sort | uniq -c;
  dmesg 2>&1 | grep -i -E "iommu|dmar|amd-vi" | head -5; lscpu | grep -E "Model name|NUMA|L3"; } > "$L/system.txt" 2>&1
cat "$L/system.txt" | cut -c1-200
timeout 300 python3 benchmarks/engram_page_probe.py --rows 64M,1M --tokens 4096 --window 1M --out "$OUT" \
    > "$L/page_probe.log" 2>&1; echo "[$((SECONDS-t0)) s] probe rc=$?"
grep -A20 "^   rows" "$L/page_probe.log" | tail -12
cd "$OUT" && tar czf run103.tgz logs *.json 2>/dev/null; rm -rf logs *.json
