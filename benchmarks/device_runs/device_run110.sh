#!/usr/bin/env bash
# Session 21, call 1. mHC (issue 5): the GLUON one pass (SYNC 2) over SPLIT_K, today's code (nothing stale).
# With many splits a program's chunk of the new residual is small enough that the u pass re-reads it from L2
# (SPLIT_K 4 at T = 4096: 64 x 1280 columns x 4 streams = 655 KB a program, ~170 MB in flight: HBM).
# Interleaved sweeps against the pack entry at T = 4096 / 1024 / 8192 (D = 5120), then CUPTI breakdowns.
set -u
. benchmarks/device_runs/env.sh
SW="python3 benchmarks/config_sweep.py mhc --pack packs/nvidia-h200 --out $OUT --rounds 5"
sweep() { local W=$1; shift; local args=(); for c in "$@"; do args+=(--config "$c"); done
  timeout 170 $SW --workload "$W" "${args[@]}" > "$L/sweep_$W.log" 2>&1; echo "[$((SECONDS-t0)) s] $W rc=$?"
  grep -v Warn "$L/sweep_$W.log" | tail -$(( $# + 2 )); }
G=SYNC=2
sweep op=seam,tokens=4096,dim=5120 $G,SPLIT_K=4 $G,SPLIT_K=8 $G,SPLIT_K=16 $G,SPLIT_K=20 $G,SPLIT_K=32 $G,SPLIT_K=40 \
    $G,SPLIT_K=40,num_stages=3 $G,SPLIT_K=80
sweep op=seam,tokens=1024,dim=5120 $G,SPLIT_K=8 $G,SPLIT_K=16 $G,SPLIT_K=20 $G,SPLIT_K=40 SYNC=0,SPLIT_K=16
sweep op=seam,tokens=8192,dim=5120 $G,SPLIT_K=20 $G,SPLIT_K=40
KB="python3 benchmarks/kernel_breakdown.py mhc --pack packs/nvidia-h200 --out $OUT --calls 10"
timeout 60 $KB --workload op=seam,tokens=4096,dim=5120 > "$L/kb_pack.log" 2>&1; grep -E "call |in order" "$L/kb_pack.log" | cut -c1-300
timeout 60 $KB --workload op=seam,tokens=4096,dim=5120 --config SYNC=2,SPLIT_K=40 > "$L/kb_s40.log" 2>&1
grep -E "call |in order" "$L/kb_s40.log" | cut -c1-300
cd "$OUT" && tar czf run110.tgz logs *.json 2>/dev/null; rm -rf logs *.json
