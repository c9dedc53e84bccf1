#!/usr/bin/env bash
# Session 14, fourth call: the bound path as the B=1 default up to 8192 maxima (512K too) with one filter
# step a program, 8192-compare ranking steps and PDL; the scale prefetch. GPU tests of the bound path and
# the defaults, a re-tune of the B=1 next_n 1 points (128K, 512K; dsv41-flash 32K), export, and the
# benchmark at B=1 with the new pack and the baseline.
set -u
. benchmarks/device_runs/env.sh
timeout 200 python3 -m pytest -q -x tests/test_sparse_mqa.py -m gpu -k "bound or pdl or default_configs" -p no:cacheprovider > "$L/sparse_tests.log" 2>&1
rc=$?; echo "[$((SECONDS-t0)) s] sparse gpu tests rc=$rc"; tail -2 "$L/sparse_tests.log" | cut -c1-300
if [ $rc = 0 ]; then
timeout 150 $T sparse-mqa --profile dsv32 --batch 1 --context 131072,524288 --next-n 1 --budget 100s --retune > "$L/tune1.log" 2>&1
echo "[$((SECONDS-t0)) s] tune1 rc=$?"
timeout 170 $T sparse-mqa --profile dsv41-flash --batch 1 --context 32768,131072,524288 --next-n 1 --budget 120s --retune > "$L/tune2.log" 2>&1
echo "[$((SECONDS-t0)) s] tune2 rc=$?"
cp results.db "$OUT/results.db"
$T export --out packs/nvidia-h200 > "$L/export.log" 2>&1 && $T verify-pack packs/nvidia-h200 >> "$L/export.log" 2>&1
echo "export rc=$?"; mkdir -p "$OUT/pack"; cp packs/nvidia-h200/* "$OUT/pack/"
timeout 150 python3 benchmarks/sparse_mqa.py $P --reps 30 --next-n 1 --batch 1 --context 32768,131072,524288 \
    --algos radix,bound > "$L/sparse_b1.log" 2>&1; echo "[$((SECONDS-t0)) s] sparse B=1 rc=$?"
fi
cd "$OUT" && tar czf run79.tgz logs *.json 2>/dev/null; rm -rf logs *.json
for f in tune1 tune2; do tar xzf run79.tgz -O logs/$f.log 2>/dev/null | grep "│ " | cut -c1-200 | tail -5; done
tar xzf run79.tgz -O logs/export.log 2>/dev/null | tail -3
tar xzf run79.tgz -O logs/sparse_b1.log 2>/dev/null | grep -A40 "^profile" | cut -c1-300 | head -45
