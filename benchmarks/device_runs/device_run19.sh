#!/usr/bin/env bash
# Device call (session 4, call 6): why the engram prefetch slows ~10% beside the GEMMs
# (SM clocks sampled per phase; uniform rows with little L2 reuse vs Zipfian), and the
# sparse_mqa one-launch row top-k against the radix path, and MoE's direct kernel (T <= 4).
set -u
. benchmarks/device_runs/env.sh
cp .whl/moe_routing_head.py kernel_templates/moe_routing.py; cp .whl/moe_space_head.py search_spaces/moe_routing.py  # the committed MoE (a helper is editing the tree)
C='[{"ROWS":128,"num_warps":32,"NUM_CTAS":2,"GRID_SM_FRAC":0.01515,"num_stages":3,"DEDUP":false}]'
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw --format=csv,noheader -lms 10 > "$L/clocks.csv" 2>&1 &
SMI=$!
timeout 100 python3 benchmarks/engram_sweep.py --points host:256,host:4096 --table-rows 1048576 --overlap-configs "$C" > "$L/overlap_zipf.log" 2>&1; echo "[$((SECONDS-t0)) s] zipf rc=$?"
timeout 100 python3 benchmarks/engram_sweep.py --points host:256,host:4096 --table-rows 1048576 --uniform-rows --overlap-configs "$C" > "$L/overlap_uniform.log" 2>&1; echo "[$((SECONDS-t0)) s] uniform rc=$?"
kill $SMI
timeout 150 python3 benchmarks/sparse_mqa.py --quick --algos radix,row --no-baseline --reps 20 --out "$OUT" > "$L/sparse_row.log" 2>&1; echo "[$((SECONDS-t0)) s] sparse rc=$?"
timeout 90 python3 benchmarks/moe_routing.py --tokens 1 2 3 4 16 64 256 --out "$OUT" > "$L/moe_direct.log" 2>&1; echo "[$((SECONDS-t0)) s] moe rc=$?"
cd "$OUT" && tar czf run19.tgz logs *.json 2>/dev/null; rm -rf logs *.json
for f in overlap_zipf overlap_uniform; do tar xzf run19.tgz -O logs/$f.log | grep "^overlap\|rror" | cut -c1-170; done
tar xzf run19.tgz -C /tmp logs/overlap_zipf.log logs/overlap_uniform.log logs/clocks.csv
cat /tmp/logs/overlap_zipf.log /tmp/logs/overlap_uniform.log > /tmp/logs/all.log; python3 $OLDPWD/benchmarks/clock_spans.py /tmp/logs/all.log /tmp/logs/clocks.csv
for f in sparse_row moe_direct; do echo "== $f"; tar xzf run19.tgz -O logs/$f.log | grep -v "^{\|Warning\|warn(\|targets\|MISS\|  ok" | tail -30 | cut -c1-170; done
