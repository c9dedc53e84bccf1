#!/usr/bin/env bash
# Session 12, last call: the bound top-k as the one-row default where 2k..4096 group maxima fit
# (dsv32 B=1 128K, dsv41-flash B=1 32K / 128K): GPU tests of the defaults and the bound path,
# a re-tune of those three workloads (the new default measured first), export, and the
# benchmark at B=1 32K / 128K / 512K with the baseline.
set -u
. benchmarks/device_runs/env.sh
timeout 150 python3 -m pytest -q -x tests/test_sparse_mqa.py -m gpu -k "bound or default_configs" -p no:cacheprovider > "$L/sparse_tests.log" 2>&1
rc=$?; echo "[$((SECONDS-t0)) s] sparse gpu tests rc=$rc"; tail -2 "$L/sparse_tests.log" | cut -c1-300
if [ $rc = 0 ]; then
timeout 100 $T sparse-mqa --profile dsv32 --batch 1 --context 131072 --next-n 1 --budget 40s --retune > "$L/tune1.log" 2>&1
timeout 100 $T sparse-mqa --profile dsv41-flash --batch 1 --context 32768,131072 --next-n 1 --budget 60s --retune > "$L/tune2.log" 2>&1
echo "[$((SECONDS-t0)) s] tune rc=$?"
cp results.db "$OUT/results.db"
$T export --out packs/nvidia-h200 > "$L/export.log" 2>&1 && $T verify-pack packs/nvidia-h200 >> "$L/export.log" 2>&1
echo "export rc=$?"; cp -r packs/nvidia-h200 "$OUT/pack"
timeout 150 python3 benchmarks/sparse_mqa.py $P --reps 30 --next-n 1 --batch 1 --context 32768,131072,524288 \
    --algos radix,bound > "$L/sparse_b1.log" 2>&1; echo "[$((SECONDS-t0)) s] sparse B=1 rc=$?"
fi
cd "$OUT" && tar czf run71.tgz logs *.json 2>/dev/null; rm -rf logs *.json
for f in tune1 tune2; do tar xzf run71.tgz -O logs/$f.log 2>/dev/null | grep "│ " | cut -c1-170 | tail -4; done
tar xzf run71.tgz -O logs/export.log 2>/dev/null | tail -3
tar xzf run71.tgz -O logs/sparse_b1.log 2>/dev/null | grep -A30 "^profile" | cut -c1-200 | head -40
