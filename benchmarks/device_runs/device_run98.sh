#!/usr/bin/env bash
# Session 18, call 5. Engram (issue 6): the staged prefetch's own tile (host_split T = 4096, where it is the default
# now): 16-B loads and stores, 16 warps, 256-row tiles, in the benchmark's interleaved rounds; two processes.
set -u
. benchmarks/device_runs/env.sh
V=(--prefetch-override '{"VEC": 16}' --prefetch-override '{"num_warps": 16}' --prefetch-override '{"ROWS": 256, "num_warps": 16}')
for i in 1 2; do
  timeout 200 python3 benchmarks/engram.py $P --tokens 4096 --table-rows 8M --placement host_split \
      --overlap-tokens 4096 --overlap-rounds 5 "${V[@]}" > "$L/engram_$i.log" 2>&1; echo "[$((SECONDS-t0)) s] engram $i rc=$?"
  grep -E "^overlap|^  with" "$L/engram_$i.log" | cut -c1-220
done
cd "$OUT" && tar czf run98.tgz logs *.json 2>/dev/null; rm -rf logs *.json
