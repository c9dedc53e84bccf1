#!/usr/bin/env bash
# Written at the end of session 16 for the next session's first call (not run yet). Engram (issue 6), the T = 4096
# host_split overlap (87.4-88.6% with the streaming prefetch tile, runs 89/89b): paired in one process, the prefetch
# tile as is vs DEDUP (16-row tiles: Triton 3.6 compiles no larger DEDUP tile) and vs a third cluster; the benchmark's
# overlap at T = 256 / 4096 for every placement runs in run 91 after the pack's re-tune (session 17: device time).
set -u
. benchmarks/device_runs/env.sh
timeout 150 python3 benchmarks/engram_overlap_probe.py $P --placement host_split --tokens 4096 --clusters 2,3 \
    --override '{"DEDUP": true, "ROWS": 16, "num_warps": 4}' \
    --override '{"num_warps": 16}' --override '{"ROWS": 64, "num_warps": 16}' > "$L/engram_probe.log" 2>&1
echo "[$((SECONDS-t0)) s] engram probe rc=$?"; tail -12 "$L/engram_probe.log" | cut -c1-220
cd "$OUT" && tar czf run90.tgz logs *.json 2>/dev/null; rm -rf logs *.json
