#!/usr/bin/env bash
# Session 11, call 5 (review): the engram GPU tests after host_split's allocation change, and the
# pcie_link_probe after its refactor (the engram_sweep gather kernel, the shared probe main).
set -u
. benchmarks/device_runs/env.sh
timeout 120 python3 -m pytest -q -m gpu tests/test_engram.py -p no:cacheprovider > "$L/gpu_tests.log" 2>&1; echo "[$((SECONDS-t0)) s] tests rc=$?"
timeout 150 python3 benchmarks/pcie_link_probe.py $P > "$L/pcie_link_probe.log" 2>&1; echo "[$((SECONDS-t0)) s] probe rc=$?"
cd "$OUT" && tar czf run67.tgz logs *.json 2>/dev/null; rm -rf logs *.json
echo "== tests"; tar xzf run67.tgz -O logs/gpu_tests.log | tail -2
echo "== probe"; tar xzf run67.tgz -O logs/pcie_link_probe.log | tail -9
