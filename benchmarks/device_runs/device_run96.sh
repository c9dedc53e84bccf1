#!/usr/bin/env bash
# Session 18, call 3. Engram (issue 6): the staged prefetch (STAGE: the side stream copies the rows' bytes into HBM,
# wait() dequantizes them on the consumer's stream, counted as exposed) against the tile, in the same overlap rounds
# of the benchmark (--prefetch-override), host_split and host at T = 256 / 4096; then host_split T = 4096 again.
set -u
. benchmarks/device_runs/env.sh
V=(--prefetch-override '{"STAGE": true}')
timeout 260 python3 benchmarks/engram.py $P --tokens 256,4096 --table-rows 8M --placement host_split,host \
    --overlap-tokens 256,4096 --overlap-rounds 5 "${V[@]}" > "$L/engram_1.log" 2>&1; echo "[$((SECONDS-t0)) s] engram 1 rc=$?"
grep -E "^overlap|^  with|^target" "$L/engram_1.log" | cut -c1-220
timeout 150 python3 benchmarks/engram.py $P --tokens 4096 --table-rows 8M --placement host_split \
    --overlap-tokens 4096 --overlap-rounds 5 "${V[@]}" > "$L/engram_2.log" 2>&1; echo "[$((SECONDS-t0)) s] engram 2 rc=$?"
grep -E "^overlap|^  with" "$L/engram_2.log" | cut -c1-220
cd "$OUT" && tar czf run96.tgz logs *.json 2>/dev/null; rm -rf logs *.json
