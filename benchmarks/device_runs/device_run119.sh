#!/usr/bin/env bash
# Session 22, call 4 (short: ~5 minutes of device time left). The new defaults on the GPU: nvfp4 dense with more
# than 16 heads takes GLUON 128-entry tiles (_gl_wide_default), GLUON takes GL_AHEAD 2; mHC takes GLUON from T = 256.
# The default-config GPU tests, then the new nvfp4 default at B = 1 / 4 (no pack) against the old Triton default
# (64 x 64, D_CHUNKS 4, its splits: 64 at 8K, 128 at 32K), and mHC's new T = 256 default at D = 7168 (SPLIT_K 32).
set -u
. benchmarks/device_runs/env.sh
timeout 60 python3 -m pytest -q -m gpu tests/test_nvfp4_attention.py -k default_configs -p no:cacheprovider > "$L/gpu_tests.log" 2>&1
echo "[$((SECONDS-t0)) s] gpu tests rc=$?"; grep -E "passed|failed|Error" "$L/gpu_tests.log" | tail -4 | cut -c1-300
TR='"GLUON": false, "BLOCK_N": 64, "BLOCK_H": 64, "D_CHUNKS": 4, "SWAP_AB": false, "num_warps": 8, "GL_AHEAD": 4'
for ctx in 8192:64 32768:128; do c=${ctx%%:*}; s=${ctx##*:}
  timeout 40 python3 benchmarks/nvfp4_attention.py --out $OUT --kv-dtypes nvfp4 --modes dense --heads 64 --batch 1,4 \
      --context $c --no-baseline --reps 10 --variants "{\"triton\": {$TR, \"NUM_SPLITS\": $s}}" > "$L/bench_$c.log" 2>&1
  echo "[$((SECONDS-t0)) s] bench $c rc=$?"; grep -A4 "^variants" "$L/bench_$c.log" | cut -c1-120
  grep -E "^dense" "$L/bench_$c.log" | cut -c1-60; done
timeout 25 python3 benchmarks/config_sweep.py mhc --out $OUT --rounds 3 --workload op=seam,tokens=256,dim=7168 \
    --config GLUON=false,BLOCK_T=16,BLOCK_D=32,SPLIT_K=8,num_stages=2 > "$L/sweep.log" 2>&1
echo "[$((SECONDS-t0)) s] sweep rc=$?"; grep -v Warn "$L/sweep.log" | tail -3 | cut -c1-160
cd "$OUT" && tar czf run119.tgz logs *.json 2>/dev/null; rm -rf logs *.json
