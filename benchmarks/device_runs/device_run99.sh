#!/usr/bin/env bash
# Session 18, call 6. Engram (issue 6) after the review's mends (a staged handle's later wait() orders after its
# dequant on any stream; the staged rows freed after it): GPU tests, the pack's eight 8M points re-tuned for the new
# source hash, export and verify (trimmed to the session's last device time: no benchmark).
set -u
. benchmarks/device_runs/env.sh
timeout 60 python3 -m pytest -q -m gpu tests/test_engram.py > "$L/gpu_tests.log" 2>&1
echo "[$((SECONDS-t0)) s] gpu tests rc=$?"; tail -2 "$L/gpu_tests.log" | cut -c1-300
timeout 80 $T engram --tokens 256,4096 --table-rows 8M --placement hbm,host,host_thp,host_split --trials 2 \
    --budget 60s > "$L/tune.log" 2>&1; echo "[$((SECONDS-t0)) s] tune rc=$?"
grep "│ " "$L/tune.log" | tail -8 | cut -c1-200
$T export --out packs/nvidia-h200 > "$L/export.log" 2>&1 && $T verify-pack packs/nvidia-h200 >> "$L/export.log" 2>&1
echo "[$((SECONDS-t0)) s] export rc=$?"; tail -3 "$L/export.log" | cut -c1-200
mkdir -p "$OUT/pack" && cp -r packs/nvidia-h200 "$OUT/pack/" && cp results.db "$OUT/results.db"
cd "$OUT" && tar czf run99.tgz logs *.json 2>/dev/null; rm -rf logs *.json
