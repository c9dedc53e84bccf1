#!/usr/bin/env bash
# Device call (session 3, call 4): sparse_mqa's radix top-k verified and timed against the
# merge path, then tuning of every family's target points (results.db copied to $OUT after
# each step), export and verify of the pack.
set -u
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 COLUMNS=160
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT/logs"; L=$OUT/logs
T="python3 -m tuner.cli.main"; R="--retune --db results.db"  # (timeout cannot run a shell function)
save() { cp results.db "$OUT/results.db"; echo "[$((SECONDS-t0)) s] $1 rc=$2"; }
t0=$SECONDS
[ -n "${SKIP_ALGOS:-}" ] || timeout 110 python3 benchmarks/sparse_mqa.py --algos merge,radix --batch 1,32 --context 8192,524288 --next-n 1 --no-baseline --reps 20 --out "$OUT" > "$L/sparse_algos.log" 2>&1; echo "[$((SECONDS-t0)) s] sparse algos rc=$?"
timeout 75 $T engram --tokens 256,4096 --placement hbm,host,host_thp --table-rows 8388608 --budget 45s $R > "$L/tune_engram.log" 2>&1; save engram $?
timeout 70 $T nvfp4-attention --heads 16 --kv-dtype nvfp4,fp8 --batch 16 --context 32768,131072 --mode dense --budget 45s $R > "$L/tune_nvfp4.log" 2>&1; save nvfp4_h16 $?
timeout 45 $T nvfp4-attention --heads 64 --kv-dtype nvfp4 --batch 16 --context 32768 --mode dense --budget 25s $R >> "$L/tune_nvfp4.log" 2>&1; save nvfp4_h64 $?
timeout 60 $T moe-routing --profile dsv41-flash,dsv3 --tokens 4096,8192 --budget 40s $R > "$L/tune_moe.log" 2>&1; save moe $?
timeout 55 $T mhc --op seam --tokens 256,1024,4096 --dim 5120 --budget 30s $R > "$L/tune_mhc.log" 2>&1; save mhc $?
timeout 100 $T sparse-mqa --profile dsv32,dsv41-flash --batch 1,32 --context 131072,524288 --next-n 1 --budget 60s $R > "$L/tune_sparse_mqa.log" 2>&1; save sparse_mqa $?
python3 -m tuner.cli.main export --out packs/nvidia-h200 --db results.db > "$L/export.log" 2>&1 && python3 -m tuner.cli.main verify-pack packs/nvidia-h200 >> "$L/export.log" 2>&1; echo "export rc=$?"; tail -4 "$L/export.log" | cut -c1-200
tar czf "$OUT/pack.tgz" packs/nvidia-h200
cd "$OUT" && tar czf run12.tgz logs *.json 2>/dev/null; rm -rf logs *.json
tar xzf run12.tgz -O logs/sparse_algos.log | tail -16 | cut -c1-180
for f in engram nvfp4 moe mhc sparse_mqa; do tar xzf run12.tgz -O logs/tune_$f.log | grep "│ " | cut -c1-150; done
