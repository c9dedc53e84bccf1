#!/usr/bin/env bash
# Session 10, fifth call: GLUON is now the mHC default for pre / seam at T >= 1024 on Hopper
# (gluon_default). Re-tune the pack's T >= 1024 shapes (seam at D = 4096 / 5120 / 7168, pre at
# 5120; the old Triton winners come back as earlier bests), export and verify the pack, then
# the seam benchmark at D = 5120 with its baselines.
set -u
. benchmarks/device_runs/env.sh
timeout 200 $T mhc --op seam,pre --tokens 1024,4096,8192 --dim 5120 --budget 130s --retune --trials 8 \
    > "$L/mhc_tune.log" 2>&1; echo "[$((SECONDS-t0)) s] mhc 5120 rc=$?"
timeout 120 $T mhc --op seam --tokens 1024,4096 --dim 4096,7168 --budget 70s --retune --trials 6 \
    >> "$L/mhc_tune.log" 2>&1; echo "[$((SECONDS-t0)) s] mhc 4096/7168 rc=$?"
cp results.db "$OUT/results.db"
$T export --out packs/nvidia-h200 > "$L/export.log" 2>&1 && $T verify-pack packs/nvidia-h200 >> "$L/export.log" 2>&1
echo "[$((SECONDS-t0)) s] export rc=$?"; cp -r packs/nvidia-h200 "$OUT/pack"
timeout 150 python3 benchmarks/mhc.py $P --op seam --tokens 1,64,256,1024,4096,8192 --dim 5120 --reps 30 \
    > "$L/mhc_bench.log" 2>&1; echo "[$((SECONDS-t0)) s] bench rc=$?"
cd "$OUT" && tar czf run60.tgz logs *.json 2>/dev/null; rm -rf logs *.json
echo "== tune"; tar xzf run60.tgz -O logs/mhc_tune.log | grep "│ " | cut -c1-160
echo "== export"; tar xzf run60.tgz -O logs/export.log | tail -3 | cut -c1-200
echo "== bench"; tar xzf run60.tgz -O logs/mhc_bench.log | grep -A12 "^workload" | cut -c1-110
