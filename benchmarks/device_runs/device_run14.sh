#!/usr/bin/env bash
# Device call (session 4, call 1): the layer GEMM's resources under ncu, one-warp engram
# prefetch overlap, sparse_mqa MX_WORD_DECODE, MoE prefix-scan tuning, nvfp4 SDPA ratio.
set -u
. benchmarks/device_runs/env.sh
M=launch__grid_size,launch__block_size,launch__registers_per_thread,launch__shared_mem_per_block_dynamic,launch__shared_mem_per_block_static,launch__occupancy_limit_registers,launch__occupancy_limit_shared_mem,launch__occupancy_limit_blocks,launch__waves_per_multiprocessor,launch__occupancy_per_block_size
timeout 60 ncu --clock-control none --metrics $M -c 3 python3 -c "
import torch
a=torch.randn(1024,1024,device='cuda',dtype=torch.bfloat16); c=torch.empty_like(a)
for _ in range(3): torch.mm(a,a,out=c)
torch.cuda.synchronize()" > "$L/ncu_gemm.log" 2>&1; echo "[$((SECONDS-t0)) s] ncu rc=$?"
C='[{"ROWS":1,"num_warps":1,"GRID_SM_FRAC":1.0,"num_stages":1},{"ROWS":1,"num_warps":1,"GRID_SM_FRAC":2.0,"num_stages":1},{"ROWS":2,"num_warps":1,"GRID_SM_FRAC":1.0,"num_stages":1},{"ROWS":2,"num_warps":1,"GRID_SM_FRAC":4.0,"num_stages":1},{"ROWS":4,"num_warps":1,"GRID_SM_FRAC":1.0,"num_stages":1},{"ROWS":8,"num_warps":1,"GRID_SM_FRAC":1.0,"num_stages":1},{"ROWS":8,"num_warps":1,"GRID_SM_FRAC":2.0,"num_stages":1},{"ROWS":64,"num_warps":16,"GRID_SM_FRAC":0.125,"num_stages":3}]'
timeout 150 python3 benchmarks/engram_sweep.py --points host:256,host:4096 --table-rows 1048576 --overlap-configs "$C" > "$L/engram_overlap.log" 2>&1; echo "[$((SECONDS-t0)) s] engram rc=$?"
timeout 120 python3 benchmarks/sparse_mqa.py --profiles dsv41-flash --batch 32 --context 131072,524288 --next-n 1 --no-baseline --reps 20 --variant word:MX_WORD_DECODE=1 --variant word32:MX_WORD_DECODE=1,NUM_SPLITS=32 --out "$OUT" > "$L/sparse_word.log" 2>&1; echo "[$((SECONDS-t0)) s] sparse rc=$?"
timeout 170 $T moe-routing --profile dsv41-flash,dsv3 --tokens 1024,4096,8192 --budget 2m --retune > "$L/moe_tune.log" 2>&1; echo "[$((SECONDS-t0)) s] moe tune rc=$?"
cp results.db "$OUT/results.db"
$T export --out /tmp/pk > "$L/export.log" 2>&1 && timeout 40 python3 benchmarks/moe_routing.py --pack /tmp/pk --profiles dsv41-flash dsv3 --tokens 1024 4096 8192 --out "$OUT" > "$L/moe_bench.log" 2>&1; echo "[$((SECONDS-t0)) s] moe bench rc=$?"
left=$((560 - SECONDS + t0)); [ $left -gt 30 ] && timeout $left python3 benchmarks/nvfp4_attention.py --pack packs/nvidia-h200 --quick --modes dense --batch 16 --heads 16 --out "$OUT" > "$L/nvfp4_bench.log" 2>&1; echo "[$((SECONDS-t0)) s] nvfp4 rc=$?"
cd "$OUT" && tar czf run14.tgz logs *.json 2>/dev/null; rm -rf logs *.json
grep -E "grid_size|block_size|registers_per|shared_mem|occupancy_limit|waves|Kernel|void|gemm|sm90" <(tar xzf run14.tgz -O logs/ncu_gemm.log) | cut -c1-150 | head -30
for f in engram_overlap sparse_word moe_tune moe_bench nvfp4_bench; do echo "== $f"; tar xzf run14.tgz -O logs/$f.log | grep -v "^{\|Warning\|warn(" | tail -16 | cut -c1-170; done
