#!/usr/bin/env bash
# Session 26 (written for the next session: no GPU was lent in session 26). mHC (issue 5): SYNC 3, the persistent
# one pass (mix item i, then the u pass of item i - lag, re-reading the new residual from L2). GPU tests (all GLUON
# ones: the kernel was split into helpers), then interleaved seam sweeps at D = 5120 against the pack entries, and a
# CUPTI breakdown of one SYNC 3 call. LAUNCH_PDL (each GLUON launch a programmatic dependent launch) as a variant.
set -u
. benchmarks/device_runs/env.sh
timeout 240 python3 -m pytest -q -m gpu tests/test_mhc.py -p no:cacheprovider -k "gluon or model_shapes" \
    > "$L/gpu_tests.log" 2>&1
echo "[$((SECONDS-t0)) s] gpu tests rc=$?"; grep -E "passed|failed|Error|assert" "$L/gpu_tests.log" | tail -8 | cut -c1-300
# SYNC 3 spins on flags: if its tests failed or hung (no summary line), its sweep configs would hang their sweeps too
D3=1; { grep -q " passed" "$L/gpu_tests.log" && ! grep -q "FAILED.*gluon_defer" "$L/gpu_tests.log"; } || D3=0
echo "SYNC 3 sweeps: $([ $D3 = 1 ] && echo on || echo 'OFF (its GPU tests failed or hung)')"
SW="python3 benchmarks/config_sweep.py mhc --pack packs/nvidia-h200 --out $OUT --rounds 3"
sweep() { local n=$1 a=(); shift
  while [ $# -gt 0 ]; do  # without D3, drop the SYNC 3 configs
    if [ "$1" = --config ] && [ $D3 = 0 ] && [[ "$2" == *SYNC=3* ]]; then shift 2; continue; fi; a+=("$1"); shift; done
  timeout 150 $SW "${a[@]}" > "$L/sweep_$n.log" 2>&1; echo "[$((SECONDS-t0)) s] sweep $n rc=$?"
  grep -v Warn "$L/sweep_$n.log" | tail -12 | cut -c1-170; }
sweep t4096 --workload op=seam,tokens=4096,dim=5120 --config SYNC=3,SPLIT_K=20 --config SYNC=3,SPLIT_K=40 \
    --config SYNC=3,SPLIT_K=10 --config SYNC=3,SPLIT_K=20,PERSIST=1 --config SYNC=3,SPLIT_K=20,DEFER_LAG=50 \
    --config SYNC=3,SPLIT_K=20,DEFER_LAG=200 --config LAUNCH_PDL=true --config SYNC=3,SPLIT_K=20,LAUNCH_PDL=true
sweep t8192 --workload op=seam,tokens=8192,dim=5120 --config SYNC=3,SPLIT_K=20 --config SYNC=3,SPLIT_K=40 \
    --config SYNC=3,SPLIT_K=10
sweep t1024 --workload op=seam,tokens=1024,dim=5120 --config SYNC=3,SPLIT_K=20 --config SYNC=3,SPLIT_K=40 \
    --config SYNC=3,SPLIT_K=10 --config SYNC=3,SPLIT_K=80 --config LAUNCH_PDL=true \
    --config SYNC=3,SPLIT_K=40,LAUNCH_PDL=true
[ $D3 = 1 ] && timeout 90 python3 benchmarks/kernel_breakdown.py mhc --workload op=seam,tokens=4096,dim=5120 --pack packs/nvidia-h200 \
    --config SYNC=3,SPLIT_K=20 --out $OUT > "$L/breakdown.log" 2>&1
echo "[$((SECONDS-t0)) s] breakdown rc=$?"; grep -v Warn "$L/breakdown.log" | tail -8 | cut -c1-170
cd "$OUT" && tar czf run143.tgz logs *.json 2>/dev/null; rm -rf logs *.json
