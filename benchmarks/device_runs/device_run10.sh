#!/usr/bin/env bash
# Device call (session 3, call 2): the Engram sweep (grid size / warps / pipelining, overlap
# of SM-lean prefetches, raw PCIe gather per row layout) and a focused MoE tune of the
# one point that misses 5x (dsv41-flash T=4096).
set -u
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 COLUMNS=160
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT/logs"; L=$OUT/logs
t0=$SECONDS
timeout 330 python3 benchmarks/engram_sweep.py --budget 110 --out "$OUT" > "$L/engram_sweep.log" 2>&1; echo "[$((SECONDS-t0)) s] engram sweep rc=$?"
timeout 100 python3 -m tuner.cli.main moe-routing --profile dsv41-flash --tokens 4096,8192 --budget 60s --db results.db > "$L/tune_moe.log" 2>&1; echo "[$((SECONDS-t0)) s] moe tune rc=$?"
cp results.db "$OUT/results.db"
cd "$OUT" && tar czf run10.tgz logs *.json 2>/dev/null; rm -rf logs *.json
tar xzf run10.tgz -O logs/engram_sweep.log | grep -v '^{' | tail -20 | cut -c1-200
tar xzf run10.tgz -O logs/tune_moe.log | tail -12 | cut -c1-160
