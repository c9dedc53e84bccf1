#!/usr/bin/env bash
# Session 21, call 6 (information for a default heuristic; no code change). mHC seam at T <= 256: run 114's re-tune
# picked GLUON with SPLIT_K 32 at T = 256 D = 5120 (33.8 us vs the Triton default's 50.6). Does GLUON win at
# T = 64 / 256 for D = 4096 / 7168 too, where the pack has no entry (the default runs there)?
set -u
. benchmarks/device_runs/env.sh
SW="python3 benchmarks/config_sweep.py mhc --out $OUT --rounds 3"
GL=GLUON=true,BLOCK_T=64,BLOCK_D=32,num_warps=4,SYNC=0,num_stages=2
sweep() { local W=$1; shift; local args=(); for k in "$@"; do args+=(--config "$GL,SPLIT_K=$k"); done
  timeout 60 $SW --workload "$W" "${args[@]}" > "$L/sweep_$W.log" 2>&1; echo "[$((SECONDS-t0)) s] $W rc=$?"
  grep -v Warn "$L/sweep_$W.log" | tail -$(( $# + 2 )) | cut -c1-160; }
sweep op=seam,tokens=256,dim=4096 16 32 64
sweep op=seam,tokens=256,dim=7168 16 28 56
sweep op=seam,tokens=64,dim=5120 16 32 80
cd "$OUT" && tar czf run115.tgz logs *.json 2>/dev/null; rm -rf logs *.json
