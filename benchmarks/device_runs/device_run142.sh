#!/usr/bin/env bash
# Session 25, call 10. sparse (issue 4): run 141 ran none of its tries (its study already held run 140's 4 trials,
# the --trials 4 it asked for): the same re-tune with --trials 8, so the tries on the entry's config (20 splits, 96
# registers, + PDL, + RANK_BLOCK 32 / 128-key chunks) are timed; export; the benchmark's dsv41-flash B32 128K point.
set -u
. benchmarks/device_runs/env.sh
E='"NUM_SPLITS": 20, "SCORE_MAXNREG": 96, "num_stages": 3, "SCORE_GLUON": true, "TOPK_SPLITS": 64, "TOPK_BLOCK": 512'
timeout 150 $T sparse-mqa --profile dsv41-flash --next-n 1 --batch 32 --context 131072 --retune --trials 8 \
    --budget 100s --try "{$E, \"LAUNCH_PDL\": true, \"RANK_BLOCK\": 32}" --try "{$E, \"LAUNCH_PDL\": true}" \
    --try "{$E, \"LAUNCH_PDL\": true, \"PLACE_CHUNK\": 128}" --try "{$E}" > "$L/tune.log" 2>&1
echo "[$((SECONDS-t0)) s] tune rc=$?"; grep "│ " "$L/tune.log" | cut -c1-170 | tail -2
$T export --out packs/nvidia-h200 > "$L/export.log" 2>&1 && $T verify-pack packs/nvidia-h200 >> "$L/export.log" 2>&1
echo "[$((SECONDS-t0)) s] export rc=$?"; tail -1 "$L/export.log" | cut -c1-200
mkdir -p /tmp/p/pack; cp results.db /tmp/p/; cp packs/nvidia-h200/* /tmp/p/pack/
tar czf "$OUT/run142_pack.tgz" -C /tmp/p results.db pack
timeout 150 python3 benchmarks/sparse_mqa.py $P --reps 20 --profiles dsv41-flash --next-n 1 --batch 32 \
    --context 131072 > "$L/sparse.log" 2>&1; echo "[$((SECONDS-t0)) s] bench rc=$?"
grep -A9 "^profile" "$L/sparse.log" | cut -c1-200 | head -9; grep -E "MISS|ok |targets" "$L/sparse.log" | head -22
cd "$OUT" && tar czf run142.tgz logs *.json 2>/dev/null; rm -rf logs *.json
