"""Search space of the sparse MQA indexer template (kernel_templates/sparse_mqa).

Each knob says where it applies (``when``); elsewhere it is pinned to its ``off`` value, so a
draw that differs from a measured config only in a knob its own choices ignore (another
top-k path's, the MXFP4 decode for fp8 keys) is a duplicate, not a new trial.
"""
from __future__ import annotations

from typing import Any

from kernel_templates._host import cdiv, next_power_of_2
from kernel_templates.sparse_mqa import D_INDEX, PAGE, PROFILES, RADIX_FIRST, Workload, feasible
from kernel_templates.sparse_mqa.scoring_gluon import score_gluon_error
from tuner.runtime.target import Target
from tuner.space import Bool, Choice, Pow2, Space

__all__ = ["SPACE", "constraints", "smem_estimate", "feasible", "WORKLOADS", "SMALL_WORKLOADS"]

ROW_MAX_CONTEXT = 131072  # one program streams a whole row: past this the radix passes' parallelism wins


def _mx(w: Workload) -> bool:
    return PROFILES[w.profile]["k_format"] == "mxfp4"


def _algo_in(*algos: str):
    return lambda c, w, t: c["TOPK_ALGO"] in algos


def _gluon_applies(c: dict[str, Any], w: Workload, t: Target) -> bool:
    """``SCORE_GLUON`` can score this workload's calls with this config on the target (the
    launcher's own test, for the tuner's contiguous caches)."""
    prof = PROFILES[w.profile]
    return score_gluon_error(c, prof["k_format"], w.next_n, prof["heads"], PAGE, prof["top_k"], c["TOPK_ALGO"],
                             t) is None


def _topk_splits(v: int, c: dict[str, Any], w: Workload, t: Target) -> int:
    """The launcher runs at most one program a TOPK_BLOCK of the row (``launcher.radix_splits``)."""
    return min(v, next_power_of_2(cdiv(w.context, c["TOPK_BLOCK"])))


SPACE = Space(
    BLOCK_N=Pow2(16, 128),        # keys per tile: the MMA's M (wgmma wants 64)
    NUM_SPLITS=Choice((1, 2, 4, 8, 16, 20, 32, 64, 128, 256, 512, 640)),  # context splits per sequence
                                  # (parallelism at small batch); 20 and 640: five 4-warp programs an SM of
                                  # 132 at B=32 / B=1, with SCORE_MAXNREG 96
    TOPK_ALGO=Choice(("radix", "row", "bound")),  # top-k: row-parallel radix passes, one program per row,
                                  # or one row-parallel filter at the bound of the group maxima (then the placing)
    TOPK_BLOCK=Pow2(256, 2048),   # keys per step of a top-k pass (radix at 4096 spills: 255 registers)
    TOPK_SPLITS=Pow2(1, 256, when=_algo_in("radix", "bound"), snap=_topk_splits),  # programs per row and pass
    PLACE_CHUNK=Choice((0, 128, 256, 512, 1024), when=_algo_in("radix", "row")),  # sort chunks of this many
                                  # selected keys, then rank across them (a second launch); 0: rank by compares
                                  # (radix), one sort a row (row)
    RANK_BLOCK=Pow2(16, 128, off=64, when=lambda c, w, t: c["TOPK_ALGO"] == "bound"
                    or (c["TOPK_ALGO"] == "radix" and not c["PLACE_CHUNK"])),  # output positions per ranking
                                  # program (256 spills)
    RADIX_FIRST=Choice(RADIX_FIRST, when=_algo_in("radix")),  # the first digit (sparse_mqa.common._radix_digit)
    BOUND_GROUP=Choice((16, 32, 64, 128), off=64, when=_algo_in("bound")),  # keys per group max (<= BLOCK_N):
                                  # smaller groups give a tighter bound (fewer candidates) for more maxima to read
    RANK_STEP=Choice((2048, 8192), when=_algo_in("bound")),  # compares a step of the ranking (fewer, larger
                                  # dependent candidate loads)
    LAUNCH_PDL=Bool(when=lambda c, w, t: c["TOPK_ALGO"] in ("radix", "bound") and t.cc >= 90 and not t.interpret),
                                  # the top-k launches start as programmatic dependent launches (sm_90+)
    num_warps=Pow2(4, 8),
    num_stages=Choice((1, 2, 3, 4, 5, 7, 9)),  # scoring pipeline depth: one key tile in flight a program up
                                  # to 4, two at 5, three at 7, four at 9 (the block-table load takes stages;
                                  # 7 and 9: more bytes in flight at B=1); SCORE_GLUON: the ring's depth
    SCORE_GLUON=Bool(when=_gluon_applies),  # next_n 1, radix / bound, sm_90: the Gluon scoring kernel
                                  # (sparse_mqa.scoring_gluon: explicit layouts, fp8 key tiles by TMA into an
                                  # mbarrier ring, mxfp4 codes by cp.async)
    # mxfp4 keys: FP8 MMA per scale block (else exact BF16 dequant + one BF16 MMA), decoding 4 code bytes an
    # instruction (K order permuted); the Gluon kernel has only that decode
    MX_FP8_DOT=Bool(when=lambda c, w, t: _mx(w), snap=lambda v, c, w, t: v or c["SCORE_GLUON"]),
    MX_WORD_DECODE=Bool(when=lambda c, w, t: c["MX_FP8_DOT"], snap=lambda v, c, w, t: v or c["SCORE_GLUON"]),
    SCORE_MAXNREG=Choice((0, 96), when=lambda c, w, t: not t.interpret and not (c["SCORE_GLUON"] and not _mx(w))),
                                  # scoring register cap (0: none): at 96, five programs an SM fit (fp8 keys: 110
                                  # registers otherwise, four): H200, dsv32 512K scoring B=1 29.6 -> 26.7 us (640
                                  # splits), B=32 615 -> 569 (20 splits). The fp8 Gluon kernel takes ~72 registers
    SCORE_SAMPLE=Bool(when=lambda c, w, t: c["SCORE_GLUON"] and c["TOPK_ALGO"] == "radix"
                      and c["RADIX_FIRST"] == "sampled"),  # the Gluon scoring kernel builds the sampled digit-0
                                  # histogram (the radix passes' first launch) itself
)

