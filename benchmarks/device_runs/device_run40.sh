#!/usr/bin/env bash
# Session 8: re-tune sparse_mqa at B=32 128K / 512K with the chunked placing and 64 radix programs a row as
# the default there (measured as each workload's default), export the pack, and the sparse
# --quick benchmark with the PyTorch baselines.
set -u
. benchmarks/device_runs/env.sh
timeout 140 $T sparse-mqa --profile dsv32,dsv41-flash --batch 32 --context 131072,524288 --next-n 1 --budget 90s --retune \
    > "$L/sparse_tune.log" 2>&1; echo "[$((SECONDS-t0)) s] sparse tune rc=$?"
cp results.db "$OUT/results.db"
$T export --out packs/nvidia-h200 > "$L/export.log" 2>&1 && $T verify-pack packs/nvidia-h200 >> "$L/export.log" 2>&1
echo "export rc=$?"; cp -r packs/nvidia-h200 "$OUT/pack"
timeout 200 python3 benchmarks/sparse_mqa.py $P --quick > "$L/sparse_bench.log" 2>&1; echo "[$((SECONDS-t0)) s] sparse rc=$?"
cd "$OUT" && tar czf run40.tgz logs *.json 2>/dev/null; rm -rf logs *.json
echo "== tune"; tar xzf run40.tgz -O logs/sparse_tune.log | grep "│ " | cut -c1-160 | tail -6
echo "== sparse"; tar xzf run40.tgz -O logs/sparse_bench.log | grep -A45 "^profile" | head -45
