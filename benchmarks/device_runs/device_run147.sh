#!/usr/bin/env bash
# Session 28 (no GPU). The regression loop (README's `tune revalidate`, then `tune regressions`): re-time the engram
# T=256 hbm entries (the one flagged regression: 3.21 us in run 6, 3.97-4.09 us in every run since, the same config)
# and the MoE dsv41-flash T=64 entry (unconfirmed +9.8% in its newest point), each entry's winner, default and
# runners-up interleaved; their points join the tune history (keyed as the database keys them since session 28), so
# `tune regressions` afterwards says whether the steps stand. Independent of runs 143-146; ~1-2 minutes.
set -u
. benchmarks/device_runs/env.sh
timeout 240 $T revalidate --pack packs/nvidia-h200 --kernel engram --kernel moe-routing \
    --workload tokens=256,placement=hbm --workload tokens=64,profile=dsv41-flash \
    > "$L/revalidate.log" 2>&1; echo "[$((SECONDS-t0)) s] revalidate rc=$?"; grep -v "^\s*$" "$L/revalidate.log" | tail -12 | cut -c1-160
$T regressions > "$L/regressions.log" 2>&1; echo "[$((SECONDS-t0)) s] regressions rc=$?"; cut -c1-200 "$L/regressions.log"
mkdir -p /tmp/p; cp results.db /tmp/p/
tar czf "$OUT/run147_db.tgz" -C /tmp/p results.db
cd "$OUT" && tar czf run147.tgz logs 2>/dev/null; rm -rf logs
