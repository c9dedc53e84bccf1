#!/usr/bin/env bash
# Session 20, call 1. Sparse (issue 4), dsv32 B=32: the radix path's eleven launches have never been timed as
# programmatic dependent launches (LAUNCH_PDL) at B=32, and the bound path never at B=32 at all (no trial in
# results.db). CUPTI breakdown of B=32 128K (pack config, then with PDL); re-tune both B=32 points with those as
# --try; export; the four-point benchmark.
set -u
. benchmarks/device_runs/env.sh
KB="python3 benchmarks/kernel_breakdown.py sparse_mqa --pack packs/nvidia-h200 --out $OUT --calls 10"
W=batch=32,context=131072,next_n=1,profile=dsv32
timeout 60 $KB --workload $W > "$L/breakdown.log" 2>&1
timeout 60 $KB --workload $W --config LAUNCH_PDL=true > "$L/breakdown_pdl.log" 2>&1
echo "[$((SECONDS-t0)) s] breakdowns"; grep -hE "call |x 1.0" "$L"/breakdown*.log | cut -c1-150 | head -30
tune() { timeout $2 $T sparse-mqa --profile dsv32 --batch $1 --context $3 --next-n 1 --budget $4 --retune "${@:5}" \
    > "$L/tune_$1_$3.log" 2>&1; echo "[$((SECONDS-t0)) s] tune B=$1 ctx=$3 rc=$?"; grep "│ " "$L/tune_$1_$3.log" | cut -c1-180 | tail -2; }
B='"TOPK_ALGO": "bound", "RADIX_FIRST": "byte", "PLACE_CHUNK": 0, "LAUNCH_PDL": true, "RANK_STEP": 8192'
tune 32 150 131072 60s --trials 40 --try '{"LAUNCH_PDL": true}' --try '{"LAUNCH_PDL": true, "TOPK_SPLITS": 32}' \
    --try "{$B, \"BOUND_GROUP\": 16}" --try "{$B, \"BOUND_GROUP\": 32}" --try "{$B, \"BOUND_GROUP\": 64}"
grep -E "try|LAUNCH_PDL" "$L/tune_32_131072.log" | cut -c1-200 | head -12
tune 32 120 524288 45s --trials 30 --try '{"LAUNCH_PDL": true}' --try "{$B, \"BOUND_GROUP\": 64}"
$T export --out packs/nvidia-h200 > "$L/export.log" 2>&1 && $T verify-pack packs/nvidia-h200 >> "$L/export.log" 2>&1
echo "export rc=$?"; tail -2 "$L/export.log"; mkdir -p /tmp/p/pack; cp results.db /tmp/p/; cp packs/nvidia-h200/* /tmp/p/pack/
tar czf "$OUT/run105_pack.tgz" -C /tmp/p results.db pack  # what a timeout must not lose
timeout 130 python3 benchmarks/sparse_mqa.py $P --reps 20 --profiles dsv32 --next-n 1 --batch 1,32 --context 131072,524288 \
    > "$L/sparse.log" 2>&1; echo "[$((SECONDS-t0)) s] bench rc=$?"
grep -A14 "^profile" "$L/sparse.log" | cut -c1-260
cd "$OUT" && tar czf run105.tgz logs *.json 2>/dev/null; rm -rf logs *.json
