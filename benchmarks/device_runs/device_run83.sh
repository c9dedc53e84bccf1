#!/usr/bin/env bash
# Session 15, second call: run 82's Gluon scoring kernel lost (35.9 us vs Triton's 26.6 at dsv32 B=1
# 512K, slower with more stages): its loop has two proxy fences (MEMBAR.ALL.CTA). Two variants without
# them: SCORE_A_REGS (ldmatrix A, as the Triton kernel) and SCORE_TMA (TMA + mbarrier ring). GPU tests
# of all three, then CUPTI breakdowns of the scoring launch.
set -u
. benchmarks/device_runs/env.sh
timeout 300 python3 -m pytest -q -m gpu tests/test_sparse_mqa.py -k "gluon_scoring" > "$L/gpu_tests.log" 2>&1
echo "[$((SECONDS-t0)) s] gpu tests rc=$?"; tail -4 "$L/gpu_tests.log" | cut -c1-300
KB="python3 benchmarks/kernel_breakdown.py sparse_mqa --pack packs/nvidia-h200 --out $OUT --calls 10"
run() { timeout 45 $KB --workload $1 ${2:+--config $2} 2>&1 | grep -E "_score_kernel|_score_tma_kernel" | grep -v "in order" | sed "s/^/[$2] /" | cut -c1-120; }
G=SCORE_GLUON=true,SCORE_MAXNREG=0
W=batch=1,context=524288,next_n=1,profile=dsv32; echo "== $W"
run $W ""
for v in SCORE_A_REGS=true SCORE_TMA=true; do
  for c in num_stages=2 num_stages=3 num_stages=4 num_stages=6 NUM_SPLITS=264,num_stages=4 NUM_SPLITS=1056,num_stages=3; do run $W $G,$v,$c; done
done
W=batch=1,context=131072,next_n=1,profile=dsv32; echo "== $W"
run $W ""; for v in SCORE_A_REGS=true SCORE_TMA=true; do run $W $G,$v,num_stages=3; run $W $G,$v,num_stages=4,NUM_SPLITS=256; done
W=batch=32,context=524288,next_n=1,profile=dsv32; echo "== $W"
run $W ""; for v in SCORE_A_REGS=true SCORE_TMA=true; do run $W $G,$v,num_stages=4; run $W $G,$v,num_stages=4,NUM_SPLITS=33; run $W $G,$v,num_stages=6,NUM_SPLITS=20; done
echo "[$((SECONDS-t0)) s]"
cd "$OUT" && tar czf run83.tgz logs *.json 2>/dev/null; rm -rf logs *.json
