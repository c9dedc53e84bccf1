#!/usr/bin/env bash
# Device call: nvfp4 attention variant sweep (find the GPU-only bug), mHC GPU tests + seam bench.
set -u
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 TRITON_DEFAULT_FP_FUSION=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
timeout 100 python3 benchmarks/nvfp4_debug.py --budget 75 > "$OUT/nvfp4_debug.log" 2>&1
timeout 70 python3 -m pytest -x -q -p no:cacheprovider --timeout 60 tests/test_mhc.py -k "not fit_sm90" > "$OUT/mhc_gpu_tests.log" 2>&1
timeout 80 python3 benchmarks/mhc.py --op seam --tokens 1,256,1024,4096 --dim 5120 --out "$OUT" > "$OUT/mhc_bench.log" 2>&1
tail -4 "$OUT/mhc_gpu_tests.log"; tail -8 "$OUT/mhc_bench.log"; tail -45 "$OUT/nvfp4_debug.log" | cut -c1-140
