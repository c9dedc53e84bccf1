#!/usr/bin/env bash
# Session 9, last call: where GLUON became the default without being compared: sparse mode at
# 16 heads (top-512 + window), and dense at small batch / context. Default (GLUON) against the
# Triton template's default (variant GLUON=false), no pack.
set -u
. benchmarks/device_runs/env.sh
V='{"triton": {"GLUON": false}}'
timeout 120 python3 benchmarks/nvfp4_attention.py --out "$OUT" --kv-dtypes nvfp4 --modes sparse --heads 16 --no-baseline \
    --reps 20 --variants "$V" > "$L/sparse.log" 2>&1; echo "[$((SECONDS-t0)) s] sparse rc=$?"
timeout 120 python3 benchmarks/nvfp4_attention.py --out "$OUT" --kv-dtypes nvfp4 --modes dense --heads 16 --batch 1,4 \
    --context 8192,32768 --no-baseline --reps 20 --variants "$V" > "$L/small.log" 2>&1; echo "[$((SECONDS-t0)) s] small rc=$?"
cd "$OUT" && tar czf run55.tgz logs *.json 2>/dev/null; rm -rf logs *.json
for f in sparse small; do echo "== $f"; tar xzf run55.tgz -O logs/$f.log | grep -A12 "^variants" | cut -c1-150; done
