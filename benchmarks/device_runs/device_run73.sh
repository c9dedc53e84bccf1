#!/usr/bin/env bash
# Session 13, first call (information): where the bound and radix top-k paths spend their time
# at dsv32 B=1 (CUPTI kernel times against the graph-replayed call), 128K and 512K, and
# dsv41-flash 512K; nothing tuned, nothing exported.
set -u
. benchmarks/device_runs/env.sh
B="TOPK_ALGO=bound,RADIX_FIRST=byte,RADIX_FUSED=0,PLACE_CHUNK=0,PLACE_SORT=0"
KB="python3 benchmarks/kernel_breakdown.py sparse_mqa --pack packs/nvidia-h200 --out $OUT --calls 20"
W1=batch=1,context=524288,next_n=1,profile=dsv32
W2=batch=1,context=131072,next_n=1,profile=dsv32
W3=batch=1,context=524288,next_n=1,profile=dsv41-flash
timeout 100 $KB --workload $W1 --workload $W2 --workload $W3 > "$L/bd_pack.log" 2>&1; echo "[$((SECONDS-t0)) s] pack rc=$?"
timeout 100 $KB --workload $W1 --workload $W3 --config $B,BOUND_GROUP=64 > "$L/bd_b64.log" 2>&1; echo "[$((SECONDS-t0)) s] b64 rc=$?"
timeout 100 $KB --workload $W1 --workload $W2 --config $B,BOUND_GROUP=16 > "$L/bd_b16.log" 2>&1; echo "[$((SECONDS-t0)) s] b16 rc=$?"
timeout 100 $KB --workload $W1 --config $B,BOUND_GROUP=128,BLOCK_N=128 > "$L/bd_b128.log" 2>&1; echo "[$((SECONDS-t0)) s] b128 rc=$?"
cd "$OUT" && tar czf run73.tgz logs *.json 2>/dev/null; rm -rf logs *.json
for f in bd_pack bd_b64 bd_b16 bd_b128; do echo "== $f"; tar xzf run73.tgz -O logs/$f.log 2>/dev/null | grep -v "^WARNING\|^\s*$" | cut -c1-150 | tail -40; done
