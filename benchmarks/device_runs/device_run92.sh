#!/usr/bin/env bash
# Session 17, call 2. Engram (issue 6), host_split's T = 4096 overlap (89.6% in run 91, rounds 89.3-89.8): prefetch
# tile variants measured in the same rounds as the tile submit() runs (benchmark --prefetch-override), two processes.
set -u
. benchmarks/device_runs/env.sh
V=(--prefetch-override '{"num_warps": 16}' --prefetch-override '{"ROWS": 64, "num_warps": 16}'
   --prefetch-override '{"num_stages": 1}' --prefetch-override '{"VEC": 16}'
   --prefetch-override '{"GRID_SM_FRAC": 0.0227}')
timeout 200 python3 benchmarks/engram.py $P --tokens 256,4096 --table-rows 8M --placement host_split \
    --overlap-tokens 256,4096 --overlap-rounds 5 "${V[@]}" > "$L/engram_1.log" 2>&1; echo "[$((SECONDS-t0)) s] engram 1 rc=$?"
grep -E "^overlap|^  with|^target host" "$L/engram_1.log" | cut -c1-200
timeout 150 python3 benchmarks/engram.py $P --tokens 4096 --table-rows 8M --placement host_split \
    --overlap-tokens 4096 --overlap-rounds 5 "${V[@]}" > "$L/engram_2.log" 2>&1; echo "[$((SECONDS-t0)) s] engram 2 rc=$?"
grep -E "^overlap|^  with" "$L/engram_2.log" | cut -c1-200
cd "$OUT" && tar czf run92.tgz logs *.json 2>/dev/null; rm -rf logs *.json
