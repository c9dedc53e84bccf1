#!/usr/bin/env bash
# Session 19, call 6 (the session's last device time). Engram's 32M-row points, which run 101 reached with one to four
# trials inside its budget: re-tuned with more trials (winners kept where nothing beats them), export and verify;
# then run 91's benchmark on 32M-row tables (overlap at T = 256 / 4096 on the 32M tables), cut short if time runs out.
set -u
. benchmarks/device_runs/env.sh
timeout 200 $T engram --table-rows 32M --retune --trials 6 --budget 150s > "$L/tune.log" 2>&1
echo "[$((SECONDS-t0)) s] tune rc=$?"; grep "│ " "$L/tune.log" | cut -c1-160 | tail -24
$T export --out packs/nvidia-h200 > "$L/export.log" 2>&1 && $T verify-pack packs/nvidia-h200 >> "$L/export.log" 2>&1
echo "[$((SECONDS-t0)) s] export rc=$?"; tail -2 "$L/export.log" | cut -c1-200
mkdir -p "$OUT/pack" && cp -r packs/nvidia-h200 "$OUT/pack/" && cp results.db "$OUT/results.db"
(cd "$OUT" && tar czf run104.tgz logs *.json 2>/dev/null)
timeout 110 python3 benchmarks/engram.py $P --tokens 256,4096 --table-rows 32M --overlap-tokens 256,4096 \
    --overlap-rounds 3 > "$L/engram_bench.log" 2>&1; echo "[$((SECONDS-t0)) s] engram rc=$?"
grep -E "^ +[0-9]+ (hbm|host)|^overlap|^target" "$L/engram_bench.log" | cut -c1-200
cd "$OUT" && tar czf run104.tgz logs *.json 2>/dev/null; rm -rf logs *.json
