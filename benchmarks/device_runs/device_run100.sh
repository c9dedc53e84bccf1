#!/usr/bin/env bash
# Session 19, call 1. Engram (issue 6): GPU tests, the pack's eight 8M points re-tuned for the source hash of the
# final read (9542b0696aba561c; no kernel changed since run 99), export and verify, then the full benchmark (run 91's
# command: every placement at T = 256 / 4096 / 16384, overlap at T = 256 / 4096, five rounds), all in one call.
set -u
. benchmarks/device_runs/env.sh
timeout 100 python3 -m pytest -q -m gpu tests/test_engram.py > "$L/gpu_tests.log" 2>&1
echo "[$((SECONDS-t0)) s] gpu tests rc=$?"; tail -2 "$L/gpu_tests.log" | cut -c1-300
timeout 190 $T engram --tokens 256,4096 --table-rows 8M --placement hbm,host,host_thp,host_split --trials 6 \
    --budget 140s > "$L/tune.log" 2>&1; echo "[$((SECONDS-t0)) s] tune rc=$?"
grep "│ " "$L/tune.log" | tail -8 | cut -c1-200
$T export --out packs/nvidia-h200 > "$L/export.log" 2>&1 && $T verify-pack packs/nvidia-h200 >> "$L/export.log" 2>&1
echo "[$((SECONDS-t0)) s] export rc=$?"; tail -3 "$L/export.log" | cut -c1-200
mkdir -p "$OUT/pack" && cp -r packs/nvidia-h200 "$OUT/pack/" && cp results.db "$OUT/results.db"
timeout 200 python3 benchmarks/engram.py $P --tokens 256,4096,16384 --table-rows 8M --overlap-tokens 256,4096 \
    --overlap-rounds 5 > "$L/engram_bench.log" 2>&1; echo "[$((SECONDS-t0)) s] engram rc=$?"
grep -E "^overlap|^target|HBM|^  with" "$L/engram_bench.log" | cut -c1-220
cd "$OUT" && tar czf run100.tgz logs *.json 2>/dev/null; rm -rf logs *.json
