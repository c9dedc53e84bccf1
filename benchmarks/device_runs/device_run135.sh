#!/usr/bin/env bash
# Session 25, call 2. sparse (issue 4): RADIX_TAIL, the radix steps after the digit-0 pick (sampled: the fallback,
# the exact quarter digit, four byte digits, the ties: seven launches) in one program a row that holds the candidates
# in registers and bisects the k-th score's order bits. GPU tests of the tail, then interleaved whole calls against
# the pack at B32 128K / 512K for both profiles, and the CUPTI breakdown at B32 128K.
set -u
. benchmarks/device_runs/env.sh
timeout 150 python3 -m pytest -q tests/test_sparse_mqa.py -p no:cacheprovider -k "tail or sampled_threshold" \
    > "$L/gpu_tests.log" 2>&1
echo "[$((SECONDS-t0)) s] gpu tests rc=$?"; grep -E "passed|failed|Error|assert" "$L/gpu_tests.log" | tail -6 | cut -c1-300
SW="python3 benchmarks/config_sweep.py sparse_mqa --pack packs/nvidia-h200 --out $OUT --rounds 3"
sweep() { local n=$1; shift; timeout 110 $SW "$@" > "$L/sweep_$n.log" 2>&1; echo "[$((SECONDS-t0)) s] sweep $n rc=$?"
  grep -v Warn "$L/sweep_$n.log" | tail -7 | cut -c1-170; }
for p in dsv32 dsv41-flash; do
  sweep ${p}_b32_128k --workload batch=32,context=131072,next_n=1,profile=$p --config RADIX_TAIL=4096 \
      --config RADIX_TAIL=8192 --config RADIX_TAIL=8192,LAUNCH_PDL=true
done
for p in dsv32 dsv41-flash; do
  sweep ${p}_b32_512k --workload batch=32,context=524288,next_n=1,profile=$p --config RADIX_TAIL=8192
done
KB="python3 benchmarks/kernel_breakdown.py sparse_mqa --pack packs/nvidia-h200 --out $OUT --calls 10"
for p in dsv32 dsv41-flash; do
  timeout 90 $KB --workload batch=32,context=131072,next_n=1,profile=$p --config RADIX_TAIL=8192 > "$L/kb_$p.log" 2>&1
  echo "[$((SECONDS-t0)) s] breakdown $p rc=$?"; grep -v Warn "$L/kb_$p.log" | tail -12 | cut -c1-170
done
cd "$OUT" && tar czf run135.tgz logs *.json 2>/dev/null; rm -rf logs *.json
