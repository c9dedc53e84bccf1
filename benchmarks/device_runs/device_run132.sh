#!/usr/bin/env bash
# Session 24, call 7. mHC (issue 5): the split-K finish reads each chunk's columns from the top down (the mix launch
# wrote them bottom-up with evict_last, so the last-written are read first, while still in L2). The GPU model-shape
# tests, then the seam benchmark A / B / A / B against a copy of the tree with the old order (sed), same pack.
set -u
. benchmarks/device_runs/env.sh
timeout 120 python3 -m pytest -q -m gpu tests/test_mhc.py -p no:cacheprovider -k "gpu_model_shapes" \
    > "$L/gpu_tests.log" 2>&1
echo "[$((SECONDS-t0)) s] gpu tests rc=$?"; grep -E "passed|failed|Error|assert" "$L/gpu_tests.log" | tail -4 | cut -c1-300
rm -rf /tmp/old && mkdir /tmp/old && cp -r kernel_templates tuner search_spaces benchmarks packs /tmp/old/
sed -i 's/stride_st, stride_ss, stride_ut, U_BLOCK_D, REVERSE=True)/stride_st, stride_ss, stride_ut, U_BLOCK_D, REVERSE=False)/' \
    /tmp/old/kernel_templates/mhc.py
grep -c "U_BLOCK_D, REVERSE=False)" /tmp/old/kernel_templates/mhc.py
B="benchmarks/mhc.py --pack packs/nvidia-h200 --op seam --tokens 1024,4096,8192 --dim 5120 --reps 30 --no-baselines"
for r in 1 2; do
  for v in new old; do
    if [ $v = new ]; then d=$PWD; else d=/tmp/old; fi
    (cd $d && PYTHONPATH=/tmp/site:$d timeout 60 python3 $B --out $OUT/$v$r > "$L/bench_$v$r.log" 2>&1)
    echo "[$((SECONDS-t0)) s] $v round $r rc=$?"; grep -E "seam +[0-9]" "$L/bench_$v$r.log" | cut -c1-120
  done
done
cd "$OUT" && tar czf run132.tgz logs new* old* 2>/dev/null; rm -rf logs new* old*
