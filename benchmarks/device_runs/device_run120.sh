#!/usr/bin/env bash
# Session 22 wrote this for the next session's first call (not run: no device time left). mHC (issue 5): XY_GROUP 2,
# the GLUON mix kernel's stream copies of two steps together (128 contiguous bytes of a row a warp instruction, where
# one step's 64 ran at 2.6 TB/s: run 113). GPU tests (GLUON, XY_GROUP, model shapes), the pack's configs against
# XY_GROUP 2 interleaved, re-tune of the 13 mhc entries (mhc.py's source hash moved in session 22) with the try,
# export, the seam benchmark. Timeouts add up to ~560 s of the 600 a call.
set -u
. benchmarks/device_runs/env.sh
timeout 150 python3 -m pytest -q -m gpu tests/test_mhc.py -k "gluon or model_shapes" -p no:cacheprovider > "$L/gpu_tests.log" 2>&1
echo "[$((SECONDS-t0)) s] gpu tests rc=$?"; grep -E "passed|failed|Error" "$L/gpu_tests.log" | tail -6 | cut -c1-300
SW="python3 benchmarks/config_sweep.py mhc --pack packs/nvidia-h200 --out $OUT --rounds 3"
for w in op=seam,tokens=4096,dim=5120 op=seam,tokens=1024,dim=5120 op=seam,tokens=8192,dim=5120; do
  timeout 60 $SW --workload $w --config XY_GROUP=2 > "$L/sweep_$w.log" 2>&1; echo "[$((SECONDS-t0)) s] $w rc=$?"
  grep -v Warn "$L/sweep_$w.log" | tail -3 | cut -c1-140; done
tune() { timeout $1 $T mhc "${@:2}" --retune --try '{"XY_GROUP": 2}' >> "$L/mhc_tune.log" 2>&1
  echo "[$((SECONDS-t0)) s] tune ${*:2} rc=$?"; }
tune 120 --op seam,pre --tokens 1024,4096,8192 --dim 5120 --budget 100s --trials 6
tune 50 --op seam --tokens 1,64,256 --dim 5120 --budget 35s --trials 5
tune 80 --op seam --tokens 1024,4096 --dim 4096,7168 --budget 55s --trials 5
grep "│ " "$L/mhc_tune.log" | cut -c1-160 | tail -16
$T export --out packs/nvidia-h200 > "$L/export.log" 2>&1 && $T verify-pack packs/nvidia-h200 >> "$L/export.log" 2>&1
echo "[$((SECONDS-t0)) s] export rc=$?"; tail -1 "$L/export.log" | cut -c1-200
mkdir -p /tmp/p/pack; cp results.db /tmp/p/; cp packs/nvidia-h200/* /tmp/p/pack/
tar czf "$OUT/run120_pack.tgz" -C /tmp/p results.db pack  # what a timeout must not lose
timeout 90 python3 benchmarks/mhc.py $P --op seam --tokens 1,64,256,1024,4096,8192 --dim 5120 --reps 30 \
    > "$L/mhc_bench.log" 2>&1; echo "[$((SECONDS-t0)) s] bench rc=$?"; grep -A12 "^workload" "$L/mhc_bench.log" | cut -c1-130
cd "$OUT" && tar czf run120.tgz logs *.json 2>/dev/null; rm -rf logs *.json
