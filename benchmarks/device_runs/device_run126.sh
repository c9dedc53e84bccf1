#!/usr/bin/env bash
# Written in session 23 for the next session (not run: no device time left). nvfp4 (issue 3): GL_WS where run 125 did
# not measure it, at the edges of its Hopper default (16-64 sequence x 64-head blocks): B = 256 (the pack keeps the
# 128-entry kernel, 1 split), B = 8 (default: 128-entry, 32 heads a program) and B = 32 (default: GL_WS, 4 splits),
# interleaved against the pack / the default. Write the prediction in NOTES before running it.
set -u
. benchmarks/device_runs/env.sh
SW="python3 benchmarks/config_sweep.py nvfp4_attention --pack packs/nvidia-h200 --out $OUT --rounds 3"
sweep() { local n=$1; shift; timeout 90 $SW "$@" > "$L/sweep_$n.log" 2>&1; echo "[$((SECONDS-t0)) s] sweep $n rc=$?"
  grep -v Warn "$L/sweep_$n.log" | tail -4 | cut -c1-150; }
WS="GLUON=true,GL_WS=1,BLOCK_N=64,BLOCK_H=64"
P128="GLUON=true,GL_WS=0,BLOCK_N=128,BLOCK_H=64,GL_AHEAD=2,num_warps=8"
W="heads=64,kv_dtype=nvfp4,mode=dense"
sweep b256_8k --workload batch=256,context=8192,$W --config $WS,NUM_SPLITS=1
sweep b256_32k --workload batch=256,context=32768,$W --config $WS,NUM_SPLITS=1
sweep b8_32k --workload batch=8,context=32768,$W --config $WS,NUM_SPLITS=16 --config $WS,NUM_SPLITS=8
sweep b32_32k --workload batch=32,context=32768,$W --config $P128,NUM_SPLITS=4 --config $WS,NUM_SPLITS=8
cd "$OUT" && tar czf run126.tgz logs *.json 2>/dev/null; rm -rf logs *.json
