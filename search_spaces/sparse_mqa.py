"""Search space of the sparse MQA indexer template (kernel_templates/sparse_mqa.py)."""
from __future__ import annotations

from typing import Any

import triton

from kernel_templates.sparse_mqa import (D_INDEX, PAGE, PROFILES, RADIX_FIRST, Workload, feasible, radix_fused_cap,
                                         radix_sampled_launches, score_gluon_error)
from tuner.runtime.env import assumed_target_cc
from tuner.space import Bool, Choice, Pow2, Space

__all__ = ["SPACE", "canonical", "constraints", "smem_estimate", "feasible", "WORKLOADS", "SMALL_WORKLOADS"]

SPACE = Space(
    BLOCK_N=Pow2(16, 128),        # keys per tile: the MMA's M (wgmma wants 64)
    NUM_SPLITS=Choice((1, 2, 4, 8, 16, 20, 32, 64, 128, 256, 512, 640)),  # context splits per sequence
                                  # (parallelism at small batch); 20 and 640: five 4-warp programs an SM of
                                  # 132 at B=32 / B=1, with SCORE_MAXNREG 96 (H200 run 80)
    CAND_MULT=Choice((2, 4)),     # candidate list = CAND_MULT x next_pow2(top_k): fewer prunes vs more scratch
    MERGE_GROUP=Pow2(2, 16),      # lists merged per program and level (levels = log_G(NUM_SPLITS))
    SELECT_BLOCK=Pow2(256, 2048), # keys per step of the radix-select / compaction streams
    SHARE_THRESHOLD=Bool(),       # publish pruned thresholds across splits (atomic max)
    MX_FP8_DOT=Bool(),            # mxfp4: FP8 MMA per scale block, or exact BF16 dequant + one BF16 MMA
    MX_WORD_DECODE=Bool(),        # mxfp4 FP8 MMA: decode 4 code bytes per instruction, K order permuted
    TOPK_ALGO=Choice(("merge", "radix", "row", "bound")),  # top-k: in-split lists + merge levels, row-parallel
                                  # radix passes, one program per row after the scoring kernel, or one
                                  # row-parallel filter at the bound of the group maxima (then the placing)
    TOPK_BLOCK=Pow2(256, 2048),   # radix / row: keys per step of a pass (radix at 4096 spills: 255 registers)
    TOPK_SPLITS=Pow2(1, 256),     # radix: programs per (sequence, token) row in each pass
    RANK_BLOCK=Pow2(16, 128),     # radix: output positions per ranking program (256 spills)
    PLACE_SORT=Bool(),            # radix: one tl.sort per row instead of ranking by compares
    PLACE_CHUNK=Choice((0, 128, 256, 512, 1024), absent=0),  # radix / row: sort chunks of this many selected
                                  # keys, then rank across the sorted chunks (a second launch); 0: PLACE_SORT
                                  # decides (radix), one sort a row (row)
    RADIX_FIRST=Choice(RADIX_FIRST, absent="byte"),  # radix: the first digit
                                  # (sparse_mqa._radix_digit); configs from before it ran "byte";
                                  # "sampled_byte": the sampled threshold, then the bytes (a pass fewer)
    BOUND_GROUP=Choice((16, 32, 64, 128), absent=64),  # bound: keys per group max (<= BLOCK_N): smaller
                                  # groups give a tighter bound (fewer candidates) for more maxima to read
    BOUND_FUSED=Bool(absent=False),  # bound: every filter program derives the row's bound from all its
                                  # group maxima (one launch fewer) instead of the bound launch's parts
    RANK_STEP=Choice((2048, 8192), absent=2048),  # bound: compares a step of the ranking (fewer, larger
                                  # dependent candidate loads)
    LAUNCH_PDL=Bool(absent=False),  # radix / bound: the top-k launches start as programmatic dependent
                                  # launches (sm_90+), overlapping each launch with the end of the one before
    RADIX_FUSED=Bool(absent=False),  # radix: every pass in one launch, row barriers between them (only up
                                  # to RADIX_FUSED_MAX_ROWS rows; TOPK_SPLITS capped to one program an SM)
    SCORE_MAXNREG=Choice((0, 96), absent=0),  # scoring kernel register cap (0: none): at 96, five programs an
                                  # SM fit (fp8 keys: 110 registers otherwise, four); H200 run 80, dsv32 512K
                                  # scoring B=1 29.6 -> 26.7 us (640 splits), B=32 615 -> 569 (20 splits)
    SCORE_GLUON=Bool(absent=False),  # next_n 1, radix / bound, sm_90: the Gluon scoring kernel
                                  # (sparse_mqa._gl_score_kernel: explicit layouts, fp8 key tiles by TMA into
                                  # an mbarrier ring, mxfp4 codes by cp.async); num_stages is the ring's depth
    SCORE_SAMPLE=Bool(absent=False),  # SCORE_GLUON with the sampled first digit: the scoring kernel builds the
                                  # sampled digit-0 histogram (the radix passes' first launch) itself
    RADIX_FOLD=Bool(absent=False),  # radix, sampled first digit, a launch a step: the safe pick's last program
                                  # to finish runs the fallback (a launch fewer; the row alone when the sample misled)
    num_warps=Pow2(4, 8),
    num_stages=Choice((1, 2, 3, 4, 5, 7, 9)),  # scoring pipeline depth: one key tile in flight a program up
                                  # to 4, two at 5, three at 7, four at 9 (the block-table load takes stages;
                                  # kernel_templates/sparse_mqa.py; 7 and 9: more bytes in flight at B=1)
)

