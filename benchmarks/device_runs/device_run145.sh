#!/usr/bin/env bash
# Session 26 (written for the next session, to run after run 143 only if SYNC 3 beats the pack there; put run 143's
# best SPLIT_K / PERSIST / DEFER_LAG in the tries). mHC (issue 5): re-tune the mhc entries (mhc.py's source hash moved)
# with SYNC 3 tries laid over each entry (`--try` varies the best config so far since session 26), export, verify,
# the seam benchmark at D = 5120. Timeouts add up to ~540 s of the 600 a call.
set -u
. benchmarks/device_runs/env.sh
tune() { timeout $1 $T mhc "${@:2}" --retune >> "$L/mhc_tune.log" 2>&1; echo "[$((SECONDS-t0)) s] tune ${*:2} rc=$?"; }
tune 150 --op seam,pre --tokens 1024,4096,8192 --dim 5120 --budget 130s --trials 6 \
    --try '{"SYNC": 3, "SPLIT_K": 20}' --try '{"SYNC": 3, "SPLIT_K": 40}'
tune 45 --op seam --tokens 1,64,256 --dim 5120 --budget 30s --trials 4
tune 60 --op seam --tokens 1024,4096 --dim 4096 --budget 45s --trials 5 \
    --try '{"SYNC": 3, "SPLIT_K": 16}' --try '{"SYNC": 3, "SPLIT_K": 32}'
tune 60 --op seam --tokens 1024,4096 --dim 7168 --budget 45s --trials 5 \
    --try '{"SYNC": 3, "SPLIT_K": 28}' --try '{"SYNC": 3, "SPLIT_K": 56}'
grep "│ " "$L/mhc_tune.log" | cut -c1-160 | tail -20
$T export --out packs/nvidia-h200 > "$L/export.log" 2>&1 && $T verify-pack packs/nvidia-h200 >> "$L/export.log" 2>&1
echo "[$((SECONDS-t0)) s] export rc=$?"; tail -1 "$L/export.log" | cut -c1-200
mkdir -p /tmp/p/pack; cp results.db /tmp/p/; cp packs/nvidia-h200/* /tmp/p/pack/
tar czf "$OUT/run145_pack.tgz" -C /tmp/p results.db pack  # what a timeout must not lose
timeout 90 python3 benchmarks/mhc.py $P --op seam --tokens 1,64,256,1024,4096,8192 --dim 5120 --reps 30 \
    > "$L/mhc_bench.log" 2>&1; echo "[$((SECONDS-t0)) s] bench rc=$?"; grep -A12 "^workload" "$L/mhc_bench.log" | cut -c1-130
cd "$OUT" && tar czf run145.tgz logs *.json 2>/dev/null; rm -rf logs *.json
