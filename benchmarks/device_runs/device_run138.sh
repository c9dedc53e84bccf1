#!/usr/bin/env bash
# Session 25, call 6. sparse (issue 4): SCORE_SAMPLE, the Gluon scoring kernel builds the sampled digit-0 histogram
# (the radix passes' first launch, MODE 1) with atomics as it writes the scores; the row state is zero-filled
# before the call. GPU test, interleaved whole calls at B32 128K / 512K (both profiles), the benchmark's split of
# call and scoring alone with the knob as a variant.
set -u
. benchmarks/device_runs/env.sh
timeout 150 python3 -m pytest -q -m gpu tests/test_sparse_mqa.py -p no:cacheprovider -k "score_sample" \
    > "$L/gpu_tests.log" 2>&1
echo "[$((SECONDS-t0)) s] gpu tests rc=$?"; grep -E "passed|failed|Error|assert" "$L/gpu_tests.log" | tail -6 | cut -c1-300
SW="python3 benchmarks/config_sweep.py sparse_mqa --pack packs/nvidia-h200 --out $OUT --rounds 3"
sweep() { local n=$1; shift; timeout 110 $SW "$@" > "$L/sweep_$n.log" 2>&1; echo "[$((SECONDS-t0)) s] sweep $n rc=$?"
  grep -v Warn "$L/sweep_$n.log" | tail -6 | cut -c1-170; }
for p in dsv32 dsv41-flash; do
  for c in 131072 524288; do
    sweep ${p}_b32_$c --workload batch=32,context=$c,next_n=1,profile=$p --config SCORE_SAMPLE=true \
        --config SCORE_SAMPLE=true,LAUNCH_PDL=true
  done
done
timeout 150 python3 benchmarks/sparse_mqa.py $P --profiles dsv32,dsv41-flash --next-n 1 --batch 32 \
    --context 131072,524288 --no-baseline --reps 20 --variant smp:SCORE_SAMPLE=1 > "$L/bench_variant.log" 2>&1
echo "[$((SECONDS-t0)) s] bench variant rc=$?"; grep -v Warn "$L/bench_variant.log" | tail -14 | cut -c1-170
cd "$OUT" && tar czf run138.tgz logs *.json 2>/dev/null; rm -rf logs *.json
