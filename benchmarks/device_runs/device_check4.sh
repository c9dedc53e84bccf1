#!/usr/bin/env bash
# Device call: MoE GPU tests (fused multi-program for real) + default-config bench after GRID_SYNC.
set -u
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 TRITON_DEFAULT_FP_FUSION=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
timeout 90 python3 -m pytest -x -q -p no:cacheprovider --timeout 40 tests/test_moe_routing.py -k "profiles_default_config or variants or ties or custom_routing" > "$OUT/moe_gpu_tests.log" 2>&1
tail -15 "$OUT/moe_gpu_tests.log" | cut -c1-300
timeout 60 python3 benchmarks/moe_routing.py --tokens 1 16 64 --out "$OUT" > "$OUT/moe_bench_defaults.log" 2>&1
tail -9 "$OUT/moe_bench_defaults.log"
