#!/usr/bin/env bash
# Session 11, call 6 (information): how often the host_split prefetch serializes (run 65: 0%
# hidden once in four samples): four benchmark processes at T = 256 with overlap, host_split then host.
set -u
. benchmarks/device_runs/env.sh
for i in 1 2 3 4; do
    timeout 80 python3 benchmarks/engram.py $P --tokens 256 --table-rows 8M --placement host_split,host --overlap-tokens 256 \
        > "$L/engram_$i.log" 2>&1; echo "[$((SECONDS-t0)) s] $i rc=$?"
done
cd "$OUT" && tar czf run68.tgz logs *.json 2>/dev/null; rm -rf logs *.json
for i in 1 2 3 4; do echo "== $i"; tar xzf run68.tgz -O logs/engram_$i.log | grep -E "^ +256|overlap|target host"; done
