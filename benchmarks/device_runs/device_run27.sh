#!/usr/bin/env bash
# Session 6, last call: the committed state measured whole. mHC seam re-tune at T=1024 / 4096
# (the finish launch changed under the tuned SPLIT_K / BLOCK_T), export; sparse --quick after
# the histogram revert; nvfp4 --quick with the new reduce (run 26's 90 s cut it short).
set -u
. benchmarks/device_runs/env.sh
timeout 75 $T mhc --op seam --tokens 1024,4096 --dim 5120 --budget 55s --retune > "$L/mhc_tune.log" 2>&1
echo "[$((SECONDS-t0)) s] mhc tune rc=$?"
cp results.db "$OUT/results.db"
$T export --out packs/nvidia-h200 > "$L/export.log" 2>&1 && $T verify-pack packs/nvidia-h200 >> "$L/export.log" 2>&1
echo "export rc=$?"; cp -r packs/nvidia-h200 "$OUT/pack"
timeout 60 python3 benchmarks/mhc.py $P --op seam --tokens 1,64,256,1024,4096 --dim 5120 > "$L/mhc_bench.log" 2>&1
echo "[$((SECONDS-t0)) s] mhc rc=$?"
timeout 90 python3 benchmarks/sparse_mqa.py $P --quick > "$L/sparse_bench.log" 2>&1; echo "[$((SECONDS-t0)) s] sparse rc=$?"
left=$((540 - SECONDS + t0)); [ $left -gt 30 ] && timeout $left python3 benchmarks/nvfp4_attention.py --pack packs/nvidia-h200 \
    --quick --modes dense --out "$OUT" > "$L/nvfp4_bench.log" 2>&1; echo "[$((SECONDS-t0)) s] nvfp4 rc=$?"
cd "$OUT" && tar czf run27.tgz logs *.json 2>/dev/null; rm -rf logs *.json
echo "== mhc_tune"; tar xzf run27.tgz -O logs/mhc_tune.log | grep "│ " | cut -c1-150
echo "== mhc_bench"; tar xzf run27.tgz -O logs/mhc_bench.log | tail -8
echo "== sparse_bench"; tar xzf run27.tgz -O logs/sparse_bench.log | grep -A17 "^profile" | head -18
echo "== nvfp4_bench"; tar xzf run27.tgz -O logs/nvfp4_bench.log | grep -v "^{\|Warning\|warn(" | tail -25 | cut -c1-220
