#!/usr/bin/env bash
# Session 8, call 1: the chunked placing (PLACE_CHUNK: sort chunks of the selected keys, then
# rank across the sorted chunks) against the one-sort-a-row place (dsv32 from 8 rows) and the
# compare ranking (B=1, dsv41-flash); TOPK_SPLITS 64 at B=32 128K once more.
set -u
. benchmarks/device_runs/env.sh
C="PLACE_SORT=0,RANK_BLOCK=64"
B="python3 benchmarks/sparse_mqa.py $P --no-baseline --reps 30 --next-n 1"
timeout 200 $B --profiles dsv32 --batch 32 --context 8192,131072,524288 --variant ch128:PLACE_CHUNK=128,$C \
    --variant ch256:PLACE_CHUNK=256,$C --variant ch512:PLACE_CHUNK=512,$C > "$L/place_b32.log" 2>&1
echo "[$((SECONDS-t0)) s] b32 rc=$?"
timeout 120 $B --profiles dsv32 --batch 1,8 --context 8192,524288 --variant ch128:PLACE_CHUNK=128,$C \
    --variant ch256:PLACE_CHUNK=256,$C > "$L/place_b1.log" 2>&1
echo "[$((SECONDS-t0)) s] b1 rc=$?"
timeout 100 $B --batch 32 --context 131072 --variant ch128:PLACE_CHUNK=128,$C --variant ts64:TOPK_SPLITS=64 \
    --variant ch256ts64:PLACE_CHUNK=256,$C,TOPK_SPLITS=64 > "$L/place_128k.log" 2>&1
echo "[$((SECONDS-t0)) s] 128k rc=$?"
cd "$OUT" && tar czf run37.tgz logs *.json 2>/dev/null; rm -rf logs *.json
for f in place_b32 place_b1 place_128k; do echo "== $f"
  tar xzf run37.tgz -O logs/$f.log | grep -v "Warning\|warn(" | sed -n "/^profile /,/^targets/p" | cut -c1-220; done
