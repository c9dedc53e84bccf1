# Sourced from the repository root on a GPU machine before the benchmarks, e.g.
#   . benchmarks/device_env.sh && $T moe-routing --trials 24 && python3 benchmarks/moe_routing.py $P
# Puts the tree on PYTHONPATH (first installing the wheels in .whl/, for a machine without network access: build
# them beforehand with `pip wheel -w .whl .`), then sets $T (the CLI), $P (a benchmark's --pack and --out; the
# pack is $PACK, default packs/nvidia-h200), $OUT and $L (results and logs) and $t0 (for elapsed seconds).
if ls .whl/*.whl > /dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl || return 1
  export PYTHONPATH=/tmp/site:$PWD
else
  export PYTHONPATH=$PWD
fi
export PYTHONUNBUFFERED=1 COLUMNS=160
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT/logs"; L=$OUT/logs
T="python3 -m tuner.cli.main"
P="--pack ${PACK:-packs/nvidia-h200} --out $OUT"
t0=$SECONDS
