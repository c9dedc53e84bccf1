#!/usr/bin/env bash
# Session 24, call 2. nvfp4 (issue 3): GL_WS is now the Hopper default from 16 sequence x 64-head blocks up (run 126:
# 1.20x / 1.21x the 128-entry kernel at B = 256 8K / 32K). B = 8 32K: the 128-entry default (32 heads, 8 splits)
# against GL_WS with 16 splits (run 126: 1.53x the B = 16 entry's config). Then re-tunes of the 64-head dense
# nvfp4 entries: B = 256 (the new default against the old 128-entry form, 2 splits, GL_WS_A), B = 1 / 4 (GL_WS with
# 32-128 splits: run 125 tried only 2 / 8), B = 16 / 64 at 32K / 128K (GL_WS_A 1: 1.03x in run 126); export and
# the benchmark at the points (as run 125).
set -u
. benchmarks/device_runs/env.sh
W="heads=64,kv_dtype=nvfp4,mode=dense"
WS="GLUON=true,GL_WS=1,BLOCK_N=64,BLOCK_H=64"
timeout 70 python3 benchmarks/config_sweep.py nvfp4_attention --pack packs/nvidia-h200 --out $OUT --rounds 3 \
    --workload batch=8,context=32768,$W --config GLUON=true,GL_WS=0,BLOCK_N=128,BLOCK_H=32,NUM_SPLITS=8,num_warps=8 \
    --config $WS,NUM_SPLITS=16 --config $WS,NUM_SPLITS=16,GL_WS_A=1 > "$L/sweep_b8.log" 2>&1
echo "[$((SECONDS-t0)) s] sweep b8 rc=$?"; grep -v Warn "$L/sweep_b8.log" | tail -5 | cut -c1-150
J='"GLUON": true, "GL_WS": 1, "BLOCK_N": 64, "BLOCK_H": 64'
tune() { local n=$1 s=$2; shift 2; timeout $s $T nvfp4-attention --heads 64 --kv-dtype nvfp4 --mode dense --retune "$@" \
    > "$L/tune_$n.log" 2>&1; echo "[$((SECONDS-t0)) s] tune $n rc=$?"; grep "│ " "$L/tune_$n.log" | cut -c1-170 | tail -7; }
tune b256 110 --batch 256 --context 8192,32768,131072 --trials 5 --budget 90s \
    --try '{"GLUON": true, "GL_WS": 0, "BLOCK_N": 128, "BLOCK_H": 64, "GL_AHEAD": 2, "num_warps": 8, "NUM_SPLITS": 1}' \
    --try "{$J, \"NUM_SPLITS\": 2}" --try '{"GL_WS_A": 1}'
tune b1_4 140 --batch 1,4 --context 8192,32768,131072 --trials 6 --budget 120s \
    --try "{$J, \"NUM_SPLITS\": 32}" --try "{$J, \"NUM_SPLITS\": 64}" --try "{$J, \"NUM_SPLITS\": 128}"
tune b16_64 100 --batch 16,64 --context 32768,131072 --trials 4 --budget 80s --try '{"GL_WS_A": 1}'
$T export --out packs/nvidia-h200 > "$L/export.log" 2>&1 && $T verify-pack packs/nvidia-h200 >> "$L/export.log" 2>&1
echo "[$((SECONDS-t0)) s] export rc=$?"; tail -1 "$L/export.log" | cut -c1-200
mkdir -p /tmp/p/pack; cp results.db /tmp/p/; cp packs/nvidia-h200/* /tmp/p/pack/
tar czf "$OUT/run127_pack.tgz" -C /tmp/p results.db pack  # what a timeout must not lose
timeout 80 python3 benchmarks/nvfp4_attention.py $P --kv-dtypes nvfp4 --modes dense --heads 16,64 --batch 16,64 \
    --context 32768,131072 --no-baseline --reps 20 > "$L/bench.log" 2>&1; echo "[$((SECONDS-t0)) s] bench rc=$?"
grep -E "dense  H=|targets|MISS|OK " "$L/bench.log" | cut -c1-150 | tail -16
cd "$OUT" && tar czf run127.tgz logs *.json 2>/dev/null; rm -rf logs *.json
