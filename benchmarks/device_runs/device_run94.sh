#!/usr/bin/env bash
# Session 18, call 1. Engram (issue 6): which part of the prefetch's traffic slows the layer (and the layer it)?
# The overlap probe's traffic-only cases on the prefetch tile's grid (read / write / stage), host_split and host, T=4096.
set -u
. benchmarks/device_runs/env.sh
for pl in host_split host; do
  timeout 240 python3 benchmarks/engram_overlap_probe.py --pack packs/nvidia-h200 --out $OUT --placement $pl \
      --tokens 4096 --traffic read,write,stage > "$L/probe_$pl.log" 2>&1; echo "[$((SECONDS-t0)) s] probe $pl rc=$?"
  tail -6 "$L/probe_$pl.log" | cut -c1-220
done
cd "$OUT" && tar czf run94.tgz logs *.json 2>/dev/null; rm -rf logs *.json
