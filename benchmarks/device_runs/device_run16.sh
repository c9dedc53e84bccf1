#!/usr/bin/env bash
# Device call (session 4, call 3): engram prefetch as whole clusters of CTAs (NUM_CTAS),
# so the lookup takes SM pairs and leaves the GEMM's 2-CTA clusters their 64 pairs.
set -u
. benchmarks/device_runs/env.sh
B='"num_stages":3,"DEDUP":false'
C="[{\"ROWS\":64,\"num_warps\":32,\"NUM_CTAS\":2,\"GRID_SM_FRAC\":0.01515,$B},{\"ROWS\":64,\"num_warps\":16,\"NUM_CTAS\":2,\"GRID_SM_FRAC\":0.01515,$B},{\"ROWS\":64,\"num_warps\":32,\"NUM_CTAS\":2,\"GRID_SM_FRAC\":0.0303,$B},{\"ROWS\":64,\"num_warps\":32,\"NUM_CTAS\":1,\"GRID_SM_FRAC\":0.0303,$B},{\"ROWS\":128,\"num_warps\":32,\"NUM_CTAS\":2,\"GRID_SM_FRAC\":0.01515,$B},{\"ROWS\":64,\"num_warps\":32,\"NUM_CTAS\":4,\"GRID_SM_FRAC\":0.00758,$B},{\"ROWS\":64,\"num_warps\":16,\"GRID_SM_FRAC\":0.125,$B}]"
timeout 300 python3 benchmarks/engram_sweep.py --points host:256,host:4096 --table-rows 1048576 --overlap-configs "$C" > "$L/engram_overlap.log" 2>&1; echo "[$((SECONDS-t0)) s] engram rc=$?"
cd "$OUT" && tar czf run16.tgz logs 2>/dev/null; rm -rf logs
tar xzf run16.tgz -O logs/engram_overlap.log | grep "^overlap\|Error\|error:" | cut -c1-200
tar xzf run16.tgz -O logs/engram_overlap.log | grep '"part"' | python3 -c "
import sys,json
for l in sys.stdin:
    r=json.loads(l); c=r['config']; print(r['tokens'], c['ROWS'], c['num_warps'], c.get('NUM_CTAS',1), r['programs'], round(r['lookup_us'],1), round(r['layer_us'],1), round(r['both_us'],1), round(100*r['hidden_fraction']))"
