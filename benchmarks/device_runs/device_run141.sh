#!/usr/bin/env bash
# Session 25, call 9. sparse (issue 4): run 140's re-tune laid its tries over the template default (16 splits, no
# register cap), not over the entry's config (20 splits, 96 registers): its winner (205.2 us in the tuner, 207.6 in
# the benchmark) is worse than the entry with PDL (199.0 interleaved). Re-tune with the tries on the entry's config
# (+ PDL, + RANK_BLOCK 32 / PLACE_CHUNK 128: 197.8 / 198.3 in run 140's sweep), export, and the full benchmark.
set -u
. benchmarks/device_runs/env.sh
E='"NUM_SPLITS": 20, "SCORE_MAXNREG": 96, "num_stages": 3, "SCORE_GLUON": true, "TOPK_SPLITS": 64, "TOPK_BLOCK": 512'
timeout 150 $T sparse-mqa --profile dsv41-flash --next-n 1 --batch 32 --context 131072 --retune --trials 4 \
    --budget 100s --try "{$E, \"LAUNCH_PDL\": true, \"RANK_BLOCK\": 32}" --try "{$E, \"LAUNCH_PDL\": true}" \
    --try "{$E, \"LAUNCH_PDL\": true, \"PLACE_CHUNK\": 128}" --try "{$E}" > "$L/tune.log" 2>&1
echo "[$((SECONDS-t0)) s] tune rc=$?"; grep "│ " "$L/tune.log" | cut -c1-170 | tail -2
$T export --out packs/nvidia-h200 > "$L/export.log" 2>&1 && $T verify-pack packs/nvidia-h200 >> "$L/export.log" 2>&1
echo "[$((SECONDS-t0)) s] export rc=$?"; tail -1 "$L/export.log" | cut -c1-200
mkdir -p /tmp/p/pack; cp results.db /tmp/p/; cp packs/nvidia-h200/* /tmp/p/pack/
tar czf "$OUT/run141_pack.tgz" -C /tmp/p results.db pack
timeout 150 python3 benchmarks/sparse_mqa.py $P --reps 20 --profiles dsv32,dsv41-flash --next-n 1 --batch 1,32 \
    --context 131072,524288 > "$L/sparse.log" 2>&1; echo "[$((SECONDS-t0)) s] bench rc=$?"
grep -A9 "^profile" "$L/sparse.log" | cut -c1-200 | head -9; grep -E "MISS|ok |targets" "$L/sparse.log" | head -22
cd "$OUT" && tar czf run141.tgz logs *.json 2>/dev/null; rm -rf logs *.json
