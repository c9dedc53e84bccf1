#!/usr/bin/env bash
# Session 7, second call: A/B of the nvfp4 words decode (this tree) against the previous
# decode (benchmarks/device_runs/_nvfp4_attention_old.py, not committed: made by
# `git show ee788db:kernel_templates/nvfp4_attention.py > ...` before the call; "this tree" was
# commit 340f3eb), alternated twice in one call; Nsight Compute stall reasons of both
# H16 split kernels and of the mHC seam kernel at T=1024 (pack config).
set -u
. benchmarks/device_runs/env.sh
cp kernel_templates/nvfp4_attention.py /tmp/new.py
W="--workload batch=16,context=131072,heads=16,kv_dtype=nvfp4,mode=dense --workload batch=16,context=32768,heads=16,kv_dtype=nvfp4,mode=dense --workload batch=16,context=32768,heads=64,kv_dtype=nvfp4,mode=dense"
for v in new old new old; do
  if [ $v = old ]; then cp benchmarks/device_runs/_nvfp4_attention_old.py kernel_templates/nvfp4_attention.py; else cp /tmp/new.py kernel_templates/nvfp4_attention.py; fi
  echo "#### $v" >> "$L/ab.log"
  timeout 90 python3 benchmarks/kernel_breakdown.py nvfp4_attention $W --pack packs/nvidia-h200 >> "$L/ab.log" 2>&1
  echo "[$((SECONDS-t0)) s] ab $v rc=$?"
done
SECS="--section SpeedOfLight --section Occupancy --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis"
prof() {  # tag kernel-regex family workload config
  timeout 120 ncu --clock-control none -k "regex:$2" -s 2 -c 1 $SECS python3 benchmarks/ncu_probe.py "$3" --workload "$4" --config "$5" > "$L/ncu_$1.log" 2>&1
  echo "[$((SECONDS-t0)) s] ncu $1 rc=$?"
}
A=batch=16,context=32768,heads=16,mode=dense,kv_dtype=nvfp4
prof attn_old _split_kernel nvfp4_attention $A '{}'
cp /tmp/new.py kernel_templates/nvfp4_attention.py
prof attn_new _split_kernel nvfp4_attention $A '{}'
prof mhc1024 _mhc_seam mhc op=seam,tokens=1024,dim=5120 '{"BLOCK_D": 16, "BLOCK_T": 64, "SPLIT_K": 16, "num_stages": 2, "num_warps": 4, "DOT_PRECISION": "tf32", "SYNC": 0}'
cd "$OUT" && tar czf run29.tgz logs 2>/dev/null; rm -rf logs
echo "== ab"; tar xzf run29.tgz -O logs/ab.log | grep "####\|call\|_split"
for t in attn_old attn_new mhc1024; do echo "== $t"; tar xzf run29.tgz -O logs/ncu_$t.log | grep -E "Duration|DRAM Throughput|Achieved Occupancy|Registers Per|Issue Slots Busy|Warp Cycles Per Issued|Stall|stall|Shared|Bank|No Eligible|Eligible Warps" | head -24 | cut -c1-200; done
