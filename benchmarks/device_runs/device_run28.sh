#!/usr/bin/env bash
# Session 7, first call: the nvfp4 words decode (hardware E4M3 scales, mul.rn.f16x2 on pair
# words) checked on the GPU and benchmarked against fp8 / bf16; the sparse top-k ladder at
# short contexts; mHC's one-launch split (SYNC 1 / 2) next to the two-launch pack config.
set -u
. benchmarks/device_runs/env.sh
timeout 120 python3 -m pytest -q -m gpu tests/test_nvfp4_attention.py -k "words or gpu_default" > "$L/gpu_tests.log" 2>&1
echo "[$((SECONDS-t0)) s] gpu tests rc=$?"; tail -2 "$L/gpu_tests.log"
timeout 60 python3 benchmarks/sparse_topk_ladder.py $P > "$L/ladder.log" 2>&1; echo "[$((SECONDS-t0)) s] ladder rc=$?"
for s in "" "--config SYNC=2" "--config SYNC=1"; do
  timeout 60 python3 benchmarks/kernel_breakdown.py mhc --workload op=seam,tokens=1024,dim=5120 \
    --workload op=seam,tokens=4096,dim=5120 --pack packs/nvidia-h200 $s --out "$OUT" >> "$L/bd_mhc.log" 2>&1
  echo "[$((SECONDS-t0)) s] mhc breakdown '$s' rc=$?"
done
left=$((540 - SECONDS + t0)); [ $left -gt 30 ] && timeout $left python3 benchmarks/nvfp4_attention.py --pack packs/nvidia-h200 \
    --quick --modes dense --no-baseline --out "$OUT" > "$L/nvfp4_bench.log" 2>&1; echo "[$((SECONDS-t0)) s] nvfp4 rc=$?"
cd "$OUT" && tar czf run28.tgz logs *.json 2>/dev/null; rm -rf logs *.json
echo "== ladder"; tar xzf run28.tgz -O logs/ladder.log | tail -7
echo "== mhc"; tar xzf run28.tgz -O logs/bd_mhc.log | grep -v "Warning\|warn" | grep "call\|in order"
echo "== nvfp4_bench"; tar xzf run28.tgz -O logs/nvfp4_bench.log | grep -v "^{\|Warning\|warn(" | tail -25 | cut -c1-220
