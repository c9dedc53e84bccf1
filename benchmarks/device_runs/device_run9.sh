#!/usr/bin/env bash
# Device call (session 3, call 1): Nsight Compute counters for the kernels that sit far
# from their floors (why, not how fast), plus the MoE benchmark re-run warm.
set -u
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 COLUMNS=160
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT/logs"; L=$OUT/logs
t0=$SECONDS
ncu --version | tail -1
SECS="--section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis"
prof() {  # tag kernel-regex family workload config [extra ncu args]
  local tag=$1 kre=$2 fam=$3 wl=$4 cfg=$5; shift 5
  timeout 120 ncu --clock-control none -k "regex:$kre" -s 2 -c 1 $SECS "$@" \
    python3 benchmarks/ncu_probe.py "$fam" --workload "$wl" --config "$cfg" > "$L/ncu_$tag.log" 2>&1
  echo "[$((SECONDS-t0)) s] $tag rc=$?"; grep -E "Duration|Memory Throughput|DRAM Throughput|Achieved Occupancy|Registers Per|Block Limit|Compute \(SM\) Thr|Warp Cycles Per Issued|Issue Slots Busy" "$L/ncu_$tag.log" | head -12
}
A=batch=16,context=32768,heads=16,mode=dense
prof attn_nvfp4 _split_kernel nvfp4_attention $A,kv_dtype=nvfp4 '{}' --section SourceCounters
prof attn_fp8 _split_kernel nvfp4_attention $A,kv_dtype=fp8 '{}'
prof attn_bf16 _split_kernel nvfp4_attention $A,kv_dtype=bf16 '{}'
prof attn_nvfp4_swap _split_kernel nvfp4_attention $A,kv_dtype=nvfp4 '{"SWAP_AB": true, "num_warps": 4}' --section SourceCounters
prof attn_nvfp4_h64 _split_kernel nvfp4_attention batch=16,context=32768,heads=64,mode=dense,kv_dtype=nvfp4 '{}'
prof smqa_dsv41 _score_kernel sparse_mqa batch=32,context=524288,next_n=1,profile=dsv41-flash '{}' --section SourceCounters
prof smqa_dsv32 _score_kernel sparse_mqa batch=32,context=524288,next_n=1,profile=dsv32 '{}'
prof mhc_seam4096 _mhc_seam mhc op=seam,tokens=4096,dim=5120 '{}' --section SourceCounters
prof engram_host256 _engram_lookup engram tokens=256,placement=host,table_rows=8388608 '{}'
prof engram_hbm4096 _engram_lookup engram tokens=4096,placement=hbm,table_rows=8388608 '{}'
prof moe_dsv41_4096 _moe_routing moe_routing tokens=4096,profile=dsv41-flash '{}' --section SourceCounters
timeout 60 python3 benchmarks/moe_routing.py --pack packs/nvidia-h200 --out "$OUT" > "$L/moe_bench.log" 2>&1; echo "[$((SECONDS-t0)) s] bench moe"
cd "$OUT" && tar czf run9.tgz logs *.json 2>/dev/null; rm -rf logs *.json
tar xzf run9.tgz -O logs/moe_bench.log | tail -16 | cut -c1-160
