#!/usr/bin/env bash
# Session 11, call 3: the host_split placement (values on the host, scales in HBM) on the GPU:
# (run 64 did not tune: the CLI takes plain ints) tune the 8M T = 256 / 4096 points of every placement, export the pack,
# then the engram benchmark at T = 256 / 4096 (overlap at 256).
set -u
. benchmarks/device_runs/env.sh
# (GPU tests passed in run 64)
timeout 300 $T engram --tokens 256,4096 --table-rows 8388608 --placement hbm,host,host_thp,host_split --trials 10 \
    --budget 4m > "$L/tune.log" 2>&1; echo "[$((SECONDS-t0)) s] tune rc=$?"
$T export --out packs/nvidia-h200 > "$L/export.log" 2>&1 && $T verify-pack packs/nvidia-h200 >> "$L/export.log" 2>&1
echo "[$((SECONDS-t0)) s] export rc=$?"
timeout 200 python3 benchmarks/engram.py $P --tokens 256,4096 --table-rows 8M --overlap-tokens 256 \
    > "$L/engram_bench.log" 2>&1; echo "[$((SECONDS-t0)) s] engram rc=$?"
mkdir -p "$OUT/pack" && cp -r packs/nvidia-h200 "$OUT/pack/" && cp results.db "$OUT/results.db"
cd "$OUT" && tar czf run65.tgz logs *.json 2>/dev/null; rm -rf logs *.json
echo "== tune"; tar xzf run65.tgz -O logs/tune.log | grep -v "Warning\|warn(" | tail -12
echo "== export"; tar xzf run65.tgz -O logs/export.log | tail -4
echo "== engram"; tar xzf run65.tgz -O logs/engram_bench.log | tail -16
