#!/usr/bin/env bash
# Session 9, first call: the GLUON nvfp4 split kernel (register-A wgmma for K q^T). GPU tests
# first (correctness on ragged shapes), then the H16 / H64 target points with the variant.
set -u
. benchmarks/device_runs/env.sh
timeout 200 python3 -m pytest -q -x tests/test_nvfp4_attention.py -k "gluon" -p no:cacheprovider > "$L/gl_tests.log" 2>&1
echo "[$((SECONDS-t0)) s] gluon tests rc=$?"; tail -25 "$L/gl_tests.log" | cut -c1-300
timeout 300 python3 benchmarks/nvfp4_attention.py $P --kv-dtypes nvfp4 --modes dense --heads 16,64 --batch 16 \
    --context 32768,131072 --no-baseline --reps 30 \
    --variants '{"gluon": {"GLUON": true, "BLOCK_N": 64, "BLOCK_H": 16}}' > "$L/bench.log" 2>&1
echo "[$((SECONDS-t0)) s] bench rc=$?"
cd "$OUT" && tar czf run45.tgz logs *.json 2>/dev/null; rm -rf logs *.json
tar xzf run45.tgz -O logs/bench.log | grep -v "Warning\|warn(" | tail -22 | cut -c1-250
