#!/usr/bin/env bash
# Device call (session 3, call 3): the helpers' variants verified and timed on the H200
# (mHC one-launch split-K, nvfp4 attention D_CHUNKS), and Engram prefetch overlap with a
# high-priority side stream. Every command under its own timeout (mHC's SYNC 2 spins).
set -u
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 COLUMNS=160
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT/logs"; L=$OUT/logs
t0=$SECONDS
timeout 170 python3 benchmarks/mhc.py --op seam --dim 5120 --tokens 256,1024,4096 --no-baselines --reps 30 --out "$OUT" --variants '{"s1@256":{"SYNC":1},"s2@256":{"SYNC":2},"old@1024":{"BLOCK_T":64,"BLOCK_D":16,"SPLIT_K":16,"SYNC":0},"b64s2@1024":{"BLOCK_T":64,"SPLIT_K":16},"b16x32@1024":{"BLOCK_T":16,"BLOCK_D":32,"SPLIT_K":16},"st3@1024":{"num_stages":3},"old@4096":{"BLOCK_T":64,"BLOCK_D":16,"SPLIT_K":4,"SYNC":0},"s1k4@4096":{"SPLIT_K":4,"SYNC":1},"k8@4096":{"SPLIT_K":8},"b32k8@4096":{"BLOCK_T":32,"SPLIT_K":8},"st3@4096":{"num_stages":3}}' > "$L/mhc_variants.log" 2>&1; echo "[$((SECONDS-t0)) s] mhc rc=$?"
timeout 165 python3 benchmarks/nvfp4_debug.py --variants --budget 115 --reps 20 > "$L/nvfp4_variants.log" 2>&1; echo "[$((SECONDS-t0)) s] nvfp4 rc=$?"
timeout 150 python3 benchmarks/engram_sweep.py --points host:256,host:4096 --budget 50 --overlap-budget 50 --no-gather --out "$OUT" > "$L/engram_overlap.log" 2>&1; echo "[$((SECONDS-t0)) s] engram rc=$?"
cd "$OUT" && tar czf run11.tgz logs *.json 2>/dev/null; rm -rf logs *.json
tar xzf run11.tgz -O logs/mhc_variants.log | grep -v Warning | tail -22 | cut -c1-180
tar xzf run11.tgz -O logs/nvfp4_variants.log | tail -22 | cut -c1-180
tar xzf run11.tgz -O logs/engram_overlap.log | grep -v '^{' | tail -20 | cut -c1-180
