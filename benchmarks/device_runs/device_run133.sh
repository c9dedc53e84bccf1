#!/usr/bin/env bash
# Session 24, call 8 (last, ~4 minutes of device time left). The mxfp4 Gluon scoring without the fp8 path's mbarriers
# (allocated but unused there before): its GPU tests (7 cases x 3 paths, fp8 and mxfp4).
set -u
. benchmarks/device_runs/env.sh
timeout 150 python3 -m pytest -q -m gpu tests/test_sparse_mqa.py -p no:cacheprovider -k "gpu_gluon_scoring" \
    > "$L/gpu_tests.log" 2>&1
echo "[$((SECONDS-t0)) s] gpu tests rc=$?"; grep -E "passed|failed|Error|assert" "$L/gpu_tests.log" | tail -8 | cut -c1-300
cd "$OUT" && tar czf run133.tgz logs 2>/dev/null; rm -rf logs
