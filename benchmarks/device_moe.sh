#!/usr/bin/env bash
# Device call: tune the MoE routing default grid into results.db, export the pack, benchmark.
set -u
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 TRITON_DEFAULT_FP_FUSION=1 COLUMNS=160
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
tune() { python3 -m tuner.cli.main "$@"; }
( time tune moe-routing --budget ${BUDGET:-4m40s} --db results.db ) > "$OUT/moe_tune.log" 2>&1
tail -40 "$OUT/moe_tune.log"
tune export --out packs/nvidia-h200 --db results.db && tune verify-pack packs/nvidia-h200
timeout 150 python3 benchmarks/moe_routing.py --pack packs/nvidia-h200 --out "$OUT" > "$OUT/moe_bench.log" 2>&1
cat "$OUT/moe_bench.log" | tail -16
cp results.db "$OUT/results.db"; cp packs/nvidia-h200/manifest.json "$OUT/pack_manifest.json"
cp packs/nvidia-h200/moe_routing.json "$OUT/pack_moe_routing.json"
