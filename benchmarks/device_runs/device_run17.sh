#!/usr/bin/env bash
# Device call (session 4, call 4): larger tiles for the 2-cluster engram prefetch (run 16: 85-87% hidden).
set -u
. benchmarks/device_runs/env.sh
B='"num_stages":3,"DEDUP":false'
C="[{\"ROWS\":128,\"num_warps\":32,\"NUM_CTAS\":2,\"GRID_SM_FRAC\":0.01515,$B},{\"ROWS\":256,\"num_warps\":32,\"NUM_CTAS\":2,\"GRID_SM_FRAC\":0.01515,$B},{\"ROWS\":128,\"num_warps\":32,\"NUM_CTAS\":2,\"GRID_SM_FRAC\":0.01515,\"num_stages\":4,\"DEDUP\":false},{\"ROWS\":256,\"num_warps\":32,\"NUM_CTAS\":2,\"GRID_SM_FRAC\":0.01515,\"num_stages\":2,\"DEDUP\":false},{\"ROWS\":256,\"num_warps\":16,\"NUM_CTAS\":2,\"GRID_SM_FRAC\":0.01515,$B}]"
timeout 300 python3 benchmarks/engram_sweep.py --points host:256,host:4096 --table-rows 1048576 --overlap-configs "$C" > "$L/engram_overlap.log" 2>&1; echo "[$((SECONDS-t0)) s] engram rc=$?"
cd "$OUT" && tar czf run17.tgz logs 2>/dev/null; rm -rf logs
tar xzf run17.tgz -O logs/engram_overlap.log | grep "^overlap\|Error\|error:" | cut -c1-200
tar xzf run17.tgz -O logs/engram_overlap.log | grep '"part"' | python3 -c "
import sys,json
for l in sys.stdin:
    r=json.loads(l); c=r['config']; print(r['tokens'], c['ROWS'], c['num_warps'], c.get('NUM_CTAS',1), r['programs'], round(r['lookup_us'],1), round(r['layer_us'],1), round(r['both_us'],1), round(100*r['hidden_fraction']))"
