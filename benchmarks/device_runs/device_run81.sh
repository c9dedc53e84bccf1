#!/usr/bin/env bash
# Session 14, last call: SCORE_MAXNREG (five scoring programs an SM) in the search space; re-tune dsv32
# B=1 and B=32 at 512K with it tried first, export, benchmark both with the pack and the baseline.
set -u
. benchmarks/device_runs/env.sh
timeout 80 $T sparse-mqa --profile dsv32 --batch 1 --context 524288 --next-n 1 --budget 40s --retune \
    --try '{"SCORE_MAXNREG": 96, "NUM_SPLITS": 640}' > "$L/tune1.log" 2>&1; echo "[$((SECONDS-t0)) s] tune1 rc=$?"
timeout 90 $T sparse-mqa --profile dsv32 --batch 32 --context 524288 --next-n 1 --budget 45s --retune \
    --try '{"SCORE_MAXNREG": 96, "NUM_SPLITS": 20}' > "$L/tune2.log" 2>&1; echo "[$((SECONDS-t0)) s] tune2 rc=$?"
cp results.db "$OUT/results.db"
$T export --out packs/nvidia-h200 > "$L/export.log" 2>&1 && $T verify-pack packs/nvidia-h200 >> "$L/export.log" 2>&1
echo "export rc=$?"; mkdir -p "$OUT/pack"; cp packs/nvidia-h200/* "$OUT/pack/"
timeout 100 python3 benchmarks/sparse_mqa.py $P --reps 20 --profiles dsv32 --next-n 1 --batch 1,32 --context 524288 \
    > "$L/sparse.log" 2>&1; echo "[$((SECONDS-t0)) s] bench rc=$?"
cd "$OUT" && tar czf run81.tgz logs *.json 2>/dev/null; rm -rf logs *.json
for f in tune1 tune2; do tar xzf run81.tgz -O logs/$f.log 2>/dev/null | grep "│ " | cut -c1-200 | tail -3; done
tar xzf run81.tgz -O logs/export.log 2>/dev/null | tail -2
tar xzf run81.tgz -O logs/sparse.log 2>/dev/null | grep -A12 "^profile" | cut -c1-300
