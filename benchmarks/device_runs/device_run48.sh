#!/usr/bin/env bash
# Session 9, fourth call: GLUON v4 (v3 + the next tile's page / top-k indices loaded a tile
# ahead, so a tile's code loads never wait on a block-table load issued just before them);
# GPU tests, the H16 target points, and Nsight Compute stall reasons of the GLUON kernel.
set -u
. benchmarks/device_runs/env.sh
timeout 200 python3 -m pytest -q -x tests/test_nvfp4_attention.py -k "gluon" -p no:cacheprovider > "$L/gl_tests.log" 2>&1
echo "[$((SECONDS-t0)) s] gluon tests rc=$?"; tail -3 "$L/gl_tests.log" | cut -c1-300
timeout 300 python3 benchmarks/nvfp4_attention.py $P --kv-dtypes nvfp4 --modes dense --heads 16 --batch 16,64 \
    --context 32768,131072 --no-baseline --reps 30 \
    --variants '{"gluon": {"GLUON": true, "BLOCK_N": 64, "BLOCK_H": 16}}' > "$L/bench.log" 2>&1
echo "[$((SECONDS-t0)) s] bench rc=$?"
SECS="--section SpeedOfLight --section Occupancy --section WarpStateStats --section SchedulerStats --section SourceCounters --section LaunchStats"
timeout 150 ncu --clock-control none -k "regex:_gl_split" -s 2 -c 1 $SECS python3 benchmarks/ncu_probe.py nvfp4_attention \
    --workload batch=16,context=131072,heads=16,kv_dtype=nvfp4,mode=dense \
    --config '{"GLUON": true, "BLOCK_N": 64, "BLOCK_H": 16}' > "$L/ncu_gl.log" 2>&1
echo "[$((SECONDS-t0)) s] ncu rc=$?"
cd "$OUT" && tar czf run48.tgz logs *.json 2>/dev/null; rm -rf logs *.json
tar xzf run48.tgz -O logs/bench.log | grep -v "Warning\|warn(" | grep -A5 "^variants" | cut -c1-250
tar xzf run48.tgz -O logs/ncu_gl.log | grep -E "Duration|DRAM Throughput|Achieved Occupancy|Registers Per|Issue Slots Busy|Warp Cycles Per Issued|Stall|stall|No Eligible|Eligible Warps|Block Limit|Waves" | head -30 | cut -c1-200
