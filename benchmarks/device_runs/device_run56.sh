#!/usr/bin/env bash
# Session 10, first call: (1) the nvfp4 GLUON GPU tests after session 9's review commit (its
# epilogue was not re-run on a GPU); (2) the new mHC GLUON mix kernel: GPU tests under a
# timeout (a one-pass deadlock shows as one), then the seam at D = 5120 against the pack:
# GLUON with the finish launch (SYNC 0) and in one pass (SYNC 2), several splits / depths.
set -u
. benchmarks/device_runs/env.sh
timeout 150 python3 -m pytest -q tests/test_nvfp4_attention.py -m gpu -k gluon -p no:cacheprovider > "$L/nvfp4_tests.log" 2>&1
echo "[$((SECONDS-t0)) s] nvfp4 gluon tests rc=$?"; tail -2 "$L/nvfp4_tests.log" | cut -c1-300
timeout 180 python3 -m pytest -q tests/test_mhc.py -m gpu -k gluon -p no:cacheprovider > "$L/mhc_tests.log" 2>&1
rc=$?; echo "[$((SECONDS-t0)) s] mhc gluon tests rc=$rc"; grep -E "passed|failed|Error|assert" "$L/mhc_tests.log" | head -12 | cut -c1-300
G='"GLUON": true, "BLOCK_T": 64, "BLOCK_D": 32, "DOT_PRECISION": "tf32", "num_warps": 4'
V="{\"g0\": {$G, \"SYNC\": 0}, \"g0k8\": {$G, \"SYNC\": 0, \"SPLIT_K\": 8}, \"g2\": {$G, \"SYNC\": 2},
\"g2k8\": {$G, \"SYNC\": 2, \"SPLIT_K\": 8}, \"g2k16\": {$G, \"SYNC\": 2, \"SPLIT_K\": 16},
\"g2k32@1024\": {$G, \"SYNC\": 2, \"SPLIT_K\": 32}, \"g2k4@256\": {$G, \"SYNC\": 2, \"SPLIT_K\": 4},
\"g2s2\": {$G, \"SYNC\": 2, \"SPLIT_K\": 8, \"num_stages\": 2}, \"g2s4\": {$G, \"SYNC\": 2, \"SPLIT_K\": 8, \"num_stages\": 4}}"
timeout 240 python3 benchmarks/mhc.py $P --op seam --tokens 256,1024,4096,8192 --dim 5120 --no-baselines --reps 40 \
    --variants "$V" > "$L/mhc_seam.log" 2>&1; echo "[$((SECONDS-t0)) s] mhc seam rc=$?"
cd "$OUT" && tar czf run56.tgz logs *.json 2>/dev/null; rm -rf logs *.json
echo "== mhc"; tar xzf run56.tgz -O logs/mhc_seam.log | grep " us (\|FAILED\|skipped\|Error" | cut -c1-120
