#!/usr/bin/env bash
# Session 23, call 4. nvfp4 (issue 3): GL_WS rewritten after run 122 (the MMA partition was the wall): the decoders
# multiply K q^T from their A registers, the MMA partition runs the softmax and P V only. Compile-checked only. Its
# GPU tests (5 ragged cases + the long rows), then the sweeps of run 121 again: H64 B16 / B64 / B1 32K, H16 B16 32K.
set -u
. benchmarks/device_runs/env.sh
timeout 200 python3 -m pytest -q -m gpu tests/test_nvfp4_attention.py -p no:cacheprovider \
    -k "over14 or over15 or over16 or over17 or over18 or long_rows" > "$L/gpu_tests.log" 2>&1
echo "[$((SECONDS-t0)) s] gpu tests rc=$?"; grep -E "passed|failed|Error|assert" "$L/gpu_tests.log" | tail -8 | cut -c1-300
SW="python3 benchmarks/config_sweep.py nvfp4_attention --pack packs/nvidia-h200 --out $OUT --rounds 3"
sweep() { local n=$1; shift; timeout 75 $SW "$@" > "$L/sweep_$n.log" 2>&1; echo "[$((SECONDS-t0)) s] sweep $n rc=$?"
  grep -v Warn "$L/sweep_$n.log" | tail -5 | cut -c1-150; }
WS64="GLUON=true,GL_WS=1,BLOCK_N=64,BLOCK_H=64"
sweep h64b16 --workload batch=16,context=32768,heads=64,kv_dtype=nvfp4,mode=dense \
    --config $WS64,NUM_SPLITS=8 --config $WS64,NUM_SPLITS=16
sweep h16b16 --workload batch=16,context=32768,heads=16,kv_dtype=nvfp4,mode=dense \
    --config GLUON=true,GL_WS=2,BLOCK_N=64,BLOCK_H=16,NUM_SPLITS=8 --config GLUON=true,GL_WS=1,BLOCK_N=64,BLOCK_H=16,NUM_SPLITS=8 \
    --config GLUON=true,GL_WS=2,BLOCK_N=64,BLOCK_H=16,NUM_SPLITS=16
sweep h64b64 --workload batch=64,context=32768,heads=64,kv_dtype=nvfp4,mode=dense \
    --config $WS64,NUM_SPLITS=2 --config $WS64,NUM_SPLITS=4
sweep h64b1 --workload batch=1,context=32768,heads=64,kv_dtype=nvfp4,mode=dense \
    --config $WS64,NUM_SPLITS=128 --config $WS64,NUM_SPLITS=64
cd "$OUT" && tar czf run123.tgz logs *.json 2>/dev/null; rm -rf logs *.json
