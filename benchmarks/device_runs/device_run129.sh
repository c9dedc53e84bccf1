#!/usr/bin/env bash
# Session 24, call 4. The defaults changed after runs 127-128 on the GPU (nvfp4: GL_WS with GL_WS_A from 2^18
# block x entry pairs; sparse: SCORE_GLUON for mxfp4 keys with 3 stages, covered by the Gluon scoring test), then the
# sparse benchmark on the pack for both profiles at B = 1 / 32 x 128K / 512K with the PyTorch baseline (issue 4's
# numbers after run 128's dsv41-flash re-tune).
set -u
. benchmarks/device_runs/env.sh
timeout 150 python3 -m pytest -q -m gpu tests/test_nvfp4_attention.py -p no:cacheprovider -k "gpu_default_configs" \
    > "$L/gpu_tests.log" 2>&1
echo "[$((SECONDS-t0)) s] gpu tests rc=$?"; grep -E "passed|failed|Error|assert" "$L/gpu_tests.log" | tail -8 | cut -c1-300
timeout 330 python3 benchmarks/sparse_mqa.py $P --reps 20 --profiles dsv32,dsv41-flash --next-n 1 --batch 1,32 \
    --context 131072,524288 > "$L/sparse.log" 2>&1; echo "[$((SECONDS-t0)) s] bench rc=$?"
grep -A30 "^profile" "$L/sparse.log" | cut -c1-200
cd "$OUT" && tar czf run129.tgz logs *.json 2>/dev/null; rm -rf logs *.json
