#!/usr/bin/env bash
# Session 11, call 4 (information): host_split vs host at T = 256 in two benchmark processes with
# the placements in opposite orders, prefetch overlap included (run 65: 41.6 us and 0% hidden).
set -u
. benchmarks/device_runs/env.sh
for order in host_split,host host,host_split; do
    timeout 120 python3 benchmarks/engram.py $P --tokens 256 --table-rows 8M --placement $order --overlap-tokens 256 \
        > "$L/engram_$order.log" 2>&1; echo "[$((SECONDS-t0)) s] $order rc=$?"
done
cd "$OUT" && tar czf run66.tgz logs *.json 2>/dev/null; rm -rf logs *.json
for order in host_split,host host,host_split; do echo "== $order"; tar xzf run66.tgz -O logs/engram_$order.log | tail -7; done
