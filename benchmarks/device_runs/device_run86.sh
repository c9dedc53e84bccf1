#!/usr/bin/env bash
# Session 16, call 2. Sparse (issue 4): the bound top-k launches load seq_lens before the PDL wait, the filter
# requests its first scores before the bound, the Gluon scoring issues its first key tiles before storing q.
# GPU tests; CUPTI breakdown of dsv32 B=1 512K with the pack's config; re-tune the four dsv32 next_n 1 shapes;
# export; benchmark. Engram (issue 6): which side slows when a T = 4096 prefetch runs beside the layer; NUMA.
set -u
. benchmarks/device_runs/env.sh
timeout 150 python3 -m pytest -q -m gpu tests/test_sparse_mqa.py -k "gluon_scoring or gpu_bound_path or launch_pdl" \
    > "$L/gpu_tests.log" 2>&1; echo "[$((SECONDS-t0)) s] gpu tests rc=$?"; tail -2 "$L/gpu_tests.log" | cut -c1-300
KB="python3 benchmarks/kernel_breakdown.py sparse_mqa --pack packs/nvidia-h200 --out $OUT --calls 10"
timeout 60 $KB --workload batch=1,context=524288,next_n=1,profile=dsv32 > "$L/breakdown.log" 2>&1
echo "[$((SECONDS-t0)) s] breakdown rc=$?"; grep -E "kernel|call " "$L/breakdown.log" | cut -c1-150 | head -12
tune() { timeout $2 $T sparse-mqa --profile dsv32 --batch $1 --context $3 --next-n 1 --budget $4 --retune "${@:5}" \
    > "$L/tune_$1_$3.log" 2>&1; echo "[$((SECONDS-t0)) s] tune B=$1 ctx=$3 rc=$?"; grep "│ " "$L/tune_$1_$3.log" | cut -c1-180 | tail -2; }
tune 1 80 524288 45s --try '{"NUM_SPLITS": 640, "num_stages": 2}' --try '{"NUM_SPLITS": 264, "num_stages": 4}'
tune 1 50 131072 20s --try '{"SCORE_GLUON": true, "SCORE_MAXNREG": 0, "num_stages": 2}'
tune 32 60 524288 25s --try '{"SCORE_GLUON": true, "SCORE_MAXNREG": 0, "num_stages": 3}'
tune 32 45 131072 15s --try '{"SCORE_GLUON": true, "SCORE_MAXNREG": 0, "num_stages": 3}'
$T export --out packs/nvidia-h200 > "$L/export.log" 2>&1 && $T verify-pack packs/nvidia-h200 >> "$L/export.log" 2>&1
echo "export rc=$?"; tail -2 "$L/export.log"; mkdir -p /tmp/p/pack; cp results.db /tmp/p/; cp packs/nvidia-h200/* /tmp/p/pack/
tar czf "$OUT/run86_pack.tgz" -C /tmp/p results.db pack  # what a timeout must not lose
timeout 130 python3 benchmarks/sparse_mqa.py $P --reps 20 --profiles dsv32 --next-n 1 --batch 1,32 --context 131072,524288 \
    > "$L/sparse.log" 2>&1; echo "[$((SECONDS-t0)) s] bench rc=$?"
grep -A14 "^profile" "$L/sparse.log" | cut -c1-260
(cat /sys/devices/system/node/online; nvidia-smi topo -m | head -4; lscpu | grep -i numa) > "$L/numa.log" 2>&1
echo "== numa"; cat "$L/numa.log" | cut -c1-160
timeout 90 python3 benchmarks/engram_overlap_probe.py $P --placement host_split --tokens 4096 --clusters 2,3 \
    > "$L/engram_probe.log" 2>&1; echo "[$((SECONDS-t0)) s] engram probe rc=$?"; tail -4 "$L/engram_probe.log" | cut -c1-200
cd "$OUT" && tar czf run86.tgz logs *.json 2>/dev/null; rm -rf logs *.json
