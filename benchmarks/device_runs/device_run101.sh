#!/usr/bin/env bash
# Session 19, call 2. Engram (issue 6): the rest of the search space's default grid (tokens 1 / 16 / 64 / 256 / 4096 /
# 16384 x every placement x 8M / 32M rows; `tune engram` resumes, so run 100's eight winners are kept) with four
# trials a point inside a 300 s budget (points past it get their default measured), then export and verify-pack.
set -u
. benchmarks/device_runs/env.sh
timeout 470 $T engram --trials 4 --budget 300s > "$L/tune.log" 2>&1; echo "[$((SECONDS-t0)) s] tune rc=$?"
grep "│ " "$L/tune.log" | cut -c1-200 | tail -50
$T export --out packs/nvidia-h200 > "$L/export.log" 2>&1 && $T verify-pack packs/nvidia-h200 >> "$L/export.log" 2>&1
echo "[$((SECONDS-t0)) s] export rc=$?"; tail -3 "$L/export.log" | cut -c1-200
mkdir -p "$OUT/pack" && cp -r packs/nvidia-h200 "$OUT/pack/" && cp results.db "$OUT/results.db"
cd "$OUT" && tar czf run101.tgz logs *.json 2>/dev/null; rm -rf logs *.json
