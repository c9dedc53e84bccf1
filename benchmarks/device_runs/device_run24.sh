#!/usr/bin/env bash
# Session 6: where each family's call time goes (benchmarks/kernel_breakdown.py): kernel
# device times (CUPTI) vs the call under graph replay, pack configs. Chiefly the sparse_mqa
# radix top-k at B=1, which costs ~28 us at every context (run 23: 8K 33.6 vs 5.1 us scoring).
set -u
. benchmarks/device_runs/env.sh
B="python3 benchmarks/kernel_breakdown.py"
S=next_n=1,profile=dsv32
timeout 120 $B sparse_mqa --pack packs/nvidia-h200 --out "$OUT" --workload batch=1,context=8192,$S \
    --workload batch=1,context=131072,$S --workload batch=1,context=524288,$S --workload batch=32,context=8192,$S \
    --workload batch=32,context=524288,$S --workload batch=1,context=8192,next_n=1,profile=dsv41-flash \
    > "$L/bd_sparse.log" 2>&1; echo "[$((SECONDS-t0)) s] sparse rc=$?"
timeout 60 $B moe_routing --pack packs/nvidia-h200 --out "$OUT" --workload tokens=1,profile=dsv3 \
    --workload tokens=256,profile=dsv3 --workload tokens=256,profile=dsv41-flash > "$L/bd_moe.log" 2>&1
echo "[$((SECONDS-t0)) s] moe rc=$?"
timeout 60 $B mhc --pack packs/nvidia-h200 --out "$OUT" --workload op=seam,tokens=1024,dim=5120 \
    --workload op=seam,tokens=4096,dim=5120 > "$L/bd_mhc.log" 2>&1; echo "[$((SECONDS-t0)) s] mhc rc=$?"
timeout 90 $B nvfp4_attention --pack packs/nvidia-h200 --out "$OUT" \
    --workload batch=8,context=131072,heads=16,kv_dtype=nvfp4,mode=dense \
    --workload batch=8,context=131072,heads=16,kv_dtype=fp8,mode=dense \
    --workload batch=8,context=131072,heads=64,kv_dtype=nvfp4,mode=dense > "$L/bd_nvfp4.log" 2>&1
echo "[$((SECONDS-t0)) s] nvfp4 rc=$?"
cd "$OUT" && tar czf run24.tgz logs *.json 2>/dev/null; rm -rf logs *.json
for f in bd_sparse bd_moe bd_mhc bd_nvfp4; do
    echo "== $f"; tar xzf run24.tgz -O logs/$f.log | grep -v "^{\|Warning\|warn(\|raw results" | cut -c1-120 | tail -45
done
