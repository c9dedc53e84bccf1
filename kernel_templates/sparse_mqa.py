"""Sparse MQA indexer ("lightning indexer"): scoring over a paged key cache fused with top-k.

KERNELS.md section 3. ``I[t, s] = sum_j w[t, j] * relu(q[t, j] . k[s]) * k_scale[s]`` for
the keys a query token sees, then the ``top_k`` keys by descending score (ties: lower
index first), ``-1`` where fewer keys are visible. Key formats: ``fp8`` (128 E4M3 + one
fp32 scale per key, 132 B) and ``mxfp4`` (64 B of E2M1 codes + 4 UE8M0 scales, 68 B, no
per-key scale). Causality for ``next_n > 1``: query ``i`` sees ``seq_len - next_n + i + 1`` keys.

Design:
- ``_score_kernel`` runs on ``(B, NUM_SPLITS)``: each program scans one contiguous chunk
  of a sequence's keys in tiles of ``BLOCK_N`` and scores the tile for every query token
  of the step at once: the ``next_n * H`` query rows share each key tile (MQA), so one
  ``tl.dot`` of ``[BLOCK_N, 128] x [128, next_n*H]`` (FP8 MMA for fp8 keys), relu, the
  weight, a per-token head sum and the key scale. mxfp4 keys are decoded in registers:
  either exactly to BF16 with their block scales (``nvfp4.mxfp4_tile_to_f32``) for one
  BF16 MMA, or (``MX_FP8_DOT``) the E2M1 nibbles straight into E4M3 bit patterns (value
  * 2^-6, exact) for four FP8 MMAs over the 32-wide scale blocks, each block's partial
  scaled by its UE8M0 scale (* 2^6) in fp32.
- Top-k without writing the logits: every (score, index) becomes one 63-bit key
  ``order(score) << 31 | (2^31 - 1 - index)`` (unique, larger = better, ties to the lower
  index), so selection is exact on integers. Each program keeps, per token, a candidate
  list in a small scratch buffer (``CAND_MULT`` x the top-k capacity, L2-resident):
  tile keys at or above a running threshold are appended compactly (cumsum positions).
  After each group of tiles that could fill the list, a list holding more than allowed
  is pruned to its ``top_k`` best by an exact radix select (eight 8-bit digit passes,
  one 256-bin histogram each) and the threshold becomes its k-th key, so the pass rate
  falls like k / keys-seen. ``SHARE_THRESHOLD`` publishes each pruned threshold with an
  atomic max per (sequence, token): any split's k-th key is a lower bound of the row's,
  so later programs filter with the best bound any split has found.
- ``_merge_kernel`` merges the per-split lists ``MERGE_GROUP`` at a time (one launch per
  level, programs over (row, group)) with the same streaming radix select, and the last
  level sorts the at most ``top_k`` survivors (``tl.sort`` on the 63-bit keys) and
  writes the indices. Only ``return_logits=True`` writes the ``[B, next_n, max_len]`` scores.
- ``TOPK_ALGO="radix"``: the scoring kernel writes the visible scores, six row-parallel
  launches radix-select over them and one ranks the selected keys (``_radix_pass_kernel``,
  ``_radix_place_kernel``): the GPU-wide passes win on long rows, but each launch costs ~3-4 us.
  The ranking: k^2 compares a row over many programs, one ``tl.sort`` a row, or
  (``PLACE_CHUNK``, the default from 8 rows of 2048) sorted chunks of the selected keys and
  a second launch that ranks each key across them by binary search (``_radix_merge_rank_kernel``).
  Tried and dropped (session 6, H200 run 26): the digit-0 histogram in the scoring kernel
  (atomics into a zero-filled state) instead of its own pass. It saved the 89.7 us pass
  at dsv32 B=32 512K but slowed the scoring kernel by 209 us (612 -> 821); slower at
  B=1 too (8K 40.5 -> 43.5 us). ``RADIX_FIRST`` picks the first digit (``_radix_digit``):
  the top order byte, quarter binades, or quarter binades placed from a 1-in-16 sample
  with a fallback pass keeping it exact ("sampled", the default from 32 rows at >= 128K:
  H200 run 34, B=32 512K top-k +41% -> +27% dsv32, +29% -> +18% dsv41-flash; "sampled_byte":
  the same threshold, then the bytes without the exact quarter digit, a pass fewer, not yet
  measured). ``RADIX_FOLD``: the fallback run by the safe pick's last program (not yet measured).
- ``RADIX_FUSED`` (search space only: slower where measured, H200 run 54, B=1 512K 86 vs
  65-71 us): the same radix steps in ONE launch
  (``_radix_fused_kernel``), the programs of a row meeting at a barrier (an arrive counter
  in the row's state, zeroed by the scoring kernel) between steps; at most one program an
  SM over all rows, so all are resident (more rows than SMs: the launch a step). The
  interpreter runs programs one after another, so a barrier with more than one program a
  row would deadlock there: it runs the fused kernel with one program a row.
- ``TOPK_ALGO="row"``: one launch after the scoring kernel, one program per (sequence,
  token) doing the row's whole exact selection (``_row_topk_kernel``). The scoring programs
  also histogram a first 8-bit digit of their scores (``_row_digit``: quarter binades), so
  the row program reads the row's scores once, with the k-th score's bin known, and
  refines only that bin's keys (a few % of the row) before one ``tl.sort``.
- ``TOPK_ALGO="bound"``: the scoring kernel also writes the max of every ``BOUND_GROUP``
  keys; a bound of the row's k-th score is derived from those maxima (``_group_bound``:
  k distinct groups each hold a key at or above the k-th largest max) in its own launch,
  in parts of at most ``BOUND_PART_MAXIMA`` maxima a program held in registers
  (``_bound_threshold_kernel``, ``ONE_LOAD``; the filter takes the least of the parts'
  bounds), or (``BOUND_FUSED``) by every program of the filter; the filter
  (``_bound_topk_kernel``) streams the scores once and appends the keys at or above it, and
  ``_bound_place_kernel`` ranks those few candidates (one program selects exactly first when
  a loose bound leaves too many). Three or four launches, where the radix path takes eight or more.
- ``LAUNCH_PDL``: the top-k launches of the radix and bound paths start as programmatic
  dependent launches (sm_90+): their programs become resident while the launch before
  them finishes and wait for it (``_pdl_enter``), which shrinks the gaps between launches.
- ``SCORE_MAXNREG``: a register cap on the scoring launch (96: five 4-warp programs an SM
  for fp8 keys; H200 run 80). ``SCORE_GLUON`` (sm_90, one token, radix / bound): the
  scoring by a Gluon kernel with explicit layouts, fp8 key tiles by TMA, mxfp4 codes by
  cp.async decoded into register MMA operands (``_gl_score_kernel``, see its section below).
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import torch
import triton
import triton.language as tl

from kernel_templates._gluon import (TensorDescriptor, async_copy, async_load, cta_barrier, gl, gluon_available,
                                    gluon_jit, gluon_on_hopper, hopper, mbarrier, tma_load)
from kernel_templates._host import cdiv, next_power_of_2, sm_count
from kernel_templates.nvfp4 import dequantize_mxfp4, mxfp4_tile_to_f32, quantize_mxfp4, ue8m0_to_f32
from tuner import lowering, runtime
from tuner.runtime.env import assumed_target_cc, interpreting, target_cc
from tuner.spec import KernelSpec
from tuner.verify import assert_close

log = logging.getLogger(__name__)
_LOGGED: set[str] = set()  # one-time notices already logged

SOURCE_DEPENDENCIES = ("kernel_templates.nvfp4",)

D_INDEX = 128
PAGE = 64
K_FORMATS = ("fp8", "mxfp4")
BYTES_PER_KEY = {"fp8": 132, "mxfp4": 68}
PROFILES: dict[str, dict[str, Any]] = {
    "dsv32": dict(heads=64, top_k=2048, k_format="fp8"),
    "dsv41-flash": dict(heads=32, top_k=512, k_format="mxfp4"),
}
SMS = 132  # H200: the defaults' SM count (launches read the device's: _host.sm_count)
# Programs an SM of the fused radix launch (RADIX_FUSED), whose row barriers need every
# program resident at once: one 4-warp program an SM. Two would always fit as well (4 warps
# at <= 255 registers and <= 8 KB shared: 2 x 128 x 256 registers fill the 64K register
# file), and the launch-a-pass B=1 512K ran ~6 us faster with 256 programs a row than with
# 128 (H200 run 44); fused with 2 an SM is unmeasured.
RADIX_FUSED_PER_SM = 1
MAX_TOPK = 4096  # the last merge level sorts next_pow2(top_k) 64-bit keys in registers
# default_config: the row top-k up to this context for a top-k up to this size, radix otherwise
# (search_spaces.sparse_mqa.ROW_MAX_CONTEXT: how far the tuner may take it)
ROW_DEFAULT_MAX_CONTEXT = 8192
ROW_DEFAULT_MAX_TOPK = 1024
ROW_DEFAULT_MAX_SPLITS = 32  # the row kernel first sums every split's histogram, 16 a step
ROW_WARPS = 8  # row top-k program: sm_90 107-128 registers, no stack; at 4 warps 255 (Triton 3.6)
_FMT = {"fp8": 0, "mxfp4": 1}
TOPK_ALGOS = ("merge", "radix", "row", "bound")
# Radix top-k state, one int32 row per (sequence, token): the 256-bin histograms of the
# digits (the four bytes of the score's order bits, after 0-2 quarter-binade digits, see
# _radix_digit), then counters: keys in the selected list, in each candidate list and in the
# tie list, the keys still wanted after each digit, and the fused launch's barrier arrivals.
_RS = tl.constexpr(1552)
_CNT_SEL = tl.constexpr(1536)
_CNT_C1, _CNT_C2, _CNT_C3, _CNT_TIE, _CNT_C4, _CNT_C5, _CNT_C1X = (tl.constexpr(1537 + i) for i in range(7))
_REM = tl.constexpr(1544)  # _REM + j: keys still wanted after digit j - 1 (j = 1..6)
_SYNC = tl.constexpr(1551)  # RADIX_FUSED: arrivals at the row's barriers (_row_sync)
_FOLD_DONE = tl.constexpr(1544)  # RADIX_FOLD: MODE 2 programs of the row done (_REM + 0: unused by the picks)
# the radix passes' first digit (RADIX_FIRST config); RADIX_LEAD: the number of quarter-binade
# digits before the four order bytes (_radix_digit); RADIX_SAMPLED: the first placed from a sample
RADIX_FIRST = ("byte", "quarter", "sampled", "sampled_byte")
RADIX_LEAD = {"byte": 0, "quarter": 1, "sampled": 2, "sampled_byte": 1}
RADIX_SAMPLED = ("sampled", "sampled_byte")
RADIX_SAMPLE = tl.constexpr(16)  # "sampled": every 16th key of a row in the first histogram
# bound path: group maxima a step of the bound's histograms holds ([512, 16] compares: 64 a
# thread at 4 warps), maxima a part of the bound launch takes at most (the parts' count a
# power of two, at most BOUND_MAX_PARTS)
BOUND_GMAX_BLOCK = 512
BOUND_PART_MAXIMA = 1024
BOUND_MAX_PARTS = 32
# maxima a program of the bound holds in registers at once (_group_bound's ONE_LOAD): a part
# of the bound launch (4 warps), and every filter program with BOUND_FUSED (8 warps, 16 at
# 8192 maxima: bound_filter_warps); past that, GMAX_BLOCK at a time from memory
BOUND_REG_MAXIMA = 1024
BOUND_REG_MAXIMA_FUSED = 8192


def bound_parts(max_len: int, group: int) -> int:
    """Programs a row of the bound launch (``_bound_threshold_kernel``): parts of at most
    ``BOUND_PART_MAXIMA`` of a full row's group maxima, a power of two up to BOUND_MAX_PARTS."""
    return min(BOUND_MAX_PARTS, next_power_of_2(cdiv(cdiv(max_len, group), BOUND_PART_MAXIMA)))


def bound_gmax_block(per_part: int, fused: bool) -> dict[str, Any]:
    """``GMAX_BLOCK`` and ``ONE_LOAD`` of the bound's programs for at most ``per_part`` maxima
    a program: all of them in registers (one load) up to ``BOUND_REG_MAXIMA`` (fused:
    ``BOUND_REG_MAXIMA_FUSED``), else ``BOUND_GMAX_BLOCK`` at a time."""
    block = max(16, next_power_of_2(max(1, per_part)))
    if block <= (BOUND_REG_MAXIMA_FUSED if fused else BOUND_REG_MAXIMA):
        return dict(GMAX_BLOCK=block, ONE_LOAD=True)
    return dict(GMAX_BLOCK=BOUND_GMAX_BLOCK, ONE_LOAD=False)


def bound_filter_warps(gmax_block: int) -> int:
    """Warps of a ``BOUND_FUSED`` filter program: 8, 16 when it holds 8192 maxima in registers
    (sm_90 compiles: 4096 at 8 warps 123 registers; 8192 at 8 warps spilled). Each such
    program derives the row's bound itself: at dsv32 B=1 512K (8192 maxima) the filter launch
    took 32 us (H200 run 76), where the bound launch in parts and a plain filter take ~10."""
    return 16 if gmax_block > 4096 else 8


def bound_select_cap(top_k: int) -> int:
    """Candidates the bound path's placing ranks in parallel: 2 x next_pow2(top_k) (random
    scores at 64-key groups leave ~k + 15% of a 512K row)."""
    return 2 * next_power_of_2(max(top_k, 1))


_TIE_MAX = 4096  # more keys tied at the k-th score than this: one program selects them (slow, exact)
_ROW_EXP_LO = tl.constexpr(87)  # biased exponent of the lowest binade with bins of its own (2^-40)


# ----------------------------------------------------------------------------- reference


def _dequant_rows(k_rows: torch.Tensor, s_rows: torch.Tensor, k_format: str) -> tuple[torch.Tensor, torch.Tensor]:
    """Gathered cache rows -> (keys [n, 128] float64, per-key scale [n] float64)."""
    if k_format == "fp8":
        return k_rows.view(torch.float8_e4m3fn).double(), s_rows.double()
    return dequantize_mxfp4(k_rows, s_rows).double(), torch.ones(k_rows.shape[0], dtype=torch.float64,
                                                                  device=k_rows.device)


def visible(seq_lens: torch.Tensor, next_n: int) -> torch.Tensor:
    """``[B, next_n]`` keys each query token sees: ``seq_len - next_n + i + 1`` (>= 0)."""
    i = torch.arange(next_n, device=seq_lens.device)
    return (seq_lens.long()[:, None] - next_n + i[None, :] + 1).clamp(min=0)


def topk_of_logits(logits: torch.Tensor, k: int) -> torch.Tensor:
    """The top-k order of the spec on logits ``[..., N]``: descending, lower index first on
    equal scores, -1 where a row has fewer than ``k`` finite (visible) entries."""
    v, i = torch.sort(logits, dim=-1, descending=True, stable=True)
    return torch.where(torch.isfinite(v), i, -1)[..., :k].to(torch.int32)


