#!/usr/bin/env bash
# Session 29. Runs device_run<N>.sh for each N given, in order, carrying the tuner's state from one device call to
# the next on a warm machine: a call copies the working tree afresh (results.db and the pack included), so before a
# script the results.db and pack an earlier call on this machine left (kept in the ignored `.devstate/`) are put
# back, and after it they are saved there again. They are put back only while the tree's results.db is still the
# one that earlier call started from (`.devstate/base.sha256`): a tree that has moved on since (results copied back
# and committed, or edited) wins. On a fresh machine `.devstate/` is absent and the tree's are used.
# Usage: bash benchmarks/device_runs/chain.sh 145 [146 ...]
set -u
sha() { sha256sum "$1" 2>/dev/null | cut -d' ' -f1; }
base=$(sha results.db)  # the tree's, as this call copied it
if [ -f .devstate/results.db ]; then
  if [ "$base" = "$(cat .devstate/base.sha256 2>/dev/null)" ]; then
    cp .devstate/results.db results.db && rm -f packs/nvidia-h200/* && cp .devstate/pack/* packs/nvidia-h200/
    echo "chain: results.db and pack from an earlier call on this machine"
  else
    echo "chain: the tree's results.db is not the one this machine's earlier calls started from: using the tree's"
  fi
fi
for n in "$@"; do
  bash "benchmarks/device_runs/device_run$n.sh"
  mkdir -p .devstate/pack && cp results.db .devstate/ && rm -f .devstate/pack/* && cp packs/nvidia-h200/* .devstate/pack/
  echo "$base" > .devstate/base.sha256
done
