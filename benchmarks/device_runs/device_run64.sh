#!/usr/bin/env bash
# Session 11, call 2: the host_split placement (values on the host, scales in HBM) on the GPU:
# engram GPU tests, tune the 8M T = 256 / 4096 points of every placement, export the pack,
# then the engram benchmark at T = 256 / 4096 (overlap at 256).
set -u
. benchmarks/device_runs/env.sh
timeout 120 python3 -m pytest -q -m gpu tests/test_engram.py -p no:cacheprovider > "$L/gpu_tests.log" 2>&1; echo "[$((SECONDS-t0)) s] tests rc=$?"
timeout 300 $T engram --tokens 256,4096 --table-rows 8M --placement hbm,host,host_thp,host_split --trials 10 \
    --budget 4m > "$L/tune.log" 2>&1; echo "[$((SECONDS-t0)) s] tune rc=$?"
$T export --out packs/nvidia-h200 > "$L/export.log" 2>&1 && $T verify-pack packs/nvidia-h200 >> "$L/export.log" 2>&1
echo "[$((SECONDS-t0)) s] export rc=$?"
timeout 200 python3 benchmarks/engram.py $P --tokens 256,4096 --table-rows 8M --overlap-tokens 256 \
    > "$L/engram_bench.log" 2>&1; echo "[$((SECONDS-t0)) s] engram rc=$?"
mkdir -p "$OUT/pack" && cp -r packs/nvidia-h200 "$OUT/pack/" && cp results.db "$OUT/results.db"
cd "$OUT" && tar czf run64.tgz logs *.json 2>/dev/null; rm -rf logs *.json
echo "== tests"; tar xzf run64.tgz -O logs/gpu_tests.log | tail -3
echo "== tune"; tar xzf run64.tgz -O logs/tune.log | grep -v "Warning\|warn(" | tail -12
echo "== export"; tar xzf run64.tgz -O logs/export.log | tail -4
echo "== engram"; tar xzf run64.tgz -O logs/engram_bench.log | tail -16
