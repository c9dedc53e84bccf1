"""The exact top-k paths after the scoring kernel wrote a row of scores per (sequence, token).

Every (score, index) is one 63-bit key ``order(score) << 31 | (2^31 - 1 - index)`` (unique,
larger = better, ties to the lower index), so selection is exact on integers.

- ``TOPK_ALGO="radix"``: row-parallel radix select, one launch a step (``_radix_pass_kernel``,
  programs over (row, ``TOPK_SPLITS``)): a histogram of a digit, then the pick of the k-th
  key's bin (keys above it selected, keys in it to the next candidate list), digit by digit,
  then the placing (``_radix_place_kernel``: each key ranked by compares, or with
  ``PLACE_CHUNK`` sorted chunks ranked across by binary search in ``_radix_merge_rank_kernel``).
  The GPU-wide passes win on long rows, but each launch costs ~3-4 us. ``RADIX_FIRST``
  picks the first digit (``_radix_digit``): "byte", or "sampled" (quarter binades placed from
  a 1-in-16 sample, a fallback pass keeping it exact). Tried and dropped: the digit-0
  histogram in the scoring kernel (atomics into a zero-filled state) instead of its own pass
  saved the 89.7 us pass at dsv32 B=32 512K but slowed the scoring kernel by 209 us
  (612 -> 821 on an H200), and B=1 8K too (40.5 -> 43.5 us).
- ``TOPK_ALGO="row"``: one program per (sequence, token) does the row's whole selection
  (``_row_topk_kernel``) from the scoring programs' first-digit histograms: one read of the
  row, a refinement of the k-th score's bin (a few % of the row), one ``tl.sort``.
- ``TOPK_ALGO="bound"``: see ``bound.py``; it appends with ``_filter_logits`` and places
  with ``_rank_from``.
"""
from __future__ import annotations

import triton
import triton.language as tl

