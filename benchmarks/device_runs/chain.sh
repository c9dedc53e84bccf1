#!/usr/bin/env bash
# Session 29. Runs device_run<N>.sh for each N given, in order, carrying the tuner's state from one device call to
# the next on a warm machine: a call copies the working tree afresh (results.db and the pack included), so before a
# script the newest results.db and pack of an earlier call on this machine (kept in the ignored `.devstate/`) are put
# back, and after it they are saved there again. On a fresh machine `.devstate/` is absent and the tree's are used.
# Usage: bash benchmarks/device_runs/chain.sh 145 [146 ...]
set -u
for n in "$@"; do
  if [ -f .devstate/results.db ]; then
    cp .devstate/results.db results.db && rm -f packs/nvidia-h200/* && cp .devstate/pack/* packs/nvidia-h200/
    echo "chain: results.db and pack from an earlier call on this machine"
  fi
  bash "benchmarks/device_runs/device_run$n.sh"
  mkdir -p .devstate/pack && cp results.db .devstate/ && rm -f .devstate/pack/* && cp packs/nvidia-h200/* .devstate/pack/
done
