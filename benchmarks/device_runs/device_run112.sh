#!/usr/bin/env bash
# Session 21, call 3. mHC (issue 5): the GLUON mix kernel capped at 168 registers (GL_MAXNREG: 3 CTAs an SM at 2
# stages instead of 2; 216 registers uncapped for the seam, 8 B of stack capped). GPU test of a capped config, then
# interleaved sweeps against the two-launch pack entries (D = 5120), then CUPTI breakdowns of the best.
set -u
. benchmarks/device_runs/env.sh
timeout 100 python3 -m pytest -q -m gpu tests/test_mhc.py -k "gluon_register_cap" > "$L/gpu_tests.log" 2>&1
echo "[$((SECONDS-t0)) s] gpu tests rc=$?"; grep -E "passed|failed|Error" "$L/gpu_tests.log" | tail -4 | cut -c1-300
SW="python3 benchmarks/config_sweep.py mhc --pack packs/nvidia-h200 --out $OUT --rounds 5"
sweep() { local W=$1; shift; local args=(); for c in "$@"; do args+=(--config "$c"); done
  timeout 150 $SW --workload "$W" "${args[@]}" > "$L/sweep_$W.log" 2>&1; echo "[$((SECONDS-t0)) s] $W rc=$?"
  grep -v Warn "$L/sweep_$W.log" | tail -$(( $# + 2 )) | cut -c1-200; }
R=GL_MAXNREG=168
sweep op=seam,tokens=4096,dim=5120 $R $R,SPLIT_K=8 $R,SPLIT_K=10 $R,num_stages=3 SPLIT_K=8
sweep op=seam,tokens=1024,dim=5120 $R $R,SPLIT_K=10 $R,SPLIT_K=16 $R,num_stages=3
sweep op=seam,tokens=8192,dim=5120 $R $R,SPLIT_K=4
sweep op=pre,tokens=4096,dim=5120 SPLIT_K=8 num_stages=3
KB="python3 benchmarks/kernel_breakdown.py mhc --pack packs/nvidia-h200 --out $OUT --calls 10"
timeout 60 $KB --workload op=seam,tokens=4096,dim=5120 --config $R > "$L/kb_cap.log" 2>&1
grep -E "call |in order|us  x" "$L/kb_cap.log" | cut -c1-200
cd "$OUT" && tar czf run112.tgz logs *.json 2>/dev/null; rm -rf logs *.json
