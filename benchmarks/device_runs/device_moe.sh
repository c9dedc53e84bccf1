#!/usr/bin/env bash
# Device call: tune the MoE routing default grid into results.db, export the pack, benchmark.
set -u
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 TRITON_DEFAULT_FP_FUSION=1 COLUMNS=160
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
tune() { python3 -m tuner.cli.main "$@"; }
( time tune moe-routing --budget ${BUDGET:-4m30s} --db results.db ) > "$OUT/moe_tune.log" 2>&1
tail -40 "$OUT/moe_tune.log"
tune export --out packs/nvidia-h200 --db results.db && tune verify-pack packs/nvidia-h200
timeout 150 python3 benchmarks/moe_routing.py --pack packs/nvidia-h200 --out "$OUT" > "$OUT/moe_bench.log" 2>&1
cat "$OUT/moe_bench.log" | tail -16
cp results.db "$OUT/results.db"  # the pack is re-exported from it after the run
# Engram: first GPU sight (tests + benchmark), logs only
timeout 80 python3 -m pytest -x -q -p no:cacheprovider --timeout 60 tests/test_engram.py > "$OUT/engram_gpu_tests.log" 2>&1; tail -3 "$OUT/engram_gpu_tests.log"
timeout 100 python3 benchmarks/engram.py --tokens 256,4096 --table-rows 8M --out "$OUT" > "$OUT/engram_bench.log" 2>&1; tail -25 "$OUT/engram_bench.log"
