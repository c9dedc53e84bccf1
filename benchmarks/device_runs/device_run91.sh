#!/usr/bin/env bash
# Session 17, call 1: run 90's probe first (folded in to save a machine start; run 90 never ran on its own), then
# engram (issue 6) with the current source: tune the pack's eight 8M points (T = 256 / 4096, four
# placements; the study for this source hash starts from the earlier source's best configs), export and verify the
# pack, then the benchmark in one process: every placement at T = 256 / 4096 / 16384, overlap at T = 256 / 4096 with
# five rounds.
set -u
. benchmarks/device_runs/env.sh
timeout 110 python3 benchmarks/engram_overlap_probe.py $P --placement host_split --tokens 4096 --clusters 2,3 \
    --override '{"DEDUP": true, "ROWS": 16, "num_warps": 4}' \
    --override '{"num_warps": 16}' --override '{"ROWS": 64, "num_warps": 16}' > "$L/engram_probe.log" 2>&1
echo "[$((SECONDS-t0)) s] engram probe rc=$?"; tail -12 "$L/engram_probe.log" | cut -c1-220
timeout 280 $T engram --tokens 256,4096 --table-rows 8M --placement hbm,host,host_thp,host_split --trials 10 \
    --budget 200s > "$L/tune.log" 2>&1; echo "[$((SECONDS-t0)) s] tune rc=$?"
grep -v "Warning\|warn(" "$L/tune.log" | tail -12 | cut -c1-200
$T export --out packs/nvidia-h200 > "$L/export.log" 2>&1 && $T verify-pack packs/nvidia-h200 >> "$L/export.log" 2>&1
echo "[$((SECONDS-t0)) s] export rc=$?"; tail -3 "$L/export.log" | cut -c1-200
timeout 170 python3 benchmarks/engram.py $P --tokens 256,4096,16384 --table-rows 8M --overlap-tokens 256,4096 \
    --overlap-rounds 5 > "$L/engram_bench.log" 2>&1; echo "[$((SECONDS-t0)) s] engram rc=$?"
tail -24 "$L/engram_bench.log" | cut -c1-220
mkdir -p "$OUT/pack" && cp -r packs/nvidia-h200 "$OUT/pack/" && cp results.db "$OUT/results.db"
cd "$OUT" && tar czf run91.tgz logs *.json 2>/dev/null; rm -rf logs *.json
