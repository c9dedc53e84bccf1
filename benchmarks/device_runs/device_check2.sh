#!/usr/bin/env bash
# Device call 2: MoE phase profile; GPU tests of mhc / nvfp4 with logs; quick default-config benches.
set -u
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 TRITON_DEFAULT_FP_FUSION=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
timeout 150 python3 benchmarks/moe_profile.py --out "$OUT" > "$OUT/moe_profile.log" 2>&1
timeout 60 python3 -m pytest -x -q -p no:cacheprovider --timeout 50 tests/test_mhc.py > "$OUT/gpu_tests_mhc.log" 2>&1
timeout 60 python3 -m pytest -x -q -p no:cacheprovider --timeout 50 tests/test_nvfp4_attention.py tests/test_nvfp4.py > "$OUT/gpu_tests_nvfp4.log" 2>&1
timeout 60 python3 benchmarks/mhc.py --op seam --tokens 1,64,256,1024,4096 --dim 5120 --out "$OUT" > "$OUT/mhc_bench.log" 2>&1
timeout 90 python3 benchmarks/nvfp4_attention.py --quick --out "$OUT" > "$OUT/nvfp4_bench.log" 2>&1
tail -3 "$OUT/gpu_tests_mhc.log" "$OUT/gpu_tests_nvfp4.log"; tail -12 "$OUT/mhc_bench.log"; tail -14 "$OUT/nvfp4_bench.log"
cat "$OUT/moe_profile.log" | cut -c1-150
