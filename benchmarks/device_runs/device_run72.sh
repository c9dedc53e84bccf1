#!/usr/bin/env bash
# Session 12, review check: the bound path's GPU tests after the review commit (one bin
# helper in _bound_threshold_kernel, bound_config choosing the group size); nothing timed.
set -u
. benchmarks/device_runs/env.sh
timeout 150 python3 -m pytest -q -x tests/test_sparse_mqa.py -m gpu -k "bound or default_configs" -p no:cacheprovider > "$L/sparse_tests.log" 2>&1
rc=$?; echo "[$((SECONDS-t0)) s] sparse gpu tests rc=$rc"; tail -3 "$L/sparse_tests.log" | cut -c1-300
cd "$OUT" && tar czf run72.tgz logs 2>/dev/null; rm -rf logs
