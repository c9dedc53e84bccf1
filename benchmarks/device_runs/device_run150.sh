#!/usr/bin/env bash
# Session 29, with the ~250 s of device time left after runs 143-149. MoE routing: all 24 pack entries are stale
# (moe_routing.py's source hash moved since they were tuned) and `tune regressions` confirms a +7.6% step at
# dsv41-flash T=64 (11.54 -> 12.41 us, "template source changed; another config"). Re-tune the 24 under today's
# source (a short search: the budget cuts it, every workload keeps at least its default and finalists), export,
# verify, the MoE benchmark with the pack, `tune regressions`.
set -u
. benchmarks/device_runs/env.sh
timeout 130 $T moe-routing --profile dsv3,dsv4-flash,dsv41-flash --tokens 1,4,16,64,256,1024,4096,8192 --retune \
    --trials 6 --budget 100s > "$L/moe_tune.log" 2>&1; echo "[$((SECONDS-t0)) s] moe tune rc=$?"
grep "│ " "$L/moe_tune.log" | cut -c1-150 | grep -E "tokens=(64|1024|8192)," | head -9
$T export --out packs/nvidia-h200 > "$L/export.log" 2>&1 && $T verify-pack packs/nvidia-h200 >> "$L/export.log" 2>&1
echo "[$((SECONDS-t0)) s] export rc=$?"; tail -1 "$L/export.log" | cut -c1-200
mkdir -p /tmp/p/pack; cp results.db /tmp/p/; cp packs/nvidia-h200/* /tmp/p/pack/
tar czf "$OUT/run150_pack.tgz" -C /tmp/p results.db pack  # what a timeout must not lose
timeout 60 python3 benchmarks/moe_routing.py $P > "$L/moe_bench.log" 2>&1; echo "[$((SECONDS-t0)) s] bench rc=$?"
grep -v Warn "$L/moe_bench.log" | tail -30 | cut -c1-160
$T regressions > "$L/regressions.log" 2>&1; echo "[$((SECONDS-t0)) s] regressions rc=$?"; cut -c1-200 "$L/regressions.log"
cd "$OUT" && tar czf run150.tgz logs *.json 2>/dev/null; rm -rf logs *.json
