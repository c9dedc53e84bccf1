#!/usr/bin/env bash
# Session 21, call 4. mHC (issue 5): re-tune the pack's 13 mhc entries (the one-pass change moved mhc.py's source
# hash; the two-launch path is the same code), export and verify, the seam benchmark at D = 5120; then, for the next
# session, where the GLUON mix kernel's 2.5 TB/s wall is (ncu memory throughputs) and whether a streaming kernel's
# row-piece width moves HBM efficiency (post, Triton, 2048-element tiles from 64 x 32 to 8 x 256).
set -u
. benchmarks/device_runs/env.sh
tune() { timeout $1 $T mhc "${@:2}" --retune >> "$L/mhc_tune.log" 2>&1; echo "[$((SECONDS-t0)) s] tune ${*:2} rc=$?"; }
tune 150 --op seam,pre --tokens 1024,4096,8192 --dim 5120 --budget 110s --trials 6
tune 70 --op seam --tokens 1,64,256 --dim 5120 --budget 45s --trials 6
tune 100 --op seam --tokens 1024,4096 --dim 4096,7168 --budget 70s --trials 5
grep "│ " "$L/mhc_tune.log" | cut -c1-160 | tail -16
$T export --out packs/nvidia-h200 > "$L/export.log" 2>&1 && $T verify-pack packs/nvidia-h200 >> "$L/export.log" 2>&1
echo "[$((SECONDS-t0)) s] export rc=$?"; tail -2 "$L/export.log" | cut -c1-200
mkdir -p /tmp/p/pack; cp results.db /tmp/p/; cp packs/nvidia-h200/* /tmp/p/pack/
tar czf "$OUT/run113_pack.tgz" -C /tmp/p results.db pack  # what a timeout must not lose
timeout 110 python3 benchmarks/mhc.py $P --op seam --tokens 1,64,256,1024,4096,8192 --dim 5120 --reps 30 \
    > "$L/mhc_bench.log" 2>&1; echo "[$((SECONDS-t0)) s] bench rc=$?"; grep -A12 "^workload" "$L/mhc_bench.log" | cut -c1-130
W=op=seam,tokens=4096,dim=5120
C='{"GLUON": true, "BLOCK_T": 64, "BLOCK_D": 32, "DOT_PRECISION": "tf32", "num_warps": 4, "SYNC": 0, "SPLIT_K": 4, "num_stages": 2}'
M="gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,lts__throughput.avg.pct_of_peak_sustained_elapsed"
M="$M,l1tex__throughput.avg.pct_of_peak_sustained_elapsed,sm__memory_throughput.avg.pct_of_peak_sustained_elapsed"
M="$M,lts__t_sectors_op_read.sum,lts__t_sectors_op_write.sum,lts__t_sector_hit_rate.pct,dram__bytes_read.sum,dram__bytes_write.sum"
M="$M,sm__warps_active.avg.pct_of_peak_sustained_active,smsp__issue_active.avg.pct_of_peak_sustained_active"
timeout 80 ncu --clock-control none -k "regex:_gl_mix" -s 1 -c 1 --metrics "$M" python3 benchmarks/ncu_probe.py mhc \
    --workload $W --config "$C" --calls 2 > "$L/ncu_mix.log" 2>&1; echo "[$((SECONDS-t0)) s] ncu mix rc=$?"
grep -E "__" "$L/ncu_mix.log" | sed 's/  */ /g' | cut -c1-110
timeout 70 python3 benchmarks/config_sweep.py mhc --workload op=post,tokens=4096,dim=5120 --out $OUT --rounds 3 \
    --config BLOCK_T=64,BLOCK_D=32 --config BLOCK_T=32,BLOCK_D=64 --config BLOCK_T=16,BLOCK_D=128 \
    --config BLOCK_T=8,BLOCK_D=256 > "$L/post_sweep.log" 2>&1; echo "[$((SECONDS-t0)) s] post sweep rc=$?"
grep -v Warn "$L/post_sweep.log" | tail -7
cd "$OUT" && tar czf run113.tgz logs *.json 2>/dev/null; rm -rf logs *.json
