#!/usr/bin/env bash
# Session 15, last call (~280 s of device time left): a longer re-tune of dsv32 B=1 512K (run 84's 30 s
# study kept the Gluon default, 40.65 us), export, the benchmark at that shape.
set -u
. benchmarks/device_runs/env.sh
timeout 110 $T sparse-mqa --profile dsv32 --batch 1 --context 524288 --next-n 1 --budget 80s --retune \
    --try '{"NUM_SPLITS": 640, "num_stages": 2}' --try '{"NUM_SPLITS": 264, "num_stages": 4}' > "$L/tune.log" 2>&1
echo "[$((SECONDS-t0)) s] tune rc=$?"; grep "│ " "$L/tune.log" | cut -c1-180 | tail -2
$T export --out packs/nvidia-h200 > "$L/export.log" 2>&1 && $T verify-pack packs/nvidia-h200 >> "$L/export.log" 2>&1
echo "export rc=$?"; mkdir -p /tmp/p/pack; cp results.db /tmp/p/; cp packs/nvidia-h200/* /tmp/p/pack/
tar czf "$OUT/run85_pack.tgz" -C /tmp/p results.db pack
timeout 60 python3 benchmarks/sparse_mqa.py $P --reps 20 --profiles dsv32 --next-n 1 --batch 1 --context 524288 \
    > "$L/sparse.log" 2>&1; echo "[$((SECONDS-t0)) s] bench rc=$?"
grep -A6 "^profile" "$L/sparse.log" | cut -c1-200
cd "$OUT" && tar czf run85.tgz logs *.json 2>/dev/null; rm -rf logs *.json
