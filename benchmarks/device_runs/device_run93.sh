#!/usr/bin/env bash
# Session 17, call 3. Engram (issue 6): the benchmark with the overlap's layer re-sized whenever the lookup drifts > 2%
# from it (run 91's T = 256 layers ran 11-16% long), every placement, T = 256 / 4096, overlap at 256 / 4096, five
# rounds (one process: the session's device time ran short after refused starts).
set -u
. benchmarks/device_runs/env.sh
timeout 170 python3 benchmarks/engram.py $P --tokens 256,4096 --table-rows 8M --overlap-tokens 256,4096 \
    --overlap-rounds 5 > "$L/engram_1.log" 2>&1; echo "[$((SECONDS-t0)) s] engram 1 rc=$?"
tail -22 "$L/engram_1.log" | cut -c1-240
cd "$OUT" && tar czf run93.tgz logs *.json 2>/dev/null; rm -rf logs *.json
