#!/usr/bin/env bash
# Session 10, review: the final mHC GLUON code (fn copies masked by row only, GL_FIXED shared) on
# the GPU: the GLUON tests and the default GPU model shapes, nothing timed.
set -u
. benchmarks/device_runs/env.sh
timeout 200 python3 -m pytest -q tests/test_mhc.py -m gpu -p no:cacheprovider > "$L/mhc_tests.log" 2>&1
echo "[$((SECONDS-t0)) s] mhc gpu tests rc=$?"; grep -E "passed|failed" "$L/mhc_tests.log" | tail -3 | cut -c1-300
