#!/usr/bin/env bash
# The peers of benchmarks/peers.py on a GPU machine without network access, where one transfer carries at
# most 64 MiB with the tree. The wheels (versions: pyproject.toml's `peers` extra) travel in parts:
#   .whl-peers/dg        DeepGEMM and FlashMLA with their needs (~18 MB): installs in one call
#   .whl-peers/tk-0 ...  TileLang and TileKernels with their needs (~85 MB), one tar split in parts of at most
#                        PEERS_PART_SIZE (default 28M); each call stashes its part, the last one installs the set
#
#   bash benchmarks/peers_device.sh fetch                       # here, with network: .whl-peers/dg and tk-*
#   bash benchmarks/peers_device.sh install .whl-peers/dg       # GPU machine: DeepGEMM, FlashMLA
#   bash benchmarks/peers_device.sh install .whl-peers/tk-0     # same machine, one call per part ...
#   bash benchmarks/peers_device.sh run --family sparse_mqa,attention --pack packs/nvidia-h100
#
# Everything installs into one folder, $PEERS_SITE (default /tmp/site), and the parts wait in $PEERS_SITE.parts,
# so the calls must find the same machine. `run` puts $PEERS_SITE and the tree on PYTHONPATH and runs
# benchmarks/peers.py with --out $OUT/peers (OUT defaults to /tmp/out) and the arguments given.
# Exit status: peers.py's; 2 for bad usage.
set -uo pipefail
cd "$(dirname "$0")/.."
SITE=${PEERS_SITE:-/tmp/site}
WHEELS=${PEERS_WHEELS:-.whl-peers}
PART_SIZE=${PEERS_PART_SIZE:-28M}

fetch() {  # run where PyPI is reachable
  local plat="--platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_24_x86_64"
  plat="$plat --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform manylinux1_x86_64"
  local get="python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp $plat"
  local tk
  tk=$(mktemp -d) || return 1
  rm -rf "$WHEELS/dg"
  mkdir -p "$WHEELS/dg"
  local both="apache-tvm-ffi==0.1.11 torch-c-dlpack-ext==0.1.5"  # each set installs without the other
  $get -d "$WHEELS/dg" sgl-deep-gemm==0.1.5 sgl-flash-mla==1.0.0 $both &&
    $get -d "$tk" tilelang==0.1.9 tile-kernels==1.0.0 $both "z3-solver>=4.13.0,<4.15.5" cloudpickle ml-dtypes psutil tqdm &&
    pack "$tk" tk
  local rc=$?
  rm -rf "$tk"
  [ $rc -eq 0 ] && du -sb "$WHEELS"/dg "$WHEELS"/tk-*
  return $rc
}

pack() {  # SRC NAME: SRC's wheels as one tar, split into $WHEELS/NAME-0, NAME-1, ... of at most $PART_SIZE each
  local src=${1:-} name=${2:-}
  if [ -z "$name" ] || ! ls "$src"/*.whl > /dev/null 2>&1; then
    echo "peers_device.sh pack: no wheels in '${src}' (usage: pack DIR NAME)" >&2
    return 2
  fi
  local work sum i=0
  work=$(mktemp -d) || return 1
  tar cf "$work/set.tar" -C "$src" $(cd "$src" && ls *.whl) && (cd "$work" && split -b "$PART_SIZE" -d -a 2 set.tar part.) || return 1
  sum=$(sha256sum "$work/set.tar" | cut -d' ' -f1)
  local parts=("$work"/part.*)
  rm -rf "$WHEELS/$name"-[0-9]*
  for p in "${parts[@]}"; do
    mkdir -p "$WHEELS/$name-$i"
    mv "$p" "$WHEELS/$name-$i/$name.part$i"
    echo "$sum ${#parts[@]}" > "$WHEELS/$name-$i/$name.set"
    i=$((i + 1))
  done
  rm -rf "$work"
}

pip_target() {  # wheels into $SITE, next to what an earlier call put there
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" "$@"
}

install() {  # a folder of wheels, or one part of a split set (installed once its last part is here)
  local dir=${1:-}
  if ls "$dir"/*.whl > /dev/null 2>&1; then
    pip_target "$dir"/*.whl
    return
  fi
  local part set
  part=$(ls "$dir"/*.part[0-9]* 2> /dev/null | head -1)
  set=$(ls "$dir"/*.set 2> /dev/null | head -1)
  if [ -z "$dir" ] || [ -z "$part" ] || [ -z "$set" ]; then
    echo "peers_device.sh install: no wheels and no part of a split set in '${dir}' (carry .whl-peers/dg or .whl-peers/tk-N)" >&2
    return 2
  fi
  local sum count have stash
  read -r sum count < "$set"
  stash=$SITE.parts/$sum
  mkdir -p "$stash"
  cp "$part" "$stash/"
  have=$(ls "$stash" | wc -l)
  if [ "$have" -lt "$count" ]; then
    echo "peers_device.sh install: part $have of $count stashed in $stash; carry the next part in the next call"
    return 0
  fi
  local work
  work=$(mktemp -d) || return 1
  cat $(ls "$stash"/* | sort -V) > "$work/set.tar"
  if [ "$(sha256sum "$work/set.tar" | cut -d' ' -f1)" != "$sum" ]; then
    echo "peers_device.sh install: the joined parts in $stash do not match the set's checksum; fetch again" >&2
    rm -rf "$work"
    return 1
  fi
  tar xf "$work/set.tar" -C "$work" && \
    pip_target "$work"/*.whl
  local rc=$?
  rm -rf "$work" "$stash"
  [ $rc -eq 0 ] && echo "peers_device.sh install: all $count parts joined and installed into $SITE"
  return $rc
}

run() {
  export PYTHONPATH="$SITE:$PWD" PYTHONUNBUFFERED=1
  local out=${OUT:-/tmp/out}
  mkdir -p "$out/peers"
  python3 benchmarks/peers.py --out "$out/peers" "$@"
}

cmd=${1:-}
shift || true
case "$cmd" in
  fetch) fetch ;;
  pack) pack "$@" ;;
  install) install "$@" ;;
  run) run "$@" ;;
  *) echo "usage: bash benchmarks/peers_device.sh fetch | pack DIR NAME | install DIR | run [peers.py arguments]" >&2; exit 2 ;;
esac
