#!/usr/bin/env bash
# Session 14, fifth call (experiment): the scoring kernel is a per-tile chain with ~4 programs an SM
# (runs 77-78): more programs resident an SM through a register cap (SCORE_MAXNREG) and more splits.
# CUPTI breakdowns at B=1 512K (both profiles) and B=32 512K dsv32.
set -u
. benchmarks/device_runs/env.sh
KB="python3 benchmarks/kernel_breakdown.py sparse_mqa --pack packs/nvidia-h200 --out $OUT --calls 10"
run() { timeout 60 $KB --workload $1 ${2:+--config $2} 2>&1 | grep -E "_score_kernel|call " | sed "s/^/[$2] /" | cut -c1-150; }
for W in batch=1,context=524288,next_n=1,profile=dsv32 batch=1,context=524288,next_n=1,profile=dsv41-flash; do
  echo "== $W"
  run $W ""
  for c in NUM_SPLITS=640 NUM_SPLITS=1024 SCORE_MAXNREG=96,NUM_SPLITS=640 SCORE_MAXNREG=80,NUM_SPLITS=768 SCORE_MAXNREG=64,NUM_SPLITS=1024; do run $W $c; done
done
W=batch=32,context=524288,next_n=1,profile=dsv32; echo "== $W"
run $W ""; run $W SCORE_MAXNREG=96,NUM_SPLITS=20; run $W SCORE_MAXNREG=80,NUM_SPLITS=24
echo "[$((SECONDS-t0)) s]"