# fp32 score-tile words per thread ([BLOCK_N, next_n*H] / threads) past which the scoring
# kernel spills, measured for sm_90 with Triton 3.6 (cuobjdump): fp8 keys compile spill-free
# at 64 (173-229 registers) and spill at 128; mxfp4 (FP8 MMA per scale block: four
# partial products, the decode and four q slices live) takes 194-239 registers at 32 and
# spills at 64. (BLOCK_N < 64 has no wgmma: mma.sync, with an 8-16 B stack frame at
# 128-168 registers.)
_MAX_ACC_WORDS = {"fp8": 64, "mxfp4": 32}


def smem_estimate(config: dict[str, Any], workload: Workload) -> int:
    """Upper bound of the scoring kernel's shared memory: the q operand, ``num_stages``
    key tiles (128 B a key; 64 B of raw codes for the mxfp4 FP8-MMA path), q once more
    for the mma.sync layouts of BLOCK_N < 64, 1 KB of reduction scratch. Calibrated on
    sm_90 / Triton 3.6: 1.04-2.3x the measured ``metadata.shared`` over BLOCK_N 32-128,
    1-3 stages, 4-8 warps, next_n 1-2, both formats and both mxfp4 MMA paths (measured
    6-38 KB: never near the 227 KB limit)."""
    w = workload
    prof = PROFILES[w.profile]
    bn, ns = config["BLOCK_N"], config["num_stages"]
    qr = next_power_of_2(w.next_n) * next_power_of_2(prof["heads"])
    mx = prof["k_format"] == "mxfp4"
    if config["SCORE_GLUON"]:  # q once, the ring of key tiles (mxfp4: codes), the group max's scratch
        return 1024 + qr * D_INDEX + ns * bn * (D_INDEX // 2 if mx else D_INDEX)
    key_bytes = D_INDEX // 2 if mx and config["MX_FP8_DOT"] else D_INDEX
    return 1024 + qr * D_INDEX * (2 if bn < 64 else 1) + ns * bn * key_bytes


def constraints(config: dict[str, Any], workload: Workload, target: Target) -> bool:
    """Splits shorter than a tile (or a top-k block) or far past filling a GPU target's SMs
    (the interpreter runs one program at a time), group maxima larger than a tile, ranking
    and sorting blocks past the top-k, the row path on long rows, register and shared-memory
    estimates."""
    w = workload
    prof = PROFILES[w.profile]
    bn, S, nw = config["BLOCK_N"], config["NUM_SPLITS"], config["num_warps"]
    p2k = next_power_of_2(prof["top_k"])
    algo = config["TOPK_ALGO"]
    if algo == "bound" and config["BOUND_GROUP"] > bn:
        return False
    if algo in ("radix", "bound"):
        P = config["TOPK_SPLITS"]
        if P > 1 and not target.interpret and w.batch * w.next_n * P // 4 >= 8 * target.sms:  # ~32 an SM and pass
            return False
        if config["RANK_BLOCK"] > p2k:
            return False
    elif algo == "row" and w.context > ROW_MAX_CONTEXT:
        return False
    if config["PLACE_CHUNK"] > p2k:
        return False
    if PAGE % bn and bn % PAGE:
        return False
    if S > max(1, cdiv(w.context, bn)):
        return False
    if S > 1 and not target.interpret and w.batch * S // 2 >= 4 * target.sms:
        return False
    # registers: the fp32 score tile per thread (calibrated, see _MAX_ACC_WORDS)
    qr = next_power_of_2(w.next_n) * next_power_of_2(prof["heads"])
    if bn * qr // (32 * nw) > _MAX_ACC_WORDS[prof["k_format"]]:
        return False
    return smem_estimate(config, w) <= target.smem


_BATCH = (1, 8, 32, 128)
_CONTEXT = (8192, 32768, 131072, 524288)
WORKLOADS = [Workload(b, n, t, p) for p in PROFILES for t in (1, 2) for n in _CONTEXT for b in _BATCH]
"""The default GPU grid (memory-infeasible points are reported by ``feasible`` and skipped)."""

SMALL_WORKLOADS = [Workload(1, 300, 1, "dsv32"), Workload(1, 700, 2, "dsv41-flash")]
"""Interpreter-sized; the row path sorts next_pow2(top_k) keys, ~3 s per row there."""
