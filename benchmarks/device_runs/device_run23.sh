#!/usr/bin/env bash
# Second device call prepared in session 5: after run 22 has checked the predictions,
# re-tune what the session-5 changes opened up (every template's source hash changed, so
# these are fresh studies; each re-times the earlier winners first), export, and re-run
# the sparse and mHC benchmarks with the new pack.
#  - sparse_mqa B=1 and B=32 at 128K / 512K, next_n 1: NUM_SPLITS up to 512, num_stages 5;
#  - mHC seam T=1024 / 4096 at D=5120: the latency-bound seam with more programs resident.
set -u
. benchmarks/device_runs/env.sh
timeout 270 $T sparse-mqa --profile dsv32,dsv41-flash --batch 1,32 --context 131072,524288 --next-n 1 \
    --budget 230s --retune > "$L/sparse_tune.log" 2>&1; echo "[$((SECONDS-t0)) s] sparse tune rc=$?"
timeout 90 $T mhc --op seam --tokens 1024,4096 --dim 5120 --budget 60s --retune > "$L/mhc_tune.log" 2>&1
echo "[$((SECONDS-t0)) s] mhc tune rc=$?"
cp results.db "$OUT/results.db"
$T export --out packs/nvidia-h200 > "$L/export.log" 2>&1 && $T verify-pack packs/nvidia-h200 >> "$L/export.log" 2>&1
echo "export rc=$?"; cp -r packs/nvidia-h200 "$OUT/pack"
timeout 120 python3 benchmarks/sparse_mqa.py $P --quick > "$L/sparse_mqa_bench.log" 2>&1; echo "[$((SECONDS-t0)) s] sparse rc=$?"
left=$((585 - SECONDS + t0)); [ $left -gt 20 ] && timeout $left python3 benchmarks/mhc.py $P --op seam \
    --tokens 1,64,256,1024,4096 --dim 5120 > "$L/mhc_bench.log" 2>&1; echo "[$((SECONDS-t0)) s] mhc rc=$?"
cd "$OUT" && tar czf run23.tgz logs *.json 2>/dev/null; rm -rf logs *.json
for f in sparse_tune mhc_tune; do echo "== $f"; tar xzf run23.tgz -O logs/$f.log | grep "│ " | cut -c1-150; done
for f in sparse_mqa_bench mhc_bench; do
    echo "== $f"; tar xzf run23.tgz -O logs/$f.log | grep -v "^{\|Warning\|warn(" | tail -30 | cut -c1-170
done
