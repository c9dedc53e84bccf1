#!/usr/bin/env bash
# Session 8, call 6: re-tune the mHC seam at D = 5120 (T = 256, 1024, 4096) with bf16x2 in the
# space and the two configs run 41 found under the pack's entries tried first (--try), export the
# pack, then the mHC seam benchmark with both baselines (T = 1 ... 4096).
set -u
. benchmarks/device_runs/env.sh
timeout 260 $T mhc --op seam --tokens 256,1024,4096 --dim 5120 --budget 120s --retune \
    --try '{"BLOCK_T": 16, "BLOCK_D": 32, "SPLIT_K": 8, "DOT_PRECISION": "bf16x2", "SYNC": 0, "num_warps": 4, "num_stages": 3}' \
    --try '{"BLOCK_T": 32, "BLOCK_D": 32, "SPLIT_K": 16, "DOT_PRECISION": "tf32", "SYNC": 0, "num_warps": 4, "num_stages": 2}' \
    > "$L/mhc_tune.log" 2>&1; echo "[$((SECONDS-t0)) s] mhc tune rc=$?"
cp results.db "$OUT/results.db"
$T export --out packs/nvidia-h200 > "$L/export.log" 2>&1 && $T verify-pack packs/nvidia-h200 >> "$L/export.log" 2>&1
echo "export rc=$?"; cp -r packs/nvidia-h200 "$OUT/pack"
timeout 150 python3 benchmarks/mhc.py $P --op seam --dim 5120 --tokens 1,64,256,1024,4096 --reps 50 > "$L/mhc_bench.log" 2>&1
echo "[$((SECONDS-t0)) s] mhc bench rc=$?"
cd "$OUT" && tar czf run42.tgz logs *.json 2>/dev/null; rm -rf logs *.json
echo "== tune"; tar xzf run42.tgz -O logs/mhc_tune.log | grep "│ " | cut -c1-160 | tail -5
echo "== bench"; tar xzf run42.tgz -O logs/mhc_bench.log | sed -n '/^workload/,$p' | cut -c1-160
