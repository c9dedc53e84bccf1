#!/usr/bin/env bash
# Session 22, call 1. nvfp4 (issue 3): the GLUON split kernel takes 128-entry tiles on two warpgroups (8 warps),
# which admits 64 heads a program (each warpgroup holds half of every accumulator), and GL_AHEAD 2 (raw codes two
# chunks ahead instead of four: 255 -> 225 registers at 64 x 16). Its dense path now also serves tiles spanning
# pages. GPU tests, then the variants against the pack's configs at H = 64 (Triton 64 x 64, D_CHUNKS 4) and H = 16.
set -u
. benchmarks/device_runs/env.sh
timeout 230 python3 -m pytest -q -m gpu tests/test_nvfp4_attention.py -k gluon -p no:cacheprovider > "$L/gpu_tests.log" 2>&1
echo "[$((SECONDS-t0)) s] gpu tests rc=$?"; grep -E "passed|failed|Error" "$L/gpu_tests.log" | tail -6 | cut -c1-300
G='"GLUON": true, "SWAP_AB": true, "DQ_FP16": true, "D_CHUNKS": 1, "USE_DOT_SCALED": false, "num_stages": 2'
V64="{\"g64x32\": {$G, \"BLOCK_N\": 64, \"BLOCK_H\": 32, \"num_warps\": 4},
 \"g128x32\": {$G, \"BLOCK_N\": 128, \"BLOCK_H\": 32, \"num_warps\": 8},
 \"g128x64\": {$G, \"BLOCK_N\": 128, \"BLOCK_H\": 64, \"num_warps\": 8},
 \"g128x64a2\": {$G, \"BLOCK_N\": 128, \"BLOCK_H\": 64, \"num_warps\": 8, \"GL_AHEAD\": 2}}"
timeout 200 python3 benchmarks/nvfp4_attention.py $P --kv-dtypes nvfp4 --modes dense --heads 64 --batch 16,64 \
    --context 32768,131072 --no-baseline --reps 10 --variants "$V64" > "$L/bench_h64.log" 2>&1
echo "[$((SECONDS-t0)) s] h64 rc=$?"; grep -A30 "^variants" "$L/bench_h64.log" | cut -c1-150
V16="{\"a2\": {$G, \"BLOCK_N\": 64, \"BLOCK_H\": 16, \"num_warps\": 4, \"GL_AHEAD\": 2},
 \"g128\": {$G, \"BLOCK_N\": 128, \"BLOCK_H\": 16, \"num_warps\": 8},
 \"g128a2\": {$G, \"BLOCK_N\": 128, \"BLOCK_H\": 16, \"num_warps\": 8, \"GL_AHEAD\": 2}}"
timeout 120 python3 benchmarks/nvfp4_attention.py $P --kv-dtypes nvfp4 --modes dense --heads 16 --batch 16,64 \
    --context 32768,131072 --no-baseline --reps 10 --variants "$V16" > "$L/bench_h16.log" 2>&1
echo "[$((SECONDS-t0)) s] h16 rc=$?"; grep -A30 "^variants" "$L/bench_h16.log" | cut -c1-150
cd "$OUT" && tar czf run116.tgz logs *.json 2>/dev/null; rm -rf logs *.json
