#!/usr/bin/env bash
# Session 26, revised in session 27 (no GPU in either). sparse (issue 4): re-tune the B32 128K / 512K entries of both
# profiles (sparse_mqa.py's source hash moved in session 26) with RADIX_FOLD and sampled_byte tries (laid over each
# entry since session 26's tuner change; the tuner keeps whichever wins, so it does not wait on run 144), export,
# verify, the full benchmark (B 1 / 32, 128K / 512K).
set -u
. benchmarks/device_runs/env.sh
for p in dsv32 dsv41-flash; do
  timeout 150 $T sparse-mqa --profile $p --next-n 1 --batch 32 --context 131072,524288 --retune --trials 3 \
      --budget 100s --try '{"RADIX_FOLD": true}' --try '{"RADIX_FOLD": true, "RADIX_FIRST": "sampled_byte"}' \
      > "$L/tune_$p.log" 2>&1
  echo "[$((SECONDS-t0)) s] tune $p rc=$?"; grep "│ " "$L/tune_$p.log" | cut -c1-170 | tail -3
done
$T export --out packs/nvidia-h200 > "$L/export.log" 2>&1 && $T verify-pack packs/nvidia-h200 >> "$L/export.log" 2>&1
echo "[$((SECONDS-t0)) s] export rc=$?"; tail -1 "$L/export.log" | cut -c1-200
mkdir -p /tmp/p/pack; cp results.db /tmp/p/; cp packs/nvidia-h200/* /tmp/p/pack/
tar czf "$OUT/run146_pack.tgz" -C /tmp/p results.db pack  # what a timeout must not lose
timeout 150 python3 benchmarks/sparse_mqa.py $P --reps 20 --profiles dsv32,dsv41-flash --next-n 1 --batch 1,32 \
    --context 131072,524288 > "$L/sparse.log" 2>&1; echo "[$((SECONDS-t0)) s] bench rc=$?"
grep -A9 "^profile" "$L/sparse.log" | cut -c1-200 | head -9; grep -E "MISS|ok |targets" "$L/sparse.log" | head -22
cd "$OUT" && tar czf run146.tgz logs *.json 2>/dev/null; rm -rf logs *.json
