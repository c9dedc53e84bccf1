#!/usr/bin/env bash
# Session 22, call 2. nvfp4 (issue 3): run 116's 128-entry GLUON tiles read the wrong chunks' columns in P V (a
# slice of one [4 BLOCK_N, 128] buffer as wgmma's transposed A across two warpgroups); the decoded tile is now four
# [BLOCK_N, 128] buffers, and the two warpgroups meet at a barrier before either overwrites it. GPU tests; the
# variants against the pack; if the tests pass, the tuner tries them at the H = 64 and H = 16 target points,
# export, verify, and the benchmark of those points (nvfp4 and fp8).
set -u
. benchmarks/device_runs/env.sh
timeout 200 python3 -m pytest -q -m gpu tests/test_nvfp4_attention.py -k gluon -p no:cacheprovider > "$L/gpu_tests.log" 2>&1
rc=$?; echo "[$((SECONDS-t0)) s] gpu tests rc=$rc"; grep -E "passed|failed|Error" "$L/gpu_tests.log" | tail -6 | cut -c1-300
G='"GLUON": true, "SWAP_AB": true, "DQ_FP16": true, "D_CHUNKS": 1, "USE_DOT_SCALED": false, "num_stages": 2'
G128_64="{$G, \"BLOCK_N\": 128, \"BLOCK_H\": 64, \"num_warps\": 8}"
G128_64A2="{$G, \"BLOCK_N\": 128, \"BLOCK_H\": 64, \"num_warps\": 8, \"GL_AHEAD\": 2}"
G128_32="{$G, \"BLOCK_N\": 128, \"BLOCK_H\": 32, \"num_warps\": 8}"
timeout 100 python3 benchmarks/nvfp4_attention.py $P --kv-dtypes nvfp4 --modes dense --heads 64 --batch 16,64 \
    --context 32768,131072 --no-baseline --reps 10 \
    --variants "{\"g128x64\": $G128_64, \"g128x64a2\": $G128_64A2, \"g128x32\": $G128_32}" > "$L/bench_h64.log" 2>&1
echo "[$((SECONDS-t0)) s] h64 rc=$?"; grep -A14 "^variants" "$L/bench_h64.log" | cut -c1-150
G128_16="{$G, \"BLOCK_N\": 128, \"BLOCK_H\": 16, \"num_warps\": 8}"
timeout 60 python3 benchmarks/nvfp4_attention.py $P --kv-dtypes nvfp4 --modes dense --heads 16 --batch 16,64 \
    --context 32768,131072 --no-baseline --reps 10 --variants "{\"g128\": $G128_16}" > "$L/bench_h16.log" 2>&1
echo "[$((SECONDS-t0)) s] h16 rc=$?"; grep -A6 "^variants" "$L/bench_h16.log" | cut -c1-150
if [ $rc = 0 ]; then
  timeout 170 $T nvfp4-attention --batch 16,64 --context 32768,131072 --heads 64 --kv-dtype nvfp4 --mode dense --retune \
      --trials 5 --try "$G128_64" --try "$G128_64A2" --try "$G128_32" > "$L/tune_h64.log" 2>&1
  echo "[$((SECONDS-t0)) s] tune h64 rc=$?"
  timeout 100 $T nvfp4-attention --batch 16,64 --context 32768,131072 --heads 16 --kv-dtype nvfp4 --mode dense --retune \
      --trials 4 --try '{"GL_AHEAD": 2}' --try "$G128_16" > "$L/tune_h16.log" 2>&1
  echo "[$((SECONDS-t0)) s] tune h16 rc=$?"; grep "│ " "$L"/tune_h*.log | cut -c1-170 | tail -12
  $T export --out packs/nvidia-h200 > "$L/export.log" 2>&1 && $T verify-pack packs/nvidia-h200 >> "$L/export.log" 2>&1
  echo "[$((SECONDS-t0)) s] export rc=$?"; tail -1 "$L/export.log" | cut -c1-200
  mkdir -p /tmp/p/pack; cp results.db /tmp/p/; cp packs/nvidia-h200/* /tmp/p/pack/
  tar czf "$OUT/run117_pack.tgz" -C /tmp/p results.db pack  # what a timeout must not lose
  timeout 100 python3 benchmarks/nvfp4_attention.py $P --kv-dtypes nvfp4,fp8 --modes dense --heads 16,64 --batch 16,64 \
      --context 32768,131072 --no-baseline --reps 20 > "$L/bench.log" 2>&1
  echo "[$((SECONDS-t0)) s] bench rc=$?"; grep -B2 -A24 "^targets" "$L/bench.log" | cut -c1-150
fi
cd "$OUT" && tar czf run117.tgz logs *.json 2>/dev/null; rm -rf logs *.json
