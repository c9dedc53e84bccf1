#!/usr/bin/env bash
# Session 6, second look: (1) the sparse radix passes one by one (kernel_breakdown's launch
# order) at B=1 / 32, 8K / 512K, and PLACE_SORT / RANK_BLOCK variants of the place kernel;
# (2) the mHC seam with the finish launch's own tiling (prediction in NOTES, session 6).
set -u
. benchmarks/device_runs/env.sh
B="python3 benchmarks/kernel_breakdown.py"
S=next_n=1,profile=dsv32
timeout 90 $B sparse_mqa --pack packs/nvidia-h200 --out "$OUT" --workload batch=1,context=8192,$S \
    --workload batch=1,context=524288,$S --workload batch=32,context=8192,$S --workload batch=32,context=524288,$S \
    --workload batch=32,context=524288,next_n=1,profile=dsv41-flash > "$L/bd_sparse.log" 2>&1
echo "[$((SECONDS-t0)) s] sparse breakdown rc=$?"
timeout 90 $B mhc --pack packs/nvidia-h200 --out "$OUT" --workload op=seam,tokens=1024,dim=5120 \
    --workload op=seam,tokens=4096,dim=5120 --workload op=seam,tokens=256,dim=5120 > "$L/bd_mhc.log" 2>&1
echo "[$((SECONDS-t0)) s] mhc breakdown rc=$?"
timeout 100 python3 benchmarks/mhc.py $P --op seam --tokens 1,64,256,1024,4096 --dim 5120 > "$L/mhc_bench.log" 2>&1
echo "[$((SECONDS-t0)) s] mhc rc=$?"
timeout 120 python3 benchmarks/sparse_mqa.py $P --batch 1,32 --next-n 1 --context 8192,524288 --no-baseline \
    --variant ps:PLACE_SORT=1,RANK_BLOCK=64 --variant rb64:RANK_BLOCK=64 > "$L/sparse_place.log" 2>&1
echo "[$((SECONDS-t0)) s] sparse place rc=$?"
cd "$OUT" && tar czf run25.tgz logs *.json 2>/dev/null; rm -rf logs *.json
for f in bd_sparse bd_mhc; do
    echo "== $f"; tar xzf run25.tgz -O logs/$f.log | grep -v "^{\|Warning\|warn(\|raw results" | cut -c1-300 | tail -40
done
echo "== mhc_bench"; tar xzf run25.tgz -O logs/mhc_bench.log | tail -9
echo "== sparse_place"; tar xzf run25.tgz -O logs/sparse_place.log | grep -A12 "^variants"
