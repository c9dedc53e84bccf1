#!/usr/bin/env bash
# Session 7, fifth call: re-tune sparse_mqa at B=32 128K / 512K with the new radix defaults
# (measured as each workload's default), export the pack, the sparse --quick benchmark
# (with baselines), and a third engram sample at T=256.
set -u
. benchmarks/device_runs/env.sh
timeout 200 $T sparse-mqa --profile dsv32,dsv41-flash --batch 32 --context 131072,524288 --next-n 1 --budget 120s --retune \
    > "$L/sparse_tune.log" 2>&1; echo "[$((SECONDS-t0)) s] sparse tune rc=$?"
cp results.db "$OUT/results.db"
$T export --out packs/nvidia-h200 > "$L/export.log" 2>&1 && $T verify-pack packs/nvidia-h200 >> "$L/export.log" 2>&1
echo "export rc=$?"; cp -r packs/nvidia-h200 "$OUT/pack"
timeout 150 python3 benchmarks/sparse_mqa.py $P --quick > "$L/sparse_bench.log" 2>&1; echo "[$((SECONDS-t0)) s] sparse rc=$?"
left=$((500 - SECONDS + t0)); [ $left -gt 30 ] && timeout $left python3 benchmarks/engram.py $P --tokens 256 --table-rows 8M \
    > "$L/engram_bench.log" 2>&1; echo "[$((SECONDS-t0)) s] engram rc=$?"
cd "$OUT" && tar czf run32.tgz logs *.json 2>/dev/null; rm -rf logs *.json
echo "== tune"; tar xzf run32.tgz -O logs/sparse_tune.log | grep "│ " | cut -c1-160 | tail -8
echo "== sparse"; tar xzf run32.tgz -O logs/sparse_bench.log | grep -A40 "^profile" | head -40
echo "== engram"; tar xzf run32.tgz -O logs/engram_bench.log | tail -12
