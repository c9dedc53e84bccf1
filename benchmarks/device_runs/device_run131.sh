#!/usr/bin/env bash
# Session 24, call 6. sparse (issue 4): re-tune of the dsv41-flash B32 entries with the register cap the search space
# now admits for the mxfp4 Gluon scoring (run 130: 96 registers, 20 splits, 1.03-1.04x), export, and the benchmark's
# dsv41-flash points on the new pack.
set -u
. benchmarks/device_runs/env.sh
J='"SCORE_GLUON": true, "BLOCK_N": 64, "num_warps": 4, "MX_FP8_DOT": true, "MX_WORD_DECODE": true, "num_stages": 3'
timeout 170 $T sparse-mqa --profile dsv41-flash --next-n 1 --batch 32 --context 32768,131072,524288 --retune \
    --trials 6 --budget 140s --try "{$J, \"SCORE_MAXNREG\": 96, \"NUM_SPLITS\": 20}" \
    --try "{$J, \"SCORE_MAXNREG\": 96, \"NUM_SPLITS\": 16}" > "$L/tune.log" 2>&1
echo "[$((SECONDS-t0)) s] tune rc=$?"; grep "│ " "$L/tune.log" | cut -c1-170 | tail -4
$T export --out packs/nvidia-h200 > "$L/export.log" 2>&1 && $T verify-pack packs/nvidia-h200 >> "$L/export.log" 2>&1
echo "[$((SECONDS-t0)) s] export rc=$?"; tail -1 "$L/export.log" | cut -c1-200
mkdir -p /tmp/p/pack; cp results.db /tmp/p/; cp packs/nvidia-h200/* /tmp/p/pack/
tar czf "$OUT/run131_pack.tgz" -C /tmp/p results.db pack  # what a timeout must not lose
timeout 120 python3 benchmarks/sparse_mqa.py $P --reps 20 --profiles dsv41-flash --next-n 1 --batch 1,32 \
    --context 131072,524288 > "$L/sparse.log" 2>&1; echo "[$((SECONDS-t0)) s] bench rc=$?"
grep -A14 "^profile" "$L/sparse.log" | cut -c1-200 | head -6
cd "$OUT" && tar czf run131.tgz logs *.json 2>/dev/null; rm -rf logs *.json
