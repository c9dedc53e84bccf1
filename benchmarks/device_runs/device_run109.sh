#!/usr/bin/env bash
# Session 20, call 5 (the last ~8 minutes). Sparse dsv32 B=32 128K with the lean filter: does PDL or another
# programs-a-row / block choice now beat the re-tuned pack config? Interleaved sweep, 5 rounds, each config verified.
set -u
. benchmarks/device_runs/env.sh
SW="python3 benchmarks/config_sweep.py sparse_mqa --pack packs/nvidia-h200 --out $OUT --rounds 5"
timeout 100 $SW --workload batch=32,context=131072,next_n=1,profile=dsv32 --config LAUNCH_PDL=true \
    --config LAUNCH_PDL=true,TOPK_SPLITS=32 --config LAUNCH_PDL=true,TOPK_SPLITS=128 --config LAUNCH_PDL=true,TOPK_BLOCK=1024 > "$L/sweep128.log" 2>&1; echo "[$((SECONDS-t0)) s] rc=$?"; grep -v Warn "$L/sweep128.log" | tail -8
cd "$OUT" && tar czf run109.tgz logs *.json 2>/dev/null; rm -rf logs *.json
