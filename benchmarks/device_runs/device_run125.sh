#!/usr/bin/env bash
# Session 23, call 6 (last: ~10 minutes of device time left). nvfp4 (issue 3): GL_WS's decoder now prefetches the next
# tile's rows into L2 (run 124: the decoder is the wall, stalled on its register loads two chunks ahead). The GL_WS
# GPU tests, one interleaved sweep (H64 B16 32K), then a re-tune of the 64-head dense nvfp4 pack entries at
# B 1 / 4 / 16 / 64 x 8K / 32K / 128K with GL_WS tries (B = 1 / 4 also owed since session 22: their entries were
# admitted unmeasured against the defaults), export, and the benchmark at the points.
set -u
. benchmarks/device_runs/env.sh
timeout 110 python3 -m pytest -q -m gpu tests/test_nvfp4_attention.py -p no:cacheprovider \
    -k "over14 or over15 or over16 or over17 or over18 or long_rows" > "$L/gpu_tests.log" 2>&1
echo "[$((SECONDS-t0)) s] gpu tests rc=$?"; grep -E "passed|failed|Error|assert" "$L/gpu_tests.log" | tail -8 | cut -c1-300
WS64="GLUON=true,GL_WS=1,BLOCK_N=64,BLOCK_H=64"
timeout 45 python3 benchmarks/config_sweep.py nvfp4_attention --pack packs/nvidia-h200 --out $OUT --rounds 3 \
    --workload batch=16,context=32768,heads=64,kv_dtype=nvfp4,mode=dense --config $WS64,NUM_SPLITS=8 \
    --config GLUON=true,GL_WS=1,BLOCK_N=64,BLOCK_H=16,NUM_SPLITS=8 > "$L/sweep.log" 2>&1
echo "[$((SECONDS-t0)) s] sweep rc=$?"; grep -v Warn "$L/sweep.log" | tail -4 | cut -c1-150
J='"GLUON": true, "GL_WS": 1, "BLOCK_N": 64, "BLOCK_H": 64'
timeout 200 $T nvfp4-attention --batch 1,4,16,64 --context 8192,32768,131072 --heads 64 --kv-dtype nvfp4 --mode dense \
    --retune --trials 5 --budget 170s --try "{$J, \"NUM_SPLITS\": 8}" --try "{$J, \"NUM_SPLITS\": 2}" > "$L/tune.log" 2>&1
echo "[$((SECONDS-t0)) s] tune rc=$?"; grep "│ " "$L/tune.log" | cut -c1-170 | tail -13
$T export --out packs/nvidia-h200 > "$L/export.log" 2>&1 && $T verify-pack packs/nvidia-h200 >> "$L/export.log" 2>&1
echo "[$((SECONDS-t0)) s] export rc=$?"; tail -1 "$L/export.log" | cut -c1-200
mkdir -p /tmp/p/pack; cp results.db /tmp/p/; cp packs/nvidia-h200/* /tmp/p/pack/
tar czf "$OUT/run125_pack.tgz" -C /tmp/p results.db pack  # what a timeout must not lose
timeout 80 python3 benchmarks/nvfp4_attention.py $P --kv-dtypes nvfp4 --modes dense --heads 16,64 --batch 16,64 \
    --context 32768,131072 --no-baseline --reps 20 > "$L/bench.log" 2>&1; echo "[$((SECONDS-t0)) s] bench rc=$?"
grep -E "dense  H=|targets|MISS|OK " "$L/bench.log" | cut -c1-150 | tail -16
cd "$OUT" && tar czf run125.tgz logs *.json 2>/dev/null; rm -rf logs *.json
