#!/usr/bin/env bash
# Session 29: the queue's essentials in one call (~9 min), for when the device time left cannot hold runs 145-147
# (four refused starts cost ~6 minutes of it). The regression loop of run 147 first (re-time the flagged engram
# T=256 hbm step and the unconfirmed MoE T=64 one), then the mHC seam entries at D = 5120 (T = 1024 / 4096 / 8192)
# re-tuned with SYNC 3 tries (after its GPU case passes), then the sparse B32 128K entries of both profiles with the
# RADIX_FOLD / sampled_byte tries; export, verify, `tune regressions`. The tune tables give each entry's time
# against its floor; no separate benchmark.
set -u
. benchmarks/device_runs/env.sh
timeout 120 $T revalidate --pack packs/nvidia-h200 --kernel engram --kernel moe-routing \
    --workload tokens=256,placement=hbm --workload tokens=64,profile=dsv41-flash \
    > "$L/revalidate.log" 2>&1; echo "[$((SECONDS-t0)) s] revalidate rc=$?"; grep -v "^\s*$" "$L/revalidate.log" | tail -12 | cut -c1-160
timeout 60 python3 -m pytest -q -m gpu tests/test_mhc.py -p no:cacheprovider -k "gluon_defer and 4096-5120-40" \
    > "$L/defer_test.log" 2>&1; echo "[$((SECONDS-t0)) s] SYNC 3 test rc=$?"; tail -1 "$L/defer_test.log" | cut -c1-200
A=(); grep -q "1 passed" "$L/defer_test.log" && A=(--try '{"SYNC": 3, "SPLIT_K": 20}' --try '{"SYNC": 3, "SPLIT_K": 40}')
timeout 150 $T mhc --op seam --tokens 1024,4096,8192 --dim 5120 --budget 120s --trials 5 --retune --timeout 60s "${A[@]}" \
    > "$L/mhc_tune.log" 2>&1; echo "[$((SECONDS-t0)) s] mhc tune rc=$?"; grep "│ " "$L/mhc_tune.log" | cut -c1-170 | tail -4
for p in dsv32 dsv41-flash; do
  timeout 95 $T sparse-mqa --profile $p --next-n 1 --batch 32 --context 131072 --retune --trials 3 --budget 75s \
      --try '{"RADIX_FOLD": true}' --try '{"RADIX_FOLD": true, "RADIX_FIRST": "sampled_byte"}' \
      > "$L/tune_$p.log" 2>&1
  echo "[$((SECONDS-t0)) s] tune $p rc=$?"; grep "│ " "$L/tune_$p.log" | cut -c1-170 | tail -2
done
$T export --out packs/nvidia-h200 > "$L/export.log" 2>&1 && $T verify-pack packs/nvidia-h200 >> "$L/export.log" 2>&1
echo "[$((SECONDS-t0)) s] export rc=$?"; tail -1 "$L/export.log" | cut -c1-200
mkdir -p /tmp/p/pack; cp results.db /tmp/p/; cp packs/nvidia-h200/* /tmp/p/pack/
tar czf "$OUT/run148_pack.tgz" -C /tmp/p results.db pack
$T regressions > "$L/regressions.log" 2>&1; echo "[$((SECONDS-t0)) s] regressions rc=$?"; cut -c1-200 "$L/regressions.log"
cd "$OUT" && tar czf run148.tgz logs 2>/dev/null; rm -rf logs
