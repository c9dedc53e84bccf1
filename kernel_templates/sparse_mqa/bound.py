"""``TOPK_ALGO="bound"``: the scoring kernel also writes the max of every ``BOUND_GROUP`` keys;
a lower bound of the row's k-th score is derived from those maxima (``_group_bound``: k
distinct groups each hold a key at or above the k-th largest max) in its own launch, in
parts of at most ``BOUND_PART_MAXIMA`` maxima a program held in registers
(``_bound_threshold_kernel``; the filter takes the least of the parts' bounds); the filter
(``_bound_topk_kernel``) streams the scores once and appends the keys at or above it, and
``_bound_place_kernel`` ranks those few candidates (one program selects exactly first when a
loose bound leaves too many). Three launches after the scoring, where the radix path takes
seven or more.
"""
from __future__ import annotations

from typing import Any

import triton
import triton.language as tl

from kernel_templates._host import cdiv, next_power_of_2
from kernel_templates.sparse_mqa.common import (_CNT_C1, _RS, _compact, _key_index, _kth_key, _n_visible, _order_bits,
                                                _pdl_enter, _select_digit)
from kernel_templates.sparse_mqa.topk import _filter_first, _filter_logits, _rank_from, _rank_in

# group maxima a step of the bound's histograms holds ([512, 16] compares: 64 a thread at 4
# warps), maxima a part of the bound launch takes at most (the parts' count a power of two, at
# most BOUND_MAX_PARTS), and holds in registers at once (_group_bound's ONE_LOAD; past that,
# GMAX_BLOCK at a time from memory)
BOUND_GMAX_BLOCK = 512
BOUND_PART_MAXIMA = 1024
BOUND_MAX_PARTS = 32
BOUND_REG_MAXIMA = 1024


def bound_parts(max_len: int, group: int) -> int:
    """Programs a row of the bound launch (``_bound_threshold_kernel``): parts of at most
    ``BOUND_PART_MAXIMA`` of a full row's group maxima, a power of two up to BOUND_MAX_PARTS."""
    return min(BOUND_MAX_PARTS, next_power_of_2(cdiv(cdiv(max_len, group), BOUND_PART_MAXIMA)))


def bound_gmax_block(per_part: int) -> dict[str, Any]:
    """``GMAX_BLOCK`` and ``ONE_LOAD`` of the bound's programs for at most ``per_part`` maxima
    a program: all of them in registers (one load) up to ``BOUND_REG_MAXIMA``, else
    ``BOUND_GMAX_BLOCK`` at a time."""
    block = max(16, next_power_of_2(max(1, per_part)))
    if block <= BOUND_REG_MAXIMA:
        return dict(GMAX_BLOCK=block, ONE_LOAD=True)
    return dict(GMAX_BLOCK=BOUND_GMAX_BLOCK, ONE_LOAD=False)


def bound_select_cap(top_k: int) -> int:
    """Candidates the bound path's placing ranks in parallel: 2 x next_pow2(top_k) (random
    scores at 64-key groups leave ~k + 15% of a 512K row)."""
    return 2 * next_power_of_2(max(top_k, 1))


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
    seven times: a chain of dependent loads, ~9.8 us at 1024 maxima on an H200)."""
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
    on an H200: 34-43 us for 8192 maxima). ``ONE_LOAD`` (``n <= GMAX_BLOCK``, the
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
    """After the scoring kernel (which wrote
    the scores and the max of every ``BOUND_GROUP`` keys): programs over (row,
    BOUND_PARTS) each derive one part's bound (``_part_theta``) into the row's state
    (rs[part], an area the bound path leaves to this: the radix path's histograms), which
    the filter programs reduce to the row's (the least). One program a row was the cost of
    the path at 8192 maxima (34 us on an H200); a part is 1024 maxima or fewer."""
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
def _bound_topk_kernel(logits_ptr, seqlen_ptr, cand_ptr, rs_ptr, top_k, max_len,
                       NEXT_N: tl.constexpr, TOPK_BLOCK: tl.constexpr, TOPK_SPLITS: tl.constexpr,
                       BOUND_GROUP: tl.constexpr, BOUND_PARTS: tl.constexpr, PDL: tl.constexpr = False):
    """Programs over (row, TOPK_SPLITS) stream their chunk of the row's scores once and
    append the keys at or above the row's bound (the least of ``_bound_threshold_kernel``'s
    parts) to the row's candidate list (count in the row's state, zeroed by the scoring
    kernel); ``_bound_place_kernel`` then ranks them. Chunks map in reverse: the interpreter
    runs programs in order, so there too the list runs against the index order (as it may
    on a GPU), and the tests see the placing not rely on it."""
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
    _, has = _row_groups(n, top_k, BOUND_GROUP)
    theta = tl.full([], -1, tl.int64)  # the order bits a candidate needs (-1: every visible key)
    if has:
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
