#!/usr/bin/env bash
# Session 21, call 5. mHC (issue 5): the split-K finish launch takes 16-token tiles of its own (16 x 256: 512-byte row
# pieces, where GLUON's 64-token blocks gave it 64 x 64, 128-byte ones). GPU tests, CUPTI breakdowns against run 110's
# (finish 58.8 us at T = 4096), re-tune of the 13 mhc entries (the source hash moved), export, the seam benchmark.
set -u
. benchmarks/device_runs/env.sh
timeout 120 python3 -m pytest -q -m gpu tests/test_mhc.py -k "gluon or model_shapes" > "$L/gpu_tests.log" 2>&1
echo "[$((SECONDS-t0)) s] gpu tests rc=$?"; grep -E "passed|failed|Error" "$L/gpu_tests.log" | tail -4 | cut -c1-300
KB="python3 benchmarks/kernel_breakdown.py mhc --pack packs/nvidia-h200 --out $OUT --calls 10"
timeout 60 $KB --workload op=seam,tokens=4096,dim=5120 --workload op=seam,tokens=1024,dim=5120 > "$L/kb.log" 2>&1
grep -E "call |us  x" "$L/kb.log" | cut -c1-200
tune() { timeout $1 $T mhc "${@:2}" --retune >> "$L/mhc_tune.log" 2>&1; echo "[$((SECONDS-t0)) s] tune ${*:2} rc=$?"; }
tune 150 --op seam,pre --tokens 1024,4096,8192 --dim 5120 --budget 110s --trials 6
tune 70 --op seam --tokens 1,64,256 --dim 5120 --budget 45s --trials 6
tune 100 --op seam --tokens 1024,4096 --dim 4096,7168 --budget 70s --trials 5
grep "│ " "$L/mhc_tune.log" | cut -c1-160 | tail -16
$T export --out packs/nvidia-h200 > "$L/export.log" 2>&1 && $T verify-pack packs/nvidia-h200 >> "$L/export.log" 2>&1
echo "[$((SECONDS-t0)) s] export rc=$?"; tail -1 "$L/export.log" | cut -c1-200
mkdir -p /tmp/p/pack; cp results.db /tmp/p/; cp packs/nvidia-h200/* /tmp/p/pack/
tar czf "$OUT/run114_pack.tgz" -C /tmp/p results.db pack  # what a timeout must not lose
timeout 110 python3 benchmarks/mhc.py $P --op seam --tokens 1,64,256,1024,4096,8192 --dim 5120 --reps 30 \
    > "$L/mhc_bench.log" 2>&1; echo "[$((SECONDS-t0)) s] bench rc=$?"; grep -A12 "^workload" "$L/mhc_bench.log" | cut -c1-130
cd "$OUT" && tar czf run114.tgz logs *.json 2>/dev/null; rm -rf logs *.json
