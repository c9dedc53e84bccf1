#!/usr/bin/env bash
# Session 18, call 2. Engram (issue 6): run 94's traffic cases again in three processes (their spread), with one
# prefetch cluster beside the two of the tile, host_split T=4096.
set -u
. benchmarks/device_runs/env.sh
for i in 1 2 3; do
  timeout 150 python3 benchmarks/engram_overlap_probe.py --pack packs/nvidia-h200 --out $OUT --placement host_split \
      --tokens 4096 --clusters 2,1 --traffic stage,read,write > "$L/probe_$i.log" 2>&1; echo "[$((SECONDS-t0)) s] probe $i rc=$?"
  tail -5 "$L/probe_$i.log" | cut -c1-220
done
cd "$OUT" && tar czf run95.tgz logs *.json 2>/dev/null; rm -rf logs *.json
