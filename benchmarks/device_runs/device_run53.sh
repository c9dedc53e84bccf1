#!/usr/bin/env bash
# Session 9, ninth call: GLUON into the pack. GPU tests of the nvfp4 file (GLUON is now the
# default for nvfp4 at 16 heads on sm_90); tune the four H16 target points (the default, the
# Triton config by --try, TPE draws); export + verify the pack; then the whole H16 nvfp4 dense
# grid, the old pack's configs against the GLUON variant.
set -u
. benchmarks/device_runs/env.sh
timeout 150 python3 -m pytest -q tests/test_nvfp4_attention.py -m gpu -p no:cacheprovider > "$L/gpu_tests.log" 2>&1
echo "[$((SECONDS-t0)) s] gpu tests rc=$?"; tail -3 "$L/gpu_tests.log" | cut -c1-300
timeout 200 python3 benchmarks/nvfp4_attention.py $P --kv-dtypes nvfp4 --modes dense --heads 16 --no-baseline --reps 20 \
    --variants '{"gluon": {"GLUON": true, "BLOCK_N": 64, "BLOCK_H": 16, "SWAP_AB": true, "num_warps": 4, "DQ_FP16": true, "D_CHUNKS": 1}}' \
    > "$L/bench_grid.log" 2>&1
echo "[$((SECONDS-t0)) s] grid rc=$?"
timeout 200 $T nvfp4-attention --batch 16,64 --context 32768,131072 --heads 16 --kv-dtype nvfp4 --mode dense --retune \
    --trials 4 --try '{"GLUON": false}' > "$L/nvfp4_tune.log" 2>&1; echo "[$((SECONDS-t0)) s] tune rc=$?"
cp results.db "$OUT/results.db"
$T export --out packs/nvidia-h200 > "$L/export.log" 2>&1 && $T verify-pack packs/nvidia-h200 >> "$L/export.log" 2>&1
echo "export rc=$?"; cp -r packs/nvidia-h200 "$OUT/pack"
cd "$OUT" && tar czf run53.tgz logs *.json 2>/dev/null; rm -rf logs *.json
echo "== grid"; tar xzf run53.tgz -O logs/bench_grid.log | grep -A30 "^variants" | cut -c1-150
echo "== tune"; tar xzf run53.tgz -O logs/nvfp4_tune.log | grep "│ " | cut -c1-170
echo "== export"; tar xzf run53.tgz -O logs/export.log | tail -4 | cut -c1-200
