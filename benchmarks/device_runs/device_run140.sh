#!/usr/bin/env bash
# Session 25, call 8. sparse (issue 4): dsv41-flash B32 128K's top-k is +32% (run 139; ~49 us on a 153.7 us scoring,
# target 30%). Its pack entry has no PDL and ranks its 512 keys (no chunks); the top-k launches' knobs interleaved,
# then a re-tune of the entry with the promising ones as tries, export, and the benchmark's dsv41-flash B32 points.
set -u
. benchmarks/device_runs/env.sh
SW="python3 benchmarks/config_sweep.py sparse_mqa --pack packs/nvidia-h200 --out $OUT --rounds 3"
W=batch=32,context=131072,next_n=1,profile=dsv41-flash
timeout 150 $SW --workload $W --config LAUNCH_PDL=true --config LAUNCH_PDL=true,TOPK_SPLITS=32 \
    --config LAUNCH_PDL=true,TOPK_SPLITS=128 --config LAUNCH_PDL=true,TOPK_BLOCK=1024 \
    --config LAUNCH_PDL=true,PLACE_CHUNK=128 --config LAUNCH_PDL=true,RANK_BLOCK=32 > "$L/sweep.log" 2>&1
echo "[$((SECONDS-t0)) s] sweep rc=$?"; grep -v Warn "$L/sweep.log" | tail -9 | cut -c1-170
timeout 150 $T sparse-mqa --profile dsv41-flash --next-n 1 --batch 32 --context 131072 --retune --trials 4 \
    --budget 100s --try '{"LAUNCH_PDL": true}' --try '{"LAUNCH_PDL": true, "PLACE_CHUNK": 128}' \
    --try '{"LAUNCH_PDL": true, "TOPK_SPLITS": 32}' > "$L/tune.log" 2>&1
echo "[$((SECONDS-t0)) s] tune rc=$?"; grep "│ " "$L/tune.log" | cut -c1-170 | tail -2
$T export --out packs/nvidia-h200 > "$L/export.log" 2>&1 && $T verify-pack packs/nvidia-h200 >> "$L/export.log" 2>&1
echo "[$((SECONDS-t0)) s] export rc=$?"; tail -1 "$L/export.log" | cut -c1-200
mkdir -p /tmp/p/pack; cp results.db /tmp/p/; cp packs/nvidia-h200/* /tmp/p/pack/
tar czf "$OUT/run140_pack.tgz" -C /tmp/p results.db pack
timeout 100 python3 benchmarks/sparse_mqa.py $P --reps 20 --profiles dsv41-flash --next-n 1 --batch 32 \
    --context 131072,524288 > "$L/sparse.log" 2>&1; echo "[$((SECONDS-t0)) s] bench rc=$?"
grep -A4 "^profile" "$L/sparse.log" | cut -c1-200 | head -4; grep -E "MISS|ok " "$L/sparse.log" | head -6
cd "$OUT" && tar czf run140.tgz logs *.json 2>/dev/null; rm -rf logs *.json
