#!/usr/bin/env bash
# Written in session 23 for the next session (not run: no device time left). nvfp4 (issue 3): first GL_WS_A (the
# decoders' K q^T from the ring slot, raw codes a whole tile ahead; compile-checked only: 1 spill load at 64 heads
# where GL_WS_A 0 has ~15): its GPU tests, then interleaved against the pack at H64 B16 / B64 32K and H16 B16 32K.
# Then GL_WS where run 125 did not measure it, at the edges of its Hopper default (16-64 sequence x 64-head blocks):
# B = 256 (the pack keeps the 128-entry kernel, 1 split), B = 8 (default: 128-entry, 32 heads a program) and B = 32
# (default: GL_WS, 4 splits). Write the prediction in NOTES before running it.
set -u
. benchmarks/device_runs/env.sh
SW="python3 benchmarks/config_sweep.py nvfp4_attention --pack packs/nvidia-h200 --out $OUT --rounds 3"
sweep() { local n=$1; shift; timeout 60 $SW "$@" > "$L/sweep_$n.log" 2>&1; echo "[$((SECONDS-t0)) s] sweep $n rc=$?"
  grep -v Warn "$L/sweep_$n.log" | tail -4 | cut -c1-150; }
timeout 120 python3 -m pytest -q -m gpu tests/test_nvfp4_attention.py -p no:cacheprovider \
    -k "over19 or over20 or long_rows" > "$L/gpu_tests.log" 2>&1
echo "[$((SECONDS-t0)) s] gpu tests rc=$?"; grep -E "passed|failed|Error|assert" "$L/gpu_tests.log" | tail -8 | cut -c1-300
WS="GLUON=true,GL_WS=1,BLOCK_N=64,BLOCK_H=64"
P128="GLUON=true,GL_WS=0,BLOCK_N=128,BLOCK_H=64,GL_AHEAD=2,num_warps=8"
W="heads=64,kv_dtype=nvfp4,mode=dense"
sweep a_h64b16 --workload batch=16,context=32768,$W --config $WS,NUM_SPLITS=8,GL_WS_A=1
sweep a_h64b64 --workload batch=64,context=32768,$W --config $WS,NUM_SPLITS=2,GL_WS_A=1
sweep a_h16b16 --workload batch=16,context=32768,heads=16,kv_dtype=nvfp4,mode=dense \
    --config GLUON=true,GL_WS=2,GL_WS_A=1,BLOCK_N=64,BLOCK_H=16,NUM_SPLITS=8 --config GLUON=true,GL_WS=1,GL_WS_A=1,BLOCK_N=64,BLOCK_H=16,NUM_SPLITS=16
sweep b256_8k --workload batch=256,context=8192,$W --config $WS,NUM_SPLITS=1
sweep b256_32k --workload batch=256,context=32768,$W --config $WS,NUM_SPLITS=1
sweep b8_32k --workload batch=8,context=32768,$W --config $WS,NUM_SPLITS=16 --config $WS,NUM_SPLITS=8
sweep b32_32k --workload batch=32,context=32768,$W --config $P128,NUM_SPLITS=4 --config $WS,NUM_SPLITS=8
cd "$OUT" && tar czf run126.tgz logs *.json 2>/dev/null; rm -rf logs *.json
