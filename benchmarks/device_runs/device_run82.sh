#!/usr/bin/env bash
# Session 15, first call: SCORE_GLUON (the Gluon scoring kernel for fp8 keys, one token). GPU tests
# of it, then CUPTI breakdowns of the scoring launch (Triton pack config vs Gluon ring depths and
# splits) at dsv32 B=1 512K / 128K and B=32 512K.
set -u
. benchmarks/device_runs/env.sh
timeout 240 python3 -m pytest -q -x -m gpu tests/test_sparse_mqa.py -k "gluon_scoring" > "$L/gpu_tests.log" 2>&1
echo "[$((SECONDS-t0)) s] gpu tests rc=$?"; tail -5 "$L/gpu_tests.log" | cut -c1-300
KB="python3 benchmarks/kernel_breakdown.py sparse_mqa --pack packs/nvidia-h200 --out $OUT --calls 10"
run() { timeout 60 $KB --workload $1 ${2:+--config $2} 2>&1 | grep -E "_score_kernel|call " | sed "s/^/[$2] /" | cut -c1-150; }
W=batch=1,context=524288,next_n=1,profile=dsv32; echo "== $W"
run $W ""
for c in SCORE_GLUON=true,SCORE_MAXNREG=0 SCORE_GLUON=true,SCORE_MAXNREG=0,num_stages=3 SCORE_GLUON=true,SCORE_MAXNREG=0,num_stages=7 \
         SCORE_GLUON=true,SCORE_MAXNREG=0,NUM_SPLITS=256 SCORE_GLUON=true,SCORE_MAXNREG=0,NUM_SPLITS=1024,num_stages=3 \
         SCORE_GLUON=true,SCORE_MAXNREG=0,NUM_SPLITS=128,num_stages=9; do run $W $c; done
W=batch=1,context=131072,next_n=1,profile=dsv32; echo "== $W"
run $W ""; run $W SCORE_GLUON=true,SCORE_MAXNREG=0; run $W SCORE_GLUON=true,SCORE_MAXNREG=0,NUM_SPLITS=256,num_stages=3
W=batch=32,context=524288,next_n=1,profile=dsv32; echo "== $W"
run $W ""; run $W SCORE_GLUON=true,SCORE_MAXNREG=0; run $W SCORE_GLUON=true,SCORE_MAXNREG=0,NUM_SPLITS=33,num_stages=4
run $W SCORE_GLUON=true,SCORE_MAXNREG=0,NUM_SPLITS=16,num_stages=7
echo "[$((SECONDS-t0)) s]"
cd "$OUT" && tar czf run82.tgz logs *.json 2>/dev/null; rm -rf logs *.json
