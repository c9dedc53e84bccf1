#!/usr/bin/env bash
# Written in session 24 for the next session (not run). nvfp4 (issue 3): the B256 128K 64-head dense entry, which run
# 127's tune step lost to its timeout during the finalists: GL_WS_A (the default there now) against the 128-entry
# form and 2 splits, with a step of its own; export. (`tune revalidate` re-times a whole pack: a call of its own.)
set -u
. benchmarks/device_runs/env.sh
timeout 300 $T nvfp4-attention --heads 64 --kv-dtype nvfp4 --mode dense --batch 256 --context 131072 --retune \
    --trials 3 --budget 240s \
    --try '{"GLUON": true, "GL_WS": 0, "BLOCK_N": 128, "BLOCK_H": 64, "GL_AHEAD": 2, "num_warps": 8, "NUM_SPLITS": 1}' \
    --try '{"NUM_SPLITS": 2}' > "$L/tune.log" 2>&1
echo "[$((SECONDS-t0)) s] tune rc=$?"; grep "│ " "$L/tune.log" | cut -c1-170 | tail -3
$T export --out packs/nvidia-h200 > "$L/export.log" 2>&1 && $T verify-pack packs/nvidia-h200 >> "$L/export.log" 2>&1
echo "[$((SECONDS-t0)) s] export rc=$?"; tail -1 "$L/export.log" | cut -c1-200
mkdir -p /tmp/p/pack; cp results.db /tmp/p/; cp packs/nvidia-h200/* /tmp/p/pack/
tar czf "$OUT/run134_pack.tgz" -C /tmp/p results.db pack
cd "$OUT" && tar czf run134.tgz logs 2>/dev/null; rm -rf logs
