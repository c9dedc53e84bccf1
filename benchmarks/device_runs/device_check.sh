#!/usr/bin/env bash
# One device call: GPU correctness tests of the templates, a short tuning, default-config benchmarks.
# Usage (device tool): bash benchmarks/device_runs/device_check.sh   (writes under $OUT)
set -u
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 TRITON_DEFAULT_FP_FUSION=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"
timeout 200 python3 -m pytest -q -x -p no:cacheprovider tests/test_moe_routing.py 2>&1 | tail -5
timeout 100 python3 -m pytest -q -p no:cacheprovider tests/test_mhc.py tests/test_nvfp4.py tests/test_nvfp4_attention.py 2>&1 | tail -8
( time timeout 150 python3 -m tuner.cli.main moe-routing --tokens 1,64,4096 --profile dsv3 --trials 8 --db "$OUT/check.db" ) 2>&1 | tail -12
timeout 120 python3 benchmarks/moe_routing.py --out "$OUT" 2>&1 | tail -16
