#!/usr/bin/env bash
# Session 8, call 5: mHC seam with DOT_PRECISION "bf16x2" (fn as two bf16 terms, the new
# residual's bf16 as the MMA's B operand: half tf32's shared-memory bytes) against tf32, at
# T = 256 / 1024 / 4096 (D = 5120), and the seam / finish split at T = 1024.
set -u
. benchmarks/device_runs/env.sh
V='{"bf": {"DOT_PRECISION": "bf16x2"}, "bf_s3": {"DOT_PRECISION": "bf16x2", "num_stages": 3},
    "tf_s3@4096": {"num_stages": 3}, "bf_t32d32": {"DOT_PRECISION": "bf16x2", "BLOCK_T": 32, "BLOCK_D": 32},
    "tf_t32d32": {"BLOCK_T": 32, "BLOCK_D": 32}, "bf_d32w8": {"DOT_PRECISION": "bf16x2", "BLOCK_D": 32, "num_warps": 8}}'
timeout 200 python3 benchmarks/mhc.py $P --op seam --tokens 256,1024,4096 --dim 5120 --no-baselines --reps 50 \
    --variants "$V" > "$L/mhc_bf16.log" 2>&1; echo "[$((SECONDS-t0)) s] mhc rc=$?"
for p in tf32 bf16x2; do
  timeout 60 python3 benchmarks/kernel_breakdown.py mhc --workload op=seam,tokens=1024,dim=5120 \
      --workload op=seam,tokens=4096,dim=5120 --pack packs/nvidia-h200 --config DOT_PRECISION=$p --out "$OUT" \
      >> "$L/bd_mhc.log" 2>&1; echo "[$((SECONDS-t0)) s] breakdown $p rc=$?"
done
cd "$OUT" && tar czf run41.tgz logs *.json 2>/dev/null; rm -rf logs *.json
echo "== mhc"; tar xzf run41.tgz -O logs/mhc_bf16.log | grep " us (" | cut -c1-200
echo "== breakdown"; tar xzf run41.tgz -O logs/bd_mhc.log | grep -v "^\s*$" | grep -i "call\|_mhc\|workload" | cut -c1-200
