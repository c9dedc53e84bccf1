"""Search space of the sparse MQA indexer template (kernel_templates/sparse_mqa.py)."""
from __future__ import annotations

from typing import Any

import triton

from kernel_templates.sparse_mqa import BYTES_PER_KEY, D_INDEX, PAGE, PROFILES, Workload, feasible
from tuner.space import Bool, Choice, Pow2, Space

__all__ = ["SPACE", "constraints", "feasible", "WORKLOADS", "SMALL_WORKLOADS"]

SPACE = Space(
    BLOCK_N=Pow2(16, 128),        # keys per tile: the MMA's M (wgmma wants 64)
    NUM_SPLITS=Pow2(1, 128),      # context splits per sequence (parallelism at small batch)
    CAND_MULT=Choice((2, 4)),     # candidate list = CAND_MULT x next_pow2(top_k): fewer prunes vs more scratch
    MERGE_GROUP=Pow2(2, 16),      # lists merged per program and level (levels = log_G(NUM_SPLITS))
    SELECT_BLOCK=Pow2(256, 2048), # keys per step of the radix-select / compaction streams
    SHARE_THRESHOLD=Bool(),       # publish pruned thresholds across splits (atomic max)
    MX_FP8_DOT=Bool(),            # mxfp4: FP8 MMA per scale block, or exact BF16 dequant + one BF16 MMA
    num_warps=Pow2(4, 8),
    num_stages=Choice((1, 2, 3)),
)

SMEM_BYTES = 232448   # opt-in shared memory per block on H100/H200 and B200 (227 KB)
SMS = 132             # H200; only used to tell over-splitting apart
_MAX_WORDS = 160      # 32-bit registers per thread for the score tile, q and the key tile


def constraints(config: dict[str, Any], workload: Workload) -> bool:
    """Variants that do nothing for the key format, splits shorter than a tile or far past
    filling the GPU, register and shared-memory estimates."""
    w = workload
    prof = PROFILES[w.profile]
    bn, S, nw = config["BLOCK_N"], config["NUM_SPLITS"], config["num_warps"]
    mx = prof["k_format"] == "mxfp4"
    if config["MX_FP8_DOT"] and not mx:
        return False  # no effect on fp8 keys: would only duplicate trials
    if PAGE % bn and bn % PAGE:
        return False
    if S > max(1, triton.cdiv(w.context, bn)):
        return False
    if S > 1 and w.batch * S // 2 >= 4 * SMS:
        return False
    if S == 1 and config["MERGE_GROUP"] != 2:
        return False  # one list: the group size does nothing
    # registers: fp32 scores [BLOCK_N, next_n*H], q [next_n*H, 128] fp8, the key tile
    qr = triton.next_power_of_2(w.next_n) * triton.next_power_of_2(prof["heads"])
    key_words = bn * D_INDEX // (2 if mx and not config["MX_FP8_DOT"] else 4)  # bf16 or fp8 operand
    words = bn * qr + qr * D_INDEX // 4 + key_words
    if words / (32 * nw) > _MAX_WORDS:
        return False
    smem = config["num_stages"] * bn * BYTES_PER_KEY[prof["k_format"]] + qr * D_INDEX + bn * D_INDEX * 2
    return smem <= SMEM_BYTES


_BATCH = (1, 8, 32, 128)
_CONTEXT = (8192, 32768, 131072, 524288)
WORKLOADS = [Workload(b, n, t, p) for p in PROFILES for t in (1, 2) for n in _CONTEXT for b in _BATCH]
"""The default GPU grid (memory-infeasible points are reported by ``feasible`` and skipped)."""

SMALL_WORKLOADS = [Workload(1, 300, 1, "dsv32"), Workload(1, 700, 2, "dsv41-flash")]
"""Interpreter-sized; the last merge level sorts next_pow2(top_k) keys, ~3 s per row there."""
