#!/usr/bin/env bash
# Session 8, call 7: pack coverage. Re-tune the two nvfp4 shapes whose winners predate D_CHUNKS
# (left out of the manifest since session 6), tune the mHC seam at the other two widths (D =
# 4096, 7168; T = 1024, 4096), export and verify the pack.
set -u
. benchmarks/device_runs/env.sh
timeout 200 $T nvfp4-attention --batch 16 --context 131072 --heads 64 --kv-dtype nvfp4 --mode dense --budget 80s --retune \
    > "$L/nvfp4_tune.log" 2>&1; echo "[$((SECONDS-t0)) s] nvfp4 h64 rc=$?"
timeout 200 $T nvfp4-attention --batch 64 --context 32768 --heads 16 --kv-dtype nvfp4 --mode dense --budget 60s --retune \
    >> "$L/nvfp4_tune.log" 2>&1; echo "[$((SECONDS-t0)) s] nvfp4 b64 rc=$?"
timeout 200 $T mhc --op seam --tokens 1024,4096 --dim 4096,7168 --budget 120s > "$L/mhc_tune.log" 2>&1
echo "[$((SECONDS-t0)) s] mhc rc=$?"
cp results.db "$OUT/results.db"
$T export --out packs/nvidia-h200 > "$L/export.log" 2>&1 && $T verify-pack packs/nvidia-h200 >> "$L/export.log" 2>&1
echo "export rc=$?"; cp -r packs/nvidia-h200 "$OUT/pack"
cd "$OUT" && tar czf run43.tgz logs 2>/dev/null; rm -rf logs
echo "== tune"; tar xzf run43.tgz -O logs/nvfp4_tune.log logs/mhc_tune.log | grep "│ " | cut -c1-170
echo "== export"; tar xzf run43.tgz -O logs/export.log | tail -4 | cut -c1-200
