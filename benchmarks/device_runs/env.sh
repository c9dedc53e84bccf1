# Preamble of a device call, sourced from the repository root by the device_run*.sh scripts
# from run 14 on: the wheels into /tmp/site, PYTHONPATH, $OUT / $L for results and logs, $T
# for the CLI, $P for a benchmark's pack and output, $t0 for elapsed seconds.
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 COLUMNS=160
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT/logs"; L=$OUT/logs
T="python3 -m tuner.cli.main"
P="--pack packs/nvidia-h200 --out $OUT"
t0=$SECONDS
