#!/usr/bin/env bash
# Session 15, third call: SCORE_GLUON as the TMA kernel only, the Hopper default for fp8 keys and one
# token. GPU tests; re-tune dsv32 next_n 1 at B=1 / 32 x 128K / 512K with Gluon configs tried first;
# export; benchmark those shapes against the baseline. (Fallback instead of an error where the Gluon
# kernel cannot score a call, after a review.)
set -u
. benchmarks/device_runs/env.sh
timeout 150 python3 -m pytest -q -m gpu tests/test_sparse_mqa.py -k "gluon_scoring or gpu_default_configs" > "$L/gpu_tests.log" 2>&1
echo "[$((SECONDS-t0)) s] gpu tests rc=$?"; tail -3 "$L/gpu_tests.log" | cut -c1-300
tune() { timeout $2 $T sparse-mqa --profile dsv32 --batch $1 --context $3 --next-n 1 --budget $4 --retune "${@:5}" \
    > "$L/tune_$1_$3.log" 2>&1; echo "[$((SECONDS-t0)) s] tune B=$1 ctx=$3 rc=$?"; grep "│ " "$L/tune_$1_$3.log" | cut -c1-180 | tail -2; }
tune 1 70 524288 30s --try '{"SCORE_GLUON": true, "SCORE_MAXNREG": 0, "num_stages": 2}' --try '{"SCORE_GLUON": true, "SCORE_MAXNREG": 0, "num_stages": 3, "NUM_SPLITS": 640}'
tune 1 50 131072 20s --try '{"SCORE_GLUON": true, "SCORE_MAXNREG": 0, "num_stages": 2}'
tune 32 75 524288 35s --try '{"SCORE_GLUON": true, "SCORE_MAXNREG": 0, "num_stages": 3}'
tune 32 50 131072 20s --try '{"SCORE_GLUON": true, "SCORE_MAXNREG": 0, "num_stages": 3}'
$T export --out packs/nvidia-h200 > "$L/export.log" 2>&1 && $T verify-pack packs/nvidia-h200 >> "$L/export.log" 2>&1
echo "export rc=$?"; tail -2 "$L/export.log"; mkdir -p /tmp/p/pack; cp results.db /tmp/p/; cp packs/nvidia-h200/* /tmp/p/pack/
tar czf "$OUT/run84_pack.tgz" -C /tmp/p results.db pack  # what a timeout must not lose
timeout 150 python3 benchmarks/sparse_mqa.py $P --reps 20 --profiles dsv32 --next-n 1 --batch 1,32 --context 131072,524288 \
    > "$L/sparse.log" 2>&1; echo "[$((SECONDS-t0)) s] bench rc=$?"
grep -A14 "^profile" "$L/sparse.log" | cut -c1-260
cd "$OUT" && tar czf run84.tgz logs *.json 2>/dev/null; rm -rf logs *.json
