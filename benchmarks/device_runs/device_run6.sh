#!/usr/bin/env bash
# Device call (session 2, call 1): GPU tests of the four unverified families in parallel,
# the nvfp4 variant probe, then default-config benchmarks one after another. Logs -> $OUT.
set -u
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 TRITON_DEFAULT_FP_FUSION=1 COLUMNS=160
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT/logs"; L=$OUT/logs
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv,noheader
t0=$SECONDS
for f in mhc nvfp4_attention sparse_mqa engram; do
  timeout 150 python3 -m pytest -q -p no:cacheprovider --timeout 120 tests/test_$f.py > "$L/gpu_tests_$f.log" 2>&1 &
done
wait; echo "tests: $((SECONDS-t0)) s"
for f in mhc nvfp4_attention sparse_mqa engram; do echo "== $f"; tail -4 "$L/gpu_tests_$f.log" | cut -c1-220; done
timeout 70 python3 benchmarks/nvfp4_debug.py --budget 50 > "$L/nvfp4_debug.log" 2>&1
timeout 60 python3 benchmarks/mhc.py --op seam,pre --tokens 1,256,1024,4096 --dim 5120 --out "$OUT" > "$L/mhc_bench.log" 2>&1
timeout 90 python3 benchmarks/nvfp4_attention.py --quick --out "$OUT" > "$L/nvfp4_bench.log" 2>&1
timeout 100 python3 benchmarks/sparse_mqa.py --quick --out "$OUT" > "$L/sparse_mqa_bench.log" 2>&1
timeout 80 python3 benchmarks/engram.py --tokens 256,4096 --table-rows 8M --out "$OUT" > "$L/engram_bench.log" 2>&1
echo "total: $((SECONDS-t0)) s"
cd "$OUT" && tar czf run6.tgz logs *.json 2>/dev/null; rm -rf logs *.json
tar xzf run6.tgz -O logs/nvfp4_debug.log | tail -25 | cut -c1-150
for f in mhc_bench nvfp4_bench sparse_mqa_bench engram_bench; do echo "== $f"; tar xzf run6.tgz -O logs/$f.log | tail -14 | cut -c1-170; done
