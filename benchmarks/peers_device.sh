#!/usr/bin/env bash
# The peers of benchmarks/peers.py on a GPU machine without network access. The wheels (~98 MB) travel
# in two parts, each under a 64 MiB transfer with the tree: a/ TileLang + TileKernels (52.4 MB), b/ the rest
# (45.5 MB); both install into one folder, /tmp/site, which the second step finds on the same machine.
#
#   bash benchmarks/peers_device.sh fetch            # here, with network: the wheels into .whl-peers/a and b
#   bash benchmarks/peers_device.sh install .whl-peers/a                      # GPU machine, first call
#   bash benchmarks/peers_device.sh install .whl-peers/b && \
#     bash benchmarks/peers_device.sh run --quick                             # same machine, second call
#
# `run` puts /tmp/site and the tree on PYTHONPATH, checks that DeepGEMM's extension loads and, where a
# symbol of a newer torch is missing, builds benchmarks/peers_torch_shim.cpp against the machine's torch and
# preloads it (sgl-deep-gemm 0.2.0 needs two such symbols, all later versions more, some of torch builds not
# released), then runs benchmarks/peers.py with --out $OUT/peers (OUT defaults to /tmp/out) and the
# arguments given. Exit status: peers.py's; 2 for a bad subcommand.
set -uo pipefail
cd "$(dirname "$0")/.."
SITE=${PEERS_SITE:-/tmp/site}
WHEELS=.whl-peers

fetch() {  # run where PyPI is reachable; the versions pyproject.toml's `peers` extra names
  local plat="--platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_24_x86_64"
  plat="$plat --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform manylinux1_x86_64"
  local get="python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp $plat"
  mkdir -p "$WHEELS/a" "$WHEELS/b"
  $get -d "$WHEELS/a" tilelang==0.1.15 apache-tvm-ffi==0.1.11 tile-kernels==1.0.0 || return 1
  $get -d "$WHEELS/b" sgl-flash-mla==1.0.0 sgl-deep-gemm==0.2.0 "z3-solver>=4.13.0,<4.15.5" torch-c-dlpack-ext || return 1
  du -sb "$WHEELS/a" "$WHEELS/b"
}

install() {  # one part of the wheels into $SITE, next to what an earlier part put there
  local dir=${1:-}
  if [ -z "$dir" ] || ! ls "$dir"/*.whl > /dev/null 2>&1; then
    echo "peers_device.sh install: no wheels in '${dir}' (carry .whl-peers/a or .whl-peers/b)" >&2
    return 2
  fi
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" "$dir"/*.whl
}

shim_deep_gemm() {  # DeepGEMM's prebuilt _C.so takes symbols from a newer torch than the machine's
  [ -d "$SITE/deep_gemm" ] || return 0  # not installed: peers.py reports it
  local err tdir abi so=$SITE/peers_torch_shim.so
  # tvm_ffi opens _C.so lazily (RTLD_LAZY): a missing function symbol shows only at the first call
  # that needs it, and ends the process there. LD_BIND_NOW resolves every symbol at the import instead.
  LD_BIND_NOW=1 python3 -c "import torch" > /dev/null 2>&1 || { echo "deep_gemm: torch does not load with LD_BIND_NOW" >&2; return 0; }
  err=$(LD_BIND_NOW=1 python3 -c "import torch, deep_gemm" 2>&1 | tail -1) && return 0
  case "$err" in *"undefined symbol"*) ;; *) echo "deep_gemm: does not load: $err" >&2; return 0 ;; esac
  read -r tdir abi < <(python3 -c "import os, torch; print(os.path.dirname(torch.__file__), int(torch.compiled_with_cxx11_abi()))")
  [ -n "$abi" ] || return 0
  if g++ -std=c++17 -O2 -fPIC -shared -D_GLIBCXX_USE_CXX11_ABI="$abi" -I"$tdir/include" benchmarks/peers_torch_shim.cpp \
      -L"$tdir/lib" -Wl,-rpath,"$tdir/lib" -lc10 -ltorch_cpu -o "$so"; then
    if err=$(LD_BIND_NOW=1 LD_PRELOAD="$so" python3 -c "import torch, deep_gemm" 2>&1 | tail -1); then
      echo "deep_gemm: loads with benchmarks/peers_torch_shim.cpp preloaded"
      export LD_PRELOAD="$so${LD_PRELOAD:+:$LD_PRELOAD}"
      return 0
    fi
  fi
  echo "deep_gemm: does not load, with or without benchmarks/peers_torch_shim.cpp: $err" >&2
}

run() {
  export PYTHONPATH="$SITE:$PWD" PYTHONUNBUFFERED=1
  shim_deep_gemm
  local out=${OUT:-/tmp/out}
  mkdir -p "$out/peers"
  python3 benchmarks/peers.py --out "$out/peers" "$@"
}

cmd=${1:-}
shift || true
case "$cmd" in
  fetch) fetch ;;
  install) install "$@" ;;
  shim) export PYTHONPATH="$SITE:$PWD"; shim_deep_gemm ;;
  run) run "$@" ;;
  *) echo "usage: bash benchmarks/peers_device.sh fetch | install DIR | shim | run [peers.py arguments]" >&2; exit 2 ;;
esac
