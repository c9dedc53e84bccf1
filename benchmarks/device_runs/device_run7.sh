#!/usr/bin/env bash
# Device call (session 2, call 2): sparse_mqa GPU debug + the fixed GPU tests (in parallel,
# nothing timed), then tuning of moe_routing / mhc / nvfp4_attention / engram on the
# target points into results.db, export of the pack, MoE benchmark with it. -> $OUT
set -u
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 TRITON_DEFAULT_FP_FUSION=1 COLUMNS=160
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT/logs"; L=$OUT/logs
tune() { python3 -m tuner.cli.main "$@"; }
t0=$SECONDS
timeout 240 python3 -m pytest -q -p no:cacheprovider --timeout 200 tests/test_sparse_mqa.py > "$L/gpu_tests_sparse_mqa.log" 2>&1 &
timeout 100 python3 -m pytest -q -p no:cacheprovider --timeout 90 tests/test_mhc.py -k "configs or seam_is_post" > "$L/gpu_tests_mhc.log" 2>&1 &
timeout 100 python3 -m pytest -q -p no:cacheprovider --timeout 90 tests/test_engram.py -k gpu > "$L/gpu_tests_engram.log" 2>&1 &
timeout 100 python3 -m pytest -q -p no:cacheprovider --timeout 90 tests/test_nvfp4_attention.py -k lowers > "$L/gpu_tests_nvfp4.log" 2>&1 &
timeout 150 python3 benchmarks/sparse_mqa_debug.py > "$L/sparse_mqa_debug.log" 2>&1
cat "$L/sparse_mqa_debug.log" | cut -c1-200
echo "debug done: $((SECONDS-t0)) s"
wait; echo "tests done: $((SECONDS-t0)) s"
for f in sparse_mqa mhc engram nvfp4; do echo "== $f"; tail -3 "$L/gpu_tests_$f.log" | cut -c1-250; done
( time tune moe-routing --budget 75s --db results.db ) > "$L/tune_moe.log" 2>&1; tail -3 "$L/tune_moe.log"
( time tune mhc --op seam --tokens 1,64,256,1024,4096 --dim 5120 --budget 75s --db results.db ) > "$L/tune_mhc.log" 2>&1; tail -3 "$L/tune_mhc.log"
( time tune nvfp4-attention --heads 16 --kv-dtype nvfp4,fp8 --batch 16,64 --context 32768,131072 --mode dense --budget 85s --db results.db ) > "$L/tune_nvfp4_h16.log" 2>&1; tail -3 "$L/tune_nvfp4_h16.log"
( time tune nvfp4-attention --heads 64 --kv-dtype nvfp4 --batch 16,64 --context 32768,131072 --mode dense --budget 45s --db results.db ) > "$L/tune_nvfp4_h64.log" 2>&1; tail -3 "$L/tune_nvfp4_h64.log"
( time tune engram --tokens 256,4096 --table-rows 8388608 --budget 50s --db results.db ) > "$L/tune_engram.log" 2>&1; tail -3 "$L/tune_engram.log"
echo "tuning done: $((SECONDS-t0)) s"
tune export --out packs/nvidia-h200 --db results.db > "$L/export.log" 2>&1 && tune verify-pack packs/nvidia-h200 >> "$L/export.log" 2>&1; tail -3 "$L/export.log"
cp results.db "$OUT/results.db"; tar czf "$OUT/pack.tgz" packs/nvidia-h200
timeout 70 python3 benchmarks/moe_routing.py --pack packs/nvidia-h200 --out "$OUT" > "$L/moe_bench.log" 2>&1
echo "total: $((SECONDS-t0)) s"
cd "$OUT" && tar czf run7.tgz logs *.json 2>/dev/null; rm -rf logs *.json
tar xzf run7.tgz -O logs/moe_bench.log | tail -16 | cut -c1-170
