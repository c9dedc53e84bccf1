#!/usr/bin/env bash
# Session 26 (written for the next session: no GPU was lent in session 26). sparse (issue 4): RADIX_FOLD, the safe
# pick's last program runs the sampled first digit's fallback (one launch fewer). GPU test, then interleaved whole
# calls at B32 128K / 512K (both profiles; the pack entries take the sampled first digit there) with the knob on,
# and RADIX_FIRST "sampled_byte" (the sampled threshold, then the four bytes: one radix pass fewer) with and without.
set -u
. benchmarks/device_runs/env.sh
timeout 150 python3 -m pytest -q -m gpu tests/test_sparse_mqa.py -p no:cacheprovider -k "radix_fold or score_sample or sampled_byte" \
    > "$L/gpu_tests.log" 2>&1
echo "[$((SECONDS-t0)) s] gpu tests rc=$?"; grep -E "passed|failed|Error|assert" "$L/gpu_tests.log" | tail -6 | cut -c1-300
SW="python3 benchmarks/config_sweep.py sparse_mqa --pack packs/nvidia-h200 --out $OUT --rounds 3"
sweep() { local n=$1; shift; timeout 110 $SW "$@" > "$L/sweep_$n.log" 2>&1; echo "[$((SECONDS-t0)) s] sweep $n rc=$?"
  grep -v Warn "$L/sweep_$n.log" | tail -6 | cut -c1-170; }
for p in dsv32 dsv41-flash; do
  for c in 131072 524288; do
    sweep ${p}_b32_$c --workload batch=32,context=$c,next_n=1,profile=$p --config RADIX_FOLD=true \
        --config RADIX_FIRST=sampled_byte --config RADIX_FIRST=sampled_byte,RADIX_FOLD=true
  done
done
timeout 120 python3 benchmarks/kernel_breakdown.py sparse_mqa --workload batch=32,context=131072,next_n=1,profile=dsv32 \
    --pack packs/nvidia-h200 --config RADIX_FOLD=true,RADIX_FIRST=sampled_byte --out $OUT > "$L/breakdown.log" 2>&1
echo "[$((SECONDS-t0)) s] breakdown rc=$?"; grep -v Warn "$L/breakdown.log" | tail -14 | cut -c1-170
cd "$OUT" && tar czf run144.tgz logs *.json 2>/dev/null; rm -rf logs *.json
