#!/usr/bin/env bash
# Session 21, call 2. mHC (issue 5): the GLUON one pass with its splits' partials added atomically into one row a
# token (the combine read SPLIT_K rows in a chain of L2 round trips), a u pass with two steps in flight, and even
# (not only power-of-two) SPLIT_K. GLUON GPU tests, then interleaved sweeps of SYNC 2 over SPLIT_K against the
# two-launch pack entry (D = 5120), then a CUPTI breakdown.
set -u
. benchmarks/device_runs/env.sh
timeout 200 python3 -m pytest -q -m gpu tests/test_mhc.py -k "gluon" > "$L/gpu_tests.log" 2>&1
echo "[$((SECONDS-t0)) s] gpu tests rc=$?"; grep -E "passed|failed|Error" "$L/gpu_tests.log" | tail -4 | cut -c1-300
SW="python3 benchmarks/config_sweep.py mhc --pack packs/nvidia-h200 --out $OUT --rounds 5"
sweep() { local W=$1; shift; local args=(); for c in "$@"; do args+=(--config "$c"); done
  timeout 150 $SW --workload "$W" "${args[@]}" > "$L/sweep_$W.log" 2>&1; echo "[$((SECONDS-t0)) s] $W rc=$?"
  grep -v Warn "$L/sweep_$W.log" | tail -$(( $# + 2 )) | cut -c1-200; }
G=SYNC=2
sweep op=seam,tokens=4096,dim=5120 $G,SPLIT_K=4 $G,SPLIT_K=16 $G,SPLIT_K=20 $G,SPLIT_K=32 $G,SPLIT_K=40 \
    $G,SPLIT_K=40,num_stages=3 $G,SPLIT_K=80
sweep op=seam,tokens=1024,dim=5120 $G,SPLIT_K=8 $G,SPLIT_K=16 $G,SPLIT_K=32 $G,SPLIT_K=40
sweep op=seam,tokens=8192,dim=5120 $G,SPLIT_K=16 $G,SPLIT_K=32 $G,SPLIT_K=40
sweep op=pre,tokens=4096,dim=5120 $G,SPLIT_K=16 $G,SPLIT_K=32 $G,SPLIT_K=40
KB="python3 benchmarks/kernel_breakdown.py mhc --pack packs/nvidia-h200 --out $OUT --calls 10"
timeout 60 $KB --workload op=seam,tokens=4096,dim=5120 --config SYNC=2,SPLIT_K=32 > "$L/kb_s32.log" 2>&1
grep -E "call |in order" "$L/kb_s32.log" | cut -c1-300
cd "$OUT" && tar czf run111.tgz logs *.json 2>/dev/null; rm -rf logs *.json
