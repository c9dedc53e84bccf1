#!/usr/bin/env bash
# Device call (session 3, call 6): every family's benchmark with the re-exported pack.
set -u
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 COLUMNS=160
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT/logs"; L=$OUT/logs
t0=$SECONDS
timeout 100 python3 benchmarks/sparse_mqa.py --pack packs/nvidia-h200 --quick --out "$OUT" > "$L/sparse_mqa_bench.log" 2>&1; echo "[$((SECONDS-t0)) s] sparse rc=$?"
timeout 60 python3 benchmarks/nvfp4_attention.py --pack packs/nvidia-h200 --quick --modes dense --out "$OUT" > "$L/nvfp4_bench.log" 2>&1; echo "[$((SECONDS-t0)) s] nvfp4 rc=$?"
timeout 40 python3 benchmarks/mhc.py --pack packs/nvidia-h200 --op seam --tokens 1,64,256,1024,4096 --dim 5120 --out "$OUT" > "$L/mhc_bench.log" 2>&1; echo "[$((SECONDS-t0)) s] mhc rc=$?"
timeout 70 python3 benchmarks/engram.py --pack packs/nvidia-h200 --tokens 256,4096 --table-rows 8M --out "$OUT" > "$L/engram_bench.log" 2>&1; echo "[$((SECONDS-t0)) s] engram rc=$?"
timeout 40 python3 benchmarks/moe_routing.py --pack packs/nvidia-h200 --out "$OUT" > "$L/moe_bench.log" 2>&1; echo "[$((SECONDS-t0)) s] moe rc=$?"
cd "$OUT" && tar czf run13.tgz logs *.json 2>/dev/null; rm -rf logs *.json
for f in sparse_mqa_bench nvfp4_bench mhc_bench engram_bench moe_bench; do echo "== $f"; tar xzf run13.tgz -O logs/$f.log | grep -v "^{\|Warning\|warn(" | tail -24 | cut -c1-170; done
