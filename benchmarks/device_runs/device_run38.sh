#!/usr/bin/env bash
# Session 8, call 2: the row path with the chunked placing for dsv32's short contexts (B=1, 8,
# 32 at 8K / 32K), 1024-key chunks, B=128's radix programs a row and placing, and Nsight
# Compute on dsv41-flash's scoring kernel at B=32 512K (44% of the floor).
set -u
. benchmarks/device_runs/env.sh
B="python3 benchmarks/sparse_mqa.py $P --no-baseline --reps 30 --next-n 1"
R="TOPK_ALGO=row,TOPK_BLOCK=2048,TOPK_SPLITS=1,RADIX_FIRST=byte,PLACE_SORT=0,RANK_BLOCK=64"
for bs in 1:32 8:32 32:16; do b=${bs%:*}; s=${bs#*:}
  timeout 100 $B --profiles dsv32 --batch $b --context 8192,32768 --variant row:$R,NUM_SPLITS=$s \
      --variant rowc256:$R,NUM_SPLITS=$s,PLACE_CHUNK=256 --variant rowc512:$R,NUM_SPLITS=$s,PLACE_CHUNK=512 \
      > "$L/row_b$b.log" 2>&1; echo "[$((SECONDS-t0)) s] row b$b rc=$?"
done
timeout 100 $B --profiles dsv41-flash --batch 1,32 --context 8192 --variant rowc128:PLACE_CHUNK=128 \
    > "$L/row_dsv41.log" 2>&1; echo "[$((SECONDS-t0)) s] row dsv41 rc=$?"
C="PLACE_SORT=0,RANK_BLOCK=64"
timeout 100 $B --profiles dsv32 --batch 32 --context 8192,524288 --variant ch512:PLACE_CHUNK=512,$C \
    --variant ch1024:PLACE_CHUNK=1024,$C > "$L/ch1024.log" 2>&1; echo "[$((SECONDS-t0)) s] ch1024 rc=$?"
timeout 120 $B --batch 128 --context 131072 --variant ts32:TOPK_SPLITS=32 --variant sort:PLACE_CHUNK=0,PLACE_SORT=1 \
    --variant rank:PLACE_CHUNK=0,RANK_BLOCK=128 > "$L/b128.log" 2>&1; echo "[$((SECONDS-t0)) s] b128 rc=$?"
SECS="--section SpeedOfLight --section Occupancy --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis --section InstructionStats"
timeout 150 ncu --clock-control none -k "regex:_score_kernel" -s 2 -c 1 $SECS python3 benchmarks/ncu_probe.py sparse_mqa \
    --workload batch=32,context=524288,next_n=1,profile=dsv41-flash --config '{}' > "$L/ncu_dsv41.log" 2>&1
echo "[$((SECONDS-t0)) s] ncu rc=$?"
cd "$OUT" && tar czf run38.tgz logs *.json 2>/dev/null; rm -rf logs *.json
for f in row_b1 row_b8 row_b32 row_dsv41 ch1024 b128; do echo "== $f"
  tar xzf run38.tgz -O logs/$f.log | grep -v "Warning\|warn(" | sed -n "/^top-k paths/,/^variants/p" | cut -c1-220; done
echo "== ncu"; tar xzf run38.tgz -O logs/ncu_dsv41.log | grep -E "Duration|DRAM Throughput|Memory Throughput|Achieved Occupancy|Registers Per|Issue Slots Busy|Warp Cycles Per Issued|Stall|stall|Bank|No Eligible|Eligible Warps|Executed Ipc|Theoretical Occ|Block Limit" | head -30 | cut -c1-200