def reference(q: torch.Tensor, weights: torch.Tensor, k_cache: torch.Tensor, k_scales: torch.Tensor,
              block_table: torch.Tensor, seq_lens: torch.Tensor, *, top_k: int, k_format: str = "fp8",
              return_logits: bool = False) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """KERNELS.md section 3 in float64, one sequence at a time.

    The order is an explicit stable sort of the fp32-rounded scores (descending; equal
    scores keep ascending index order). Returns ``topk_idx [B, next_n, top_k] int32`` and,
    with ``return_logits``, the fp32 logits ``[B, next_n, max_pages * PAGE]`` (-inf where not seen).
    """
    B, T, H, D = q.shape
    page = k_cache.shape[1]
    max_len = block_table.shape[1] * page
    dev = q.device
    idx_out = torch.full((B, T, top_k), -1, dtype=torch.int32, device=dev)
    logits = torch.full((B, T, max_len), float("-inf"), dtype=torch.float32, device=dev)
    vis = visible(seq_lens, T).clamp(max=max_len)
    for b in range(B):
        n = int(vis[b].max()) if T else 0
        if n == 0:
            continue
        pos = torch.arange(n, device=dev)
        pages = block_table[b].long()[pos // page]
        k, ks = _dequant_rows(k_cache[pages, pos % page], k_scales[pages, pos % page], k_format)
        dots = torch.relu(q[b].double() @ k.t())                              # [T, H, n]
        score = ((dots * weights[b].double()[..., None]).sum(1) * ks).float()  # [T, n]
        score = score + 0.0  # -0.0 -> +0.0: one score
        for t in range(T):
            nt = int(vis[b, t])
            if nt == 0:
                continue
            logits[b, t, :nt] = score[t, :nt]
            order = topk_of_logits(score[t, :nt], top_k)
            idx_out[b, t, :order.numel()] = order
    return (idx_out, logits) if return_logits else idx_out


# ----------------------------------------------------------------------------- Triton kernels


@triton.jit
def _order_bits(s):
    """fp32 scores -> uint32, larger = better score (the float order; -0.0 folded into +0.0)."""
    s = tl.where(s == 0.0, 0.0, s)
    bits = s.to(tl.int32, bitcast=True)
    return tl.where(bits < 0, ~bits, bits ^ -2147483648).to(tl.uint32, bitcast=True)


@triton.jit
def _order_key(s, idx):
    """fp32 score + key index -> non-negative int64, larger = better; equal scores rank the
    lower index higher: the score's ``_order_bits`` above the inverted index."""
    return _bits_key(_order_bits(s), idx)


@triton.jit
def _bits_key(ob, idx):
    """``_order_key`` from a score's ``_order_bits`` (the radix filter and the row kernel have them already)."""
    return (ob.to(tl.int64) << 31) | (2147483647 - idx.to(tl.int64))


@triton.jit
def _n_visible(seq_len, t, NEXT_N: tl.constexpr, max_len):
    """Keys query ``t`` of a sequence sees, as ``reference`` counts them: ``seq_len - next_n +
    t + 1``, at least 0 and at most the block table's ``max_len`` (clamped after the causal
    offset). The scoring kernel, the radix passes and the row kernel all take it from here."""
    return tl.minimum(tl.maximum(seq_len - NEXT_N + t + 1, 0), max_len)


@triton.jit
def _select_digit(hist, want):
    """Radix-select step over a 256-bin (or any power-of-two size) digit histogram (of the
    keys matching the prefix so far): the digit of the ``want``-th largest key (-1: fewer keys than ``want``, all
    selected) and how many keys are still wanted from that digit's bin."""
    bins = tl.arange(0, hist.shape[0])
    ge = tl.sum(hist, 0) - tl.cumsum(hist, 0) + hist  # keys with digit >= bin (a forward scan)
    d = tl.max(tl.where(ge >= want, bins, -1), 0)
    return d, want - tl.sum(tl.where(bins > d, hist, 0), 0)


@triton.jit
def _row_digit(o):
    """``_order_bits`` -> the row path's first radix digit (0..255), non-decreasing in the
    score: bins 1..254 are quarter binades of the positive scores in [2^-40, 2^23) (the
    order's top 11 bits: sign, exponent, two mantissa bits), so the bin of the k-th score
    holds a few % of a row, where a plain top byte (sign and 7 exponent bits) held ~15%.
    Lower scores (zero, negatives) share bin 0 and higher ones bin 255: still exact, the
    row kernel then refines over all 32 bits."""
    v = (o >> 21).to(tl.int32)
    return tl.minimum(tl.maximum(v - (1024 + 4 * _ROW_EXP_LO - 1), 0), 255)


@triton.jit
def _radix_digit(key, J: tl.constexpr, RADIX_FIRST: tl.constexpr):
    """Digit ``J`` of a 63-bit ``_order_key`` for the radix passes: 0-2 quarter-binade
    digits (``_row_digit``), then the four bytes of the score's order bits, most
    significant first. ``RADIX_FIRST`` "byte" (no quarter digit): the bytes alone; the top one
    is sign + 7 exponent bits, one binade a bin, and the k-th score's bin holds ~15% of a
    row. "quarter" (one): the k-th score's bin holds a few %, so the first pick appends ~5x
    fewer candidates for the later passes. "sampled" (two): digit 0 is the same quarter
    binades histogrammed over a sample of the row (a safe threshold, see
    ``_radix_pass_kernel``), digit 1 the same again, exactly, over the keys above it.
    "sampled_byte" (one): the sampled threshold, then the bytes at once (the keys above the
    threshold span a few binades, so the top byte's pick leaves ~4x the exact quarter
    digit's candidates, and the select takes one pass fewer).
    Every digit is non-decreasing in the key and the bytes cover all 32 order bits, so the
    selection is exact even when the k-th score falls in a catch-all end bin."""
    LEAD: tl.constexpr = _lead(RADIX_FIRST)
    if J < LEAD:
        return _row_digit((key >> 31).to(tl.uint32))
    else:
        return ((key >> (55 - 8 * (J - LEAD))) & 255).to(tl.int32)


@triton.constexpr_function
def _lead(first):
    """``RADIX_LEAD`` in a kernel (a constexpr of the ``RADIX_FIRST`` string)."""
    return RADIX_LEAD[first]


@triton.constexpr_function
def _sampled(first):
    """Whether ``RADIX_FIRST`` places its first digit from a sample (``RADIX_SAMPLED``)."""
    return first in RADIX_SAMPLED


@triton.jit
def _key_index(keys):
    """The key index of ``_order_key``s as int32; -1 where the key is -1 (no key)."""
    return tl.where(keys >= 0, 2147483647 - (keys & 2147483647), -1).to(tl.int32)


@triton.jit
def _mma(a, b, INTERPRET: tl.constexpr):
    """``tl.dot`` with fp32 accumulation; under Triton 3.9's interpreter bf16 operands
    are multiplied as raw bits, so there they go through fp32 (exact for bf16)."""
    if INTERPRET:
        return tl.dot(a.to(tl.float32), b.to(tl.float32))
    else:
        return tl.dot(a, b)


@triton.jit
def _e2m1x2_to_e4m3_scaled(packed):
    """``[R, C]`` uint8 (two E2M1 codes, low nibble first) -> ``[R, 2C]`` fp8e4nv equal to
    the E2M1 value * 2^-6, exactly: the nibble ``s e1 e0 m`` placed at E4M3 bits 7 and
    4..2 reads as ``2^(e-7) * (1 + m/2)`` (e = 0 lands on E4M3 subnormals, also exact)."""
    p = packed.to(tl.int32) & 0xFF
    lo = ((p & 0x7) << 2) | ((p & 0x8) << 4)
    hi = ((p & 0x70) >> 2) | (p & 0x80)
    R: tl.constexpr = packed.shape[0]
    C: tl.constexpr = packed.shape[1]
    return tl.reshape(tl.join(lo, hi), (R, 2 * C)).to(tl.uint8).to(tl.float8e4nv, bitcast=True)


@triton.jit
def _split4(x):
    """``[R, 4, C]`` -> its four ``[R, C]`` slices along axis 1 (register shuffles only)."""
    a, b = tl.split(tl.reshape(tl.permute(x, (0, 2, 1)), (x.shape[0], x.shape[2], 2, 2)))
    x0, x2 = tl.split(a)
    x1, x3 = tl.split(b)
    return x0, x1, x2, x3


@triton.jit
def _mx_tile_dot(k_ptr, row_k, valid, scl, q0, q1, q2, q3, BLOCK_N: tl.constexpr):
    """Scores of an MXFP4 key tile: the 64 code bytes of each key in one load (16 B per
    thread at 64 keys / 4 warps: 128-bit loads; four per-block loads of 16 B rows were only
    8 B per thread), its 4 scale bytes ``scl [R, 4]`` loaded a tile ahead (``_tile_scales``),
    then per 32-wide scale block an FP8 MMA on the 2^-6-scaled codes times 2^(s+6)."""
    codes = tl.load(k_ptr + row_k[:, None, None] + tl.arange(0, 4)[None, :, None] * 16
                    + tl.arange(0, 16)[None, None, :], mask=valid[:, None, None], other=0)
    c0, c1, c2, c3 = _split4(codes)
    s0, s1, s2, s3 = _split4(tl.reshape(scl, (BLOCK_N, 4, 1)))
    s = tl.dot(_e2m1x2_to_e4m3_scaled(c0), tl.trans(q0)) * (ue8m0_to_f32(s0) * 64.0)
    s += tl.dot(_e2m1x2_to_e4m3_scaled(c1), tl.trans(q1)) * (ue8m0_to_f32(s1) * 64.0)
    s += tl.dot(_e2m1x2_to_e4m3_scaled(c2), tl.trans(q2)) * (ue8m0_to_f32(s2) * 64.0)
    s += tl.dot(_e2m1x2_to_e4m3_scaled(c3), tl.trans(q3)) * (ue8m0_to_f32(s3) * 64.0)
    return s


# Four code bytes (one 32-bit register, $2) -> their low nibbles' E4M3 bytes ($0) and their
# high nibbles' ($1), each the E2M1 value * 2^-6 (``_e2m1_lo_hi_to_e4m3``, ``_gl_mx_operand``).
_E2M1_LO_HI_ASM = tl.constexpr("{\n.reg .b32 y, t;\n"
                               "shl.b32 y, $2, 4;\n"
                               "shr.u32 t, y, 2;\n"
                               "and.b32 t, t, 0x1c1c1c1c;\n"
                               "and.b32 y, y, 0x80808080;\n"
                               "or.b32 $0, y, t;\n"
                               "shr.u32 t, $2, 2;\n"
                               "and.b32 t, t, 0x1c1c1c1c;\n"
                               "and.b32 y, $2, 0x80808080;\n"
                               "or.b32 $1, y, t;\n}")


@triton.jit
def _e2m1_lo_hi_to_e4m3(codes, INTERPRET: tl.constexpr):
    """``[R, C]`` uint8 (two E2M1 codes, low nibble first) -> two ``[R, C]`` uint8 of E4M3
    bits (value * 2^-6, exactly as ``_e2m1x2_to_e4m3_scaled``): the low nibbles' and the high
    nibbles'. On the GPU four code bytes at a time in one 32-bit register (pack=4): y = x << 4,
    lo = (y & 0x80808080) | ((y >> 2) & 0x1c1c1c1c), hi = (x & 0x80808080) | ((x >> 2) & 0x1c1c1c1c)
    (the masks drop what a shift carries across bytes): 7 ALU instructions per 8 codes."""
    if INTERPRET:
        p = codes.to(tl.int32) & 0xFF
        lo = (((p & 0x7) << 2) | ((p & 0x8) << 4)).to(tl.uint8)
        hi = (((p & 0x70) >> 2) | (p & 0x80)).to(tl.uint8)
        return lo, hi
    else:
        return tl.inline_asm_elementwise(_E2M1_LO_HI_ASM, "=r,=r,r", [codes], dtype=(tl.uint8, tl.uint8),
                                         is_pure=True, pack=4)


@triton.jit
def _lo_hi_operand(lo, hi):
    """``[R, 16]`` low- and high-nibble E4M3 bits of one scale block -> the ``[R, 32]`` MMA
    operand in K order (16 low nibbles, then 16 high nibbles): element 2i at k = i, element
    2i + 1 at k = 16 + i (``_mx_q_perm`` orders q the same way)."""
    R: tl.constexpr = lo.shape[0]
    C: tl.constexpr = lo.shape[1]
    return tl.reshape(tl.permute(tl.join(lo, hi), (0, 2, 1)), (R, 2 * C)).to(tl.float8e4nv, bitcast=True)


@triton.jit
def _mx_q_perm(k):
    """Column of q (within a 32-wide scale block) at K position ``k`` of ``_lo_hi_operand``."""
    return tl.where(k < 16, 2 * k, 2 * (k - 16) + 1)


@triton.jit
def _ue8m0_x64(c):
    """int32 UE8M0 codes (0..255) -> fp32 2^(c - 127) * 64, bit-identical to
    ``ue8m0_to_f32(c) * 64.0``: 2^(c - 121) is a normal for c <= 248, inf above, NaN at 255."""
    bits = (tl.minimum(c, 249) + 6) << 23
    return tl.where(c == 255, 0x7FC00000, bits).to(tl.float32, bitcast=True)


@triton.jit
def _mx_tile_dot_word(k_ptr, row_k, valid, sw, q0, q1, q2, q3, BLOCK_N: tl.constexpr,
                      INTERPRET: tl.constexpr):
    """``_mx_tile_dot`` with the decode done a 32-bit word at a time (``MX_WORD_DECODE``):
    each scale block's 16 code bytes become its low-nibble and high-nibble E4M3 bytes with no
    per-element shifts or byte interleaving (the MMA's K order is permuted instead, and q with
    it, once per program); the four UE8M0 scales of a key are one 32-bit load, turned into
    fp32 factors per key (not per element of the score tile). One load per scale block
    (8-byte cp.async, then ldmatrix hands each thread whole 4-byte words of a block, which is
    the register A operand's K layout here): one [R, 4, 16] load split afterwards cost ~76
    byte permutes (PRMT) per tile (sm_90, Triton 3.6). ``sw``: the scale words, loaded a
    tile ahead (``_tile_scales``)."""
    c16 = tl.arange(0, 16)
    l0, h0 = _e2m1_lo_hi_to_e4m3(tl.load(k_ptr + row_k[:, None] + c16[None, :], mask=valid[:, None], other=0),
                                 INTERPRET)
    l1, h1 = _e2m1_lo_hi_to_e4m3(tl.load(k_ptr + row_k[:, None] + 16 + c16[None, :], mask=valid[:, None],
                                         other=0), INTERPRET)
    l2, h2 = _e2m1_lo_hi_to_e4m3(tl.load(k_ptr + row_k[:, None] + 32 + c16[None, :], mask=valid[:, None],
                                         other=0), INTERPRET)
    l3, h3 = _e2m1_lo_hi_to_e4m3(tl.load(k_ptr + row_k[:, None] + 48 + c16[None, :], mask=valid[:, None],
                                         other=0), INTERPRET)
    f0 = _ue8m0_x64(sw & 0xFF)
    f1 = _ue8m0_x64((sw >> 8) & 0xFF)
    f2 = _ue8m0_x64((sw >> 16) & 0xFF)
    f3 = _ue8m0_x64((sw >> 24) & 0xFF)
    s = tl.dot(_lo_hi_operand(l0, h0), tl.trans(q0)) * f0[:, None]
    s += tl.dot(_lo_hi_operand(l1, h1), tl.trans(q1)) * f1[:, None]
    s += tl.dot(_lo_hi_operand(l2, h2), tl.trans(q2)) * f2[:, None]
    s += tl.dot(_lo_hi_operand(l3, h3), tl.trans(q3)) * f3[:, None]
    return s


@triton.jit
def _kth_key(base, stride_l, cnt_ptr, n_lists, k, BLOCK: tl.constexpr):
    """Exact k-th largest of the keys in lists ``base + l * stride_l`` (``cnt_ptr[l]`` keys
    each, l < n_lists; at least k keys in all): radix select from the top, 8 bits a pass,
    streaming the lists through one 256-bin histogram per pass."""
    bins = tl.arange(0, 256)
    offs = tl.arange(0, BLOCK)
    prefix = tl.full([], 0, tl.int64)
    rem = k
    for p in range(8):  # a loop, not unrolled: unrolled, ptxas spilled 12-24 B in the merge kernel
        SHIFT = 56 - 8 * p
        hist = tl.zeros([256], tl.int32)
        for li in range(n_lists):
            n = tl.load(cnt_ptr + li)
            for o in range(0, n, BLOCK):
                m = o + offs < n
                key = tl.load(base + li * stride_l + o + offs, mask=m, other=-1)
                if p > 0:
                    m = m & ((key >> (SHIFT + 8)) == (prefix >> (SHIFT + 8)))
                hist += tl.histogram(((key >> SHIFT) & 255).to(tl.int32), 256, mask=m)
        # keys (matching the prefix) with digit >= bin; a forward scan (no reverse=True scan).
        # Inline, not _select_digit: through the helper ptxas spills a word in the merge kernel (sm_90, Triton 3.6)
        ge = tl.sum(hist, 0) - tl.cumsum(hist, 0) + hist
        d = tl.max(tl.where(ge >= rem, bins, -1), 0)
        rem = rem - tl.sum(tl.where(bins > d, hist, 0), 0)
        prefix = prefix | (d.to(tl.int64) << SHIFT)
    return prefix


@triton.jit
def _compact(src, stride_l, cnt_ptr, n_lists, kth, dst, BLOCK: tl.constexpr):
    """Copy the keys >= kth of the lists densely to ``dst`` (in place is safe: every key
    moves down, and a block's stores wait on its cumsum, i.e. on all its loads)."""
    offs = tl.arange(0, BLOCK)
    oc = 0
    for li in range(n_lists):
        n = tl.load(cnt_ptr + li)
        for o in range(0, n, BLOCK):
            m = o + offs < n
            key = tl.load(src + li * stride_l + o + offs, mask=m, other=-1)
            keep = m & (key >= kth)
            kk = keep.to(tl.int32)
            tl.store(dst + oc + tl.cumsum(kk, 0) - 1, key, mask=keep)
            oc += tl.sum(kk, 0)
    return oc


@triton.jit
def _prune_lists(cand_ptr, cnt_ptr, thr_ptr, list_base, cnt, thr, tok, b, top_k, limit, NEXT_N: tl.constexpr,
                 CAP: tl.constexpr, SELECT_BLOCK: tl.constexpr, SHARE_THRESHOLD: tl.constexpr):
    """Prune every token's list holding more than ``limit`` keys to its ``top_k`` best."""
    for t in tl.static_range(NEXT_N):
        c_t = tl.sum(tl.where(tok == t, cnt, 0), 0)
        if c_t > limit:
            lb = tl.sum(tl.where(tok == t, list_base, 0), 0)
            tl.store(cnt_ptr + lb // CAP, c_t)
            tl.debug_barrier()  # the count and every appended key visible to all threads
            kth = _kth_key(cand_ptr + lb, CAP, cnt_ptr + lb // CAP, 1, top_k, SELECT_BLOCK)
            kept = _compact(cand_ptr + lb, CAP, cnt_ptr + lb // CAP, 1, kth, cand_ptr + lb, SELECT_BLOCK)
            tl.debug_barrier()
            cnt = tl.where(tok == t, kept, cnt)  # top_k: the keys are distinct
            thr = tl.where(tok == t, kth, thr)
            if SHARE_THRESHOLD:
                tl.atomic_max(thr_ptr + b * NEXT_N + t, kth)
    return cnt, thr


@triton.jit
def _tile_rows(bt_row, n0, offs_n, g1, stride_kp, stride_ks, stride_sp, stride_ss, PAGE: tl.constexpr,
               BLOCK_N: tl.constexpr):
    """Row offsets (keys, scales) and validity of the scoring tile at ``n0`` (keys before ``g1``)."""
    idx = n0 + offs_n
    valid = idx < g1
    if BLOCK_N <= PAGE:
        page = tl.load(bt_row + n0 // PAGE, mask=n0 < g1, other=0).to(tl.int64)  # BLOCK_N | PAGE: one page a tile
        slot = n0 % PAGE + offs_n
    else:
        page = tl.load(bt_row + idx // PAGE, mask=valid, other=0).to(tl.int64)
        slot = idx % PAGE
    return page * stride_kp + slot * stride_ks, page * stride_sp + slot * stride_ss, valid


@triton.jit
def _tile_scales(ks_ptr, row_s, valid, K_FORMAT: tl.constexpr, MX_FP8_DOT: tl.constexpr,
                 MX_WORD_DECODE: tl.constexpr):
    """The key scales of a scoring tile, in the form its path takes them: fp8 keys their
    fp32 scale ``[BLOCK_N]``; mxfp4 keys their four UE8M0 bytes, as one int32 word
    (``MX_WORD_DECODE``) or ``[BLOCK_N, 4]`` uint8. The scoring loop loads them a tile
    ahead: the pipeliner prefetches only what feeds the MMA (the key tile, its page), and a
    scale loaded where it is used left its whole memory latency exposed every tile (H200
    run 77, ncu of dsv32 B=1 512K: 31% of the stall samples on the multiply by the scale).
    The prefetch moved those stalls but not the time (run 78: the scoring stayed ~29 us)."""
    if K_FORMAT == 0:
        return tl.load(ks_ptr + row_s, mask=valid, other=0.0)
    elif MX_FP8_DOT and MX_WORD_DECODE:
        return tl.load((ks_ptr + row_s).to(tl.pointer_type(tl.int32)), mask=valid, other=0x7F7F7F7F)
    else:
        return tl.load(ks_ptr + row_s[:, None] + tl.arange(0, 4)[None, :], mask=valid[:, None], other=127)


@triton.jit
def _score_kernel(q_ptr, w_ptr, k_ptr, ks_ptr, bt_ptr, seqlen_ptr, logits_ptr, cand_ptr, cnt_ptr, thr_ptr, rs_ptr,
                  gmax_ptr, H, top_k, max_len,
                  stride_qb, stride_qt, stride_qh, stride_wb, stride_wt, stride_kp, stride_ks, stride_sp,
                  stride_ss, stride_btb, stride_lb, stride_lt, stride_gm,
                  D: tl.constexpr, PAGE: tl.constexpr, K_FORMAT: tl.constexpr, NEXT_N: tl.constexpr,
                  TP: tl.constexpr, HP: tl.constexpr, LIST_UNIT: tl.constexpr, DO_TOPK: tl.constexpr,
                  WRITE_LOGITS: tl.constexpr,
                  BLOCK_N: tl.constexpr, NUM_SPLITS: tl.constexpr, CAND_MULT: tl.constexpr,
                  SELECT_BLOCK: tl.constexpr, SHARE_THRESHOLD: tl.constexpr, MX_FP8_DOT: tl.constexpr,
                  TOPK_ALGO: tl.constexpr, INTERPRET: tl.constexpr, MX_WORD_DECODE: tl.constexpr = False,
                  BOUND_GROUP: tl.constexpr = 64, PDL: tl.constexpr = False):
    if PDL:
        # LAUNCH_PDL: the top-k launches after this one may start their programs now (each
        # waits for this launch to finish before it reads anything: _pdl_enter)
        tl.extra.cuda.gdc_launch_dependents()
    b = tl.program_id(0)
    split = tl.program_id(1)
    if TOPK_ALGO == "radix" or TOPK_ALGO == "bound":
        # the radix top-k's per-row histograms and counters start at zero (the passes run after this launch)
        if split == 0:
            zo = tl.arange(0, 2048)
            for t in tl.static_range(NEXT_N):
                tl.store(rs_ptr + (b * NEXT_N + t) * _RS + zo, tl.zeros([2048], tl.int32), mask=zo < _RS)
    QR: tl.constexpr = TP * HP
    CAP: tl.constexpr = CAND_MULT * LIST_UNIT
    GROUP_KEYS: tl.constexpr = ((CAP - LIST_UNIT) // BLOCK_N) * BLOCK_N  # appended at most between prunes
    d = tl.arange(0, D)
    offs_n = tl.arange(0, BLOCK_N)
    tok = tl.arange(0, TP)
    # query rows (token, head) of this step, padded to TP x HP with zero q and zero weight
    r = tl.arange(0, QR)
    rt = r // HP
    rh = r % HP
    rmask = (rt < NEXT_N) & (rh < H)
    q_rows = q_ptr + b.to(tl.int64) * stride_qb + rt * stride_qt + rh * stride_qh
    w = tl.load(w_ptr + b.to(tl.int64) * stride_wb + rt * stride_wt + rh, mask=rmask, other=0.0)
    if K_FORMAT == 1 and MX_FP8_DOT:
        # one [QR, 32] slice per scale block, kept in registers for the whole scan
        d32 = tl.arange(0, 32)
        if MX_WORD_DECODE:
            d32 = _mx_q_perm(d32)  # the K order of _lo_hi_operand
        q0 = tl.load(q_rows[:, None] + d32[None, :], mask=rmask[:, None], other=0).to(tl.float8e4nv, bitcast=True)
        q1 = tl.load(q_rows[:, None] + 32 + d32[None, :], mask=rmask[:, None], other=0).to(tl.float8e4nv,
                                                                                          bitcast=True)
        q2 = tl.load(q_rows[:, None] + 64 + d32[None, :], mask=rmask[:, None], other=0).to(tl.float8e4nv,
                                                                                          bitcast=True)
        q3 = tl.load(q_rows[:, None] + 96 + d32[None, :], mask=rmask[:, None], other=0).to(tl.float8e4nv,
                                                                                          bitcast=True)
    else:
        q = tl.load(q_rows[:, None] + d[None, :], mask=rmask[:, None], other=0).to(tl.float8e4nv, bitcast=True)
        if K_FORMAT == 1:
            q = q.to(tl.bfloat16)  # exact: every E4M3 value is a BF16 value
    # keys past the block table's capacity do not exist (as in the reference): each token's
    # visible count is clamped to it (after the causal offset, as the reference does), and so
    # is the scored range, so a seq_len beyond it never writes past the row of scores
    seq_raw = tl.load(seqlen_ptr + b)
    seq_len = tl.minimum(seq_raw, max_len)
    n_vis = _n_visible(seq_raw, tok, NEXT_N, max_len)  # [TP] keys each token sees
    n_vis = tl.where(tok < NEXT_N, n_vis, 0)
    chunk = tl.cdiv(tl.cdiv(seq_len, NUM_SPLITS), BLOCK_N) * BLOCK_N
    start = split * chunk
    end = tl.minimum(start + chunk, seq_len)
    bt_row = bt_ptr + b.to(tl.int64) * stride_btb
    # per token: candidate list start (in keys), count, threshold (a lower bound of the k-th key)
    list_base = ((b * NEXT_N + tok).to(tl.int64) * NUM_SPLITS + split) * CAP
    cnt = tl.zeros([TP], tl.int32)
    thr = tl.zeros([TP], tl.int64)
    if TOPK_ALGO == "row":
        # this split's histogram of the row kernel's first digit, per token (bins t*256 + digit)
        row_hist = tl.zeros([TP * 256], tl.int32)
    if DO_TOPK:
        group = GROUP_KEYS
    else:
        # No lists to prune: one group, so the tile loop (the one the pipeliner prefetches
        # across) runs over the whole chunk. With GROUP_KEYS it restarted every
        # LIST_UNIT keys: every tile at top_k = 0 (64-key groups), every 32 at top-2048.
        group = tl.maximum(end - start, 1)
    for g0 in range(start, end, group):
        if DO_TOPK and SHARE_THRESHOLD:
            # The other splits' bound, read by a scalar atomic: one thread reads, every thread
            # gets that value. A plain (volatile) load is one read per thread; with other
            # programs raising the bound meanwhile, threads holding copies of the same tile
            # element then disagreed on which keys to append, and the lists got repeats and
            # holes (seen on the H200, never in the interpreter).
            for t in tl.static_range(NEXT_N):
                shared = tl.atomic_max(thr_ptr + b * NEXT_N + t, tl.full([], 0, tl.int64))
                thr = tl.where(tok == t, tl.maximum(thr, shared), thr)
        g1 = tl.minimum(g0 + group, end)
        _, row_s, valid = _tile_rows(bt_row, g0, offs_n, g1, stride_kp, stride_ks, stride_sp, stride_ss, PAGE, BLOCK_N)
        scl_next = _tile_scales(ks_ptr, row_s, valid, K_FORMAT, MX_FP8_DOT, MX_WORD_DECODE)
        for n0 in range(g0, g1, BLOCK_N):
            idx = n0 + offs_n
            row_k, _, valid = _tile_rows(bt_row, n0, offs_n, g1, stride_kp, stride_ks, stride_sp, stride_ss, PAGE,
                                         BLOCK_N)
            scl = scl_next  # this tile's scales, loaded an iteration ago; the next tile's now
            _, row_s_next, valid_next = _tile_rows(bt_row, n0 + BLOCK_N, offs_n, g1, stride_kp, stride_ks, stride_sp,
                                                   stride_ss, PAGE, BLOCK_N)
            scl_next = _tile_scales(ks_ptr, row_s_next, valid_next, K_FORMAT, MX_FP8_DOT, MX_WORD_DECODE)
            if K_FORMAT == 0:
                kt = tl.load(k_ptr + row_k[:, None] + d[None, :], mask=valid[:, None], other=0)
                s = tl.dot(kt.to(tl.float8e4nv, bitcast=True), tl.trans(q))  # [BLOCK_N, QR]
                ksc = scl
            elif MX_FP8_DOT and MX_WORD_DECODE:
                s = _mx_tile_dot_word(k_ptr, row_k, valid, scl, q0, q1, q2, q3, BLOCK_N, INTERPRET)
            elif MX_FP8_DOT:
                s = _mx_tile_dot(k_ptr, row_k, valid, scl, q0, q1, q2, q3, BLOCK_N)
            else:
                codes = tl.load(k_ptr + row_k[:, None] + tl.arange(0, D // 2)[None, :], mask=valid[:, None],
                                other=0)
                kt = mxfp4_tile_to_f32(codes, scl).to(tl.bfloat16)  # exact
                s = _mma(kt, tl.trans(q), INTERPRET)
            s = tl.maximum(s, 0.0) * w[None, :]
            sc = tl.sum(tl.reshape(s, (BLOCK_N, TP, HP)), axis=2)  # [BLOCK_N, TP]: per-token head sum
            if K_FORMAT == 0:
                sc = sc * ksc[:, None]
            vis = valid[:, None] & (idx[:, None] < n_vis[None, :])
            if WRITE_LOGITS:
                lp = logits_ptr + b.to(tl.int64) * stride_lb + tok[None, :] * stride_lt + idx[:, None]
                tl.store(lp, sc, mask=vis)
            if TOPK_ALGO == "bound":
                # the max of each BOUND_GROUP keys a token sees (groups with one visible key or more)
                gmx = tl.max(tl.reshape(tl.where(vis, sc, float("-inf")), (BLOCK_N // BOUND_GROUP, BOUND_GROUP, TP)),
                             axis=1)
                gi = n0 // BOUND_GROUP + tl.arange(0, BLOCK_N // BOUND_GROUP)
                gp = gmax_ptr + (b * NEXT_N + tok[None, :]).to(tl.int64) * stride_gm + gi[:, None]
                tl.store(gp, gmx, mask=gi[:, None] * BOUND_GROUP < n_vis[None, :])
            if TOPK_ALGO == "row":
                dig = _row_digit(_order_bits(sc)) + tok[None, :] * 256
                row_hist += tl.histogram(tl.reshape(dig, (BLOCK_N * TP,)), TP * 256,
                                         mask=tl.reshape(vis, (BLOCK_N * TP,)))
            if DO_TOPK:
                key = _order_key(sc, idx[:, None])
                ok = vis & (key >= thr[None, :])
                ok32 = ok.to(tl.int32)
                pos = cnt[None, :] + tl.cumsum(ok32, 0) - 1
                tl.store(cand_ptr + list_base[None, :] + pos, key, mask=ok)
                cnt += tl.sum(ok32, 0)
        if DO_TOPK:
            cnt, thr = _prune_lists(cand_ptr, cnt_ptr, thr_ptr, list_base, cnt, thr, tok, b, top_k,
                                    CAP - GROUP_KEYS, NEXT_N, CAP, SELECT_BLOCK, SHARE_THRESHOLD)
    if DO_TOPK:
        # leave at most top_k keys per list for the merge
        cnt, thr = _prune_lists(cand_ptr, cnt_ptr, thr_ptr, list_base, cnt, thr, tok, b, top_k, top_k,
                                NEXT_N, CAP, SELECT_BLOCK, SHARE_THRESHOLD)
        tl.store(cnt_ptr + list_base // CAP, cnt, mask=tok < NEXT_N)
    if TOPK_ALGO == "row":
        # written whole by every split, empty ones too: no zeroing launch, nothing to reset for a graph replay
        hb = tl.arange(0, TP * 256)
        tl.store(rs_ptr + ((b * NEXT_N + hb // 256) * NUM_SPLITS + split) * 256 + hb % 256, row_hist,
                 mask=hb // 256 < NEXT_N)


# ----------------------------------------------------------------------------- Gluon scoring kernel (sm_90)
#
# ``SCORE_GLUON``: the scoring of fp8 or mxfp4 keys for one query token (next_n = 1) on the radix /
# bound paths (and ``top_k=0`` with the logits), by a Gluon kernel with explicit layouts.
# Every per-key value lives in the layout the head sum leaves (``SliceLayout(1, MMA)``: a
# thread holds two keys' scores, replicated over the four lanes of a quad): the key scales
# are loaded, the scores stored and the group max's in-warp steps done in it, where the
# Triton kernel's layout passes put them through shared memory.
# The key tiles (one page, 8 KB) come by TMA into a ring of ``num_stages`` slots completed by
# mbarriers: TMA writes and wgmma reads are both in the async proxy, so the loop needs no
# proxy fence. (A first form with cp.async into the ring needed two ``fence.proxy.async`` a
# tile, each a ``MEMBAR.ALL.CTA`` waiting for every load in flight: 35.9 us against the
# Triton kernel's 26.6 at dsv32 B=1 512K, H200 run 82; with ldmatrix A operands instead,
# as the Triton kernel does, no fence and 26.6 us, run 83.) A tile: a CTA barrier (every
# warp done with the slot refilled next; Triton's membar pass adds more around the mbarrier
# expect and the group max's scratch: 4-5 ``bar.sync`` a tile in all), the TMA of the tile
# ``num_stages - 1`` ahead, the block-table entry of the one after, the scales two tiles
# ahead, the wait on the tile's mbarrier, one 64 x HP x 128 FP8 wgmma (keys on M, query
# heads on N, q in shared memory once a program), the epilogue; the group max is the only
# cross-warp step. mxfp4 keys (``MX``): the codes come by cp.async (a ring of four 64 x
# 16-byte buffers, one a scale block), each block is read by ldmatrix straight into wgmma's
# register A layout and decoded there to E4M3 (``_gl_mx_operand``), one 64 x HP x 32 FP8
# wgmma a block, and the four block products are summed with their UE8M0 factors. Where it
# cannot score a call (``score_gluon_error``: not sm_90, next_n > 1, a strided cache, ...)
# the launcher runs the Triton kernel with the same config.
# Not runnable under the interpreter: verified on the GPU (tests marked gpu, and the
# tuner's check of every config against the reference).

GL_SCORE_BLOCK_N = 64  # wgmma's M: one warpgroup
GL_SCORE_MAX_HP = 128  # query rows (heads, padded): the accumulator is HP / 2 registers a thread


def score_gluon_error(config: dict[str, Any], k_format: str, next_n: int, heads: int, page: int, top_k: int,
                      algo: str, return_logits: bool = True, contiguous: bool = True,
                      compile_only: bool = False) -> str | None:
    """Why ``SCORE_GLUON`` cannot score this call (None: it can); the launcher then scores
    with the Triton kernel. ``compile_only``: judged for another machine (lowering under
    ``assume_target``), so the interpreter being on here does not matter."""
    if not gluon_available(compile_only=compile_only):
        return "SCORE_GLUON needs Triton's Gluon (triton >= 3.5) and does not run under TRITON_INTERPRET"
    if not 90 <= target_cc() < 100:
        return "SCORE_GLUON runs wgmma and TMA as sm_90 has them: not on this target"
    if next_n != 1:
        return f"SCORE_GLUON scores one query token (got next_n={next_n})"
    if config["BLOCK_N"] != GL_SCORE_BLOCK_N or page % GL_SCORE_BLOCK_N:
        return f"SCORE_GLUON needs BLOCK_N={GL_SCORE_BLOCK_N} and a page size divisible by it"
    if int(config["num_warps"]) != 4 or int(config["num_stages"]) < 2:
        return "SCORE_GLUON runs one warpgroup (num_warps=4) and a ring of num_stages >= 2 key tiles"
    if max(next_power_of_2(heads), 16) > GL_SCORE_MAX_HP:
        return f"SCORE_GLUON takes at most {GL_SCORE_MAX_HP} heads, got {heads}"
    if top_k > 0 and algo not in ("radix", "bound"):
        return f"SCORE_GLUON writes the scores for the radix / bound top-k paths, not {algo!r}"
    if top_k == 0 and not return_logits:
        return "SCORE_GLUON always writes the scores: a call asking for neither indices nor logits has none to write"
    if not contiguous:
        return "SCORE_GLUON reads the key cache through a TMA descriptor of its rows: it must be contiguous"
    return None


@gluon_jit
def _gl_page(bt_row, start, j, n_tiles, PAGE: gl.constexpr):
    """Block-table entry of the program's tile ``j`` (0 past its last tile)."""
    return gl.load(bt_row + (start + j * 64) // PAGE, mask=j < n_tiles, other=0).to(gl.int64)


@gluon_jit
def _gl_tma_keys(k_desc, kbuf, bars, page, start, j, n_tiles, STAGES: gl.constexpr, PAGE: gl.constexpr):
    """TMA of the program's key tile ``j`` (if it has one) into its ring slot, completing on its mbarrier."""
    n0 = start + j * 64
    bar = bars.index(j % STAGES)
    ok = j < n_tiles
    mbarrier.expect(bar, 64 * 128, ok)
    tma_load(k_desc, [(page * PAGE + n0 % PAGE).to(gl.int32), 0], bar, kbuf.index(j % STAGES), ok)


@gluon_jit
def _gl_cp_codes(k_ptr, kb0, kb1, kb2, kb3, coff, page, start, j, n_tiles, stride_kp, stride_ks,
                 STAGES: gl.constexpr, PAGE: gl.constexpr):
    """cp.async of the program's mxfp4 code tile ``j`` (if it has one): its four 64 x 16-byte
    scale blocks into their buffers' ring slot, one commit group. cp.async, not TMA: the codes
    are read by generic loads (``_gl_mx_operand``), and a TMA refill of a slot read that way
    made Triton put a proxy fence (a ``MEMBAR.ALL.CTA``, waiting for every load in flight)
    and a barrier a copy in the loop."""
    n0 = start + j * 64
    at = k_ptr + page * stride_kp + (n0 % PAGE) * stride_ks + coff
    ok = j < n_tiles
    slot = j % STAGES
    async_load(kb0.index(slot), at, mask=ok)
    async_load(kb1.index(slot), at + 16, mask=ok)
    async_load(kb2.index(slot), at + 32, mask=ok)
    async_load(kb3.index(slot), at + 48, mask=ok)
    async_copy.commit_group()


@gluon_jit
def _gl_scales(ks_ptr, bt_row, start, j, n_tiles, end, rows, stride_sp, stride_ss, PAGE: gl.constexpr,
               MX: gl.constexpr):
    """The key scales of tile ``j`` in the head sum's layout: fp8 keys their fp32 scale (0 past
    ``end``), mxfp4 keys their four UE8M0 bytes as one int32 word (2^0 each past ``end``)."""
    n0 = start + j * 64
    page = _gl_page(bt_row, start, j, n_tiles, PAGE)
    at = ks_ptr + page * stride_sp + (n0 % PAGE + rows) * stride_ss
    if MX:
        return gl.load(at.to(gl.pointer_type(gl.int32)), mask=n0 + rows < end, other=0x7F7F7F7F)
    else:
        return gl.load(at, mask=n0 + rows < end, other=0.0)


@gluon_jit
def _gl_mx_operand(buf, CL: gl.constexpr, AL: gl.constexpr):
    """One scale block of an mxfp4 key tile, ``buf [64, 16]`` code bytes in shared memory ->
    wgmma's register A operand ``[64, 32]`` FP8 (the E2M1 values * 2^-6, exactly) in the K
    order of ``_lo_hi_operand``: the 16 low nibbles, then the 16 high ones (q is stored the
    same way). ``CL`` gives each thread one 4-byte word of two rows 8 apart, the word wgmma's
    A layout wants there, so the operand needs no data movement after the decode."""
    lo, hi = gl.inline_asm_elementwise(_E2M1_LO_HI_ASM, "=r,=r,r", [buf.load(CL)], dtype=(gl.uint8, gl.uint8),
                                       is_pure=True, pack=4)
    a = gl.reshape(gl.permute(gl.join(lo, hi), (0, 2, 1)), [64, 32]).to(gl.float8e4nv, bitcast=True)
    return gl.convert_layout(a, AL)


@gluon_jit
def _gl_score_kernel(q_ptr, w_ptr, k_src, ks_ptr, bt_ptr, seqlen_ptr, logits_ptr, rs_ptr, gmax_ptr, H, max_len,
                     stride_qb, stride_qh, stride_wb, stride_kp, stride_ks, stride_sp, stride_ss, stride_btb,
                     stride_lb, stride_gm,
                     HP: gl.constexpr, PAGE: gl.constexpr, NUM_SPLITS: gl.constexpr, STAGES: gl.constexpr,
                     ZERO_RS: gl.constexpr, RS: gl.constexpr, GMAX: gl.constexpr, BOUND_GROUP: gl.constexpr,
                     PDL: gl.constexpr = False, MX: gl.constexpr = False, SAMPLE: gl.constexpr = False):
    """Scores of one (sequence, split) chunk of keys for one query token (see above). fp8 keys:
    ``k_src`` is a TMA descriptor of the key cache as ``[pages * PAGE, 128]`` rows, boxes of one
    64-key tile. mxfp4 keys (``MX``): ``k_src`` is the code cache itself (strides ``stride_kp``,
    ``stride_ks``); each tile comes by cp.async as four 64 x 16-byte scale blocks, each block is
    decoded to a register A operand (``_gl_mx_operand``), one FP8 wgmma a block against q's
    block (stored in the same K order), and the four products are summed with their scale
    factors before the ReLU.

    ``SAMPLE`` (``SCORE_SAMPLE``): also the radix passes' sampled digit-0 histogram (MODE 1:
    ``_row_digit`` of every ``RADIX_SAMPLE``-th key of the row), added atomically into the
    row state, which the launcher zero-fills before this launch (no ``ZERO_RS``: the row's
    other programs would add before its split 0 zeroed it)."""
    BLOCK_N: gl.constexpr = 64
    D: gl.constexpr = 128
    MMA: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, HP, 32])
    ROW: gl.constexpr = gl.SliceLayout(1, MMA)
    COL: gl.constexpr = gl.SliceLayout(0, MMA)
    KS: gl.constexpr = gl.NVMMASharedLayout(swizzle_byte_width=128, element_bitwidth=8, rank=2)
    LD: gl.constexpr = gl.BlockedLayout([1, 16], [4, 8], [4, 1], [1, 0])
    ZL: gl.constexpr = gl.BlockedLayout([4], [32], [4], [0])
    # mxfp4: the code blocks (unswizzled 16-byte rows), their copies' layout (8 bytes a thread), q's
    # scale blocks, the decode's layout
    KC: gl.constexpr = gl.NVMMASharedLayout(swizzle_byte_width=0, element_bitwidth=8, rank=2)
    CP: gl.constexpr = gl.BlockedLayout([1, 8], [16, 2], [4, 1], [1, 0])
    KQ: gl.constexpr = gl.NVMMASharedLayout(swizzle_byte_width=32, element_bitwidth=8, rank=2)
    LQ: gl.constexpr = gl.BlockedLayout([1, 8], [8, 4], [4, 1], [1, 0])
    CL: gl.constexpr = gl.DistributedLinearLayout(reg_bases=[[0, 1], [0, 2], [8, 0]],
                                                  lane_bases=[[0, 4], [0, 8], [1, 0], [2, 0], [4, 0]],
                                                  warp_bases=[[16, 0], [32, 0]], block_bases=[], shape=[64, 16])
    AL: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=MMA, k_width=4)
    if PDL:
        tl.extra.cuda.gdc_launch_dependents()
    b = gl.program_id(0)
    split = gl.program_id(1)
    # the start is a chain of dependent loads (seq_len, the block table, the first key tiles): q and the
    # weights are requested first and stored to shared memory only after the first TMA copies are issued
    if MX:
        hq = gl.arange(0, HP, layout=gl.SliceLayout(1, LQ))
        kq = gl.arange(0, 32, layout=gl.SliceLayout(0, LQ))
        kcol = _mx_q_perm(kq)  # q column at K position kq
        qrow = q_ptr + b.to(gl.int64) * stride_qb + hq[:, None] * stride_qh + kcol[None, :]
        qm = (hq < H)[:, None]
        qv0 = gl.load(qrow, mask=qm, other=0.0)
        qv1 = gl.load(qrow + 32, mask=qm, other=0.0)
        qv2 = gl.load(qrow + 64, mask=qm, other=0.0)
        qv3 = gl.load(qrow + 96, mask=qm, other=0.0)
    else:
        hq = gl.arange(0, HP, layout=gl.SliceLayout(1, LD))
        dq = gl.arange(0, D, layout=gl.SliceLayout(0, LD))
        qv = gl.load(q_ptr + b.to(gl.int64) * stride_qb + hq[:, None] * stride_qh + dq[None, :],
                     mask=(hq < H)[:, None], other=0.0)
    hw = gl.arange(0, HP, layout=COL)
    w = gl.load(w_ptr + b.to(gl.int64) * stride_wb + hw, mask=hw < H, other=0.0)
    seq_len = gl.minimum(gl.maximum(gl.load(seqlen_ptr + b), 0), max_len)
    if ZERO_RS:
        if split == 0:
            zo = gl.arange(0, 2048, layout=ZL)
            gl.store(rs_ptr + b * RS + zo, gl.zeros([2048], gl.int32, ZL), mask=zo < RS)
    chunk = gl.cdiv(gl.cdiv(seq_len, NUM_SPLITS), BLOCK_N) * BLOCK_N
    start = split * chunk
    end = gl.minimum(start + chunk, seq_len)
    n_tiles = gl.cdiv(gl.maximum(end - start, 0), BLOCK_N)
    bt_row = bt_ptr + b.to(gl.int64) * stride_btb

    if MX:
        kb0 = gl.allocate_shared_memory(gl.uint8, [STAGES, BLOCK_N, 16], KC)
        kb1 = gl.allocate_shared_memory(gl.uint8, [STAGES, BLOCK_N, 16], KC)
        kb2 = gl.allocate_shared_memory(gl.uint8, [STAGES, BLOCK_N, 16], KC)
        kb3 = gl.allocate_shared_memory(gl.uint8, [STAGES, BLOCK_N, 16], KC)
        coff = (gl.arange(0, BLOCK_N, layout=gl.SliceLayout(1, CP))[:, None] * stride_ks
                + gl.arange(0, 16, layout=gl.SliceLayout(0, CP))[None, :])
        for j in gl.static_range(STAGES - 1):
            _gl_cp_codes(k_src, kb0, kb1, kb2, kb3, coff, _gl_page(bt_row, start, j, n_tiles, PAGE), start, j,
                         n_tiles, stride_kp, stride_ks, STAGES, PAGE)
    else:
        bars = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
        for s in gl.static_range(STAGES):
            mbarrier.init(bars.index(s), count=1)
        kbuf = gl.allocate_shared_memory(gl.float8e4nv, [STAGES, BLOCK_N, D], KS)
        hopper.fence_async_shared()  # the barrier inits, before the TMA copies complete on them
        cta_barrier()
        for j in gl.static_range(STAGES - 1):
            _gl_tma_keys(k_src, kbuf, bars, _gl_page(bt_row, start, j, n_tiles, PAGE), start, j, n_tiles, STAGES,
                         PAGE)
    page_next = _gl_page(bt_row, start, STAGES - 1, n_tiles, PAGE)
    rows = gl.arange(0, BLOCK_N, layout=ROW)
    scl = _gl_scales(ks_ptr, bt_row, start, 0, n_tiles, end, rows, stride_sp, stride_ss, PAGE, MX)
    scl_next = _gl_scales(ks_ptr, bt_row, start, 1, n_tiles, end, rows, stride_sp, stride_ss, PAGE, MX)
    if MX:
        q_smem = gl.allocate_shared_memory(gl.float8e4nv, [4, HP, 32], KQ)
        q_smem.index(0).store(qv0)
        q_smem.index(1).store(qv1)
        q_smem.index(2).store(qv2)
        q_smem.index(3).store(qv3)
    else:
        q_smem = gl.allocate_shared_memory(gl.float8e4nv, [HP, D], KS, qv)
    hopper.fence_async_shared()  # q's generic stores, before the wgmma reads them
    cta_barrier()
    zero = gl.zeros([BLOCK_N, HP], gl.float32, MMA)
    lrow = logits_ptr + b.to(gl.int64) * stride_lb
    grow = gmax_ptr + b.to(gl.int64) * stride_gm
    NG: gl.constexpr = BLOCK_N // BOUND_GROUP
    gcol = gl.arange(0, NG, layout=COL)
    for i in range(n_tiles):
        cta_barrier()  # every warp's wgmma (mxfp4: code loads) of tile i - 1 is done: its slot may be refilled
        if MX:
            _gl_cp_codes(k_src, kb0, kb1, kb2, kb3, coff, page_next, start, i + STAGES - 1, n_tiles, stride_kp,
                         stride_ks, STAGES, PAGE)
        else:
            _gl_tma_keys(k_src, kbuf, bars, page_next, start, i + STAGES - 1, n_tiles, STAGES, PAGE)
        page_next = _gl_page(bt_row, start, i + STAGES, n_tiles, PAGE)
        scl_after = _gl_scales(ks_ptr, bt_row, start, i + 2, n_tiles, end, rows, stride_sp, stride_ss, PAGE, MX)
        if MX:
            async_copy.wait_group(STAGES - 1)  # this thread's copies of tile i
            cta_barrier()  # everyone's
            slot = i % STAGES
            a0 = _gl_mx_operand(kb0.index(slot), CL, AL)
            d0 = hopper.warpgroup_mma(a0, q_smem.index(0).permute((1, 0)), zero, use_acc=False, is_async=True)
            a1 = _gl_mx_operand(kb1.index(slot), CL, AL)
            d1 = hopper.warpgroup_mma(a1, q_smem.index(1).permute((1, 0)), zero, use_acc=False, is_async=True)
            a2 = _gl_mx_operand(kb2.index(slot), CL, AL)
            d2 = hopper.warpgroup_mma(a2, q_smem.index(2).permute((1, 0)), zero, use_acc=False, is_async=True)
            a3 = _gl_mx_operand(kb3.index(slot), CL, AL)
            d3 = hopper.warpgroup_mma(a3, q_smem.index(3).permute((1, 0)), zero, use_acc=False, is_async=True)
            d0, d1, d2, d3 = hopper.warpgroup_mma_wait(0, deps=[d0, d1, d2, d3])
            acc = d0 * _ue8m0_x64(scl & 0xFF)[:, None] + d1 * _ue8m0_x64((scl >> 8) & 0xFF)[:, None]
            acc += d2 * _ue8m0_x64((scl >> 16) & 0xFF)[:, None] + d3 * _ue8m0_x64((scl >> 24) & 0xFF)[:, None]
            sc = gl.sum(gl.maximum(acc, 0.0) * w[None, :], axis=1)
        else:
            mbarrier.wait(bars.index(i % STAGES), (i // STAGES) & 1)
            acc = hopper.warpgroup_mma(kbuf.index(i % STAGES), q_smem.permute((1, 0)), zero, use_acc=False,
                                       is_async=True)
            acc = hopper.warpgroup_mma_wait(0, deps=[acc])
            sc = gl.sum(gl.maximum(acc, 0.0) * w[None, :], axis=1) * scl
        n0 = start + i * BLOCK_N
        key = n0 + rows
        vis = key < end
        gl.store(lrow + key, sc, mask=vis)
        if SAMPLE:
            gl.atomic_add(rs_ptr + b * RS + _row_digit(_order_bits(sc)), gl.full([BLOCK_N], 1, gl.int32, ROW),
                          mask=vis & (key % RADIX_SAMPLE == 0), sem="relaxed", scope="gpu")
        if GMAX:
            xm = gl.where((((rows // BOUND_GROUP)[:, None] == gcol[None, :]) & vis[:, None]), sc[:, None],
                          float("-inf"))
            gi = n0 // BOUND_GROUP + gcol
            gl.store(grow + gi, gl.max(xm, axis=0), mask=gi * BOUND_GROUP < end)
        scl = scl_next
        scl_next = scl_after
    if not MX:
        for s in gl.static_range(STAGES):
            mbarrier.invalidate(bars.index(s))


@triton.jit
def _merge_kernel(in_ptr, in_cnt_ptr, out_ptr, out_cnt_ptr, idx_ptr, n_lists, top_k,
                  stride_in_row, stride_in_list, stride_idx_row,
                  OUT_CAP: tl.constexpr, TOPK_P2: tl.constexpr, FINAL: tl.constexpr,
                  MERGE_GROUP: tl.constexpr, SELECT_BLOCK: tl.constexpr):
    """One row (sequence, token), MERGE_GROUP lists -> one list of its top_k keys; the last
    level sorts them and writes the indices (-1 past the keys there are)."""
    row = tl.program_id(0)
    g = tl.program_id(1)
    n_groups = tl.num_programs(1)
    l0 = g * MERGE_GROUP
    nl = tl.minimum(MERGE_GROUP, n_lists - l0)
    base = in_ptr + row.to(tl.int64) * stride_in_row + l0 * stride_in_list
    cntp = in_cnt_ptr + row * n_lists + l0
    gl = tl.arange(0, MERGE_GROUP)
    total = tl.sum(tl.load(cntp + gl, mask=gl < nl, other=0), 0)
    kth = tl.full([], 0, tl.int64)
    if total > top_k:
        kth = _kth_key(base, stride_in_list, cntp, nl, top_k, SELECT_BLOCK)
    dst = out_ptr + (row * n_groups + g).to(tl.int64) * OUT_CAP
    n = _compact(base, stride_in_list, cntp, nl, kth, dst, SELECT_BLOCK)
    if FINAL:
        tl.debug_barrier()
        offs = tl.arange(0, TOPK_P2)
        keys = tl.sort(tl.load(dst + offs, mask=offs < n, other=-1), descending=True)
        tl.store(idx_ptr + row.to(tl.int64) * stride_idx_row + offs, _key_index(keys), mask=offs < top_k)
    else:
        tl.store(out_cnt_ptr + row * n_groups + g, n)


@triton.jit
def _append(base, cnt_ptr, key, keep):
    """Append the kept keys of a block at the end of a list shared by many programs: one
    atomic reserves the block's slots (list order is arbitrary; the last step ranks keys)."""
    kk = keep.to(tl.int32)
    c = tl.sum(kk, 0)
    if c > 0:
        at = tl.atomic_add(cnt_ptr, c, sem="relaxed")
        tl.store(base + at + tl.cumsum(kk, 0) - 1, key, mask=keep)


@triton.jit
def _row_digit_floor(d):
    """The least ``_order_bits`` whose ``_row_digit`` is at least ``d`` (int64; -1 for ``d`` <= 0:
    every key). For 1 <= d <= 255: ``_row_digit(o) >= d`` iff ``(o >> 21) - C >= d``, C its offset."""
    return tl.where(d <= 0, -1, (d + (1024 + 4 * _ROW_EXP_LO - 1)).to(tl.int64) << 21)


_FILTER_VEC = tl.constexpr(4)  # scores a row of a filter block: one 16-byte load a thread


@triton.jit
def _filter_offs(BLOCK: tl.constexpr):
    """``[BLOCK // 4, 4]`` offsets of a filter block: a thread's four contiguous scores are a row,
    so a row's count and scan stay in the thread (``_filter_logits``)."""
    tl.static_assert(BLOCK // _FILTER_VEC * _FILTER_VEC == BLOCK, "a filter block is whole rows of _FILTER_VEC scores")
    return tl.arange(0, BLOCK // _FILTER_VEC)[:, None] * _FILTER_VEC + tl.arange(0, _FILTER_VEC)[None, :]


@triton.jit
def _filter_first(src, max_len, start, BLOCK: tl.constexpr):
    """The first block of ``_filter_logits`` (a caller may request it before it knows ``theta``)."""
    i = tl.multiple_of(start, BLOCK) + _filter_offs(BLOCK)
    return tl.load(src + i, mask=i < max_len, other=0.0)


@triton.jit
def _filter_logits(src, max_len, start, end, theta, dst, cnt_ptr, x, BLOCK: tl.constexpr):
    """Append the keys (``_order_key``) of scores ``src[start:end]`` whose ``_order_bits`` are at
    least ``theta`` (int64; -1: every score) to the list at ``dst``, its length at ``cnt_ptr``
    (one atomic a block reserves the block's slots; list order is arbitrary). ``x``: the
    first block (``_filter_first``); each next block is requested before this one is
    appended. Lean for a low pass rate (H200 run 107: the 1-D ``_append`` form of this loop
    ran 107 instructions a score, the scan and the masks converted between layouts through
    shared memory): the test on the order bits, 64-bit keys only for the stores, blocks as
    ``[BLOCK // 4, 4]`` rows (a row's count and positions in its thread, one scan over the
    rows), loads bounded by the row's allocation (``max_len``, 16-divisible where the JIT
    specialises it) so they are whole 16-byte vectors, ``end`` masking only the test."""
    offs = _filter_offs(BLOCK)
    for o in range(start, end, BLOCK):
        o = tl.multiple_of(o, BLOCK)
        i = o + offs
        lim = tl.where(o + BLOCK < end, max_len, 0)  # no next block: nothing to request
        x_next = tl.load(src + i + BLOCK, mask=i + BLOCK < lim, other=0.0)
        ob = _order_bits(x).to(tl.int64)
        keep = (i < end) & (ob >= theta)
        kk = keep.to(tl.int32)
        per = tl.sum(kk, 1)  # a row's kept scores: in its thread
        c = tl.sum(per, 0)
        if c > 0:
            at = tl.atomic_add(cnt_ptr, c, sem="relaxed")
            pos = at + (tl.cumsum(per, 0) - per)[:, None] + tl.cumsum(kk, 1) - 1
            tl.store(dst + pos, _bits_key(ob, i), mask=keep)
        x = x_next


@triton.jit
def _radix_step(logits_ptr, seqlen_ptr, src_ptr, sel_ptr, dst_ptr, rs_ptr, top_k, max_len,
                stride_src, stride_sel, stride_dst, row, pid,
                NEXT_N: tl.constexpr, FROM_LOGITS: tl.constexpr, SRC_CNT: tl.constexpr, PICK: tl.constexpr,
                DST_CNT: tl.constexpr, HIST: tl.constexpr, TOPK_BLOCK: tl.constexpr,
                TOPK_SPLITS: tl.constexpr, RADIX_FIRST: tl.constexpr, MODE: tl.constexpr,
                SRC_CNT2: tl.constexpr, FUSED: tl.constexpr, FOLD: tl.constexpr = False):
    """One step of the row-parallel radix select, for program ``pid`` of the TOPK_SPLITS
    programs of row ``row`` (``_radix_pass_kernel``: one launch a step; ``_radix_fused_kernel``:
    every step in one launch).

    Keys are the 63-bit ``_order_key``s; digit j is ``_radix_digit(key, j, RADIX_FIRST)``.
    The source is the row's logits (the visible ones) or a candidate list: every key of a
    candidate list shares the digits already picked. ``PICK = j``: every program derives digit j's bin from the row's
    histogram (the bin holding the ``rem``-th key from the top) and ``rem`` for the next
    digit (program 0 stores it); keys above the bin are selected (appended to the row's
    selected list), keys in it go to the next candidate list (``dst``), the rest drop.
    ``HIST = j``: the surviving keys' digit j goes into the row's histogram (atomic adds of
    a per-program histogram).

    ``MODE`` (``RADIX_FIRST="sampled"``): 1, the histogram of digit 0 over every
    ``RADIX_SAMPLE``-th key of the row only; 2, pick digit 0 at a safe threshold from that
    sample: the bin with at least ``2 * ceil(k / RADIX_SAMPLE) + 16`` sampled keys at or
    above it (all keys when the sample has fewer), every key at or above it to the candidate
    list, none selected yet; 3, the fallback: a row whose candidate list came out shorter
    than k appends the rest of its keys too (exact whatever the sample; a no-op otherwise).
    The fallback's programs decide on the list's count from the step before and append
    behind it under a counter of their own (``_CNT_C1X``; ``SRC_CNT2``: the next passes read
    the list's length as the sum), so no program's decision sees another's appends.
    ``FOLD`` (``RADIX_FOLD``, MODE 2 a launch of its own): no fallback launch; the row's last
    MODE 2 program to finish (a counter, ``_FOLD_DONE``) reads the list's count and, when it
    is short, runs the fallback over the whole row alone (slow, rare: a misleading sample).

    ``FUSED`` (a step of ``_radix_fused_kernel``): every load of what other programs wrote in
    an earlier step (the row state, candidate lists) takes ".cg" (L2, never a stale L1
    line); between launches "". The logits come from the scoring launch before."""
    SHARED_CACHE: tl.constexpr = ".cg" if FUSED else ""
    rs = rs_ptr + row * _RS
    if FROM_LOGITS:
        t = row % NEXT_N
        n = _n_visible(tl.load(seqlen_ptr + row // NEXT_N), t, NEXT_N, max_len)
        src = logits_ptr + row.to(tl.int64) * max_len
    else:
        n = tl.load(rs + SRC_CNT, cache_modifier=SHARED_CACHE)
        if SRC_CNT2 > 0:
            n += tl.load(rs + SRC_CNT2, cache_modifier=SHARED_CACHE)
        src = src_ptr + row.to(tl.int64) * stride_src
    step = 1
    if MODE == 1:
        step = RADIX_SAMPLE
    n_it = tl.cdiv(n, step)
    chunk = tl.cdiv(tl.cdiv(n_it, TOPK_SPLITS), TOPK_BLOCK) * TOPK_BLOCK
    start = pid * chunk
    end = tl.minimum(start + chunk, n_it)
    bins = tl.arange(0, 256)
    n_kept = 0
    if MODE >= 2:
        d, _ = _select_digit(tl.load(rs + bins, cache_modifier=SHARED_CACHE), 2 * tl.cdiv(top_k, RADIX_SAMPLE) + 16)
        if MODE == 2:
            if pid == 0 or FUSED:  # fused: every program (as for PICK below)
                tl.store(rs + _REM + 1, top_k)
        else:
            n_kept = tl.load(rs + DST_CNT, cache_modifier=SHARED_CACHE)  # final: this step appends under _CNT_C1X
            if n_kept >= top_k:
                end = start  # the sampled threshold kept enough keys
    elif PICK >= 0:
        if PICK == 0:
            rem = top_k
        else:
            rem = tl.load(rs + _REM + PICK, cache_modifier=SHARED_CACHE)
        d, rem_next = _select_digit(tl.load(rs + PICK * 256 + bins, cache_modifier=SHARED_CACHE), rem)
        # fused: every program stores the same value (all read the same histogram and rem);
        # a pid == 0 predicate live across the whole launch cost a stack spill (sm_90)
        if pid == 0 or FUSED:
            tl.store(rs + _REM + PICK + 1, rem_next)
    offs = tl.arange(0, TOPK_BLOCK)
    acc = tl.zeros([256], tl.int32)
    if MODE == 2:
        _filter_logits(src, max_len, start, end, _row_digit_floor(d), dst_ptr + row.to(tl.int64) * stride_dst,
                       rs + DST_CNT, _filter_first(src, max_len, start, TOPK_BLOCK), TOPK_BLOCK)
        end = start  # done: the general loop below runs no step
        if FOLD:
            tl.debug_barrier()  # this program's appends precede its arrival (release)
            if tl.atomic_add(rs + _FOLD_DONE, 1, sem="acq_rel") == TOPK_SPLITS - 1:
                n_kept = tl.atomic_add(rs + DST_CNT, 0, sem="acquire")  # every program's appends
                if n_kept < top_k:  # a misleading sample: the rest of the row, by this program alone
                    start = 0
                    end = n_it
    for o in range(start, end, TOPK_BLOCK):
        i = (o + offs) * step
        live = o + offs < end
        if FROM_LOGITS:
            key = _order_key(tl.load(src + i, mask=live, other=0.0), i)
        else:
            key = tl.load(src + i, mask=live, other=0, cache_modifier=SHARED_CACHE)
        if MODE >= 2:  # the fallback (MODE 3, or FOLD's last MODE 2 program)
            _append(dst_ptr + row.to(tl.int64) * stride_dst + n_kept, rs + _CNT_C1X, key,
                    live & (_radix_digit(key, 0, RADIX_FIRST) < d))
        elif PICK >= 0:
            dig = _radix_digit(key, PICK, RADIX_FIRST)
            _append(sel_ptr + row.to(tl.int64) * stride_sel, rs + _CNT_SEL, key, live & (dig > d))
            live = live & (dig == d)
            _append(dst_ptr + row.to(tl.int64) * stride_dst, rs + DST_CNT, key, live)
        if HIST >= 0:
            acc += tl.histogram(_radix_digit(key, HIST, RADIX_FIRST), 256, mask=live)
    if HIST >= 0:
        tl.atomic_add(rs + HIST * 256 + bins, acc, mask=acc > 0, sem="relaxed")


@triton.jit
def _radix_pass_kernel(logits_ptr, seqlen_ptr, src_ptr, sel_ptr, dst_ptr, rs_ptr, top_k, max_len,
                       stride_src, stride_sel, stride_dst,
                       NEXT_N: tl.constexpr, FROM_LOGITS: tl.constexpr, SRC_CNT: tl.constexpr, PICK: tl.constexpr,
                       DST_CNT: tl.constexpr, HIST: tl.constexpr, TOPK_BLOCK: tl.constexpr,
                       TOPK_SPLITS: tl.constexpr, RADIX_FIRST: tl.constexpr = "byte", MODE: tl.constexpr = 0,
                       SRC_CNT2: tl.constexpr = 0, PDL: tl.constexpr = False, FOLD: tl.constexpr = False):
    """One step of the row-parallel radix select (``_radix_step``) a launch; programs over
    (row, TOPK_SPLITS chunks)."""
    _pdl_enter(PDL)
    _radix_step(logits_ptr, seqlen_ptr, src_ptr, sel_ptr, dst_ptr, rs_ptr, top_k, max_len,
                stride_src, stride_sel, stride_dst, tl.program_id(0), tl.program_id(1),
                NEXT_N, FROM_LOGITS, SRC_CNT, PICK, DST_CNT, HIST, TOPK_BLOCK, TOPK_SPLITS, RADIX_FIRST, MODE,
                SRC_CNT2, False, FOLD)


@triton.jit
def _row_sync(cnt_ptr, target, GRID_SYNC: tl.constexpr):
    """Barrier of the programs of one row in ``_radix_fused_kernel``: this CTA's stores and
    atomics before it, then (``GRID_SYNC``) one arrival on the row's counter and a spin
    until ``target`` programs have arrived. The counter only grows within a launch (step s
    waits for (s + 1) x programs), so no reset races; the scoring launch zeroes it (it
    lies in the row's radix state). Without GRID_SYNC (one program a row) only the CTA
    barrier. Needs every program of the row resident at once (the launcher caps the grid)."""
    tl.debug_barrier()
    if GRID_SYNC:
        tl.atomic_add(cnt_ptr, 1, sem="acq_rel", scope="gpu")
        while tl.atomic_add(cnt_ptr, 0, sem="acquire", scope="gpu") < target:
            pass
        tl.debug_barrier()


@triton.jit
def _radix_fused_kernel(logits_ptr, seqlen_ptr, sel_ptr, ca_ptr, cb_ptr, rs_ptr, top_k, max_len,
                        stride_sel, stride_cand,
                        NEXT_N: tl.constexpr, TOPK_BLOCK: tl.constexpr, TOPK_SPLITS: tl.constexpr,
                        RADIX_FIRST: tl.constexpr, GRID_SYNC: tl.constexpr):
    """``RADIX_FUSED``: every step of the radix select (``_plan``'s list for the launches of
    ``_radix_pass_kernel``, in the same order with the same arguments) in ONE launch over
    (row, TOPK_SPLITS): the programs of a row meet at a barrier (``_row_sync``) between
    steps; rows are independent. Loads of other programs' writes take ".cg". The
    interpreter runs programs one after another, so there a barrier with more than one
    program a row would deadlock: the launcher gives it one program a row (no
    ``GRID_SYNC``), which still runs the fused step sequence."""
    row = tl.program_id(0)
    pid = tl.program_id(1)
    sync = rs_ptr + row * _RS + _SYNC
    LEAD: tl.constexpr = _lead(RADIX_FIRST)
    SAMPLED: tl.constexpr = _sampled(RADIX_FIRST)
    LAST: tl.constexpr = 3 + LEAD  # digits 0 .. LAST
    P: tl.constexpr = TOPK_SPLITS
    if SAMPLED:
        # histogram of digit 0 over a sample of the logits
        _radix_step(logits_ptr, seqlen_ptr, ca_ptr, sel_ptr, ca_ptr, rs_ptr, top_k, max_len, stride_cand,
                    stride_sel, stride_cand, row, pid, NEXT_N, True, 0, -1, 0, 0, TOPK_BLOCK, TOPK_SPLITS,
                    RADIX_FIRST, 1, 0, True)
        _row_sync(sync, 1 * P, GRID_SYNC)
        # every key at or above a safe digit-0 bin
        _radix_step(logits_ptr, seqlen_ptr, ca_ptr, sel_ptr, ca_ptr, rs_ptr, top_k, max_len, stride_cand,
                    stride_sel, stride_cand, row, pid, NEXT_N, True, 0, 0, _CNT_C1, -1, TOPK_BLOCK, TOPK_SPLITS,
                    RADIX_FIRST, 2, 0, True)
        _row_sync(sync, 2 * P, GRID_SYNC)
        # too few (a bad sample): the rest of the row
        _radix_step(logits_ptr, seqlen_ptr, ca_ptr, sel_ptr, ca_ptr, rs_ptr, top_k, max_len, stride_cand,
                    stride_sel, stride_cand, row, pid, NEXT_N, True, 0, 0, _CNT_C1, -1, TOPK_BLOCK, TOPK_SPLITS,
                    RADIX_FIRST, 3, 0, True)
        _row_sync(sync, 3 * P, GRID_SYNC)
        # histogram of digit 1 (digit 0 again, exact; "sampled_byte": the top order byte)
        _radix_step(logits_ptr, seqlen_ptr, ca_ptr, sel_ptr, ca_ptr, rs_ptr, top_k, max_len, stride_cand,
                    stride_sel, stride_cand, row, pid, NEXT_N, False, _CNT_C1, -1, 0, 1, TOPK_BLOCK, TOPK_SPLITS,
                    RADIX_FIRST, 0, _CNT_C1X, True)
        _row_sync(sync, 4 * P, GRID_SYNC)
    else:
        # histogram of digit 0 over the logits
        _radix_step(logits_ptr, seqlen_ptr, ca_ptr, sel_ptr, ca_ptr, rs_ptr, top_k, max_len, stride_cand,
                    stride_sel, stride_cand, row, pid, NEXT_N, True, 0, -1, 0, 0, TOPK_BLOCK, TOPK_SPLITS,
                    RADIX_FIRST, 0, 0, True)
        _row_sync(sync, 1 * P, GRID_SYNC)
        # digit 0: select above, candidates in its bin
        _radix_step(logits_ptr, seqlen_ptr, ca_ptr, sel_ptr, ca_ptr, rs_ptr, top_k, max_len, stride_cand,
                    stride_sel, stride_cand, row, pid, NEXT_N, True, 0, 0, _CNT_C1, -1, TOPK_BLOCK, TOPK_SPLITS,
                    RADIX_FIRST, 0, 0, True)
        _row_sync(sync, 2 * P, GRID_SYNC)
        # histogram of digit 1 over the candidates
        _radix_step(logits_ptr, seqlen_ptr, ca_ptr, sel_ptr, ca_ptr, rs_ptr, top_k, max_len, stride_cand,
                    stride_sel, stride_cand, row, pid, NEXT_N, False, _CNT_C1, -1, 0, 1, TOPK_BLOCK, TOPK_SPLITS,
                    RADIX_FIRST, 0, 0, True)
        _row_sync(sync, 3 * P, GRID_SYNC)
    N0: tl.constexpr = 4 if SAMPLED else 3  # barriers so far
    # digit j (+ histogram of digit j + 1), candidates ping-pong (list j - 1 -> list j), then
    # the last digit, whose bin's keys are the ties at the k-th score
    for j in tl.static_range(1, LAST + 1):
        _radix_fused_digit(logits_ptr, seqlen_ptr, sel_ptr, ca_ptr, cb_ptr, rs_ptr, top_k, max_len, stride_sel,
                           stride_cand, row, pid, j, LAST, NEXT_N, TOPK_BLOCK, TOPK_SPLITS, RADIX_FIRST)
        if j < LAST:
            _row_sync(sync, (N0 + j) * P, GRID_SYNC)


@triton.jit
def _radix_fused_digit(logits_ptr, seqlen_ptr, sel_ptr, ca_ptr, cb_ptr, rs_ptr, top_k, max_len, stride_sel,
                       stride_cand, row, pid, J: tl.constexpr, LAST: tl.constexpr, NEXT_N: tl.constexpr,
                       TOPK_BLOCK: tl.constexpr, TOPK_SPLITS: tl.constexpr, RADIX_FIRST: tl.constexpr):
    """Digit ``J`` >= 1 of ``_radix_fused_kernel``: candidate list J - 1 (``_CNT_C1`` ..
    ``_CNT_C5``; buffer a for odd J, b for even) -> list J and the histogram of digit J + 1,
    or at ``J = LAST`` the ties at the k-th score (``_CNT_TIE``), as ``_plan``'s steps."""
    SRC_CNT: tl.constexpr = _CNT_C1 + (J - 1) + (1 if J - 1 >= 3 else 0)  # C1, C2, C3, then C4, C5 (past the tie count)
    DST_CNT: tl.constexpr = (_CNT_C1 + J + (1 if J >= 3 else 0)) if J < LAST else _CNT_TIE
    HIST: tl.constexpr = J + 1 if J < LAST else -1
    CNT2: tl.constexpr = _CNT_C1X if (_sampled(RADIX_FIRST) and J == 1) else 0  # the sampled pick's list + fallback
    if J % 2 == 1:
        _radix_step(logits_ptr, seqlen_ptr, ca_ptr, sel_ptr, cb_ptr, rs_ptr, top_k, max_len, stride_cand,
                    stride_sel, stride_cand, row, pid, NEXT_N, False, SRC_CNT, J, DST_CNT, HIST, TOPK_BLOCK,
                    TOPK_SPLITS, RADIX_FIRST, 0, CNT2, True)
    else:
        _radix_step(logits_ptr, seqlen_ptr, cb_ptr, sel_ptr, ca_ptr, rs_ptr, top_k, max_len, stride_cand,
                    stride_sel, stride_cand, row, pid, NEXT_N, False, SRC_CNT, J, DST_CNT, HIST, TOPK_BLOCK,
                    TOPK_SPLITS, RADIX_FIRST, 0, CNT2, True)


@triton.jit
def _rank_in(base, n, keys, CMP_BLOCK: tl.constexpr):
    """For each key, how many of the ``n`` keys at ``base`` are larger (keys are distinct)."""
    acc = tl.zeros([keys.shape[0], CMP_BLOCK], tl.int32)  # reduced once, after the loop
    co = tl.arange(0, CMP_BLOCK)
    for o in range(0, n, CMP_BLOCK):
        other = tl.load(base + o + co, mask=o + co < n, other=-1)
        acc += (other[None, :] > keys[:, None]).to(tl.int32)
    return tl.sum(acc, 1)


@triton.jit
def _rank_from(base, n, keys, first, CMP_BLOCK: tl.constexpr):
    """``_rank_in`` with the first block of the ``n`` keys already requested (``first``, valid
    where below ``n``) and each next block requested a step ahead."""
    acc = tl.zeros([keys.shape[0], CMP_BLOCK], tl.int32)
    co = tl.arange(0, CMP_BLOCK)
    cur = first
    for o in range(0, n, CMP_BLOCK):
        nxt = tl.load(base + o + CMP_BLOCK + co, mask=o + CMP_BLOCK + co < n, other=-1)
        other = tl.where(o + co < n, cur, -1)
        acc += (other[None, :] > keys[:, None]).to(tl.int32)
        cur = nxt
    return tl.sum(acc, 1)


@triton.jit
def _radix_place_kernel(sel_ptr, tie_ptr, rs_ptr, idx_ptr, top_k, stride_sel, stride_tie, stride_idx,
                        RANK_BLOCK: tl.constexpr, PLACE_SORT: tl.constexpr, TOPK_P2: tl.constexpr,
                        TIE_MAX: tl.constexpr, TOPK_BLOCK: tl.constexpr, N_DIGITS: tl.constexpr = 4,
                        PLACE_CHUNK: tl.constexpr = 0, PDL: tl.constexpr = False):
    """Write the row's indices in descending key order. The selected keys (all above the
    k-th score) come first, then the keys tied at the k-th score, the ``rem`` largest
    (lowest index) of them; -1 pads.

    ``PLACE_SORT=False``: programs over (row, chunks of RANK_BLOCK positions); each key goes
    to its rank, counted by compares against the whole list (parallel over the row, k^2
    compares a row). ``PLACE_SORT=True``: one program a row ranks the ties taken into the
    selected list, then one ``tl.sort`` of TOPK_P2 keys (k log^2 k work, one program's latency).
    More than TIE_MAX ties: program 0 radix-selects the ties taken (exact, slow: degenerate
    inputs only).

    ``PLACE_CHUNK > 0`` (programs over (row, chunks of PLACE_CHUNK positions)): each program
    sorts its chunk of the selected list in place (one ``tl.sort`` of PLACE_CHUNK keys)
    and places the ties as the ranking does; ``_radix_merge_rank_kernel`` then writes the
    selected keys at their ranks across the sorted chunks (k log(PLACE_CHUNK) work a row,
    spread over the row's chunks, where the ranking is k^2 and the one sort a row is one
    program's latency)."""
    _pdl_enter(PDL)
    row = tl.program_id(0)
    j = tl.program_id(1)
    nprog = tl.num_programs(1)
    CMP_BLOCK: tl.constexpr = 2048 // RANK_BLOCK  # [RANK_BLOCK, CMP_BLOCK] compares a step
    rs = rs_ptr + row * _RS
    n_sel = tl.load(rs + _CNT_SEL)
    nt = tl.load(rs + _CNT_TIE)
    rem = tl.load(rs + _REM + N_DIGITS)
    take = tl.minimum(rem, nt)
    out = idx_ptr + row.to(tl.int64) * stride_idx
    sel = sel_ptr + row.to(tl.int64) * stride_sel
    tie = tie_ptr + row.to(tl.int64) * stride_tie
    if PLACE_CHUNK > 0:
        offs = j * PLACE_CHUNK + tl.arange(0, PLACE_CHUNK)
        m = offs < n_sel
        tl.store(sel + offs, tl.sort(tl.load(sel + offs, mask=m, other=-1), descending=True), mask=m)
    else:
        offs = j * RANK_BLOCK + tl.arange(0, RANK_BLOCK)
        if not PLACE_SORT:
            m = offs < n_sel
            keys = tl.load(sel + offs, mask=m, other=-1)
            tl.store(out + _rank_in(sel, n_sel, keys, CMP_BLOCK), _key_index(keys), mask=m)
    if nt <= TIE_MAX:
        for tc in range(j * RANK_BLOCK, nt, nprog * RANK_BLOCK):
            to = tc + tl.arange(0, RANK_BLOCK)
            tm = to < nt
            tk = tl.load(tie + to, mask=tm, other=-1)
            r = _rank_in(tie, nt, tk, CMP_BLOCK)
            if PLACE_SORT:
                tl.store(sel + n_sel + r, tk, mask=tm & (r < rem))
            else:
                tl.store(out + n_sel + r, _key_index(tk), mask=tm & (r < rem))
    elif j == 0:
        kth = _kth_key(tie, 0, rs + _CNT_TIE, 1, rem, TOPK_BLOCK)
        dst = tie
        if PLACE_SORT:
            dst = sel + n_sel
        kept = _compact(tie, 0, rs + _CNT_TIE, 1, kth, dst, TOPK_BLOCK)  # the rem taken
        tl.debug_barrier()
        if not PLACE_SORT:
            for tc in range(0, kept, RANK_BLOCK):
                to = tc + tl.arange(0, RANK_BLOCK)
                tk = tl.load(tie + to, mask=to < kept, other=-1)
                tl.store(out + n_sel + _rank_in(tie, kept, tk, CMP_BLOCK), _key_index(tk), mask=to < kept)
    if PLACE_SORT:
        tl.debug_barrier()  # the ties' stores visible to every thread
        o2 = tl.arange(0, TOPK_P2)
        keys = tl.sort(tl.load(sel + o2, mask=o2 < n_sel + take, other=-1), descending=True)
        tl.store(out + o2, _key_index(keys), mask=o2 < top_k)
    else:
        tl.store(out + offs, tl.full(offs.shape, -1, tl.int32), mask=(offs >= n_sel + take) & (offs < top_k))


@triton.jit
def _radix_merge_rank_kernel(sel_ptr, rs_ptr, idx_ptr, stride_sel, stride_idx,
                             PLACE_CHUNK: tl.constexpr, CHUNK_LOG2: tl.constexpr, N_CHUNKS: tl.constexpr,
                             PDL: tl.constexpr = False):
    """Second launch of the chunked placing (``PLACE_CHUNK > 0``, programs over (row,
    chunk)): the row's selected list is sorted in descending chunks of PLACE_CHUNK keys,
    so a key's output position is the number of larger keys in all chunks together (in its
    own chunk, its position there). Each count is a branchless binary search, every chunk
    at once: CHUNK_LOG2 + 1 dependent gathers of ``[N_CHUNKS, PLACE_CHUNK]`` keys (L1/L2-hot).
    Keys are distinct and >= 0; positions past the list read -1, smaller than any key."""
    _pdl_enter(PDL)
    row = tl.program_id(0)
    j = tl.program_id(1)
    n_sel = tl.load(rs_ptr + row * _RS + _CNT_SEL)
    sel = sel_ptr + row.to(tl.int64) * stride_sel
    offs = j * PLACE_CHUNK + tl.arange(0, PLACE_CHUNK)
    m = offs < n_sel
    keys = tl.load(sel + offs, mask=m, other=-1)
    start = (tl.arange(0, N_CHUNKS) * PLACE_CHUNK)[:, None]
    cnt = tl.zeros([N_CHUNKS, PLACE_CHUNK], tl.int32)  # larger keys of chunk c found so far: a prefix of it
    for s in tl.static_range(CHUNK_LOG2):
        p = start + cnt + ((PLACE_CHUNK >> (s + 1)) - 1)
        cnt += tl.where(tl.load(sel + p, mask=p < n_sel, other=-1) > keys[None, :], PLACE_CHUNK >> (s + 1), 0)
    p = start + cnt  # cnt <= PLACE_CHUNK - 1 here: the chunk's last key is the one left to test
    cnt += (tl.load(sel + p, mask=p < n_sel, other=-1) > keys[None, :]).to(tl.int32)
    tl.store(idx_ptr + row.to(tl.int64) * stride_idx + tl.sum(cnt, 0), _key_index(keys), mask=m)


@triton.jit
def _row_topk_kernel(logits_ptr, seqlen_ptr, hist_ptr, sel_ptr, cand_ptr, idx_ptr, rs_ptr, top_k, max_len,
                     stride_sel, stride_idx,
                     NEXT_N: tl.constexpr, NUM_SPLITS: tl.constexpr, HIST_ROWS: tl.constexpr,
                     TOPK_P2: tl.constexpr, TOPK_BLOCK: tl.constexpr, PLACE_CHUNK: tl.constexpr = 0):
    """The whole top-k of one row (sequence, token) in one program, after the scoring kernel.

    1. The scoring programs' histograms of the first digit (``_row_digit``), summed: the bin
       ``d0`` of the k-th score and how many keys above it (all taken). At most top_k keys:
       ``d0 = -1``, every key is taken.
    2. The only pass over the row's scores (the visible ones, as the scoring kernel wrote
       them; the next block's load issued before this one is processed): keys above ``d0``
       are appended to the selected list, keys in it to the candidate list, both in index
       order (one cumsum of the two counts packed in one int32).
    3. Radix select over the candidates on the rest of the 32 order bits (bits 20..0 in
       three passes of <= 8 bits; all 32 bits where ``d0`` is an end bin holding several
       binades): the k-th score's order bits and how many keys tied at it are taken.
    4. One pass over the candidates appends those above it and the first (lowest index)
       ties taken.
    5. One ``tl.sort`` of the next_pow2(top_k) 63-bit ``_order_key``s (ties: lower index
       first), the indices written, -1 past the keys there are. ``PLACE_CHUNK > 0``: instead
       the count of selected keys goes to the row's radix state (no ties left apart) and the
       radix path's chunked placing launches follow (``_radix_place_kernel``,
       ``_radix_merge_rank_kernel``): that sort is one program's latency (~42 us for 2048
       keys on the H200, run 28)."""
    row = tl.program_id(0)
    t = row % NEXT_N
    n = _n_visible(tl.load(seqlen_ptr + row // NEXT_N), t, NEXT_N, max_len)
    bins = tl.arange(0, 256)
    hs = tl.arange(0, HIST_ROWS)
    hist = tl.zeros([256], tl.int32)
    for s0 in range(0, NUM_SPLITS, HIST_ROWS):
        hm = s0 + hs < NUM_SPLITS
        hist += tl.sum(tl.load(hist_ptr + (row * NUM_SPLITS + s0 + hs[:, None]) * 256 + bins[None, :],
                               mask=hm[:, None], other=0), 0)
    d0, take = _select_digit(hist, top_k)  # take: keys wanted from bin d0
    src = logits_ptr + row.to(tl.int64) * max_len
    sel = sel_ptr + row.to(tl.int64) * stride_sel
    cand = cand_ptr + row.to(tl.int64) * max_len
    offs = tl.arange(0, TOPK_BLOCK)
    ns = 0
    nc = 0
    nxt = tl.load(src + offs, mask=offs < n, other=0.0)
    for o in range(0, n, TOPK_BLOCK):
        i = o + offs
        s = nxt
        nxt = tl.load(src + TOPK_BLOCK + i, mask=TOPK_BLOCK + i < n, other=0.0)
        live = i < n
        ob = _order_bits(s)
        dig = _row_digit(ob)
        up = live & (dig > d0)
        mid = live & (dig == d0)
        c = tl.cumsum(up.to(tl.int32) + (mid.to(tl.int32) << 16), 0)  # TOPK_BLOCK < 2^16
        key = _bits_key(ob, i)
        tl.store(sel + ns + (c & 65535) - 1, key, mask=up)
        tl.store(cand + nc + (c >> 16) - 1, key, mask=mid)
        last = tl.max(c, 0)
        ns += last & 65535
        nc += last >> 16
    if nc > 0:
        tl.debug_barrier()  # the candidates visible to every thread
        # order bits not yet fixed: an inner bin fixes the top 11
        hi = tl.where((d0 == 0) | (d0 == 255), 32, 21)
        kth = (d0 + (1024 + 4 * _ROW_EXP_LO - 1)).to(tl.int64) << 21
        kth = tl.where(hi == 32, 0, kth)
        for _p in range(4):
            if hi > 0:
                sh = tl.maximum(hi - 8, 0)
                h = tl.zeros([256], tl.int32)
                for o in range(0, nc, TOPK_BLOCK):
                    m = o + offs < nc
                    ob = tl.load(cand + o + offs, mask=m, other=0) >> 31
                    m = m & ((ob >> hi) == (kth >> hi))
                    h += tl.histogram(((ob >> sh) & 255).to(tl.int32), 256, mask=m)
                d, take = _select_digit(h, take)
                kth = kth | (d.to(tl.int64) << sh)  # (bits of d above hi repeat kth's)
                hi = sh
        # kth: the k-th score's order bits; take: the keys tied at it that are taken
        nt = 0
        for o in range(0, nc, TOPK_BLOCK):
            m = o + offs < nc
            key = tl.load(cand + o + offs, mask=m, other=0)
            gt = m & ((key >> 31) > kth)
            eq = m & ((key >> 31) == kth)
            c = tl.cumsum(gt.to(tl.int32) + (eq.to(tl.int32) << 16), 0)
            ce = nt + (c >> 16)  # ties up to here: the first ``take`` are taken
            pos = ns + (c & 65535) + tl.minimum(ce, take) - tl.minimum(nt, take) - 1
            tl.store(sel + pos, key, mask=gt | (eq & (ce <= take)))
            last = tl.max(c, 0)
            ns += (last & 65535) + tl.minimum(nt + (last >> 16), take) - tl.minimum(nt, take)
            nt += last >> 16
    if PLACE_CHUNK > 0:
        rs = rs_ptr + row * _RS
        tl.store(rs + _CNT_SEL, ns)
        tl.store(rs + _CNT_TIE, 0)  # the taken ties are in the selected list already
        tl.store(rs + _REM + 4, 0)
    else:
        tl.debug_barrier()  # the selected list visible to every thread
        o2 = tl.arange(0, TOPK_P2)
        keys = tl.sort(tl.load(sel + o2, mask=o2 < ns, other=-1), descending=True)
        tl.store(idx_ptr + row.to(tl.int64) * stride_idx + o2, _key_index(keys), mask=o2 < top_k)


@triton.jit
def _pdl_enter(PDL: tl.constexpr):
    """``LAUNCH_PDL``: a launch that may start while the previous one runs (programmatic
    dependent launch, sm_90+) waits here until that one has finished and its stores are
    visible, then lets the next launch start its programs early in turn. Every kernel
    launched that way calls this before any load of what earlier launches wrote (a launch
    that skipped the wait could finish before its predecessor, and the one after it would
    not wait for that predecessor either); loads of the call's inputs (``seq_lens``) may come
    first, so that their latency runs under the wait."""
    if PDL:
        tl.extra.cuda.gdc_wait()
        tl.extra.cuda.gdc_launch_dependents()


@triton.jit
def _bin16(x, lo, scale):
    """The bin (0..15) of ``x`` among 16 linear from ``lo``, ``1 / scale`` wide (clamped)."""
    return tl.minimum(tl.maximum((x - lo) * scale, 0.0), 15.0).to(tl.int32)


@triton.jit
def _in_bins(x, lo1, s1, b1, lo2, s2, b2, LEVEL: tl.constexpr):
    """``_group_bound``: ``x`` in the bins selected at the levels before ``LEVEL`` (1-3)."""
    sel = x == x
    if LEVEL >= 2:
        sel = _bin16(x, lo1, s1) == b1
    if LEVEL >= 3:
        sel = sel & (_bin16(x, lo2, s2) == b2)
    return sel


@triton.jit
def _gb_level(gm, n, want, lo1, s1, b1, lo2, s2, b2, LEVEL: tl.constexpr, GMAX_BLOCK: tl.constexpr):
    """One level of ``_group_bound`` over the maxima in the bins selected so far: their min
    and max (one pass), then a 16-bin histogram linear between them (a second), counted by
    compares (``[GMAX_BLOCK, 16]`` one-hot sums: no atomics). Returns the level's bin origin
    and scale, the bin holding the ``want``-th largest of them, how many are still wanted in
    that bin, and whether their range is finite."""
    go = tl.arange(0, GMAX_BLOCK)
    lo = tl.full([], float("inf"), tl.float32)
    hi = tl.full([], float("-inf"), tl.float32)
    for o in range(0, n, GMAX_BLOCK):
        x = tl.load(gm + o + go, mask=o + go < n, other=0.0)
        m = (o + go < n) & _in_bins(x, lo1, s1, b1, lo2, s2, b2, LEVEL)
        lo = tl.minimum(lo, tl.min(tl.where(m, x, float("inf")), 0))
        hi = tl.maximum(hi, tl.max(tl.where(m, x, float("-inf")), 0))
    s = 16.0 / tl.maximum(hi - lo, 1e-30)
    bins = tl.arange(0, 16)
    h = tl.zeros([16], tl.int32)
    for o in range(0, n, GMAX_BLOCK):
        x = tl.load(gm + o + go, mask=o + go < n, other=0.0)
        m = (o + go < n) & _in_bins(x, lo1, s1, b1, lo2, s2, b2, LEVEL)
        hit = (_bin16(x, lo, s)[:, None] == bins[None, :]) & m[:, None]
        h += tl.sum(hit.to(tl.int32), 0)
    d, w = _select_digit(h, want)
    return lo, s, d, w, (hi - lo) < float("inf")


@triton.jit
def _min_max(a_lo, a_hi, b_lo, b_hi):
    return tl.minimum(a_lo, b_lo), tl.maximum(a_hi, b_hi)


@triton.jit
def _gb_range(x, sel):
    """``_group_bound_regs``: the origin and scale of 16 bins linear between the min and max
    of ``x`` where ``sel`` (one block reduction of the pair), and whether that range is finite."""
    lo, hi = tl.reduce((tl.where(sel, x, float("inf")), tl.where(sel, x, float("-inf"))), 0, _min_max)
    return lo, 16.0 / tl.maximum(hi - lo, 1e-30), (hi - lo) < float("inf")


@triton.jit
def _add4(a0, a1, a2, a3, b0, b1, b2, b3):
    return a0 + b0, a1 + b1, a2 + b2, a3 + b3


@triton.jit
def _hist16(c, sel):
    """Counts of the bins ``c`` (0..15) where ``sel`` (fewer than 2^16 elements), without
    atomics and without a ``[n, 16]`` one-hot tile (at 1024 maxima and 4 warps that spilled):
    each element adds 1 to a 16-bit field of one of four int64 words (bins 4w .. 4w + 3),
    the four summed in one block reduction."""
    one = tl.where(sel, 1, 0).to(tl.int64) << ((c & 3) * 16).to(tl.int64)
    w = c >> 2
    h0, h1, h2, h3 = tl.reduce((tl.where(w == 0, one, 0), tl.where(w == 1, one, 0), tl.where(w == 2, one, 0),
                                tl.where(w == 3, one, 0)), 0, _add4)
    bins = tl.arange(0, 16)
    q = bins >> 2
    word = tl.where(q == 0, h0, tl.where(q == 1, h1, tl.where(q == 2, h2, h3)))
    return ((word >> ((bins & 3) * 16).to(tl.int64)) & 65535).to(tl.int32)


@triton.jit
def _group_bound_regs(x, m, want):
    """``_group_bound`` over maxima already in registers (``x`` where ``m``): the same three
    nested 16-bin levels and the same result, each level one min/max and one histogram
    reduction of the block, with no reload in between (the looped form reads the maxima
    seven times: a chain of dependent loads, ~9.8 us at 1024 maxima, H200 run 75)."""
    lo1, s1, ok = _gb_range(x, m)
    c1 = _bin16(x, lo1, s1)
    b1, w1 = _select_digit(_hist16(c1, m), want)
    m2 = m & (c1 == b1)
    lo2, s2, _ = _gb_range(x, m2)
    c2 = _bin16(x, lo2, s2)
    b2, w2 = _select_digit(_hist16(c2, m2), w1)
    m3 = m2 & (c2 == b2)
    lo3, s3, _ = _gb_range(x, m3)
    c3 = _bin16(x, lo3, s3)
    b3, _ = _select_digit(_hist16(c3, m3), w2)
    up = m & ((c1 > b1) | ((c1 == b1) & ((c2 > b2) | ((c2 == b2) & (c3 >= b3)))))
    return tl.min(tl.where(up, x, float("inf")), 0), ok


@triton.jit
def _group_bound(gm, n, want, GMAX_BLOCK: tl.constexpr, ONE_LOAD: tl.constexpr):
    """A lower bound of the ``want``-th largest of the ``n`` group maxima at ``gm`` (``1 <=
    want <= n``): three nested 16-bin histograms, each linear between the min and max of
    the maxima in the bin the level before selected (the bin holding the want-th largest),
    then the least max whose bins are, level by level, at or above the selected ones. At
    least ``want`` maxima are that high: the counts come from the same bin expressions, so
    this holds whatever the rounding (tightness only needs the bins ordered). Each level
    adapts to its bin's own spread (an outlier max does not leave every other max in one
    bin). The histograms are sums of compares, not ``tl.histogram``: Triton 3.6 lowers
    that to shared-memory atomics, which serialize on maxima crowded in few bins (H200
    runs 69, 73, 74: 34-43 us for 8192 maxima). ``ONE_LOAD`` (``n <= GMAX_BLOCK``, the
    caller's promise): the maxima are loaded once and kept in registers
    (``_group_bound_regs``); else GMAX_BLOCK at a time, reloaded at every pass. Returns
    the bound and whether the maxima's range is finite (else no bound)."""
    go = tl.arange(0, GMAX_BLOCK)
    if ONE_LOAD:
        m = go < n
        thr, ok = _group_bound_regs(tl.load(gm + go, mask=m, other=0.0), m, want)
    else:
        z = tl.full([], 0.0, tl.float32)
        lo1, s1, b1, w1, ok = _gb_level(gm, n, want, z, z, 0, z, z, 0, 1, GMAX_BLOCK)
        lo2, s2, b2, w2, _ = _gb_level(gm, n, w1, lo1, s1, b1, z, z, 0, 2, GMAX_BLOCK)
        lo3, s3, b3, _, _ = _gb_level(gm, n, w2, lo1, s1, b1, lo2, s2, b2, 3, GMAX_BLOCK)
        thr = tl.full([], float("inf"), tl.float32)
        for o in range(0, n, GMAX_BLOCK):
            m = o + go < n
            x = tl.load(gm + o + go, mask=m, other=0.0)
            c1 = _bin16(x, lo1, s1)
            c2 = _bin16(x, lo2, s2)
            up = (c1 > b1) | ((c1 == b1) & ((c2 > b2) | ((c2 == b2) & (_bin16(x, lo3, s3) >= b3))))
            thr = tl.minimum(thr, tl.min(tl.where(m & up, x, float("inf")), 0))
    return thr, ok


@triton.jit
def _row_groups(n, top_k, BOUND_GROUP: tl.constexpr):
    """A row of ``n`` visible keys: its group maxima count and whether the bound path bounds
    it at all: more keys than k and at least k groups (else every visible key is a candidate)."""
    ng = tl.cdiv(n, BOUND_GROUP)
    return ng, (n > top_k) & (ng >= top_k)


@triton.jit
def _part_theta(gm, ng, top_k, part, BOUND_PARTS: tl.constexpr, GMAX_BLOCK: tl.constexpr, ONE_LOAD: tl.constexpr):
    """Part ``part`` of ``BOUND_PARTS`` contiguous parts of a row's ``ng`` maxima: the order
    bits of a lower bound of its ``k_p``-th largest, ``k_p = ceil(k * n_p / ng)`` for its
    ``n_p`` maxima (so the parts' k_p sum to at least k, and k_p <= n_p). The least of the
    parts' bounds is a bound of the row: each part has k_p distinct groups with a key at or
    above it. 0 (every key) for a part of no finite range, 2^32 - 1 (no constraint) for an
    empty part."""
    per = tl.cdiv(ng, BOUND_PARTS)
    p0 = part * per
    n_p = tl.maximum(tl.minimum(ng - p0, per), 0)
    k_p = tl.cdiv(top_k.to(tl.int64) * n_p, ng).to(tl.int32)
    theta = tl.full([], 4294967295, tl.int64)
    if n_p > 0:
        thr, ok = _group_bound(gm + p0, n_p, k_p, GMAX_BLOCK, ONE_LOAD)
        theta = tl.where(ok, _order_bits(thr).to(tl.int64), 0)
    return theta


@triton.jit
def _bound_threshold_kernel(seqlen_ptr, gmax_ptr, rs_ptr, top_k, max_len, stride_gm,
                            NEXT_N: tl.constexpr, BOUND_GROUP: tl.constexpr, BOUND_PARTS: tl.constexpr,
                            GMAX_BLOCK: tl.constexpr, ONE_LOAD: tl.constexpr, PDL: tl.constexpr = False):
    """``TOPK_ALGO="bound"`` without ``BOUND_FUSED``, after the scoring kernel (which wrote
    the scores and the max of every ``BOUND_GROUP`` keys): programs over (row,
    BOUND_PARTS) each derive one part's bound (``_part_theta``) into the row's state
    (rs[part], an area the bound path leaves to this: the radix path's histograms), which
    the filter programs reduce to the row's (the least). One program a row was the cost of
    the path at 8192 maxima (34 us, H200 run 73); a part is 1024 maxima or fewer."""
    row = tl.program_id(0)
    part = tl.program_id(1)
    n = _n_visible(tl.load(seqlen_ptr + row // NEXT_N), row % NEXT_N, NEXT_N, max_len)  # an input: before the wait
    _pdl_enter(PDL)
    ng, has = _row_groups(n, top_k, BOUND_GROUP)
    theta = tl.full([], 0, tl.int64)
    if has:
        theta = _part_theta(gmax_ptr + row.to(tl.int64) * stride_gm, ng, top_k, part, BOUND_PARTS, GMAX_BLOCK,
                            ONE_LOAD)
    tl.store(rs_ptr + row * _RS + part, theta.to(tl.uint32).to(tl.int32, bitcast=True))


@triton.jit
def _bound_topk_kernel(logits_ptr, seqlen_ptr, cand_ptr, rs_ptr, gmax_ptr, top_k, max_len, stride_gm,
                       NEXT_N: tl.constexpr, TOPK_BLOCK: tl.constexpr, TOPK_SPLITS: tl.constexpr,
                       BOUND_FUSED: tl.constexpr = False, BOUND_GROUP: tl.constexpr = 64,
                       BOUND_PARTS: tl.constexpr = 1, GMAX_BLOCK: tl.constexpr = 16, ONE_LOAD: tl.constexpr = False,
                       PDL: tl.constexpr = False):
    """``TOPK_ALGO="bound"``: programs over (row, TOPK_SPLITS) stream their chunk of the row's
    scores once and append the keys at or above the row's bound to the row's candidate
    list (count in the row's state, zeroed by the scoring kernel); ``_bound_place_kernel``
    then ranks them. The bound: the least of ``_bound_threshold_kernel``'s parts, or
    (``BOUND_FUSED``) each program derives it itself from all the row's maxima (one part:
    one launch fewer, every maximum read by every program). Chunks map in reverse: the
    interpreter runs programs in order, so there too the list runs against the index
    order (as it may on a GPU), and the tests see the placing not rely on it."""
    row = tl.program_id(0)
    pid = TOPK_SPLITS - 1 - tl.program_id(1)
    t = row % NEXT_N
    n = _n_visible(tl.load(seqlen_ptr + row // NEXT_N), t, NEXT_N, max_len)  # an input: before the wait
    chunk = tl.cdiv(tl.cdiv(n, TOPK_SPLITS), TOPK_BLOCK) * TOPK_BLOCK
    start = pid * chunk
    end = tl.minimum(start + chunk, n)
    src = logits_ptr + row.to(tl.int64) * max_len
    cand = cand_ptr + row.to(tl.int64) * max_len
    _pdl_enter(PDL)
    x = _filter_first(src, max_len, start, TOPK_BLOCK)  # requested before the bound: one round trip
    rs = rs_ptr + row * _RS
    ng, has = _row_groups(n, top_k, BOUND_GROUP)
    theta = tl.full([], -1, tl.int64)  # the order bits a candidate needs (-1: every visible key)
    if has:
        if BOUND_FUSED:
            theta = _part_theta(gmax_ptr + row.to(tl.int64) * stride_gm, ng, top_k, 0, 1, GMAX_BLOCK, ONE_LOAD)
        else:
            po = tl.arange(0, BOUND_PARTS)
            theta = tl.min(tl.load(rs + po).to(tl.uint32, bitcast=True).to(tl.int64), 0)
    _filter_logits(src, max_len, start, end, theta, cand, rs + _CNT_C1, x, TOPK_BLOCK)


@triton.jit
def _bound_place_kernel(cand_ptr, rs_ptr, idx_ptr, top_k, max_len, stride_idx,
                        RANK_BLOCK: tl.constexpr, SEL_CAP: tl.constexpr, TOPK_BLOCK: tl.constexpr,
                        RANK_STEP: tl.constexpr = 2048, PDL: tl.constexpr = False):
    """The bound path's indices, programs over (row, SEL_CAP / RANK_BLOCK): each candidate's
    output position is the number of larger candidate keys (every key above a top-k key is a
    candidate, so that is its rank in the row; keys are distinct: ties at a score are
    ordered by index); ranks past k drop, -1 pads a row of fewer keys. More than SEL_CAP
    candidates (a loose bound: masses of tied scores): program 0 radix-selects the k best
    in place first (exact, slow: degenerate inputs only), then ranks them. ``RANK_STEP``
    compares a step (RANK_BLOCK keys against RANK_STEP / RANK_BLOCK candidates): the ranking
    is a chain of dependent candidate loads, so larger steps mean fewer round trips."""
    _pdl_enter(PDL)
    row = tl.program_id(0)
    j = tl.program_id(1)
    CMP_BLOCK: tl.constexpr = RANK_STEP // RANK_BLOCK  # [RANK_BLOCK, CMP_BLOCK] compares a step
    cnt = rs_ptr + row * _RS + _CNT_C1
    cand = cand_ptr + row.to(tl.int64) * max_len
    out = idx_ptr + row.to(tl.int64) * stride_idx
    offs = j * RANK_BLOCK + tl.arange(0, RANK_BLOCK)
    co = tl.arange(0, CMP_BLOCK)
    # the count, this program's keys and the ranking's first block are requested together (the
    # keys and the block bounded by the row's buffer, cut to the count once it is there):
    # two L2 round trips fewer before the first compare
    nc = tl.load(cnt)
    raw = tl.load(cand + offs, mask=offs < max_len, other=-1)
    first = tl.load(cand + co, mask=co < max_len, other=-1)
    if nc <= SEL_CAP:
        m = offs < nc
        keys = tl.where(m, raw, -1)
        r = _rank_from(cand, nc, keys, first, CMP_BLOCK)
        tl.store(out + r, _key_index(keys), mask=m & (r < top_k))
    elif j == 0:
        kth = _kth_key(cand, 0, cnt, 1, top_k, TOPK_BLOCK)
        kept = _compact(cand, 0, cnt, 1, kth, cand, TOPK_BLOCK)  # exactly top_k
        tl.debug_barrier()
        for tc in range(0, kept, RANK_BLOCK):
            to = tc + tl.arange(0, RANK_BLOCK)
            tk = tl.load(cand + to, mask=to < kept, other=-1)
            tl.store(out + _rank_in(cand, kept, tk, CMP_BLOCK), _key_index(tk), mask=to < kept)
    tl.store(out + offs, tl.full(offs.shape, -1, tl.int32), mask=(offs >= nc) & (offs < top_k))


# ----------------------------------------------------------------------------- launcher


def _check(name: str, t: Any, shape: tuple, dtypes: tuple[torch.dtype, ...]) -> None:
    if not isinstance(t, torch.Tensor):
        raise ValueError(f"{name} must be a tensor, got {type(t).__name__}")
    if t.dtype not in dtypes:
        raise ValueError(f"{name} must be {' or '.join(str(d) for d in dtypes)}, got {t.dtype}")
    if len(shape) != t.dim() or any(s is not None and s != ts for s, ts in zip(shape, t.shape)):
        want = ", ".join("?" if s is None else str(s) for s in shape)
        raise ValueError(f"{name} must have shape [{want}], got {list(t.shape)}")
    if t.numel() and t.stride(-1) != 1:
        raise ValueError(f"{name} must be contiguous in its last dimension")


def _validate(q, weights, k_cache, k_scales, block_table, seq_lens, top_k, k_format) -> None:
    if k_format not in K_FORMATS:
        raise ValueError(f"k_format must be one of {K_FORMATS}, got {k_format!r}")
    _check("q", q, (None, None, None, D_INDEX), (torch.float8_e4m3fn,))
    B, T, H, _ = q.shape
    if T < 1 or H < 1:
        raise ValueError(f"q needs next_n >= 1 and heads >= 1, got shape {list(q.shape)}")
    _check("weights", weights, (B, T, H), (torch.float32,))
    if k_format == "fp8":
        _check("k_cache", k_cache, (None, None, D_INDEX), (torch.float8_e4m3fn,))
        _check("k_scales", k_scales, tuple(k_cache.shape[:2]), (torch.float32,))
    else:
        _check("k_cache", k_cache, (None, None, D_INDEX // 2), (torch.uint8,))
        _check("k_scales", k_scales, (*k_cache.shape[:2], D_INDEX // 32), (torch.uint8,))
    page = k_cache.shape[1]
    if page < 16 or page & (page - 1):
        raise ValueError(f"page size {page} must be a power of two >= 16")
    _check("block_table", block_table, (B, None), (torch.int32,))
    _check("seq_lens", seq_lens, (B,), (torch.int32,))
    if not isinstance(top_k, int) or not 0 <= top_k <= MAX_TOPK:
        raise ValueError(f"top_k must be an int in [0, {MAX_TOPK}], got {top_k!r}")


def _algo(config: dict[str, Any]) -> str:
    """The config's top-k path; a config without the key (packs tuned before it existed)
    keeps the path it was tuned on."""
    a = config.get("TOPK_ALGO", "merge")
    if a not in TOPK_ALGOS:
        raise ValueError(f"TOPK_ALGO must be one of {TOPK_ALGOS}, got {a!r}")
    return a


def radix_sampled_launches(config: dict[str, Any]) -> bool:
    """The radix passes with the sampled first digit, a launch a step (``RADIX_FIRST``
    "sampled" without ``RADIX_FUSED``): where ``SCORE_SAMPLE`` (with the Gluon scoring
    kernel) and ``RADIX_FOLD`` apply; the launcher and the search space's ``canonical``
    both ask here."""
    return (_algo(config) == "radix" and config.get("RADIX_FIRST", "byte") in RADIX_SAMPLED
            and not config.get("RADIX_FUSED", False))


def radix_splits(config: dict[str, Any], max_len: int) -> int:
    """Programs per row of the radix passes: TOPK_SPLITS, at most one per TOPK_BLOCK keys."""
    return max(1, min(int(config.get("TOPK_SPLITS", 1)), cdiv(max_len, int(config.get("TOPK_BLOCK", 1024)))))


def radix_fused_splits(config: dict[str, Any], max_len: int, rows: int, sms: int, interpret: bool = False) -> int:
    """Programs per row of the fused radix launch (``RADIX_FUSED``), 0 where it does not
    run: ``radix_splits``, at most ``radix_fused_cap`` (its row barriers need every program
    resident at once: ``RADIX_FUSED_PER_SM`` an SM). 0 without RADIX_FUSED or when even one
    program a row would not fit (more rows than that many SMs): then the launch-a-step
    passes run. ``interpret``: one program a row, whatever the rows (the
    interpreter runs programs one after another, so a barrier would wait forever)."""
    if not config.get("RADIX_FUSED", False):
        return 0
    if interpret:
        return 1
    if rows > RADIX_FUSED_PER_SM * sms:
        return 0
    return min(radix_splits(config, max_len), radix_fused_cap(rows, sms))


def radix_fused_cap(rows: int, sms: int = SMS) -> int:
    """The most programs a row of the fused radix launch: the largest power of two with
    ``rows`` x it <= ``RADIX_FUSED_PER_SM`` x ``sms`` (1 when even that does not fit)."""
    cap = 1
    while cap * 2 * rows <= RADIX_FUSED_PER_SM * sms:
        cap *= 2
    return cap


# kernels that, with LAUNCH_PDL, start as programmatic dependent launches (each calls _pdl_enter before it
# reads what an earlier launch wrote)
_PDL_KERNELS = ("_radix_pass_kernel", "_radix_place_kernel", "_radix_merge_rank_kernel", "_bound_threshold_kernel",
                "_bound_topk_kernel", "_bound_place_kernel")


def _plan(q, weights, k_cache, k_scales, block_table, seq_lens, top_k, k_format, return_logits, config, bufs):
    """The launches as (kernel, grid, args); shared by ``launch`` and ``lower_signatures``.

    ``LAUNCH_PDL`` (sm_90+, not under the interpreter): the scoring kernel lets the next
    launch start early, and each top-k launch of ``_PDL_KERNELS`` after it starts as a
    programmatic dependent launch (its programs become resident while the previous launch
    finishes, and wait for it in ``_pdl_enter``), so the launch gaps between them shrink.
    Launches of other kernels keep the plain stream order (they wait for everything
    before them). The bound path's launches read ``seq_lens`` (an input) before their wait:
    safe because ``plan[0]``, the scoring launch, is never itself a dependent launch, so
    every input is final before any launch of the call starts."""
    plan = _plan_launches(q, weights, k_cache, k_scales, block_table, seq_lens, top_k, k_format, return_logits,
                          config, bufs)
    if config.get("LAUNCH_PDL", False) and not interpreting() and len(plan) > 1:
        plan[0][2]["PDL"] = True
        for kern, _grid, args in plan[1:]:
            if getattr(kern, "__name__", "") in _PDL_KERNELS:
                args.update(PDL=True, launch_pdl=True)
    return plan


def _plan_launches(q, weights, k_cache, k_scales, block_table, seq_lens, top_k, k_format, return_logits, config,
                   bufs):
    """``_plan``'s launches before ``LAUNCH_PDL``.

    ``bufs``: ``_buffers``'s dict: logits, the indices, and the scratch of the top-k path
    (merge: candidate lists, counts, shared thresholds, the merge levels' lists and counts;
    radix: the per-row state, the selected list and two candidate-list buffers; row: the
    per-split histograms, the selected list and one candidate-list buffer)."""
    B, T, H, D = q.shape
    page = k_cache.shape[1]
    BN, S = int(config["BLOCK_N"]), int(config["NUM_SPLITS"])
    G = int(config["MERGE_GROUP"])
    algo = _algo(config)
    if page % BN and BN % page:
        raise ValueError(f"BLOCK_N={BN} and the page size {page} must divide one another")
    if BN < 16:
        raise ValueError("BLOCK_N must be >= 16 (MMA tile)")
    if G < 2:
        raise ValueError("MERGE_GROUP must be >= 2")
    if config["MX_FP8_DOT"] and k_format != "mxfp4":
        raise ValueError("MX_FP8_DOT applies to k_format='mxfp4' only")
    if config.get("MX_WORD_DECODE", False) and not config["MX_FP8_DOT"]:
        raise ValueError("MX_WORD_DECODE applies to the MX_FP8_DOT path only")
    # The word decode loads a key's four scales as one 4-byte aligned word: scales viewed at
    # an unaligned offset or stride take the bytewise decode (the same values).
    word = bool(config.get("MX_WORD_DECODE", False)) and not (k_scales.stride(0) % 4 or k_scales.stride(1) % 4
                                                              or k_scales.data_ptr() % 4)
    radix = algo == "radix" and top_k > 0
    row = algo == "row" and top_k > 0
    bound = algo == "bound" and top_k > 0
    GB = int(config.get("BOUND_GROUP", 64))
    if bound and (GB < 1 or GB & (GB - 1) or BN % GB):
        raise ValueError(f"BOUND_GROUP must be a power of two dividing BLOCK_N={BN}, got {GB}")
    logits, idx = bufs["logits"], bufs["idx"]
    kc = k_cache.view(torch.uint8)
    tp = next_power_of_2(T)
    hp = max(next_power_of_2(H), 16 // tp)  # >= 16 query rows: the MMA's N
    score_args = dict(
        q_ptr=q.view(torch.uint8), w_ptr=weights, k_ptr=kc,
        ks_ptr=k_scales, bt_ptr=block_table, seqlen_ptr=seq_lens, logits_ptr=logits, cand_ptr=bufs["cand"],
        cnt_ptr=bufs["cnt"], thr_ptr=bufs["thr"], rs_ptr=bufs["rs"], gmax_ptr=bufs["gmax"], H=H, top_k=top_k,
        max_len=block_table.shape[1] * page,
        stride_qb=q.stride(0), stride_qt=q.stride(1), stride_qh=q.stride(2), stride_wb=weights.stride(0),
        stride_wt=weights.stride(1), stride_kp=kc.stride(0), stride_ks=kc.stride(1), stride_sp=k_scales.stride(0),
        stride_ss=k_scales.stride(1), stride_btb=block_table.stride(0), stride_lb=logits.stride(0),
        stride_lt=logits.stride(1), stride_gm=bufs["gmax"].stride(0),
        D=D, PAGE=page, K_FORMAT=_FMT[k_format], NEXT_N=T, TP=tp, HP=hp,
        LIST_UNIT=max(next_power_of_2(max(top_k, 1)), BN), DO_TOPK=top_k > 0 and not (radix or row or bound),
        WRITE_LOGITS=return_logits or radix or row or bound,
        BLOCK_N=BN, NUM_SPLITS=S, CAND_MULT=int(config["CAND_MULT"]), SELECT_BLOCK=int(config["SELECT_BLOCK"]),
        SHARE_THRESHOLD=bool(config["SHARE_THRESHOLD"]), MX_FP8_DOT=bool(config["MX_FP8_DOT"]),
        MX_WORD_DECODE=word,
        TOPK_ALGO="radix" if radix else "row" if row else "bound" if bound else "merge", BOUND_GROUP=GB if bound else 64,
        INTERPRET=interpreting(), num_warps=int(config["num_warps"]), num_stages=int(config["num_stages"]),
    )
    if config.get("SCORE_MAXNREG", 0) and not interpreting():
        # a register cap for the scoring kernel (ptxas -maxrregcount): more programs resident an SM
        score_args["maxnreg"] = int(config["SCORE_MAXNREG"])
    gluon = bool(config.get("SCORE_GLUON", False))
    if gluon:
        # a performance choice: where the Gluon kernel cannot score this call, the Triton one does
        why = score_gluon_error(config, k_format, T, H, page, top_k, algo, return_logits, k_cache.is_contiguous(),
                                compile_only=assumed_target_cc() is not None)
        if why:
            gluon = False
            if why not in _LOGGED:
                _LOGGED.add(why)
                log.info("%s; the Triton scoring kernel runs instead", why)
    # SCORE_SAMPLE: the Gluon scoring kernel histograms the sampled first digit itself (the rows'
    # state zero-filled by _buffers), so the radix passes start at the pick (one launch fewer)
    sample = gluon and radix and radix_sampled_launches(config) and bool(config.get("SCORE_SAMPLE"))
    if gluon:
        mx = k_format == "mxfp4"  # the code cache itself (cp.async), fp8 keys a TMA descriptor of their rows
        score = (_gl_score_kernel, (B, S), dict(
            q_ptr=q, w_ptr=weights, k_src=k_cache if mx else TensorDescriptor.from_tensor(
                k_cache.view(-1, D), [GL_SCORE_BLOCK_N, D],
                gl.NVMMASharedLayout(swizzle_byte_width=128, element_bitwidth=8, rank=2)),
            stride_kp=k_cache.stride(0), stride_ks=k_cache.stride(1),
            ks_ptr=k_scales, bt_ptr=block_table, seqlen_ptr=seq_lens, logits_ptr=logits, rs_ptr=bufs["rs"],
            gmax_ptr=bufs["gmax"], H=H, max_len=block_table.shape[1] * page, stride_qb=q.stride(0),
            stride_qh=q.stride(2), stride_wb=weights.stride(0), stride_sp=k_scales.stride(0),
            stride_ss=k_scales.stride(1), stride_btb=block_table.stride(0), stride_lb=logits.stride(0),
            stride_gm=bufs["gmax"].stride(0), HP=hp, PAGE=page, NUM_SPLITS=S, STAGES=int(config["num_stages"]),
            ZERO_RS=(radix or bound) and not sample, RS=int(_RS.value), GMAX=bound,
            BOUND_GROUP=GB if bound else GL_SCORE_BLOCK_N, MX=mx, SAMPLE=sample, num_warps=4, num_stages=1))
        if "maxnreg" in score_args:
            score[2]["maxnreg"] = score_args["maxnreg"]
    else:
        score = (_score_kernel, (B, S), score_args)
    plan = [score]
    if top_k == 0:
        return plan
    # the placing's knobs (a merge-path config from before them has none)
    RB, srt = int(config.get("RANK_BLOCK", 64)), bool(config.get("PLACE_SORT", False))
    ch = int(config.get("PLACE_CHUNK", 0))
    if ch and (srt or ch < 16 or ch & (ch - 1)):
        raise ValueError(f"PLACE_CHUNK must be 0 or a power of two >= 16 without PLACE_SORT, got {ch}")

    def place(sel, tie, rs, n_digits):
        """The launches that write the indices from the selected keys (and the ties)."""
        n_place = 1 if srt else cdiv(top_k, ch if ch else RB)
        out = [(_radix_place_kernel, (B * T, n_place), dict(
            sel_ptr=sel, tie_ptr=tie, rs_ptr=rs, idx_ptr=idx, top_k=top_k, stride_sel=sel.stride(0),
            stride_tie=tie.stride(0), stride_idx=idx.stride(0), RANK_BLOCK=RB, PLACE_SORT=srt,
            TOPK_P2=next_power_of_2(top_k), TIE_MAX=_TIE_MAX, TOPK_BLOCK=int(config["TOPK_BLOCK"]),
            N_DIGITS=n_digits, PLACE_CHUNK=ch, num_warps=4, num_stages=1))]
        if ch:
            out.append((_radix_merge_rank_kernel, (B * T, n_place), dict(
                sel_ptr=sel, rs_ptr=rs, idx_ptr=idx, stride_sel=sel.stride(0), stride_idx=idx.stride(0),
                PLACE_CHUNK=ch, CHUNK_LOG2=ch.bit_length() - 1, N_CHUNKS=next_power_of_2(n_place),
                num_warps=4, num_stages=1)))
        return out

    if row:
        sel = bufs["sel"]
        plan.append((_row_topk_kernel, (B * T,), dict(
            logits_ptr=logits, seqlen_ptr=seq_lens, hist_ptr=bufs["rs"], sel_ptr=sel, cand_ptr=bufs["cand_a"],
            idx_ptr=idx, rs_ptr=bufs["state"], top_k=top_k, max_len=logits.shape[-1], stride_sel=sel.stride(0),
            stride_idx=idx.stride(0), NEXT_N=T, NUM_SPLITS=S, HIST_ROWS=min(next_power_of_2(S), 16),
            TOPK_P2=sel.shape[-1], TOPK_BLOCK=int(config["TOPK_BLOCK"]), PLACE_CHUNK=ch, num_warps=ROW_WARPS,
            num_stages=1)))
        if ch:  # the row kernel leaves the selected keys unsorted (ties included), _REM + 4 zero
            plan += place(sel, sel, bufs["state"], 4)
        return plan
    if bound:
        max_len, rs, cand = logits.shape[-1], bufs["rs"], bufs["cand_a"]
        P, RB, cap = radix_splits(config, max_len), int(config["RANK_BLOCK"]), bound_select_cap(top_k)
        fused = bool(config.get("BOUND_FUSED", False))
        parts = 1 if fused else bound_parts(max_len, GB)
        gbound = dict(gmax_ptr=bufs["gmax"], stride_gm=bufs["gmax"].stride(0), BOUND_GROUP=GB, BOUND_PARTS=parts,
                      **bound_gmax_block(cdiv(cdiv(max_len, GB), parts), fused))
        if not fused:
            plan.append((_bound_threshold_kernel, (B * T, parts), dict(
                seqlen_ptr=seq_lens, rs_ptr=rs, top_k=top_k, max_len=max_len, NEXT_N=T, **gbound,
                num_warps=4, num_stages=1)))
        plan.append((_bound_topk_kernel, (B * T, P), dict(
            logits_ptr=logits, seqlen_ptr=seq_lens, cand_ptr=cand, rs_ptr=rs, top_k=top_k, max_len=max_len,
            NEXT_N=T, TOPK_BLOCK=int(config["TOPK_BLOCK"]), TOPK_SPLITS=P, BOUND_FUSED=fused, **gbound,
            num_warps=bound_filter_warps(gbound["GMAX_BLOCK"]) if fused else 4, num_stages=1)))
        plan.append((_bound_place_kernel, (B * T, cdiv(cap, RB)), dict(
            cand_ptr=cand, rs_ptr=rs, idx_ptr=idx, top_k=top_k, max_len=max_len, stride_idx=idx.stride(0),
            RANK_BLOCK=RB, SEL_CAP=cap, TOPK_BLOCK=int(config["TOPK_BLOCK"]),
            RANK_STEP=int(config.get("RANK_STEP", 2048)), num_warps=4, num_stages=1)))
        return plan
    if radix:
        max_len = logits.shape[-1]
        P, TB = radix_splits(config, max_len), int(config["TOPK_BLOCK"])
        rs, sel, ca, cb = bufs["rs"], bufs["sel"], bufs["cand_a"], bufs["cand_b"]
        base = dict(logits_ptr=logits, seqlen_ptr=seq_lens, rs_ptr=rs, sel_ptr=sel, top_k=top_k, max_len=max_len,
                    stride_sel=sel.stride(0), NEXT_N=T, TOPK_BLOCK=TB, TOPK_SPLITS=P, num_warps=4, num_stages=1)

        first = config.get("RADIX_FIRST", "byte")
        if first not in RADIX_LEAD:
            raise ValueError(f"RADIX_FIRST must be one of {RADIX_FIRST}, got {first!r}")
        lead, sampled = RADIX_LEAD[first], first in RADIX_SAMPLED
        C1, C2, C3, C4, C5, CT = (int(c.value) for c in (_CNT_C1, _CNT_C2, _CNT_C3, _CNT_C4, _CNT_C5, _CNT_TIE))

        # RADIX_FOLD: MODE 2's last program runs the fallback (one launch fewer)
        fold = radix_sampled_launches(config) and bool(config.get("RADIX_FOLD", False))

        def step(src, src_cnt, pick, dst, dst_cnt, hist, mode=0):
            c1x = int(_CNT_C1X.value) if sampled and src_cnt == C1 else 0  # C1: the sampled pick + its fallback
            return (_radix_pass_kernel, (B * T, P), dict(
                base, src_ptr=ca if src is None else src, FROM_LOGITS=src is None, SRC_CNT=src_cnt, PICK=pick,
                dst_ptr=ca if dst is None else dst, DST_CNT=dst_cnt, HIST=hist, stride_src=ca.stride(0),
                stride_dst=ca.stride(0), RADIX_FIRST=first, MODE=mode, SRC_CNT2=c1x, FOLD=fold and mode == 2))
        if sampled:
            steps = [step(None, 0, -1, None, 0, 0, mode=1)] * (not sample)  # digit 0 over a sample of the logits
            steps += [step(None, 0, 0, ca, C1, -1, mode=2)]  # every key at or above a safe digit-0 bin
            steps += [step(None, 0, 0, ca, C1, -1, mode=3)] * (not fold)  # too few (a bad sample): the rest
            steps += [step(ca, C1, -1, None, 0, 1)]  # histogram of digit 1 (quarter again, exact; or the top byte)
        else:
            steps = [step(None, 0, -1, None, 0, 0),   # histogram of digit 0 over the logits
                     step(None, 0, 0, ca, C1, -1),    # digit 0: select above, candidates in its bin
                     step(ca, C1, -1, None, 0, 1)]    # histogram of digit 1 over the candidates
        bufs_, cnts = (ca, cb), (C1, C2, C3, C4, C5)
        last = 3 + lead  # digits 0 .. last
        for j in range(1, last):  # digit j (+ histogram of digit j + 1), candidates ping-pong
            steps.append(step(bufs_[(j - 1) % 2], cnts[j - 1], j, bufs_[j % 2], cnts[j], j + 1))
        steps.append(step(bufs_[(last - 1) % 2], cnts[last - 1], last, bufs_[last % 2], CT, -1))  # ties at the k-th
        pf = radix_fused_splits(config, max_len, B * T, sm_count(q.device, SMS), interpreting())
        if pf:  # RADIX_FUSED: these steps, in this order, in one launch (_radix_fused_kernel)
            steps = [(_radix_fused_kernel, (B * T, pf), dict(
                logits_ptr=logits, seqlen_ptr=seq_lens, sel_ptr=sel, ca_ptr=ca, cb_ptr=cb, rs_ptr=rs, top_k=top_k,
                max_len=max_len, stride_sel=sel.stride(0), stride_cand=ca.stride(0), NEXT_N=T, TOPK_BLOCK=TB,
                TOPK_SPLITS=pf, RADIX_FIRST=first, GRID_SYNC=pf > 1, num_warps=4, num_stages=1))]
        return plan + steps + place(sel, bufs_[last % 2], rs, 4 + lead)
    src, src_cnt, n_lists = bufs["cand"], bufs["cnt"], S
    for out, out_cnt in bufs["levels"]:
        groups = cdiv(n_lists, G)
        final = groups == 1
        plan.append((_merge_kernel, (B * T, groups), dict(
            in_ptr=src, in_cnt_ptr=src_cnt, out_ptr=out, out_cnt_ptr=out_cnt, idx_ptr=idx, n_lists=n_lists,
            top_k=top_k, stride_in_row=src.stride(0), stride_in_list=src.stride(1), stride_idx_row=idx.stride(0),
            OUT_CAP=out.shape[-1], TOPK_P2=out.shape[-1], FINAL=final, MERGE_GROUP=G,
            SELECT_BLOCK=int(config["SELECT_BLOCK"]), num_warps=4, num_stages=1)))
        src, src_cnt, n_lists = out, out_cnt, groups
    return plan


def _buffers(B: int, T: int, max_len: int, top_k: int, return_logits: bool, config: dict[str, Any], device: Any,
             alloc=None) -> dict[str, Any]:
    """Outputs and scratch for ``_plan``. merge: candidate lists ``[B*T, S, CAP]`` int64 (per
    split), one ``[B*T, groups, next_pow2(top_k)]`` list buffer per merge level. radix: the
    logits (scratch when not returned), ``[B*T, _RS]`` int32 state, the selected keys
    ``[B*T, top_k]`` and two ``[B*T, max_len]`` int64 candidate-list buffers (a digit's bin
    can hold every key of a row). row: the logits as for radix, ``[B*T, S, 256]`` int32
    histograms (one per scoring program and token), the selected keys ``[B*T,
    next_pow2(top_k)]`` (the sort's width), one ``[B*T, max_len]`` int64 candidate list and,
    with ``PLACE_CHUNK``, a radix state row per row for the placing launches."""
    if alloc is None:
        def alloc(shape, dtype, fill=None):
            if fill is None:
                return torch.empty(shape, dtype=dtype, device=device)
            return torch.full(shape, fill, dtype=dtype, device=device)
    BN, S, G = int(config["BLOCK_N"]), int(config["NUM_SPLITS"]), int(config["MERGE_GROUP"])
    p2 = next_power_of_2(max(top_k, 1))
    cap = int(config["CAND_MULT"]) * max(p2, BN)
    radix = _algo(config) == "radix" and top_k > 0
    row = _algo(config) == "row" and top_k > 0
    bound = _algo(config) == "bound" and top_k > 0
    if return_logits:
        logits = alloc((B, T, max_len), torch.float32, float("-inf"))
    elif radix or row or bound:
        logits = alloc((B, T, max_len), torch.float32)  # only the visible keys are written and read
    else:
        logits = alloc((1, 1, 1), torch.float32)
    idx = alloc((B * T, top_k), torch.int32)
    one64, one32 = alloc((1, 1, 1), torch.int64), alloc((1,), torch.int32)
    bufs = dict(logits=logits, idx=idx, cand=one64, cnt=one32, thr=alloc((1,), torch.int64), levels=[],
                rs=alloc((1, int(_RS.value)), torch.int32), gmax=alloc((1, 1), torch.float32))
    if top_k == 0:
        return bufs
    if bound:
        bufs.update(rs=alloc((B * T, int(_RS.value)), torch.int32), cand_a=alloc((B * T, max_len), torch.int64),
                    gmax=alloc((B * T, cdiv(max_len, int(config.get("BOUND_GROUP", 64)))), torch.float32))
        return bufs
    if radix:
        # SCORE_SAMPLE: the scoring kernel adds to the rows' state from its first tile, so it starts zeroed
        # (a fill launch; without the knob the scoring kernel's split 0 zeroes its row)
        zero = 0 if config.get("SCORE_SAMPLE", False) else None
        bufs.update(rs=alloc((B * T, int(_RS.value)), torch.int32, zero), sel=alloc((B * T, top_k), torch.int64),
                    cand_a=alloc((B * T, max_len), torch.int64), cand_b=alloc((B * T, max_len), torch.int64))
        return bufs
    if row:
        chunked = int(config.get("PLACE_CHUNK", 0)) > 0  # the placing launches' state: counts only
        bufs.update(rs=alloc((B * T, S, 256), torch.int32), sel=alloc((B * T, p2), torch.int64),
                    cand_a=alloc((B * T, max_len), torch.int64),
                    state=alloc((B * T if chunked else 1, int(_RS.value)), torch.int32))
        return bufs
    bufs.update(cand=alloc((B * T, S, cap), torch.int64), cnt=alloc((B * T * S,), torch.int32),
                thr=alloc((B * T,), torch.int64, 0))
    n = S
    while True:
        groups = cdiv(n, G)
        bufs["levels"].append((alloc((B * T, groups, p2), torch.int64), alloc((B * T * groups,), torch.int32)))
        if groups == 1:
            break
        n = groups
    return bufs


def launch(*, config: dict[str, Any], q: torch.Tensor, weights: torch.Tensor, k_cache: torch.Tensor,
           k_scales: torch.Tensor, block_table: torch.Tensor, seq_lens: torch.Tensor, top_k: int,
           k_format: str = "fp8", return_logits: bool = False) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """Validate, allocate, run the scoring kernel and the merge levels.

    Returns ``topk_idx [B, next_n, top_k] int32`` (and the logits with ``return_logits``).
    ``top_k=0`` with ``return_logits=True`` runs the scoring alone. ``seq_lens[b]`` must
    not exceed ``block_table.shape[1] * PAGE`` (not checked: a host sync).
    """
    _validate(q, weights, k_cache, k_scales, block_table, seq_lens, top_k, k_format)
    B, T = q.shape[:2]
    max_len = block_table.shape[1] * k_cache.shape[1]
    bufs = _buffers(B, T, max_len, top_k, return_logits, config, q.device)
    for kern, grid, args in _plan(q, weights, k_cache, k_scales, block_table, seq_lens, top_k, k_format,
                                  return_logits, config, bufs):
        kern[grid](**args)
    idx = bufs["idx"].view(B, T, top_k)
    return (idx, bufs["logits"]) if return_logits else idx


# ----------------------------------------------------------------------------- workloads


@dataclass(frozen=True)
class Workload:
    """One decode step: ``batch`` sequences of ``context`` keys, ``next_n`` query tokens each."""

    batch: int
    context: int
    next_n: int
    profile: str

    def __post_init__(self) -> None:
        if self.profile not in PROFILES:
            raise ValueError(f"profile must be one of {sorted(PROFILES)}, got {self.profile!r}")


def _wdict(w: Workload) -> dict[str, Any]:
    return {"batch": w.batch, "context": w.context, "next_n": w.next_n, "profile": w.profile}


def make_inputs(workload: Workload, device: str, seed: int) -> dict[str, Any]:
    """Keys ~ N(0, 1) quantized to the profile's format (fp8: per-key scale amax/448;
    mxfp4: UE8M0 per 32), pages shuffled across the pool, q ~ N(0, 1) in FP8, weights ~
    N(0, 1) * H^-0.5 * 128^-0.5 (mixed signs, as after the folding), every sequence full.
    At most 64K distinct keys are tiled over the cache (inputs for GB caches in seconds;
    repeated keys give exactly tied scores, which the tie rule orders)."""
    w = workload
    prof = PROFILES[w.profile]
    H, fmt = prof["heads"], prof["k_format"]
    g = torch.Generator(device="cpu").manual_seed(seed)
    B, N, T, D = w.batch, w.context, w.next_n, D_INDEX
    pages_per_seq = cdiv(N, PAGE)
    n_pages = B * pages_per_seq
    n_rows = n_pages * PAGE
    n_pool = min(n_rows, 65536)
    pool = torch.randn(n_pool, D, generator=g).to(device)
    if n_rows <= n_pool:
        pick = torch.arange(n_rows, device=device)  # all keys distinct (the pages are shuffled below)
    else:
        pick = torch.randint(0, n_pool, (n_rows,), generator=g).to(device)
    if fmt == "fp8":
        s = pool.abs().amax(-1).clamp(min=1e-4) / 448.0
        codes = (pool / s[:, None]).clamp(-448, 448).to(torch.float8_e4m3fn)
        k_cache = codes.view(torch.uint8)[pick].view(torch.float8_e4m3fn).view(n_pages, PAGE, D)
        k_scales = s[pick].view(n_pages, PAGE)
    else:
        pc, ps = quantize_mxfp4(pool)
        k_cache, k_scales = pc[pick].view(n_pages, PAGE, D // 2), ps[pick].view(n_pages, PAGE, D // 32)
    del pool, pick
    block_table = torch.randperm(n_pages, generator=g).to(torch.int32).view(B, pages_per_seq).to(device)
    seq_lens = torch.full((B,), N, dtype=torch.int32, device=device)
    q = torch.randn(B, T, H, D, generator=g).to(torch.float8_e4m3fn).to(device)
    weights = (torch.randn(B, T, H, generator=g) * (H ** -0.5 * D ** -0.5)).to(device)
    return dict(q=q, weights=weights, k_cache=k_cache, k_scales=k_scales, block_table=block_table,
                seq_lens=seq_lens, top_k=prof["top_k"], k_format=fmt, return_logits=False)


def default_splits(w: Workload, block_n: int, sms: int = SMS, per_sm: int = 4, min_tiles: int = 1,
                   cap: int = 512, round_up: bool = False) -> int:
    """Splits (a power of two) for about ``per_sm`` scoring programs an SM over the batch
    (rounded down, or up with ``round_up``: the merge path's older rule), none shorter than
    ``min_tiles`` tiles, at most ``cap``.

    Why 4 an SM: the radix / row scoring kernel keeps one or two key tiles in flight a
    program (sm_90, Triton 3.6: one 8 KB async-copy buffer at num_stages 2-4, 96 registers
    at 4 warps for fp8; two at ``RADIX_SCORE_STAGES`` = 5, 107 registers: four programs
    fit an SM), so bandwidth follows the programs resident an SM. Measured (H200, run 20,
    num_stages 2): dsv32 512K scoring at B=32 (16 splits, ~3.9 programs an SM) 64% of the
    floor, at B=1 (128 splits, one an SM) 18%.
    B = 8, 32, 128 get the splits they had; B = 1 goes from 128 to 512 (and short rows to
    one tile a program instead of eight)."""
    want = next_power_of_2(max(1, cdiv(per_sm * sms, w.batch))) if round_up else per_sm * sms // w.batch
    limit = min(max(1, want), max(1, w.context // (min_tiles * block_n)), cap)
    s = 1
    while s * 2 <= limit:
        s *= 2
    return s


def default_radix_splits(w: Workload, block: int, sms: int = SMS) -> int:
    """Programs per row of the radix passes: up to ~16 per SM over all rows (a power of two,
    rounded down), each >= one block, at most 256.

    H200 runs 30-31 (B=32, dsv32 / dsv41-flash, call us at 512K): 32 programs a row (the
    old ~4 an SM) 947.6 / 866.5, 64: 910.2 / 841.2, 128: 903.4 / 840.6, 16: 988.4 / 905.8;
    the two full passes over the logits (digit-0 histogram and pick, ~200 us of the top-k)
    run their histogram ALU work on more SMs at once. Runs 36-37 (sampled first digit), 64
    against 128 a row at B=32: 128K 268.5 / 235.6 vs 279.4 / 246.5 (run 36), 268.9 / 236.9
    vs 278.9 / 248.4 (run 37); 512K 791.4 / 756.7 vs 798.0 / 762.2: hence rounded down
    (B=32: 66 -> 64, not up to 128)."""
    want = max(1, 16 * sms // (w.batch * w.next_n))
    p = 1
    while p * 2 <= want:
        p *= 2
    return max(1, min(p, next_power_of_2(cdiv(w.context, block)), 256))


PLACE_CHUNK_DEFAULT = 512  # selected keys a program sorts in the chunked placing (PLACE_CHUNK), where it is the default
RADIX_SMALL_BLOCK_ROWS = 32  # rows (batch x next_n) from which the radix passes step 512 keys, not 1024
# RADIX_FIRST "sampled" by default from this many rows and keys. H200 run 34 (B=32, call us,
# byte -> sampled): dsv32 512K 890.6 -> 799.5 (top-k +41% -> +27%), 128K 291.8 -> 280.0;
# dsv41-flash 512K 833.7 -> 765.3 (+29% -> +18%), 128K 255.8 -> 245.9. Its three extra
# launches lose where the passes are short: B=32 32K 130.8 -> 137.0, B=1 512K 65.4 -> 74.7.
RADIX_SAMPLED_ROWS, RADIX_SAMPLED_CONTEXT = 32, 131072
# RADIX_FUSED by default up to this many rows (batch x next_n): none. The idea: at B=1 the
# radix passes are ~3-4 us launches of little work each (dsv32 B=1 512K: scoring ~29, six
# passes ~30, the ranking ~6 of 65.8 us), so one launch with a row barrier a step instead,
# one program an SM. Measured (H200 run 54, B=1 512K, call us): fused 86.1 / 87.4 (dsv32 /
# dsv41-flash) against one launch a pass 65.3 / 67.1 at 256 programs a row and 71.1 / 72.1
# at 128: a barrier step costs more than the launch it replaces. Exact and in the search
# space (up to search_spaces.sparse_mqa.RADIX_FUSED_MAX_ROWS rows), not a default.
RADIX_FUSED_DEFAULT_ROWS = 0


# The bound top-k by default for one row (B = 1, next_n = 1) where a group size gives the
# bound kernel 2k..8192 maxima (H200 run 70, call us, radix -> bound): dsv32 128K 40.2 ->
# 34.2 (32-key groups); dsv41-flash 32K 41.1 -> 29.1 (32), 128K 44.8 -> 35.6 (64). At 512K
# (8192 maxima) it lost while one program derived the bound (65.0 -> 75.9 dsv32, 66.1 -> 79.7
# dsv41-flash); with the bound in parts held in registers, PDL launches, 8192-compare ranking
# steps and one filter step a program it wins (run 78: dsv32 65.7 -> 44.3, dsv41-flash 63.7 ->
# 47.4; 128K 40.1 -> 24.6 and 44.3 -> 25.3). Fewer than 2k maxima give a loose bound; more
# rows are unmeasured but B = 32 at 128K (dsv41-flash 234.5 -> 231.1, dsv32 233.0 -> 588.5 at
# too few maxima) showed no gain.
BOUND_DEFAULT_MAX_ROWS = 1
BOUND_DEFAULT_MAX_MAXIMA = 8192


def bound_default_group(workload: Workload) -> int:
    """The group size (64, 32 or 16 keys, the largest that fits) giving between 2k and
    ``BOUND_DEFAULT_MAX_MAXIMA`` group maxima a row, where the bound path is the default;
    0 elsewhere (see ``BOUND_DEFAULT_MAX_ROWS``)."""
    w = workload
    k = PROFILES[w.profile]["top_k"]
    if w.batch * w.next_n > BOUND_DEFAULT_MAX_ROWS:
        return 0
    for g in (64, 32, 16):
        if 2 * k <= w.context // g <= BOUND_DEFAULT_MAX_MAXIMA:
            return g
    return 0


def default_config(workload: Workload) -> dict[str, Any]:
    """``row_config`` up to ``ROW_DEFAULT_MAX_CONTEXT`` keys for a top-k of at most ``ROW_DEFAULT_MAX_TOPK``,
    ``bound_config`` for one row where ``bound_default_group`` finds a group size,
    ``radix_config`` otherwise (the scoring parameters are the same; only the top-k path
    differs).

    Why, measured on the H200 (run 19, CUDA-graph replay, L2 flushed, scoring + top-k us,
    radix vs row): the radix path's seven launches after the scoring cost ~3-4 us each; the
    row path is one launch, but one program streams a whole row (its full pass ~2.2 warp
    instructions a key on one SM) and sorts next_pow2(top_k) keys, and the scoring kernel
    builds a histogram on top. It wins only where rows are short and top_k small:
    dsv41-flash (top_k 512) 8K B=1 41.7 -> 36.2, B=32 59.4 -> 49.5; dsv32 (top_k 2048) 8K
    B=1 40.6 -> 60.2, B=32 95.8 -> 94.8, 32K B=32 147.2 -> 134.4 but B=1 42.8 -> 81.1;
    dsv41-flash 32K B=1 41.3 -> 56.1, B=32 112.6 -> 121.4; 128K loses 1.2-3.2x. The search
    space admits the row path up to 131072 keys for the tuner to decide per shape."""
    w = workload
    short = w.context <= ROW_DEFAULT_MAX_CONTEXT and PROFILES[w.profile]["top_k"] <= ROW_DEFAULT_MAX_TOPK
    if short:
        return row_config(w)
    return bound_config(w) if bound_default_group(w) else radix_config(w)


def row_config(workload: Workload) -> dict[str, Any]:
    """``radix_config``'s scoring parameters with the row top-k (``TOPK_ALGO="row"``):
    2048-key streaming blocks (8 a thread at ``ROW_WARPS``; ~2 warp instructions a key
    whatever the block, sm_90 SASS), the radix-only knobs at their canonical values."""
    c = radix_config(workload)
    return dict(c, NUM_SPLITS=min(c["NUM_SPLITS"], ROW_DEFAULT_MAX_SPLITS), TOPK_ALGO="row", TOPK_BLOCK=2048,
                TOPK_SPLITS=1, RANK_BLOCK=64, PLACE_SORT=False, PLACE_CHUNK=0, RADIX_FIRST="byte", RADIX_FUSED=False,
                SCORE_SAMPLE=False, SCORE_GLUON=False, num_stages=RADIX_SCORE_STAGES)


# Scoring stages of the radix / row paths. The key tile's address hangs on a block-table
# load, and Triton 3.6's pipeliner spends stages on that chain: sm_90 compiles (JIT
# specialisation) keep ONE 8 KB key buffer a program at num_stages 2, 3 and 4 and two at 5
# (6 adds nothing), for 96 -> 107 registers (fp8, next_n 1; 147 -> 161 at next_n 2; mxfp4
# 75-106 -> 92-110), no spills: twice the key bytes in flight a program. H200 run 22: the
# radix call at dsv32 B=32 512K 1051 -> 909 us (the logits-writing scoring kernel gains).
RADIX_SCORE_STAGES = 5


def radix_config(workload: Workload) -> dict[str, Any]:
    """Heuristic: 64-key tiles (one page: one block-table load per tile, the wgmma M),
    splits for ~4 programs an SM (``default_splits``), mxfp4 keys through FP8 MMA on the scaled codes decoded a 32-bit
    word at a time (H200 run 14, dsv41-flash B=32: scoring 1453 -> 910 us at 512K, 369 -> 241
    us at 128K; bytewise decode before), and the radix
    top-k (``TOPK_ALGO="radix"``): the scoring kernel writes the visible scores, then
    row-parallel radix passes over 1024-key blocks (512 from 32 rows) and a ranking step,
    none serial over a row: six passes (8 launches in all), nine with the sampled first
    digit from ``RADIX_SAMPLED_ROWS`` rows at >= ``RADIX_SAMPLED_CONTEXT`` keys (11).
    ``RADIX_FUSED`` (the passes as one launch, 3 in all) is off: slower at B=1 512K
    (``RADIX_FUSED_DEFAULT_ROWS``). The merge path's
    parameters (CAND_MULT, MERGE_GROUP, SELECT_BLOCK, SHARE_THRESHOLD) keep their canonical
    values, which the radix path ignores.

    Checked for sm_90 with Triton 3.6 (ptxas -v / cuobjdump, divisibility-16
    specialisation as at launch) for every default of search_spaces.sparse_mqa.WORKLOADS
    (merge path, before the radix top-k): no spills; scoring kernel shared 16640 / 25088 B
    and 181 / 229 registers (fp8, next_n 1 / 2), 8448 / 12800 B and 147 / 194 registers
    (mxfp4); merge kernels 4-16 KB, 96-128 registers."""
    w = workload
    mx = PROFILES[w.profile]["k_format"] == "mxfp4"
    bn = 64
    S = default_splits(w, bn)
    rows, k = w.batch * w.next_n, PROFILES[w.profile]["top_k"]
    # H200 run 31, B=32 with 128 programs a row: 512-key steps beat 1024 at 128K and 512K for
    # both profiles (dsv32 300.3 -> 292.4, 903.4 -> 890.4 us; dsv41-flash 262.5 -> 257.1,
    # 840.6 -> 831.6); fewer rows are unmeasured and keep 1024
    tb = 512 if rows >= RADIX_SMALL_BLOCK_ROWS else 1024
    # Ranking costs rows * k^2 compares spread over the GPU; from 8 rows of dsv32's 2048 the
    # chunked placing wins (sorted 512-key chunks, then ranks across them). H200 run 37, call
    # us, one tl.sort a row -> PLACE_CHUNK 512: dsv32 B=32 8K 86.0 -> 50.2, 128K 279.5 ->
    # 244.0, 512K 793.8 -> 764.3; B=8 8K 87.1 -> 42.4 (256-key chunks). Below that the
    # ranking stays (B=1: 34.3 vs 37.3 at 8K, 65.9 vs 68.8 at 512K; dsv41-flash B=32 128K
    # 248.4 vs 248.3 with 128-key chunks).
    chunked = rows * k * k >= 8 * 2048 * 2048  # dsv41-flash (k = 512) from 128 rows: 128-key chunks (unmeasured)
    rank_block = max(16, min(256, next_power_of_2(cdiv(rows * k, 2 * SMS))))
    # the passes in one launch with row barriers: slower where measured (RADIX_FUSED_DEFAULT_ROWS)
    fused = rows <= RADIX_FUSED_DEFAULT_ROWS
    splits = default_radix_splits(w, tb)
    if fused:
        splits = min(splits, radix_fused_cap(rows))
    # SCORE_GLUON on Hopper for one token: the Gluon scoring kernel, H200 run 83 (CUPTI, scoring
    # launch us, Triton pack config -> Gluon): dsv32 B=1 512K 26.8 -> 26.5 (3 stages; 26.3 at 2,
    # 27.6 at 4, 33.0 at 6), B=1 128K 10.7 -> 9.9 (3), B=32 512K 567.7 -> 554.6 (4); mxfp4 keys
    # (run 128, scoring alone, pack -> Gluon with 3 stages): dsv41-flash B=1 512K 33.9 -> 26.3,
    # B=32 128K 166.1 -> 158.6, 512K 613.1 -> 599.9; its re-tune took it at 5 of 6 entries (3 stages)
    gluon = gluon_on_hopper() and w.next_n == 1
    first = "sampled" if rows >= RADIX_SAMPLED_ROWS and w.context >= RADIX_SAMPLED_CONTEXT else "byte"
    # SCORE_SAMPLE (the Gluon scoring builds the sampled digit-0 histogram, one launch fewer) for fp8 keys;
    # H200 run 138, B32 whole calls: dsv32 128K 211.4 -> 207.1 us (205.8 with PDL), 512K 677.3 -> 666.5; the
    # mxfp4 kernel, instruction-bound, loses (+24 SASS instructions: dsv41-flash 201.9 -> 209.0, 647.4 -> 682.8)
    sample = gluon and not mx and first == "sampled"
    return {"BLOCK_N": bn, "NUM_SPLITS": S, "CAND_MULT": 2, "MERGE_GROUP": 2, "SELECT_BLOCK": 1024,
            "SHARE_THRESHOLD": False, "MX_FP8_DOT": mx, "MX_WORD_DECODE": mx, "TOPK_ALGO": "radix",
            "TOPK_BLOCK": tb, "RADIX_FUSED": fused, "BOUND_GROUP": 64, "BOUND_FUSED": False, "RANK_STEP": 2048,
            "LAUNCH_PDL": False, "SCORE_MAXNREG": 0, "SCORE_GLUON": gluon, "SCORE_SAMPLE": sample,
            "RADIX_FOLD": False,  # compile- and interpreter-checked; not measured on a GPU yet (session 26)
            "TOPK_SPLITS": splits, "RANK_BLOCK": 64 if chunked else rank_block,
            "PLACE_SORT": False, "PLACE_CHUNK": min(PLACE_CHUNK_DEFAULT, next_power_of_2(k) // 4) if chunked else 0,
            "RADIX_FIRST": first,
            "num_warps": 4, "num_stages": (3 if rows == 1 or mx else 4) if gluon else RADIX_SCORE_STAGES}


def bound_config(workload: Workload) -> dict[str, Any]:
    """``radix_config``'s scoring with the bound top-k (``TOPK_ALGO="bound"``): the scoring
    kernel also writes the max of every BOUND_GROUP keys (``bound_default_group``'s size
    where it finds one, else one group a tile), one launch derives a bound of each row's k-th
    score from them in parts (``_bound_threshold_kernel``, ``bound_parts`` programs a row), one
    filters the row at it (``_bound_topk_kernel``) and one ranks the few keys above it
    (``_bound_place_kernel``): four launches in all, where the radix path takes eight or more."""
    c = radix_config(workload)
    # one filter step a program (H200 run 76, dsv32 B=1 512K: 2048-key steps 46.7 -> 44.4 us),
    # 8192 compares a ranking step (run 75: place 6.5 -> 5.3 us) and PDL launches (runs 74-78:
    # 1-2.5 us less at B=1 128K-512K; ignored before sm_90 and by the interpreter)
    tb = max(c["TOPK_BLOCK"], min(2048, next_power_of_2(cdiv(workload.context, c["TOPK_SPLITS"]))))
    return dict(c, TOPK_ALGO="bound", BOUND_GROUP=bound_default_group(workload) or c["BLOCK_N"], RADIX_FIRST="byte",
                SCORE_SAMPLE=False, RADIX_FUSED=False, PLACE_SORT=False, PLACE_CHUNK=0, TOPK_BLOCK=tb, RANK_STEP=8192,
                LAUNCH_PDL=True)


def merge_config(workload: Workload) -> dict[str, Any]:
    """The previous default: the scoring kernel's in-split candidate lists and radix
    prunes, then merge levels of up to 8 lists (for comparisons; the tuner can still pick it)."""
    w = workload
    c = radix_config(w)
    S = default_splits(w, c["BLOCK_N"], per_sm=2, min_tiles=8, cap=128, round_up=True)  # every split one more list
    return dict(c, NUM_SPLITS=S, TOPK_ALGO="merge", MERGE_GROUP=min(8, max(2, S)), TOPK_BLOCK=1024,
                TOPK_SPLITS=1, RANK_BLOCK=64, PLACE_SORT=False, PLACE_CHUNK=0, RADIX_FIRST="byte", RADIX_FUSED=False,
                SCORE_SAMPLE=False, SCORE_GLUON=False, num_stages=2)


def cost(workload: Workload) -> tuple[float, float]:
    """KERNELS.md floor: ``B*N*b_k`` bytes (indices only), ``2*B*next_n*H*128*N`` flops."""
    w = workload
    prof = PROFILES[w.profile]
    nbytes = w.batch * w.context * BYTES_PER_KEY[prof["k_format"]]
    flops = 2 * w.batch * w.next_n * prof["heads"] * D_INDEX * w.context
    return float(nbytes), float(flops)


def memory_bytes(workload: Workload, config: dict[str, Any] | None = None) -> int:
    """Device memory of the inputs, the top-k scratch and the outputs (no baseline)."""
    w = workload
    prof = PROFILES[w.profile]
    cfg = config or default_config(w)
    rows = w.batch * cdiv(w.context, PAGE) * PAGE
    p2 = next_power_of_2(prof["top_k"])
    if _algo(cfg) == "radix":  # scores (4 B) + two candidate buffers (8 B each) per row and key
        scratch = w.batch * w.next_n * (rows // w.batch * 20 + p2 * 8 + 4 * int(_RS.value))
    elif _algo(cfg) == "bound":  # scores (4 B) + one candidate buffer (8 B) per row and key, the group maxima
        n = rows // w.batch
        scratch = w.batch * w.next_n * (n * 12 + cdiv(n, cfg.get("BOUND_GROUP", 64)) * 4 + 4 * int(_RS.value))
    elif _algo(cfg) == "row":  # scores (4 B) + one candidate buffer (8 B) per row and key
        scratch = w.batch * w.next_n * (rows // w.batch * 12 + p2 * 8 + 1024 * cfg["NUM_SPLITS"])
    else:
        scratch = w.batch * w.next_n * cfg["NUM_SPLITS"] * cfg["CAND_MULT"] * max(p2, cfg["BLOCK_N"]) * 8
    return rows * BYTES_PER_KEY[prof["k_format"]] + scratch + 2 * w.batch * w.next_n * p2 * 8


def feasible(workload: Workload, budget_bytes: int | None = None) -> str | None:
    """None when the workload, its float64 reference (one sequence at a time) and the
    chunked baseline's logits fit in 70% of the device memory (141 GB without a GPU)."""
    if budget_bytes is None:
        total = 141 * 10**9
        if torch.cuda.is_available() and not interpreting():
            total = torch.cuda.get_device_properties(0).total_memory
        budget_bytes = int(0.7 * total)
    w = workload
    H = PROFILES[w.profile]["heads"]
    ref = w.context * (D_INDEX * 8 + w.next_n * H * 8 * 2)  # one sequence's keys and dots in float64
    baseline = w.batch * w.next_n * w.context * 4 * 2
    need = memory_bytes(w) + ref + baseline
    if need > budget_bytes:
        return f"needs {need / 1e9:.1f} GB of device memory, budget {budget_bytes / 1e9:.1f} GB"
    return None


# ----------------------------------------------------------------------------- public API


def mqa_topk(q: torch.Tensor, weights: torch.Tensor, k_cache: torch.Tensor, k_scales: torch.Tensor,
             block_table: torch.Tensor, seq_lens: torch.Tensor, *, top_k: int, k_format: str = "fp8",
             return_logits: bool = False, config: dict[str, Any] | None = None
             ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """Lightning-indexer scores fused with top-k: ``topk_idx [B, next_n, top_k] int32``.

    ``q [B, next_n, H, 128] float8_e4m3fn``, ``weights [B, next_n, H] fp32``; ``fp8``:
    ``k_cache [pages, PAGE, 128] float8_e4m3fn`` + ``k_scales [pages, PAGE] fp32``;
    ``mxfp4``: ``k_cache [pages, PAGE, 64] uint8`` + ``k_scales [pages, PAGE, 4] uint8``
    (UE8M0); ``block_table [B, max_pages] int32``, ``seq_lens [B] int32``. Indices sorted by
    descending score (ties: lower index first), -1 past the visible keys. With
    ``return_logits`` also ``[B, next_n, max_pages * PAGE] fp32`` (-inf where not seen).
    ``config=None`` picks the active pack's config (nearest profile by heads / top-k / format).
    """
    if config is None:
        B, T, H, _ = q.shape
        prof = next((p for p, v in PROFILES.items() if v["heads"] == H and v["top_k"] == top_k
                     and v["k_format"] == k_format), None)
        if prof is None:  # not a known profile: the one of the same key format
            prof = next(p for p, v in PROFILES.items() if v["k_format"] == k_format) if k_format in K_FORMATS \
                else "dsv32"
        wl = Workload(batch=B, context=int(block_table.shape[1]) * int(k_cache.shape[1]), next_n=T, profile=prof)
        config = runtime.select("sparse_mqa", _wdict(wl)).config
    return launch(config=config, q=q, weights=weights, k_cache=k_cache, k_scales=k_scales, block_table=block_table,
                  seq_lens=seq_lens, top_k=top_k, k_format=k_format, return_logits=return_logits)


# ----------------------------------------------------------------------------- baselines, verify


def torch_eager(q, weights, k_cache, k_scales, block_table, seq_lens, *, top_k, k_format="fp8",
                return_logits=False, chunk_elems: int = 2**27):
    """What a user writes first: per chunk of keys, gather and dequantize to fp32, einsum
    with q, relu, weighted head sum, key scale into a logits buffer; causal mask;
    ``torch.topk``. Chunked so the ``[B, next_n, H, chunk]`` products stay under
    ``chunk_elems`` floats at 512K; no host syncs, so it can be captured in a CUDA graph."""
    B, T, H, D = q.shape
    page = k_cache.shape[1]
    max_pages = block_table.shape[1]
    max_len = max_pages * page
    qf = q.float()
    logits = torch.empty(B, T, max_len, dtype=torch.float32, device=q.device)
    pages_per_chunk = max(1, chunk_elems // (B * max(T * H, D) * page))
    kc = k_cache.view(torch.uint8)
    for p0 in range(0, max_pages, pages_per_chunk):
        pg = block_table[:, p0:p0 + pages_per_chunk].long()
        n = pg.shape[1] * page
        if k_format == "fp8":
            k = kc[pg].view(torch.float8_e4m3fn).float().view(B, n, D)
            ks = k_scales[pg].view(B, 1, n)
        else:
            k = dequantize_mxfp4(kc[pg], k_scales[pg]).view(B, n, D)
            ks = None
        s = torch.relu(torch.einsum("bthd,bnd->bthn", qf, k))
        sc = torch.einsum("bthn,bth->btn", s, weights)
        logits[:, :, p0 * page:p0 * page + n] = sc if ks is None else sc * ks
    vis = visible(seq_lens, T)
    logits.masked_fill_(torch.arange(max_len, device=q.device)[None, None, :] >= vis[..., None], float("-inf"))
    kk = min(top_k, max_len)
    vals, idx = torch.topk(logits, kk, dim=-1)
    idx = torch.where(vals == float("-inf"), -1, idx).to(torch.int32)
    if kk < top_k:
        idx = torch.cat([idx, idx.new_full((B, T, top_k - kk), -1)], dim=-1)
    return (idx, logits) if return_logits else idx


baselines = {"torch_eager": torch_eager}


def scores_at(inputs: dict[str, Any], b: int, t: int, idx: torch.Tensor) -> torch.Tensor:
    """Float64 scores of sequence ``b``, token ``t`` at key indices ``idx`` (all >= 0)."""
    page = inputs["k_cache"].shape[1]
    i = idx.long()
    pages = inputs["block_table"][b].long()[i // page]
    k, ks = _dequant_rows(inputs["k_cache"][pages, i % page], inputs["k_scales"][pages, i % page],
                          inputs["k_format"])
    dots = torch.relu(inputs["q"][b, t].double() @ k.t())
    return (dots * inputs["weights"][b, t].double()[:, None]).sum(0) * ks


def verify(out: Any, ref: Any, inputs: dict[str, Any]) -> None:
    """Indices: exactly the reference's, or (where rounding reorders near-equal scores) a
    valid top-k: the same -1 padding, distinct visible keys in non-increasing score order
    whose scores match the reference's rank by rank within ``tol * max|score|`` of the
    row. Logits: ``|out - ref| <= 2 * tol * max|ref|`` of the row.

    ``tol`` is 1e-5 where the MMA accumulates in full fp32 (the interpreter) and 2^-10 on a
    GPU: Hopper's FP8 tensor cores keep ~14 bits while accumulating (DeepSeek-V3 report,
    sec. 3.3.2); the H200 gave logits 1.5-1.7e-4 of the row max off the float64 reference
    (dsv32, fp8 keys) and 2.1-2.6e-5 (mxfp4) while the indices were exactly the top-k of
    the kernel's own logits (benchmarks/sparse_mqa_debug.py, run 7)."""
    tol = 1e-5 if inputs["q"].device.type == "cpu" else 2.0 ** -10
    if inputs.get("return_logits"):
        idx, logits = out
        ridx, rlogits = ref
        fin = torch.isfinite(rlogits)
        scale = torch.where(fin, rlogits.abs(), torch.zeros_like(rlogits)).amax(-1, keepdim=True).clamp(min=1e-30)
        if logits.dtype != torch.float32:
            raise AssertionError(f"logits: dtype {logits.dtype}, want torch.float32")
        same_inf = torch.isinf(logits) & (logits == rlogits)  # -inf where not seen: equal, and no inf*0 bounds
        assert_close("logits", torch.where(same_inf, 0.0, logits / scale), torch.where(same_inf, 0.0, rlogits / scale),
                     atol=2 * tol)
    else:
        idx, ridx = out, ref
    if idx.dtype != torch.int32 or idx.shape != ridx.shape:
        raise AssertionError(f"topk_idx: {idx.dtype} {tuple(idx.shape)}, want torch.int32 {tuple(ridx.shape)}")
    idx, ridx = idx.cpu(), ridx.cpu()
    if torch.equal(idx, ridx):
        return
    if not torch.equal(idx >= 0, ridx >= 0):
        bad = (idx >= 0) != (ridx >= 0)
        raise AssertionError(f"topk_idx: -1 padding differs at {bad.nonzero()[:3].tolist()}")
    vis = visible(inputs["seq_lens"], idx.shape[1]).cpu()
    rows = (idx != ridx).any(-1).nonzero().tolist()
    for b, t in rows:
        m = idx[b, t] >= 0
        o, r = idx[b, t][m], ridx[b, t][m]
        if o.unique().numel() != o.numel() or int(o.min()) < 0 or int(o.max()) >= int(vis[b, t]):
            raise AssertionError(f"topk_idx[{b}, {t}]: indices repeat or are not visible keys")
        dev = inputs["q"].device
        so, sr = scores_at(inputs, b, t, o.to(dev)).cpu(), scores_at(inputs, b, t, r.to(dev)).cpu()
        tol_row = tol * float(sr.abs().max()) + 1e-30
        if (so[1:] - so[:-1] > tol_row).any():
            raise AssertionError(f"topk_idx[{b}, {t}]: not in descending score order")
        if ((so - sr).abs() > tol_row).any():
            j = int(((so - sr).abs() > tol_row).nonzero()[0])
            raise AssertionError(f"topk_idx[{b}, {t}] rank {j}: key {int(o[j])} scores {float(so[j]):.6g}, "
                                 f"reference key {int(r[j])} scores {float(sr[j]):.6g}")


def _plan_for(workload: Workload, config: dict[str, Any]) -> list[tuple[Any, tuple, dict[str, Any]]]:
    """``_plan`` of this workload's full-length inputs on meta tensors (no memory, no device)."""
    w = workload
    prof = PROFILES[w.profile]
    B, T, H, D, fmt = w.batch, w.next_n, prof["heads"], D_INDEX, prof["k_format"]
    m = lambda *s, dt=torch.float32: torch.empty(*s, dtype=dt, device="meta")  # noqa: E731
    pages = B * cdiv(w.context, PAGE)
    if fmt == "fp8":
        kc, ks = m(pages, PAGE, D, dt=torch.float8_e4m3fn), m(pages, PAGE)
    else:
        kc, ks = m(pages, PAGE, D // 2, dt=torch.uint8), m(pages, PAGE, D // 32, dt=torch.uint8)
    bufs = _buffers(B, T, (pages // B) * PAGE, prof["top_k"], False, config, "meta",
                    alloc=lambda shape, dtype, fill=None: m(*shape, dt=dtype))
    return _plan(m(B, T, H, D, dt=torch.float8_e4m3fn), m(B, T, H), kc, ks, m(B, pages // B, dt=torch.int32),
                 m(B, dt=torch.int32), prof["top_k"], fmt, False, config, bufs)


def lower_signatures(workload: Workload, config: dict[str, Any]) -> list[tuple[Any, dict[str, str], dict[str, Any]]]:
    """Each launch ``launch`` does for this workload/config: (jit fn, signature, constexprs).

    Needs ``TRITON_INTERPRET`` unset (under the interpreter the kernels are not compilable).
    """
    return [(kern, *lowering.signature(kern, args)) for kern, _grid, args in _plan_for(workload, config)]


runtime.register_defaults("sparse_mqa", lambda wd: default_config(Workload(**wd)))

SPEC = KernelSpec(
    name="sparse_mqa",
    workload=Workload,
    make_inputs=make_inputs,
    reference=reference,
    launch=launch,
    default_config=default_config,
    cost=cost,
    verify=verify,
    baselines=baselines,
    launch_bound=True,
    description="Sparse MQA indexer: FP8 / MXFP4 paged-key scoring fused with exact top-k (radix select)",
)
