#!/usr/bin/env bash
# Session 24, call 5. sparse (issue 4): the mxfp4 Gluon scoring is instruction-bound (run 128: 328 SASS instructions a
# tile a warp, ~55% of issue at B32 512K), with 4 programs an SM (123 registers). A register cap (Triton 3.6 sm_90:
# 96 and 80 registers without spills) fits 5 / 6 programs an SM; splits sized for one wave of them. Interleaved
# sweeps of whole calls at dsv41-flash B32 512K / 128K and B1 512K.
set -u
. benchmarks/device_runs/env.sh
SW="python3 benchmarks/config_sweep.py sparse_mqa --pack packs/nvidia-h200 --out $OUT --rounds 3"
sweep() { local n=$1; shift; timeout 100 $SW "$@" > "$L/sweep_$n.log" 2>&1; echo "[$((SECONDS-t0)) s] sweep $n rc=$?"
  grep -v Warn "$L/sweep_$n.log" | tail -7 | cut -c1-170; }
G="SCORE_GLUON=true,BLOCK_N=64,num_warps=4,MX_FP8_DOT=true,MX_WORD_DECODE=true,num_stages=3,SCORE_MAXNREG"
W="next_n=1,profile=dsv41-flash"
sweep b32_512k --workload batch=32,context=524288,$W --config $G=0,NUM_SPLITS=16 --config $G=96,NUM_SPLITS=20 \
    --config $G=80,NUM_SPLITS=24 --config $G=80,NUM_SPLITS=16
sweep b32_128k --workload batch=32,context=131072,$W --config $G=0,NUM_SPLITS=16 --config $G=96,NUM_SPLITS=20 \
    --config $G=80,NUM_SPLITS=24
sweep b1_512k --workload batch=1,context=524288,$W --config $G=0,NUM_SPLITS=512 --config $G=96,NUM_SPLITS=640 \
    --config $G=80,NUM_SPLITS=768
cd "$OUT" && tar czf run130.tgz logs *.json 2>/dev/null; rm -rf logs *.json