SMEM_BYTES = 232448   # opt-in shared memory per block on H100/H200 and B200 (227 KB)
SMS = 132             # H200: tells over-splitting apart; the fused radix launch's cap (radix_fused_cap)
# fp32 score-tile words per thread ([BLOCK_N, next_n*H] / threads) past which the scoring
# kernel spills, measured for sm_90 with Triton 3.6 (cuobjdump): fp8 keys compile spill-free
# at 64 (173-229 registers) and spill at 128; mxfp4 (FP8 MMA per scale block: four
# partial products, the decode and four q slices live) takes 194-239 registers at 32 and
# spills at 64. ~120-150 registers are the top-k bookkeeping whatever the tile. (BLOCK_N
# < 64 has no wgmma: mma.sync, with an 8-16 B stack frame at 128-168 registers.)
_MAX_ACC_WORDS = {"fp8": 64, "mxfp4": 32}


def smem_estimate(config: dict[str, Any], workload: Workload) -> int:
    """Upper bound of the scoring kernel's shared memory: the q operand, ``num_stages``
    key tiles (128 B a key; 64 B of raw codes for the mxfp4 FP8-MMA path), q once more
    for the mma.sync layouts of BLOCK_N < 64, 1 KB of reduction scratch. Calibrated on
    sm_90 / Triton 3.6: 1.04-2.3x the measured ``metadata.shared`` over BLOCK_N 32-128,
    1-3 stages, 4-8 warps, next_n 1-2, both formats and both mxfp4 MMA paths (measured
    6-38 KB: never near the 227 KB limit, so this prunes nothing in SPACE today)."""
    w = workload
    prof = PROFILES[w.profile]
    bn, ns = config["BLOCK_N"], config["num_stages"]
    qr = triton.next_power_of_2(w.next_n) * triton.next_power_of_2(prof["heads"])
    key_bytes = D_INDEX // 2 if prof["k_format"] == "mxfp4" and config["MX_FP8_DOT"] else D_INDEX
    if config.get("SCORE_GLUON", False):  # q once, the ring of key tiles (mxfp4: codes), the group max's scratch
        return 1024 + qr * D_INDEX + ns * bn * (D_INDEX // 2 if prof["k_format"] == "mxfp4" else D_INDEX)
    return 1024 + qr * D_INDEX * (2 if bn < 64 else 1) + ns * bn * key_bytes


def _gluon_scoring_applies(config: dict[str, Any], workload: Workload) -> bool:
    """``SCORE_GLUON`` can score this workload's calls with this config on the target (the
    launcher's own test, ``sparse_mqa.score_gluon_error``, for the tuner's contiguous caches)."""
    w = workload
    prof = PROFILES[w.profile]
    return score_gluon_error(config, prof["k_format"], w.next_n, prof["heads"], PAGE, prof["top_k"],
                             config["TOPK_ALGO"], compile_only=assumed_target_cc() is not None) is None


# pinned values of the parameters a top-k path ignores (other values would only duplicate trials)
_MERGE_ONLY = {"CAND_MULT": 2, "MERGE_GROUP": 2, "SELECT_BLOCK": 1024, "SHARE_THRESHOLD": False}
_RADIX_ONLY = {"TOPK_BLOCK": 1024, "TOPK_SPLITS": 1, "RANK_BLOCK": 64, "PLACE_SORT": False, "RADIX_FIRST": "byte",
               "PLACE_CHUNK": 0, "RADIX_FUSED": False}
_BOUND_ONLY = {"BOUND_GROUP": 64, "BOUND_FUSED": False, "RANK_STEP": 2048}
# the bound path streams and splits as the radix passes do; it places by ranking (RANK_BLOCK) only
_BOUND_IGNORES = {"RADIX_FIRST": "byte", "RADIX_FUSED": False, "PLACE_SORT": False, "PLACE_CHUNK": 0}
# the row path streams TOPK_BLOCK keys, and sorts its selection in one program or in PLACE_CHUNK chunks
_ROW_IGNORES = {k: v for k, v in _RADIX_ONLY.items() if k not in ("TOPK_BLOCK", "PLACE_CHUNK")}
ROW_MAX_CONTEXT = 131072  # one program streams a whole row: past this the radix passes' parallelism wins
# RADIX_FUSED up to this many rows (batch x next_n): its grid is at most one program an SM
# (all resident for the row barriers), so more rows leave few programs a row for the passes;
# the default never does (sparse_mqa.RADIX_FUSED_DEFAULT_ROWS = 0: slower where measured)
RADIX_FUSED_MAX_ROWS = 16


def canonical(config: dict[str, Any], workload: Workload) -> dict[str, Any]:
    """The config the study evaluates for a draw: what the draw's own choices ignore at its
    pinned value (the other top-k paths' knobs, the MXFP4 knobs for fp8 keys, the word
    decode without the FP8 MMA, the merge group of a single list, the ranking block when
    sorting), and the radix passes' programs capped where the launcher caps them (one a
    block; with ``RADIX_FUSED`` one an SM over the rows), ``RADIX_FUSED`` off past
    ``RADIX_FUSED_MAX_ROWS`` rows (not admitted there). ``constraints`` rejects every
    config this changes: it would only duplicate another. Before the study evaluated
    canonical forms, a uniform draw was admitted about one time in 1000-2000 (four
    merge-only knobs alone pin 1 in 64 radix draws) and studies ended on their rejection
    streak."""
    c = dict(config)
    w = workload
    if PROFILES[w.profile]["k_format"] != "mxfp4":
        c["MX_FP8_DOT"] = False
    if not c["MX_FP8_DOT"]:
        c["MX_WORD_DECODE"] = False
    if c["TOPK_ALGO"] != "bound":
        c.update(_BOUND_ONLY)
    if c["TOPK_ALGO"] in ("radix", "bound"):
        c.update(_MERGE_ONLY)
        if c["TOPK_ALGO"] == "bound":
            c.update(_BOUND_IGNORES)
        if c.get("PLACE_CHUNK", 0):
            c["PLACE_SORT"] = False  # the chunked placing replaces both; RANK_BLOCK only ranks ties there
        if c["PLACE_SORT"] or c.get("PLACE_CHUNK", 0):
            c["RANK_BLOCK"] = _RADIX_ONLY["RANK_BLOCK"]
        c["TOPK_SPLITS"] = min(c["TOPK_SPLITS"], triton.next_power_of_2(triton.cdiv(w.context, c["TOPK_BLOCK"])))
        if c.get("RADIX_FUSED", False) and w.batch * w.next_n > RADIX_FUSED_MAX_ROWS:
            c["RADIX_FUSED"] = False  # not admitted there: the draw's launch-a-step form
        if c.get("RADIX_FUSED", False):  # the launcher's cap: one program an SM over all rows
            c["TOPK_SPLITS"] = min(c["TOPK_SPLITS"], radix_fused_cap(w.batch * w.next_n, SMS))
    elif c["TOPK_ALGO"] == "row":
        c.update(_MERGE_ONLY, **_ROW_IGNORES)
    else:
        c.update(_RADIX_ONLY)
        if c["NUM_SPLITS"] == 1:
            c["MERGE_GROUP"] = _MERGE_ONLY["MERGE_GROUP"]
    if c["TOPK_ALGO"] not in ("radix", "bound"):
        c["LAUNCH_PDL"] = False  # the merge and row paths' launches have no _pdl_enter
    if c.get("SCORE_GLUON", False) and not _gluon_scoring_applies(c, w):
        c["SCORE_GLUON"] = False  # one token, BLOCK_N 64, 4 warps, 2+ stages, sm_90 only
    if c.get("SCORE_GLUON", False):
        if PROFILES[w.profile]["k_format"] == "mxfp4":
            # the Gluon kernel's own decode (FP8 MMA, words); its 123 registers capped at 96 fit five
            # programs an SM (run 130, dsv41-flash B32 with 20 splits: 1.03-1.04x; B1 512K 0.96x)
            c["MX_FP8_DOT"] = c["MX_WORD_DECODE"] = True
        else:
            c["SCORE_MAXNREG"] = 0  # fp8 keys: the Gluon kernel takes ~72 registers, a cap changes nothing
    if not (c.get("SCORE_GLUON", False) and radix_sampled_launches(c)):
        c["SCORE_SAMPLE"] = False  # only the Gluon scoring kernel samples, and only the sampled first digit uses it
    if not radix_sampled_launches(c):
        c["RADIX_FOLD"] = False  # only the sampled first digit has a fallback launch to fold
    return c


def constraints(config: dict[str, Any], workload: Workload) -> bool:
    """Variants that do nothing for the key format or the top-k path, splits shorter than a
    tile (or a radix block) or far past filling the GPU, the fused radix launch past
    ``RADIX_FUSED_MAX_ROWS`` rows, register and shared-memory estimates."""
    w = workload
    prof = PROFILES[w.profile]
    bn, S, nw = config["BLOCK_N"], config["NUM_SPLITS"], config["num_warps"]
    if canonical(config, w) != config:
        return False  # an ignored knob off its pinned value: a duplicate (see canonical)
    if config["TOPK_ALGO"] == "bound" and config["BOUND_GROUP"] > bn:
        return False
    if config["TOPK_ALGO"] in ("radix", "bound"):
        P, rows = config["TOPK_SPLITS"], w.batch * w.next_n
        if P > 1 and rows * P // 4 >= 8 * SMS:  # past ~32 programs an SM and pass (B=32: up to 128)
            return False
        if not config["PLACE_SORT"] and config["RANK_BLOCK"] > triton.next_power_of_2(prof["top_k"]):
            return False
        if config.get("RADIX_FUSED", False) and rows > RADIX_FUSED_MAX_ROWS:
            return False
    elif config["TOPK_ALGO"] == "row" and w.context > ROW_MAX_CONTEXT:
        return False
    if config.get("PLACE_CHUNK", 0) > triton.next_power_of_2(prof["top_k"]):
        return False
    if PAGE % bn and bn % PAGE:
        return False
    if S > max(1, triton.cdiv(w.context, bn)):
        return False
    if S > 1 and w.batch * S // 2 >= 4 * SMS:
        return False
    # registers: the fp32 score tile per thread (calibrated, see _MAX_ACC_WORDS)
    qr = triton.next_power_of_2(w.next_n) * triton.next_power_of_2(prof["heads"])
    if bn * qr // (32 * nw) > _MAX_ACC_WORDS[prof["k_format"]]:
        return False
    return smem_estimate(config, w) <= SMEM_BYTES

_BATCH = (1, 8, 32, 128)
_CONTEXT = (8192, 32768, 131072, 524288)
WORKLOADS = [Workload(b, n, t, p) for p in PROFILES for t in (1, 2) for n in _CONTEXT for b in _BATCH]
"""The default GPU grid (memory-infeasible points are reported by ``feasible`` and skipped)."""

SMALL_WORKLOADS = [Workload(1, 300, 1, "dsv32"), Workload(1, 700, 2, "dsv41-flash")]
"""Interpreter-sized; the last merge level sorts next_pow2(top_k) keys, ~3 s per row there."""
