#!/usr/bin/env bash
# Session 16, extra call (the ~430 s left): the prefetch tile with STREAM (run 88's probe: hidden 86.2 -> 87.8% at
# T = 4096). The probe in the other order (STREAM first), then the benchmark's overlap, host_split and host, T = 256 /
# 4096, 5 rounds.
set -u
. benchmarks/device_runs/env.sh
timeout 80 python3 benchmarks/engram_overlap_probe.py $P --placement host_split --tokens 4096 --clusters 2 \
    --override '{"STREAM": false}' > "$L/engram_probe.log" 2>&1; echo "[$((SECONDS-t0)) s] engram probe rc=$?"
tail -3 "$L/engram_probe.log" | cut -c1-200
timeout 150 python3 benchmarks/engram.py $P --tokens 256,4096 --table-rows 8M --placement host_split,host \
    --overlap-tokens 256,4096 --overlap-rounds 5 > "$L/engram.log" 2>&1; echo "[$((SECONDS-t0)) s] engram rc=$?"
grep -E "^overlap|^target|^ +(256|4096) " "$L/engram.log" | cut -c1-220
cd "$OUT" && tar czf run89.tgz logs *.json 2>/dev/null; rm -rf logs *.json
