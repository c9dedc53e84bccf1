#!/usr/bin/env bash
# Session 20, call 2. Sparse (issue 4), dsv32 B=32: run 105's breakdown put 22.6 us of the 128K radix top-k in one
# pass (MODE 2: every score against the sampled bin, ~4% appended) and ~26 us between launches. Interleaved sweep
# (benchmarks/config_sweep.py, each config verified first) of PDL x the passes' block / programs a row at 128K and
# 512K; CUPTI breakdowns (no PDL, so the launch durations are the kernels') of the block / program choices.
set -u
. benchmarks/device_runs/env.sh
SW="python3 benchmarks/config_sweep.py sparse_mqa --pack packs/nvidia-h200 --out $OUT --rounds 5"
W=batch=32,context=131072,next_n=1,profile=dsv32
timeout 150 $SW --workload $W --config LAUNCH_PDL=true --config LAUNCH_PDL=true,TOPK_BLOCK=1024 \
    --config LAUNCH_PDL=true,TOPK_BLOCK=2048 --config LAUNCH_PDL=true,TOPK_SPLITS=128 \
    --config LAUNCH_PDL=true,TOPK_SPLITS=128,TOPK_BLOCK=1024 --config LAUNCH_PDL=true,TOPK_SPLITS=32,TOPK_BLOCK=2048 \
    --config LAUNCH_PDL=true,TOPK_SPLITS=16,TOPK_BLOCK=2048 --config LAUNCH_PDL=true,RADIX_FIRST=quarter \
    --config LAUNCH_PDL=true,RADIX_FIRST=byte,PLACE_CHUNK=512 --config TOPK_BLOCK=2048 > "$L/sweep128.log" 2>&1
echo "[$((SECONDS-t0)) s] sweep 128K rc=$?"; grep -v Warn "$L/sweep128.log" | tail -13
W5=batch=32,context=524288,next_n=1,profile=dsv32
timeout 120 $SW --workload $W5 --config LAUNCH_PDL=true --config LAUNCH_PDL=true,TOPK_BLOCK=1024 \
    --config LAUNCH_PDL=true,TOPK_BLOCK=2048 --config LAUNCH_PDL=true,TOPK_SPLITS=128 > "$L/sweep512.log" 2>&1
echo "[$((SECONDS-t0)) s] sweep 512K rc=$?"; grep -v Warn "$L/sweep512.log" | tail -7
KB="python3 benchmarks/kernel_breakdown.py sparse_mqa --pack packs/nvidia-h200 --out $OUT --calls 10"
for c in TOPK_BLOCK=2048 TOPK_SPLITS=128 TOPK_SPLITS=32,TOPK_BLOCK=2048; do
  timeout 50 $KB --workload $W --config $c > "$L/breakdown_$c.log" 2>&1
  echo "== $c"; grep -E "call |in order" "$L/breakdown_$c.log" | cut -c1-400
done
echo "[$((SECONDS-t0)) s] done"
cd "$OUT" && tar czf run106.tgz logs *.json 2>/dev/null; rm -rf logs *.json
