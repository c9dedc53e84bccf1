#!/usr/bin/env bash
# Device call (session 4, call 8): MoE T=16 re-tuned with the direct kernel capped at T=8
# (run 20: direct lost at T=16), export, the MoE benchmark with the final pack.
set -u
. benchmarks/device_runs/env.sh
timeout 100 $T moe-routing --tokens 16 --profile dsv3,dsv41-flash,dsv4-flash --budget 60s --retune > "$L/moe_tune.log" 2>&1; echo "[$((SECONDS-t0)) s] moe tune rc=$?"
cp results.db "$OUT/results.db"
$T export --out packs/nvidia-h200 > "$L/export.log" 2>&1 && $T verify-pack packs/nvidia-h200 >> "$L/export.log" 2>&1; echo "export rc=$?"; cp -r packs/nvidia-h200 "$OUT/pack"
timeout 45 python3 benchmarks/moe_routing.py --pack packs/nvidia-h200 --out "$OUT" > "$L/moe_bench.log" 2>&1; echo "[$((SECONDS-t0)) s] moe rc=$?"
cd "$OUT" && tar czf run21.tgz logs *.json 2>/dev/null; rm -rf logs *.json
tar xzf run21.tgz -O logs/moe_tune.log | grep "│ " | cut -c1-150
tar xzf run21.tgz -O logs/moe_bench.log | grep -v "^{\|Warning\|warn(" | tail -16 | cut -c1-170
