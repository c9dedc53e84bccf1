#!/usr/bin/env bash
# Session 20, call 4. Sparse (issue 4): the lean score filter (_filter_logits) in the radix MODE-2 pass and the bound
# filter. GPU tests; CUPTI breakdowns of dsv32 B=32 128K and B=1 512K; re-tune the pack's nine sparse entries (the
# source hash moved); export; the four-point dsv32 benchmark.
set -u
. benchmarks/device_runs/env.sh
timeout 150 python3 -m pytest -q -m gpu tests/test_sparse_mqa.py -k "gpu_bound_path or launch_pdl or gpu_default_configs or radix_fused" \
    > "$L/gpu_tests.log" 2>&1; echo "[$((SECONDS-t0)) s] gpu tests rc=$?"; tail -2 "$L/gpu_tests.log" | cut -c1-300
KB="python3 benchmarks/kernel_breakdown.py sparse_mqa --pack packs/nvidia-h200 --out $OUT --calls 10"
for W in batch=32,context=131072,next_n=1,profile=dsv32 batch=1,context=524288,next_n=1,profile=dsv32; do
  timeout 50 $KB --workload $W > "$L/breakdown_$W.log" 2>&1; grep -E "call |in order" "$L/breakdown_$W.log" | cut -c1-400
done
echo "[$((SECONDS-t0)) s] breakdowns"
tune() { timeout $3 $T sparse-mqa --profile $1 --batch $2 --context $4 --next-n 1 --budget $5 --trials 8 --retune \
    > "$L/tune_$1_$2_$4.log" 2>&1; echo "[$((SECONDS-t0)) s] tune $1 B=$2 ctx=$4 rc=$?"; grep "│ " "$L/tune_$1_$2_$4.log" | cut -c1-180 | tail -1; }
tune dsv32 1 60 524288 30s; tune dsv32 1 50 131072 25s; tune dsv32 32 70 131072 30s; tune dsv32 32 80 524288 30s
tune dsv41-flash 1 45 131072 15s; tune dsv41-flash 1 40 32768 15s; tune dsv41-flash 1 45 524288 15s
tune dsv41-flash 32 50 131072 15s; tune dsv41-flash 32 60 524288 15s
$T export --out packs/nvidia-h200 > "$L/export.log" 2>&1 && $T verify-pack packs/nvidia-h200 >> "$L/export.log" 2>&1
echo "export rc=$?"; tail -2 "$L/export.log"; mkdir -p /tmp/p/pack; cp results.db /tmp/p/; cp packs/nvidia-h200/* /tmp/p/pack/
tar czf "$OUT/run108_pack.tgz" -C /tmp/p results.db pack  # what a timeout must not lose
timeout 120 python3 benchmarks/sparse_mqa.py $P --reps 20 --profiles dsv32 --next-n 1 --batch 1,32 --context 131072,524288 \
    > "$L/sparse.log" 2>&1; echo "[$((SECONDS-t0)) s] bench rc=$?"
grep -A14 "^profile" "$L/sparse.log" | cut -c1-260
cd "$OUT" && tar czf run108.tgz logs *.json 2>/dev/null; rm -rf logs *.json
