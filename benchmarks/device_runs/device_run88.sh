#!/usr/bin/env bash
# Session 16, last call (~580 s of device time). Engram (issue 6): does a prefetch with evict-first reads and
# streaming stores (STREAM) slow the layer beside it less at T = 4096 (run 87: lookup +11.6%, layer +11.9%)?
# Sparse (issue 4): a longer re-tune of dsv32 B=1 512K (run 87: 40 s, 11 trials, 39.28 us) with seeds around the
# winner, export, the benchmark at B=1 128K / 512K.
set -u
. benchmarks/device_runs/env.sh
timeout 100 python3 benchmarks/engram_overlap_probe.py $P --placement host_split --tokens 4096 --clusters 2 \
    --override '{"STREAM": true}' > "$L/engram_probe.log" 2>&1; echo "[$((SECONDS-t0)) s] engram probe rc=$?"
tail -4 "$L/engram_probe.log" | cut -c1-200
timeout 130 $T sparse-mqa --profile dsv32 --batch 1 --context 524288 --next-n 1 --budget 90s --retune \
    --try '{"NUM_SPLITS": 768, "num_stages": 2}' --try '{"NUM_SPLITS": 640, "num_stages": 2, "TOPK_SPLITS": 128}' \
    --try '{"NUM_SPLITS": 640, "num_stages": 2, "RANK_BLOCK": 32}' --try '{"NUM_SPLITS": 576, "num_stages": 3}' \
    > "$L/tune.log" 2>&1; echo "[$((SECONDS-t0)) s] tune rc=$?"; grep "│ " "$L/tune.log" | cut -c1-180 | tail -2
$T export --out packs/nvidia-h200 > "$L/export.log" 2>&1 && $T verify-pack packs/nvidia-h200 >> "$L/export.log" 2>&1
echo "export rc=$?"; tail -1 "$L/export.log"; mkdir -p /tmp/p/pack; cp results.db /tmp/p/; cp packs/nvidia-h200/* /tmp/p/pack/
tar czf "$OUT/run88_pack.tgz" -C /tmp/p results.db pack
timeout 90 python3 benchmarks/sparse_mqa.py $P --reps 20 --profiles dsv32 --next-n 1 --batch 1 --context 131072,524288 \
    > "$L/sparse.log" 2>&1; echo "[$((SECONDS-t0)) s] bench rc=$?"
grep -A8 "^profile" "$L/sparse.log" | cut -c1-200
cd "$OUT" && tar czf run88.tgz logs *.json 2>/dev/null; rm -rf logs *.json
