#!/usr/bin/env bash
# Session 25, call 3. sparse (issue 4): RADIX_TAIL after run 135 (its tail kernel took 67 / 27 us at B32 128K,
# dsv32 / dsv41-flash: candidates past the held 8192 were counted from memory at every bisection step). Now the
# int32 order bits of up to 16384 candidates are held (four blocks, each skipped past the list end), the keys read back
# only for the lists. GPU tests, interleaved whole calls at B32 128K / 512K, the CUPTI breakdown at B32 128K.
set -u
. benchmarks/device_runs/env.sh
timeout 150 python3 -m pytest -q tests/test_sparse_mqa.py -p no:cacheprovider -k "tail or sampled_threshold" \
    > "$L/gpu_tests.log" 2>&1
echo "[$((SECONDS-t0)) s] gpu tests rc=$?"; grep -E "passed|failed|Error|assert" "$L/gpu_tests.log" | tail -6 | cut -c1-300
SW="python3 benchmarks/config_sweep.py sparse_mqa --pack packs/nvidia-h200 --out $OUT --rounds 3"
sweep() { local n=$1; shift; timeout 110 $SW "$@" > "$L/sweep_$n.log" 2>&1; echo "[$((SECONDS-t0)) s] sweep $n rc=$?"
  grep -v Warn "$L/sweep_$n.log" | tail -7 | cut -c1-170; }
for p in dsv32 dsv41-flash; do
  sweep ${p}_b32_128k --workload batch=32,context=131072,next_n=1,profile=$p --config RADIX_TAIL=8192 \
      --config RADIX_TAIL=16384 --config RADIX_TAIL=16384,LAUNCH_PDL=true
done
for p in dsv32 dsv41-flash; do
  sweep ${p}_b32_512k --workload batch=32,context=524288,next_n=1,profile=$p --config RADIX_TAIL=16384 --config RADIX_TAIL=16384,LAUNCH_PDL=true
done
KB="python3 benchmarks/kernel_breakdown.py sparse_mqa --pack packs/nvidia-h200 --out $OUT --calls 10"
for p in dsv32 dsv41-flash; do
  timeout 90 $KB --workload batch=32,context=131072,next_n=1,profile=$p --config RADIX_TAIL=16384 > "$L/kb_$p.log" 2>&1
  echo "[$((SECONDS-t0)) s] breakdown $p rc=$?"; grep -v Warn "$L/kb_$p.log" | tail -12 | cut -c1-170
done
cd "$OUT" && tar czf run136.tgz logs *.json 2>/dev/null; rm -rf logs *.json
