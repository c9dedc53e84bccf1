"""What the scoring kernels and the top-k paths share: the constants of the format and of the
per-row top-k state, and the 63-bit order keys with their radix digits (exact selection on
integers: larger key = better score, ties to the lower index)."""
from __future__ import annotations

from typing import Any

import triton
import triton.language as tl

D_INDEX = 128
PAGE = 64
K_FORMATS = ("fp8", "mxfp4")
BYTES_PER_KEY = {"fp8": 132, "mxfp4": 68}
PROFILES: dict[str, dict[str, Any]] = {
    "dsv32": dict(heads=64, top_k=2048, k_format="fp8"),
    "dsv41-flash": dict(heads=32, top_k=512, k_format="mxfp4"),
}
MAX_TOPK = 4096  # the row kernel sorts next_pow2(top_k) 64-bit keys in registers
TOPK_ALGOS = ("radix", "row", "bound")
# Top-k state, one int32 row per (sequence, token): the radix passes' 256-bin histograms of
# the digits (the four bytes of the score's order bits, after 0 or 2 quarter-binade digits,
# see _radix_digit), then counters: keys in the selected list, in each candidate list and in
# the tie list, and the keys still wanted after each digit. The bound path keeps its parts'
# bounds where the histograms are.
_RS = tl.constexpr(1551)
_CNT_SEL = tl.constexpr(1536)
_CNT_C1, _CNT_C2, _CNT_C3, _CNT_TIE, _CNT_C4, _CNT_C5, _CNT_C1X = (tl.constexpr(1537 + i) for i in range(7))
_REM = tl.constexpr(1544)  # _REM + j: keys still wanted after digit j - 1 (j = 1..6)
# the radix passes' first digit (RADIX_FIRST config) -> quarter-binade digits before the four order bytes
RADIX_LEAD = {"byte": 0, "sampled": 2}
RADIX_FIRST = tuple(RADIX_LEAD)
RADIX_SAMPLE = tl.constexpr(16)  # "sampled": every 16th key of a row in the first histogram
_ROW_EXP_LO = tl.constexpr(87)  # biased exponent of the lowest binade with bins of its own (2^-40)


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
    """Digit ``J`` of a 63-bit ``_order_key`` for the radix passes: 0 or 2 quarter-binade
    digits (``_row_digit``), then the four bytes of the score's order bits, most
    significant first. ``RADIX_FIRST`` "byte": the bytes alone (the top one is sign + 7
    exponent bits, one binade a bin: the k-th score's bin holds ~15% of a row). "sampled":
    digit 0 is the quarter binades histogrammed over a sample of the row (a safe threshold,
    see ``_radix_step``), digit 1 the same again, exactly, over the keys above it.
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


@triton.jit
def _key_index(keys):
    """The key index of ``_order_key``s as int32; -1 where the key is -1 (no key)."""
    return tl.where(keys >= 0, 2147483647 - (keys & 2147483647), -1).to(tl.int32)


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
def _kth_key(base, stride_l, cnt_ptr, n_lists, k, BLOCK: tl.constexpr):
    """Exact k-th largest of the keys in lists ``base + l * stride_l`` (``cnt_ptr[l]`` keys
    each, l < n_lists; at least k keys in all): radix select from the top, 8 bits a pass,
    streaming the lists through one 256-bin histogram per pass."""
    bins = tl.arange(0, 256)
    offs = tl.arange(0, BLOCK)
    prefix = tl.full([], 0, tl.int64)
    rem = k
    for p in range(8):  # a loop, not unrolled: unrolled, ptxas spilled 12-24 B
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
        # inline, not _select_digit: through the helper ptxas spilled a word (sm_90, Triton 3.6)
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
