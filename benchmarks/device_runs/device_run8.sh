#!/usr/bin/env bash
# Device call (session 2, call 3, the last of the session's device time): the shared-threshold
# fix of sparse_mqa checked on the race cases, short tuning of every family on its target
# points (results.db saved to $OUT after each), pack export, benchmarks with the pack.
set -u
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 TRITON_DEFAULT_FP_FUSION=1 COLUMNS=160
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT/logs"; L=$OUT/logs
tune() { python3 -m tuner.cli.main "$@"; }
save() { cp results.db "$OUT/results.db"; echo "[$((SECONDS-t0)) s] $1"; }
t0=$SECONDS
timeout 45 python3 benchmarks/sparse_mqa_debug.py --share > "$L/sparse_mqa_share.log" 2>&1; grep -c "rows wrong 0/" "$L/sparse_mqa_share.log"; grep "repeats [1-9]\|wrong [1-9]" "$L/sparse_mqa_share.log" | head -5
timeout 80 python3 -m tuner.cli.main sparse-mqa --profile dsv32,dsv41-flash --batch 1,32 --context 131072,524288 --next-n 1 --budget 50s --db results.db > "$L/tune_sparse_mqa.log" 2>&1; save sparse_mqa
timeout 60 python3 -m tuner.cli.main mhc --op seam --tokens 1,64,256,1024,4096 --dim 5120 --budget 35s --db results.db > "$L/tune_mhc.log" 2>&1; save mhc
timeout 75 python3 -m tuner.cli.main nvfp4-attention --heads 16 --kv-dtype nvfp4,fp8 --batch 16,64 --context 32768,131072 --mode dense --budget 45s --db results.db > "$L/tune_nvfp4.log" 2>&1; save nvfp4_h16
timeout 50 python3 -m tuner.cli.main nvfp4-attention --heads 64 --kv-dtype nvfp4 --batch 16,64 --context 32768,131072 --mode dense --budget 25s --db results.db >> "$L/tune_nvfp4.log" 2>&1; save nvfp4_h64
timeout 55 python3 -m tuner.cli.main engram --tokens 256,4096 --table-rows 8388608 --budget 30s --db results.db > "$L/tune_engram.log" 2>&1; save engram
tune export --out packs/nvidia-h200 --db results.db > "$L/export.log" 2>&1 && tune verify-pack packs/nvidia-h200 >> "$L/export.log" 2>&1; tail -2 "$L/export.log"
tar czf "$OUT/pack.tgz" packs/nvidia-h200
timeout 45 python3 benchmarks/sparse_mqa.py --pack packs/nvidia-h200 --quick --out "$OUT" > "$L/sparse_mqa_bench.log" 2>&1; echo "[$((SECONDS-t0)) s] bench sparse"
timeout 45 python3 benchmarks/nvfp4_attention.py --pack packs/nvidia-h200 --quick --modes dense --out "$OUT" > "$L/nvfp4_bench.log" 2>&1; echo "[$((SECONDS-t0)) s] bench nvfp4"
timeout 30 python3 benchmarks/mhc.py --pack packs/nvidia-h200 --op seam --tokens 1,64,256,1024,4096 --dim 5120 --out "$OUT" > "$L/mhc_bench.log" 2>&1; echo "[$((SECONDS-t0)) s] bench mhc"
timeout 45 python3 benchmarks/engram.py --pack packs/nvidia-h200 --tokens 256,4096 --table-rows 8M --out "$OUT" > "$L/engram_bench.log" 2>&1; echo "[$((SECONDS-t0)) s] bench engram"
timeout 30 python3 benchmarks/moe_routing.py --pack packs/nvidia-h200 --tokens 1 64 1024 4096 --out "$OUT" > "$L/moe_bench.log" 2>&1; echo "[$((SECONDS-t0)) s] bench moe"
cd "$OUT" && tar czf run8.tgz logs *.json 2>/dev/null; rm -rf logs *.json
for f in sparse_mqa_bench nvfp4_bench mhc_bench engram_bench moe_bench; do echo "== $f"; tar xzf run8.tgz -O logs/$f.log | tail -12 | cut -c1-160; done
