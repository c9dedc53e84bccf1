#!/usr/bin/env bash
# Session 26, revised in session 27 (no GPU in either). mHC (issue 5): re-tune the mhc entries (mhc.py's source hash
# moved) with SYNC 3 tries laid over each entry (`--try` varies the best config so far since session 26; SPLIT_K 20 /
# 40 / 28 / 56 are in the space since session 27), export, verify, the seam benchmark at D = 5120. Independent of run
# 143: the tuner keeps whichever config wins. Timeouts add up to ~600 s with the SYNC 3 test (usually far less).
set -u
. benchmarks/device_runs/env.sh
# SYNC 3 spins on flags: one GPU case first; where it fails or hangs its tries are left out (a hanging trial would
# otherwise eat a tune step's whole timeout), and every trial gets a 60 s timeout of its own
timeout 60 python3 -m pytest -q -m gpu tests/test_mhc.py -p no:cacheprovider -k "gluon_defer and 4096-5120-40" \
    > "$L/defer_test.log" 2>&1; echo "[$((SECONDS-t0)) s] SYNC 3 test rc=$?"; tail -1 "$L/defer_test.log" | cut -c1-200
D3=1; grep -q "1 passed" "$L/defer_test.log" || D3=0
try3() { [ $D3 = 1 ] && for sk in "$@"; do printf -- "--try\n{\"SYNC\": 3, \"SPLIT_K\": %s}\n" $sk; done; }
tune() { timeout $1 $T mhc "${@:2}" --retune --timeout 60s >> "$L/mhc_tune.log" 2>&1
  echo "[$((SECONDS-t0)) s] tune ${*:2} rc=$?"; }
mapfile -t A < <(try3 20 40); tune 150 --op seam,pre --tokens 1024,4096,8192 --dim 5120 --budget 130s --trials 6 "${A[@]}"
tune 45 --op seam --tokens 1,64,256 --dim 5120 --budget 30s --trials 4
mapfile -t A < <(try3 16 32); tune 60 --op seam --tokens 1024,4096 --dim 4096 --budget 45s --trials 5 "${A[@]}"
mapfile -t A < <(try3 28 56); tune 60 --op seam --tokens 1024,4096 --dim 7168 --budget 45s --trials 5 "${A[@]}"
grep "│ " "$L/mhc_tune.log" | cut -c1-160 | tail -20
$T export --out packs/nvidia-h200 > "$L/export.log" 2>&1 && $T verify-pack packs/nvidia-h200 >> "$L/export.log" 2>&1
echo "[$((SECONDS-t0)) s] export rc=$?"; tail -1 "$L/export.log" | cut -c1-200
mkdir -p /tmp/p/pack; cp results.db /tmp/p/; cp packs/nvidia-h200/* /tmp/p/pack/
tar czf "$OUT/run145_pack.tgz" -C /tmp/p results.db pack  # what a timeout must not lose
timeout 90 python3 benchmarks/mhc.py $P --op seam --tokens 1,64,256,1024,4096,8192 --dim 5120 --reps 30 \
    > "$L/mhc_bench.log" 2>&1; echo "[$((SECONDS-t0)) s] bench rc=$?"; grep -A12 "^workload" "$L/mhc_bench.log" | cut -c1-130
cd "$OUT" && tar czf run145.tgz logs *.json 2>/dev/null; rm -rf logs *.json
