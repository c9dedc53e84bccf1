#!/usr/bin/env bash
# Session 22, call 3. nvfp4 (issue 3): the GLUON 128-entry tiles at 64 heads over the rest of the H64 nvfp4 grid
# (B 1-256 x 8K-128K dense, sparse 128K), against today's Triton default, so the default heuristic can follow
# measurements: the tuner measures the default and two GLUON tries a point (NUM_SPLITS chosen per batch for ~64-512
# programs), keeps the winner; export, verify; the benchmark of the H64 grid with the pack. Then run 115's mHC
# sweeps (GLUON vs the Triton default at T <= 256, D = 4096 / 7168).
set -u
. benchmarks/device_runs/env.sh
G='"GLUON": true, "SWAP_AB": true, "DQ_FP16": true, "D_CHUNKS": 1, "USE_DOT_SCALED": false, "num_stages": 2, "BLOCK_N": 128, "num_warps": 8'
g64() { echo "{$G, \"BLOCK_H\": 64, \"GL_AHEAD\": 2, \"NUM_SPLITS\": $1}"; }
g32() { echo "{$G, \"BLOCK_H\": 32, \"GL_AHEAD\": 4, \"NUM_SPLITS\": $1}"; }
tune() { local b=$1 ctx=$2 mode=$3; shift 3; local tries=(); for t in "$@"; do tries+=(--try "$t"); done
  timeout 90 $T nvfp4-attention --batch $b --context $ctx --heads 64 --kv-dtype nvfp4 --mode $mode --trials 3 \
      "${tries[@]}" >> "$L/tune.log" 2>&1; echo "[$((SECONDS-t0)) s] tune B=$b $ctx $mode rc=$?"; }
tune 1 8192,32768,131072 dense "$(g64 64)" "$(g32 32)"
tune 4 8192,32768,131072 dense "$(g64 32)" "$(g32 16)"
tune 16 8192 dense "$(g64 8)" "$(g32 4)"
tune 64 8192 dense "$(g64 4)" "$(g32 2)"
tune 256 8192,32768,131072 dense "$(g64 2)" "$(g64 1)"
tune 1,16,64 131072 sparse "$(g64 2)" "$(g32 1)"
grep "│ " "$L/tune.log" | cut -c1-150
$T export --out packs/nvidia-h200 > "$L/export.log" 2>&1 && $T verify-pack packs/nvidia-h200 >> "$L/export.log" 2>&1
echo "[$((SECONDS-t0)) s] export rc=$?"; tail -1 "$L/export.log" | cut -c1-200
mkdir -p /tmp/p/pack; cp results.db /tmp/p/; cp packs/nvidia-h200/* /tmp/p/pack/
tar czf "$OUT/run118_pack.tgz" -C /tmp/p results.db pack  # what a timeout must not lose
[ $((SECONDS-t0)) -lt 470 ] && timeout 70 python3 benchmarks/nvfp4_attention.py $P --kv-dtypes nvfp4 --modes dense,sparse --heads 64 \
    --batch 1,4,16,64,256 --context 8192,32768,131072 --no-baseline --reps 10 > "$L/bench.log" 2>&1
echo "[$((SECONDS-t0)) s] bench rc=$?"; grep -A20 "^mode" "$L/bench.log" | cut -c1-110
SW="python3 benchmarks/config_sweep.py mhc --out $OUT --rounds 3"
GL=GLUON=true,BLOCK_T=64,BLOCK_D=32,num_warps=4,SYNC=0,num_stages=2
sweep() { local W=$1; shift; local args=(); for k in "$@"; do args+=(--config "$GL,SPLIT_K=$k"); done
  [ $((SECONDS-t0)) -lt 530 ] && timeout 30 $SW --workload "$W" "${args[@]}" > "$L/sweep_$W.log" 2>&1; echo "[$((SECONDS-t0)) s] $W rc=$?"
  grep -v Warn "$L/sweep_$W.log" | tail -$(( $# + 2 )) | cut -c1-160; }
sweep op=seam,tokens=256,dim=4096 16 32 64
sweep op=seam,tokens=256,dim=7168 16 28 56
cd "$OUT" && tar czf run118.tgz logs *.json 2>/dev/null; rm -rf logs *.json
