#!/usr/bin/env bash
# Session 16, call 1. Engram (issue 6): the prefetch overlap in rounds, the side stream at normal (0) vs high (-1,
# the prefetcher's new default) priority, then the whole benchmark in one run (every placement, T = 256 / 4096 /
# 16384, overlap at 256 / 4096, 5 rounds).
set -u
. benchmarks/device_runs/env.sh
timeout 120 python3 -m pytest -q -m gpu tests/test_engram.py -k "prefetch" > "$L/engram_tests.log" 2>&1
echo "[$((SECONDS-t0)) s] engram gpu tests rc=$?"; tail -1 "$L/engram_tests.log"
for prio in 0 -1; do
    timeout 90 python3 benchmarks/engram.py $P --tokens 256 --table-rows 8M --placement host_split,host \
        --overlap-tokens 256 --overlap-rounds 5 --prefetch-priority $prio > "$L/engram_prio$prio.log" 2>&1
    echo "[$((SECONDS-t0)) s] priority $prio rc=$?"; grep -E "^overlap|target host" "$L/engram_prio$prio.log" | cut -c1-230
done
timeout 200 python3 benchmarks/engram.py $P --tokens 256,4096,16384 --table-rows 8M --overlap-tokens 256,4096 \
    --overlap-rounds 5 > "$L/engram_full.log" 2>&1; echo "[$((SECONDS-t0)) s] engram full rc=$?"
tail -22 "$L/engram_full.log" | cut -c1-230
cd "$OUT" && tar czf run85.tgz logs *.json 2>/dev/null; rm -rf logs *.json
