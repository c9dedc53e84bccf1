#!/usr/bin/env bash
# Session 24, call 3. sparse (issue 4): SCORE_GLUON for mxfp4 keys (dsv41-flash): codes by cp.async, ldmatrix straight
# into wgmma's register A layout, decoded there (compile-checked: no proxy fence in the loop, 117 registers). Its GPU
# tests (7 cases x 3 paths, fp8 and mxfp4), the benchmark's scoring-alone and call times against the pack's Triton
# kernel at dsv41-flash B = 1 / 32 x 128K / 512K, then a re-tune of the six dsv41-flash next_n 1 entries with
# SCORE_GLUON tries, export, and the benchmark on the new pack.
set -u
. benchmarks/device_runs/env.sh
timeout 170 python3 -m pytest -q -m gpu tests/test_sparse_mqa.py -p no:cacheprovider -k "gpu_gluon_scoring" \
    > "$L/gpu_tests.log" 2>&1
echo "[$((SECONDS-t0)) s] gpu tests rc=$?"; grep -E "passed|failed|Error|assert" "$L/gpu_tests.log" | tail -8 | cut -c1-300
G="SCORE_GLUON=1,BLOCK_N=64,num_warps=4,SCORE_MAXNREG=0,MX_FP8_DOT=1,MX_WORD_DECODE=1"
timeout 150 python3 benchmarks/sparse_mqa.py $P --profiles dsv41-flash --next-n 1 --batch 1,32 \
    --context 131072,524288 --no-baseline --reps 20 --variant gl5:$G,num_stages=5 --variant gl3:$G,num_stages=3 \
    > "$L/bench_variants.log" 2>&1
echo "[$((SECONDS-t0)) s] bench variants rc=$?"; grep -v Warn "$L/bench_variants.log" | tail -22 | cut -c1-170
J='"SCORE_GLUON": true, "BLOCK_N": 64, "num_warps": 4, "SCORE_MAXNREG": 0, "MX_FP8_DOT": true, "MX_WORD_DECODE": true'
timeout 150 $T sparse-mqa --profile dsv41-flash --next-n 1 --batch 1,32 --context 32768,131072,524288 --retune \
    --trials 5 --budget 120s --try "{$J, \"num_stages\": 5}" --try "{$J, \"num_stages\": 3}" > "$L/tune.log" 2>&1
echo "[$((SECONDS-t0)) s] tune rc=$?"; grep "│ " "$L/tune.log" | cut -c1-170 | tail -7
$T export --out packs/nvidia-h200 > "$L/export.log" 2>&1 && $T verify-pack packs/nvidia-h200 >> "$L/export.log" 2>&1
echo "[$((SECONDS-t0)) s] export rc=$?"; tail -1 "$L/export.log" | cut -c1-200
mkdir -p /tmp/p/pack; cp results.db /tmp/p/; cp packs/nvidia-h200/* /tmp/p/pack/
tar czf "$OUT/run128_pack.tgz" -C /tmp/p results.db pack  # what a timeout must not lose
cd "$OUT" && tar czf run128.tgz logs *.json 2>/dev/null; rm -rf logs *.json
