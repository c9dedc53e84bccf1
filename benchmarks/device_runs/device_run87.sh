#!/usr/bin/env bash
# Session 16, call 3. Sparse (issue 4): the bound path's placing requests the candidate count, its keys and the
# ranking's first block together (`_rank_from`: each next block a step ahead). GPU tests; CUPTI breakdown of dsv32
# B=1 512K (the pack's config); re-tune the four dsv32 next_n 1 shapes; export; benchmark. Engram: the overlap
# probe again with the layer replayed as a graph.
set -u
. benchmarks/device_runs/env.sh
timeout 120 python3 -m pytest -q -m gpu tests/test_sparse_mqa.py -k "gpu_bound_path or launch_pdl or gpu_default_configs" \
    > "$L/gpu_tests.log" 2>&1; echo "[$((SECONDS-t0)) s] gpu tests rc=$?"; tail -2 "$L/gpu_tests.log" | cut -c1-300
KB="python3 benchmarks/kernel_breakdown.py sparse_mqa --pack packs/nvidia-h200 --out $OUT --calls 10"
timeout 60 $KB --workload batch=1,context=524288,next_n=1,profile=dsv32 > "$L/breakdown.log" 2>&1
echo "[$((SECONDS-t0)) s] breakdown rc=$?"; grep -E "kernel|call " "$L/breakdown.log" | cut -c1-150 | head -12
tune() { timeout $2 $T sparse-mqa --profile dsv32 --batch $1 --context $3 --next-n 1 --budget $4 --retune "${@:5}" \
    > "$L/tune_$1_$3.log" 2>&1; echo "[$((SECONDS-t0)) s] tune B=$1 ctx=$3 rc=$?"; grep "│ " "$L/tune_$1_$3.log" | cut -c1-180 | tail -2; }
tune 1 75 524288 40s --try '{"NUM_SPLITS": 640, "num_stages": 2}'
tune 1 50 131072 20s --try '{"SCORE_GLUON": true, "SCORE_MAXNREG": 0, "num_stages": 2}'
tune 32 60 524288 25s --try '{"SCORE_GLUON": true, "SCORE_MAXNREG": 0, "num_stages": 3}'
tune 32 45 131072 15s --try '{"SCORE_GLUON": true, "SCORE_MAXNREG": 0, "num_stages": 3}'
$T export --out packs/nvidia-h200 > "$L/export.log" 2>&1 && $T verify-pack packs/nvidia-h200 >> "$L/export.log" 2>&1
echo "export rc=$?"; tail -2 "$L/export.log"; mkdir -p /tmp/p/pack; cp results.db /tmp/p/; cp packs/nvidia-h200/* /tmp/p/pack/
tar czf "$OUT/run87_pack.tgz" -C /tmp/p results.db pack  # what a timeout must not lose
timeout 130 python3 benchmarks/sparse_mqa.py $P --reps 20 --profiles dsv32 --next-n 1 --batch 1,32 --context 131072,524288 \
    > "$L/sparse.log" 2>&1; echo "[$((SECONDS-t0)) s] bench rc=$?"
grep -A14 "^profile" "$L/sparse.log" | cut -c1-260
timeout 70 python3 benchmarks/engram_overlap_probe.py $P --placement host_split --tokens 4096 --clusters 2 \
    > "$L/engram_probe.log" 2>&1; echo "[$((SECONDS-t0)) s] engram probe rc=$?"; tail -3 "$L/engram_probe.log" | cut -c1-200
cd "$OUT" && tar czf run87.tgz logs *.json 2>/dev/null; rm -rf logs *.json
