#!/usr/bin/env bash
# Session 11, call 1: is the engram host lookup bound by the PCIe link? NVML's RX bytes per
# row read for sequential / random / aligned / scale-only gathers and the T = 256 lookup, the
# CPU baseline split into its steps, and a fresh engram T = 256 host sample.
set -u
. benchmarks/device_runs/env.sh
timeout 150 python3 benchmarks/pcie_link_probe.py $P > "$L/pcie_link_probe.log" 2>&1; echo "[$((SECONDS-t0)) s] probe rc=$?"
timeout 150 python3 benchmarks/engram.py $P --tokens 256 --placement host,host_thp --table-rows 8M --overlap-tokens 256 \
    > "$L/engram_bench.log" 2>&1; echo "[$((SECONDS-t0)) s] engram rc=$?"
cd "$OUT" && tar czf run63.tgz logs *.json 2>/dev/null; rm -rf logs *.json
echo "== probe"; tar xzf run63.tgz -O logs/pcie_link_probe.log | grep -v "Warning\|warn(" | tail -14
echo "== engram"; tar xzf run63.tgz -O logs/engram_bench.log | tail -8
