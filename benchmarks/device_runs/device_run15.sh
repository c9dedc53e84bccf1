#!/usr/bin/env bash
# Device call (session 4, call 2): co-resident engram prefetch (MAXNREG / CARVEOUT),
# sparse_mqa dsv41-flash re-tuned with the word decode default, MoE and sparse_mqa benchmarks.
set -u
. benchmarks/device_runs/env.sh
B='"num_warps":1,"GRID_SM_FRAC":1.0,"num_stages":1,"DEDUP":false'
C="[{\"ROWS\":1,$B,\"MAXNREG\":32},{\"ROWS\":1,$B,\"MAXNREG\":32,\"CARVEOUT\":100},{\"ROWS\":2,$B,\"MAXNREG\":32},{\"ROWS\":2,$B,\"MAXNREG\":32,\"CARVEOUT\":100},{\"ROWS\":4,$B,\"MAXNREG\":32,\"CARVEOUT\":100},{\"ROWS\":64,\"num_warps\":16,\"GRID_SM_FRAC\":0.125,\"num_stages\":3,\"DEDUP\":false}]"
timeout 170 python3 benchmarks/engram_sweep.py --points host:256,host:4096 --table-rows 1048576 --overlap-configs "$C" > "$L/engram_overlap.log" 2>&1; echo "[$((SECONDS-t0)) s] engram rc=$?"
timeout 120 $T sparse-mqa --profile dsv41-flash --batch 1,32 --context 131072,524288 --next-n 1 --budget 60s --retune > "$L/sparse_tune.log" 2>&1; echo "[$((SECONDS-t0)) s] sparse tune rc=$?"
cp results.db "$OUT/results.db"
$T export --out /tmp/pk > "$L/export.log" 2>&1; echo "export rc=$?"
timeout 60 python3 benchmarks/moe_routing.py --pack /tmp/pk --out "$OUT" > "$L/moe_bench.log" 2>&1; echo "[$((SECONDS-t0)) s] moe bench rc=$?"
left=$((570 - SECONDS + t0)); timeout $left python3 benchmarks/sparse_mqa.py --pack /tmp/pk --quick --out "$OUT" > "$L/sparse_bench.log" 2>&1; echo "[$((SECONDS-t0)) s] sparse bench rc=$?"
cd "$OUT" && tar czf run15.tgz logs *.json 2>/dev/null; rm -rf logs *.json
tar xzf run15.tgz -O logs/engram_overlap.log | grep "^overlap\|Error" | cut -c1-170
for f in sparse_tune moe_bench sparse_bench; do echo "== $f"; tar xzf run15.tgz -O logs/$f.log | grep -v "^{\|Warning\|warn(\|━" | tail -22 | cut -c1-170; done
