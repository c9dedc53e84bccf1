#!/usr/bin/env bash
# Session 25, call 7. sparse (issue 4): SCORE_SAMPLE is the Hopper default for fp8 keys with the sampled first digit
# (run 138: dsv32 B32 1.02-1.03x; mxfp4 loses). Re-tune the dsv32 B32 128K / 512K entries with tries of it (and PDL),
# export, verify, then the benchmark's B32 points for both profiles.
set -u
. benchmarks/device_runs/env.sh
timeout 200 $T sparse-mqa --profile dsv32 --next-n 1 --batch 32 --context 131072,524288 --retune --trials 4 \
    --budget 80s --try '{"SCORE_SAMPLE": true}' --try '{"SCORE_SAMPLE": true, "LAUNCH_PDL": true}' > "$L/tune.log" 2>&1
echo "[$((SECONDS-t0)) s] tune rc=$?"; grep "│ " "$L/tune.log" | cut -c1-170 | tail -3
$T export --out packs/nvidia-h200 > "$L/export.log" 2>&1 && $T verify-pack packs/nvidia-h200 >> "$L/export.log" 2>&1
echo "[$((SECONDS-t0)) s] export rc=$?"; tail -1 "$L/export.log" | cut -c1-200
mkdir -p /tmp/p/pack; cp results.db /tmp/p/; cp packs/nvidia-h200/* /tmp/p/pack/
tar czf "$OUT/run139_pack.tgz" -C /tmp/p results.db pack  # what a timeout must not lose
timeout 150 python3 benchmarks/sparse_mqa.py $P --reps 20 --profiles dsv32,dsv41-flash --next-n 1 --batch 32 \
    --context 131072,524288 > "$L/sparse.log" 2>&1; echo "[$((SECONDS-t0)) s] bench rc=$?"
grep -A8 "^profile" "$L/sparse.log" | cut -c1-200 | head -7; grep -E "MISS|ok " "$L/sparse.log" | head -12
cd "$OUT" && tar czf run139.tgz logs *.json 2>/dev/null; rm -rf logs *.json