from kernel_templates.sparse_mqa.common import (_CNT_C1X, _CNT_SEL, _CNT_TIE, _REM, _ROW_EXP_LO, _RS, RADIX_SAMPLE,
                                                _bits_key, _compact, _key_index, _kth_key, _n_visible, _order_bits,
                                                _order_key, _pdl_enter, _radix_digit, _row_digit, _select_digit)


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
    appended. Lean for a low pass rate (on an H200 the 1-D ``_append`` form of this loop
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
                SRC_CNT2: tl.constexpr):
    """One step of the row-parallel radix select, for program ``pid`` of the TOPK_SPLITS
    programs of row ``row`` (``_radix_pass_kernel``: one launch a step).

    Keys are the 63-bit ``_order_key``s; digit j is ``_radix_digit(key, j, RADIX_FIRST)``.
    The source is the row's logits (the visible ones) or a candidate list: every key of a
    candidate list shares the digits already picked. ``PICK = j``: every program derives
    digit j's bin from the row's histogram (the bin holding the ``rem``-th key from the top)
    and ``rem`` for the next digit (program 0 stores it); keys above the bin are selected
    (appended to the row's selected list), keys in it go to the next candidate list
    (``dst``), the rest drop. ``HIST = j``: the surviving keys' digit j goes into the row's
    histogram (atomic adds of a per-program histogram).

    ``MODE`` (``RADIX_FIRST="sampled"``): 1, the histogram of digit 0 over every
    ``RADIX_SAMPLE``-th key of the row only; 2, pick digit 0 at a safe threshold from that
    sample: the bin with at least ``2 * ceil(k / RADIX_SAMPLE) + 16`` sampled keys at or
    above it (all keys when the sample has fewer), every key at or above it to the candidate
    list, none selected yet; 3, the fallback: a row whose candidate list came out shorter
    than k appends the rest of its keys too (exact whatever the sample; a no-op otherwise).
    The fallback's programs decide on the list's count from the step before and append
    behind it under a counter of their own (``_CNT_C1X``; ``SRC_CNT2``: the next passes read
    the list's length as the sum), so no program's decision sees another's appends."""
    rs = rs_ptr + row * _RS
    if FROM_LOGITS:
        t = row % NEXT_N
        n = _n_visible(tl.load(seqlen_ptr + row // NEXT_N), t, NEXT_N, max_len)
        src = logits_ptr + row.to(tl.int64) * max_len
    else:
        n = tl.load(rs + SRC_CNT)
        if SRC_CNT2 > 0:
            n += tl.load(rs + SRC_CNT2)
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
        d, _ = _select_digit(tl.load(rs + bins), 2 * tl.cdiv(top_k, RADIX_SAMPLE) + 16)
        if MODE == 2:
            if pid == 0:
                tl.store(rs + _REM + 1, top_k)
        else:
            n_kept = tl.load(rs + DST_CNT)  # final: this step appends under _CNT_C1X
            if n_kept >= top_k:
                end = start  # the sampled threshold kept enough keys
    elif PICK >= 0:
        if PICK == 0:
            rem = top_k
        else:
            rem = tl.load(rs + _REM + PICK)
        d, rem_next = _select_digit(tl.load(rs + PICK * 256 + bins), rem)
        if pid == 0:
            tl.store(rs + _REM + PICK + 1, rem_next)
    offs = tl.arange(0, TOPK_BLOCK)
    acc = tl.zeros([256], tl.int32)
    if MODE == 2:
        _filter_logits(src, max_len, start, end, _row_digit_floor(d), dst_ptr + row.to(tl.int64) * stride_dst,
                       rs + DST_CNT, _filter_first(src, max_len, start, TOPK_BLOCK), TOPK_BLOCK)
        end = start  # done: the general loop below runs no step
    for o in range(start, end, TOPK_BLOCK):
        i = (o + offs) * step
        live = o + offs < end
        if FROM_LOGITS:
            key = _order_key(tl.load(src + i, mask=live, other=0.0), i)
        else:
            key = tl.load(src + i, mask=live, other=0)
        if MODE == 3:  # the fallback
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
                       SRC_CNT2: tl.constexpr = 0, PDL: tl.constexpr = False):
    """One step of the row-parallel radix select (``_radix_step``) a launch; programs over
    (row, TOPK_SPLITS chunks)."""
    _pdl_enter(PDL)
    _radix_step(logits_ptr, seqlen_ptr, src_ptr, sel_ptr, dst_ptr, rs_ptr, top_k, max_len,
                stride_src, stride_sel, stride_dst, tl.program_id(0), tl.program_id(1),
                NEXT_N, FROM_LOGITS, SRC_CNT, PICK, DST_CNT, HIST, TOPK_BLOCK, TOPK_SPLITS, RADIX_FIRST, MODE,
                SRC_CNT2)


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
                        RANK_BLOCK: tl.constexpr, TIE_MAX: tl.constexpr, TOPK_BLOCK: tl.constexpr,
                        N_DIGITS: tl.constexpr = 4, PLACE_CHUNK: tl.constexpr = 0, PDL: tl.constexpr = False):
    """Write the row's indices in descending key order. The selected keys (all above the
    k-th score) come first, then the keys tied at the k-th score, the ``rem`` largest
    (lowest index) of them; -1 pads.

    ``PLACE_CHUNK = 0``: programs over (row, chunks of RANK_BLOCK positions); each key goes
    to its rank, counted by compares against the whole list (parallel over the row, k^2
    compares a row). More than TIE_MAX ties: program 0 radix-selects the ties taken
    (exact, slow: degenerate inputs only).

    ``PLACE_CHUNK > 0`` (programs over (row, chunks of PLACE_CHUNK positions)): each program
    sorts its chunk of the selected list in place (one ``tl.sort`` of PLACE_CHUNK keys)
    and places the ties as the ranking does; ``_radix_merge_rank_kernel`` then writes the
    selected keys at their ranks across the sorted chunks (k log(PLACE_CHUNK) work a row,
    spread over the row's chunks, where the ranking is k^2)."""
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
        m = offs < n_sel
        keys = tl.load(sel + offs, mask=m, other=-1)
        tl.store(out + _rank_in(sel, n_sel, keys, CMP_BLOCK), _key_index(keys), mask=m)
    if nt <= TIE_MAX:
        for tc in range(j * RANK_BLOCK, nt, nprog * RANK_BLOCK):
            to = tc + tl.arange(0, RANK_BLOCK)
            tm = to < nt
            tk = tl.load(tie + to, mask=tm, other=-1)
            r = _rank_in(tie, nt, tk, CMP_BLOCK)
            tl.store(out + n_sel + r, _key_index(tk), mask=tm & (r < rem))
    elif j == 0:
        kth = _kth_key(tie, 0, rs + _CNT_TIE, 1, rem, TOPK_BLOCK)
        kept = _compact(tie, 0, rs + _CNT_TIE, 1, kth, tie, TOPK_BLOCK)  # the rem taken
        tl.debug_barrier()
        for tc in range(0, kept, RANK_BLOCK):
            to = tc + tl.arange(0, RANK_BLOCK)
            tk = tl.load(tie + to, mask=to < kept, other=-1)
            tl.store(out + n_sel + _rank_in(tie, kept, tk, CMP_BLOCK), _key_index(tk), mask=to < kept)
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
       keys on an H200)."""
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
