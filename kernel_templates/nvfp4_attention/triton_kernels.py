"""The Triton split-KV kernels: the split program (global splits + the SWA window) and the reduce.

The split program runs on a grid ``(B, cdiv(H, BLOCK_H), NUM_SPLITS + 1)``: programs
``0..NUM_SPLITS-1`` each scan one contiguous run of whole tiles of the sequence's global
entries (dense) or of its top-k list (sparse); program ``NUM_SPLITS`` scans the SWA window.
Each writes a partial (max, sum, unnormalised acc) in fp32; ``_reduce_kernel`` merges them
with the sink.

- MQA is what makes it MMA-friendly: ``BLOCK_H`` heads share every KV tile, so a tile is
  dequantized once and used by two ``tl.dot`` (``q @ K^T`` and ``P @ V``, fp32 accumulation).
  Dense tiles with ``BLOCK_N <= PAGE`` never straddle a page: one block-table load a tile.
- Decode once, by a software pipeline written by hand: the decoded tile is loop-carried
  (decoded at the end of the previous iteration) and the raw loads of tile i+1 are issued
  before tile i's MMAs. A loop-carried value has one layout, so Triton stores it to shared
  memory once and both MMAs read that copy. Written the plain way, Triton re-derived the
  decode once per MMA operand layout (sm_90 SASS: 1793 -> 747 instructions per warp per
  32-entry nvfp4 tile).
- nvfp4 is decoded exactly to fp16 value * 2^-14 (``nvfp4.nvfp4_tile_to_f16_scaled``) for
  an FP16 MMA; the 2^14 is folded into the softmax scale and the partial output. (The generic fp32
  decode + BF16 MMA measured 1.8-6.2x slower on an H200 and was dropped.)
- ``SWAP_AB``: compute ``K q^T`` and ``V^T P^T`` so that the entries (``BLOCK_N``) and the
  latent (512) are the MMA's M: Hopper's wgmma needs M >= 64, which 16 heads cannot give.
- ``D_CHUNKS`` 4: the latent in four column chunks, each decoded, stored and multiplied on
  its own (``_split_chunked``), only the raw bytes loop-carried. At 64 heads (64 x 64, 8
  warps) it lowers shared memory from 196608 to 131072 bytes and halves the spill traffic
  in the loop. (2 chunks measured 1.8-4.3x slower than 1 or 4 and was dropped.)
"""
from __future__ import annotations

import triton
import triton.language as tl

from kernel_templates.nvfp4 import F16_SHIFT, fp8_ue8m0_tile_to_f32, nvfp4_tile_to_f16_scaled

_F16_SHIFT = tl.constexpr(F16_SHIFT)


@triton.jit
def _load_kv_raw(kv_ptr, kvs_ptr, row_c, row_s, valid, D: tl.constexpr, KV_DTYPE: tl.constexpr,
                 C0: tl.constexpr = 0):
    """The stored bytes of a ``[BLOCK_N, D]`` tile (columns ``C0 .. C0 + D`` of the latent):
    (codes, scales); invalid rows read as zero (scale 127 = 1.0 for UE8M0), never NaN
    garbage. One row is contiguous: 128-bit loads."""
    if KV_DTYPE == 0:
        codes = tl.load(kv_ptr + row_c[:, None] + (C0 // 2 + tl.arange(0, D // 2))[None, :], mask=valid[:, None],
                        other=0)
        scales = tl.load(kvs_ptr + row_s[:, None] + (C0 // 16 + tl.arange(0, D // 16))[None, :], mask=valid[:, None],
                         other=0)
    elif KV_DTYPE == 1:
        codes = tl.load(kv_ptr + row_c[:, None] + (C0 + tl.arange(0, D))[None, :], mask=valid[:, None], other=0)
        scales = tl.load(kvs_ptr + row_s[:, None] + (C0 // 32 + tl.arange(0, D // 32))[None, :], mask=valid[:, None],
                         other=127)
    else:
        codes = tl.load(kv_ptr + row_c[:, None] + (C0 + tl.arange(0, D))[None, :], mask=valid[:, None], other=0.0)
        scales = codes
    return codes, scales


@triton.jit
def _decode_kv(codes, scales, KV_DTYPE: tl.constexpr):
    """Raw tile -> ``[BLOCK_N, D]`` in the MMA dtype: nvfp4 as fp16 value * 2^-14, fp8 as bf16."""
    if KV_DTYPE == 0:
        kv = nvfp4_tile_to_f16_scaled(codes, scales)
    elif KV_DTYPE == 1:
        kv = fp8_ue8m0_tile_to_f32(codes.to(tl.float8e4nv, bitcast=True), scales).to(tl.bfloat16)
    else:
        kv = codes
    return kv


@triton.jit
def _mma(a, b, INTERPRET: tl.constexpr, acc=None):
    """``tl.dot`` with fp32 accumulation (into ``acc`` when given: chained MMAs). The
    interpreter of Triton 3.9 multiplies bf16 operands as their raw bits, so there (and
    only for bf16) both go through fp32, which is exact; fp16 operands take the same
    16-bit dot as on the GPU."""
    if INTERPRET and a.dtype == tl.bfloat16:
        return tl.dot(a.to(tl.float32), b.to(tl.float32), acc)
    else:
        return tl.dot(a, b, acc)


@triton.jit
def _softmax_step(s, valid, m_i, l_i, SWAP_AB: tl.constexpr):
    """Online-softmax step over one tile of log2-domain scores: (m_new, l_new, p, alpha),
    the accumulator to be rescaled by ``alpha`` before ``p @ V`` is added.

    ``SWAP_AB``: scores are ``[BLOCK_N, BLOCK_H]`` (the entries / latent axis is the MMA's
    M, >= 64, so Hopper can use wgmma even at 16 heads); else ``[BLOCK_H, BLOCK_N]``.
    """
    if SWAP_AB:
        s = tl.where(valid[:, None], s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 0))
        m_use = tl.where(m_new == float("-inf"), 0.0, m_new)  # all-masked so far: no NaN
        alpha = tl.exp2(m_i - m_use)
        p = tl.exp2(s - m_use[None, :])
        l_i = l_i * alpha + tl.sum(p, 0)
    else:
        s = tl.where(valid[None, :], s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        m_use = tl.where(m_new == float("-inf"), 0.0, m_new)
        alpha = tl.exp2(m_i - m_use)
        p = tl.exp2(s - m_use[:, None])
        l_i = l_i * alpha + tl.sum(p, 1)
    return m_new, l_i, p, alpha


@triton.jit
def _attend(s, kv, valid, m_i, l_i, acc, SWAP_AB: tl.constexpr, INTERPRET: tl.constexpr):
    """Online-softmax update with one tile: ``acc`` is ``[D, BLOCK_H]`` under ``SWAP_AB``,
    else ``[BLOCK_H, D]``."""
    m_new, l_i, p, alpha = _softmax_step(s, valid, m_i, l_i, SWAP_AB)
    if SWAP_AB:
        acc = acc * alpha[None, :] + _mma(tl.trans(kv), p.to(kv.dtype), INTERPRET)
    else:
        acc = acc * alpha[:, None] + _mma(p.to(kv.dtype), kv, INTERPRET)
    return m_new, l_i, acc


@triton.jit
def _scores(qd, kv, sc, SWAP_AB: tl.constexpr, INTERPRET: tl.constexpr):
    if SWAP_AB:
        return _mma(kv, tl.trans(qd), INTERPRET) * sc
    else:
        return _mma(qd, tl.trans(kv), INTERPRET) * sc


@triton.jit
def _load_chunks(kv_ptr, kvs_ptr, row_c, row_s, valid, D: tl.constexpr, KV_DTYPE: tl.constexpr,
                 D_CHUNKS: tl.constexpr):
    """The raw tile as ``D_CHUNKS`` column chunks: a tuple of (codes, scales) pairs."""
    raw = ()
    for c in tl.static_range(D_CHUNKS):
        raw = raw + (_load_kv_raw(kv_ptr, kvs_ptr, row_c, row_s, valid, D // D_CHUNKS, KV_DTYPE,
                                  c * (D // D_CHUNKS)),)
    return raw


@triton.jit
def _attend_chunks(qs, raw, valid, m_i, l_i, accs, sc, KV_DTYPE: tl.constexpr, SWAP_AB: tl.constexpr,
                   INTERPRET: tl.constexpr):
    """One tile, the latent split in chunks (``D_CHUNKS`` > 1): each chunk is decoded on its
    own (a ``[BLOCK_N, D / D_CHUNKS]`` tensor, so the decode's registers are a fraction of
    the tile's), stored to shared memory once and read there by both MMAs: the scores
    accumulate over the chunks (chained MMAs), then each chunk's accumulator takes
    ``P @ V_chunk``. ``qs`` / ``raw`` / ``accs``: tuples of the chunks."""
    kvs = ()
    for c in tl.static_range(len(raw)):
        kv = _decode_kv(raw[c][0], raw[c][1], KV_DTYPE)
        kvs = kvs + (kv,)
        if c == 0:
            if SWAP_AB:
                s = _mma(kv, tl.trans(qs[c]), INTERPRET)
            else:
                s = _mma(qs[c], tl.trans(kv), INTERPRET)
        else:
            if SWAP_AB:
                s = _mma(kv, tl.trans(qs[c]), INTERPRET, s)
            else:
                s = _mma(qs[c], tl.trans(kv), INTERPRET, s)
    m_new, l_i, p, alpha = _softmax_step(s * sc, valid, m_i, l_i, SWAP_AB)
    new = ()
    for c in tl.static_range(len(raw)):
        kv = kvs[c]
        if SWAP_AB:
            new = new + (_mma(tl.trans(kv), p.to(kv.dtype), INTERPRET, accs[c] * alpha[None, :]),)
        else:
            new = new + (_mma(p.to(kv.dtype), kv, INTERPRET, accs[c] * alpha[:, None]),)
    return m_new, l_i, new


@triton.jit
def _tile_rows(n0, end, seq_len, offs_n, bt_row, tk_row, stride_kp, stride_ks, stride_sp, stride_ss,
               PAGE: tl.constexpr, BLOCK_N: tl.constexpr, SPARSE: tl.constexpr):
    """Row offsets (codes, scales) and the validity mask of the tile starting at ``n0``."""
    if SPARSE:
        pos = n0 + offs_n
        idx = tl.load(tk_row + pos, mask=pos < end, other=-1)
        valid = (idx >= 0) & (idx < seq_len)
        idx = tl.where(valid, idx, 0)
        page = tl.load(bt_row + idx // PAGE, mask=valid, other=0).to(tl.int64)
        slot = idx % PAGE
    elif BLOCK_N <= PAGE:
        valid = n0 + offs_n < end
        page = tl.load(bt_row + n0 // PAGE, mask=n0 < end, other=0).to(tl.int64)  # BLOCK_N | PAGE
        slot = n0 % PAGE + offs_n
    else:  # a tile spans BLOCK_N // PAGE whole pages
        idx = n0 + offs_n
        valid = idx < end
        page = tl.load(bt_row + idx // PAGE, mask=valid, other=0).to(tl.int64)
        slot = idx % PAGE
    return page * stride_kp + slot * stride_ks, page * stride_sp + slot * stride_ss, valid


@triton.jit
def _split_range(split, n_topk, seq_len, SPARSE: tl.constexpr, NUM_SPLITS: tl.constexpr, BLOCK_N: tl.constexpr):
    """[start, end) of this split's entries: one contiguous run of whole tiles of the
    sequence (dense) or of its top-k list (sparse)."""
    if SPARSE:
        n_items = n_topk
    else:
        n_items = seq_len
    chunk = tl.cdiv(tl.cdiv(n_items, NUM_SPLITS), BLOCK_N) * BLOCK_N
    start = split * chunk
    return start, tl.minimum(start + chunk, n_items)


@triton.jit
def _split_kernel(q_ptr, kv_ptr, kvs_ptr, bt_ptr, seqlen_ptr, swa_ptr, swas_ptr, topk_ptr,
                  m_ptr, l_ptr, acc_ptr,
                  H, n_topk, W, qk_scale,
                  stride_qb, stride_qh, stride_kp, stride_ks, stride_sp, stride_ss, stride_btb,
                  stride_wb, stride_ww, stride_wsb, stride_wsw, stride_tb,
                  stride_mb, stride_mh, stride_ab, stride_ah, stride_as,
                  D: tl.constexpr, PAGE: tl.constexpr, KV_DTYPE: tl.constexpr, SPARSE: tl.constexpr,
                  BLOCK_N: tl.constexpr, BLOCK_H: tl.constexpr, NUM_SPLITS: tl.constexpr,
                  SWAP_AB: tl.constexpr, D_CHUNKS: tl.constexpr, INTERPRET: tl.constexpr,
                  SPLIT0: tl.constexpr = 0):
    """Split ``program_id(2) + SPLIT0`` (``SPLIT0 = NUM_SPLITS`` on a grid of one: the SWA
    window's program alone, next to the Gluon kernel's global splits)."""
    if D_CHUNKS > 1:
        _split_chunked(q_ptr, kv_ptr, kvs_ptr, bt_ptr, seqlen_ptr, swa_ptr, swas_ptr, topk_ptr, m_ptr, l_ptr, acc_ptr,
                       H, n_topk, W, qk_scale, stride_qb, stride_qh, stride_kp, stride_ks, stride_sp, stride_ss,
                       stride_btb, stride_wb, stride_ww, stride_wsb, stride_wsw, stride_tb, stride_mb, stride_mh,
                       stride_ab, stride_ah, stride_as, D, PAGE, KV_DTYPE, SPARSE, BLOCK_N, BLOCK_H, NUM_SPLITS,
                       SWAP_AB, D_CHUNKS, INTERPRET, SPLIT0)
    else:
        _split_whole(q_ptr, kv_ptr, kvs_ptr, bt_ptr, seqlen_ptr, swa_ptr, swas_ptr, topk_ptr, m_ptr, l_ptr, acc_ptr,
                     H, n_topk, W, qk_scale, stride_qb, stride_qh, stride_kp, stride_ks, stride_sp, stride_ss,
                     stride_btb, stride_wb, stride_ww, stride_wsb, stride_wsw, stride_tb, stride_mb, stride_mh,
                     stride_ab, stride_ah, stride_as, D, PAGE, KV_DTYPE, SPARSE, BLOCK_N, BLOCK_H, NUM_SPLITS,
                     SWAP_AB, INTERPRET, SPLIT0)


@triton.jit
def _split_chunked(q_ptr, kv_ptr, kvs_ptr, bt_ptr, seqlen_ptr, swa_ptr, swas_ptr, topk_ptr, m_ptr, l_ptr, acc_ptr,
                   H, n_topk, W, qk_scale, stride_qb, stride_qh, stride_kp, stride_ks, stride_sp, stride_ss,
                   stride_btb, stride_wb, stride_ww, stride_wsb, stride_wsw, stride_tb, stride_mb, stride_mh,
                   stride_ab, stride_ah, stride_as, D: tl.constexpr, PAGE: tl.constexpr, KV_DTYPE: tl.constexpr,
                   SPARSE: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_H: tl.constexpr, NUM_SPLITS: tl.constexpr,
                   SWAP_AB: tl.constexpr, D_CHUNKS: tl.constexpr, INTERPRET: tl.constexpr, SPLIT0: tl.constexpr):
    """The split program with the latent in ``D_CHUNKS`` column chunks (``_attend_chunks``).

    No decoded tile crosses an iteration: the raw chunks of tile i+1 are loaded (into
    registers) before tile i is decoded chunk by chunk, so the registers held across the
    MMAs are the raw bytes plus one chunk being decoded, not a whole 16-bit tile; each
    chunk's 16-bit copy lives in shared memory only. Narrower rows also change the
    decode's thread layout (more rows per warp), which spreads each warp's stores over
    more swizzle phases of the shared tile."""
    b = tl.program_id(0)
    hb = tl.program_id(1)
    split = tl.program_id(2) + SPLIT0
    DC: tl.constexpr = D // D_CHUNKS
    heads = hb * BLOCK_H + tl.arange(0, BLOCK_H)
    hmask = heads < H
    dc = tl.arange(0, DC)
    offs_n = tl.arange(0, BLOCK_N)
    seq_len = tl.load(seqlen_ptr + b)
    m_i = tl.full([BLOCK_H], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_H], tl.float32)
    accs = ()
    for c in tl.static_range(D_CHUNKS):
        if SWAP_AB:
            accs = accs + (tl.zeros([DC, BLOCK_H], tl.float32),)
        else:
            accs = accs + (tl.zeros([BLOCK_H, DC], tl.float32),)
    q_row = q_ptr + b.to(tl.int64) * stride_qb + heads[:, None] * stride_qh
    if split < NUM_SPLITS:
        start, end = _split_range(split, n_topk, seq_len, SPARSE, NUM_SPLITS, BLOCK_N)
        qs = ()
        for c in tl.static_range(D_CHUNKS):
            qc = tl.load(q_row + (c * DC + dc)[None, :], mask=hmask[:, None], other=0.0)
            if KV_DTYPE == 0:
                qc = qc.to(tl.float16)
            qs = qs + (qc,)
        if KV_DTYPE == 0:
            sc = qk_scale * _F16_SHIFT  # the fp16 tile holds value * 2^-14
        else:
            sc = qk_scale
        bt_row = bt_ptr + b.to(tl.int64) * stride_btb
        tk_row = topk_ptr + b.to(tl.int64) * stride_tb
        row_c, row_s, valid_next = _tile_rows(start, end, seq_len, offs_n, bt_row, tk_row, stride_kp, stride_ks,
                                              stride_sp, stride_ss, PAGE, BLOCK_N, SPARSE)
        raw_next = _load_chunks(kv_ptr, kvs_ptr, row_c, row_s, valid_next, D, KV_DTYPE, D_CHUNKS)
        for n0 in range(start, end, BLOCK_N):
            raw = raw_next
            valid = valid_next
            row_c, row_s, valid_next = _tile_rows(n0 + BLOCK_N, end, seq_len, offs_n, bt_row, tk_row, stride_kp,
                                                  stride_ks, stride_sp, stride_ss, PAGE, BLOCK_N, SPARSE)
            raw_next = _load_chunks(kv_ptr, kvs_ptr, row_c, row_s, valid_next, D, KV_DTYPE, D_CHUNKS)
            m_i, l_i, accs = _attend_chunks(qs, raw, valid, m_i, l_i, accs, sc, KV_DTYPE, SWAP_AB, INTERPRET)
        if KV_DTYPE == 0:
            scaled = ()
            for c in tl.static_range(D_CHUNKS):
                scaled = scaled + (accs[c] * _F16_SHIFT,)
            accs = scaled
    else:
        # the SWA window (FP8, BF16 MMA), same chunked loop
        n_w = tl.minimum(seq_len, W)
        w_c = swa_ptr + b.to(tl.int64) * stride_wb
        w_s = swas_ptr + b.to(tl.int64) * stride_wsb
        wqs = ()
        for c in tl.static_range(D_CHUNKS):
            wqs = wqs + (tl.load(q_row + (c * DC + dc)[None, :], mask=hmask[:, None], other=0.0),)
        wvalid_next = offs_n < n_w
        wraw_next = _load_chunks(w_c, w_s, offs_n * stride_ww, offs_n * stride_wsw, wvalid_next, D, 1, D_CHUNKS)
        for n0 in range(0, n_w, BLOCK_N):
            wraw = wraw_next
            wvalid = wvalid_next
            w = n0 + BLOCK_N + offs_n
            wvalid_next = w < n_w
            wraw_next = _load_chunks(w_c, w_s, w * stride_ww, w * stride_wsw, wvalid_next, D, 1, D_CHUNKS)
            m_i, l_i, accs = _attend_chunks(wqs, wraw, wvalid, m_i, l_i, accs, qk_scale, 1, SWAP_AB, INTERPRET)
    mo = b.to(tl.int64) * stride_mb + heads * stride_mh + split
    tl.store(m_ptr + mo, m_i, mask=hmask)
    tl.store(l_ptr + mo, l_i, mask=hmask)
    ab = acc_ptr + b.to(tl.int64) * stride_ab + split * stride_as
    for c in tl.static_range(D_CHUNKS):
        if SWAP_AB:
            tl.store(ab + heads[None, :] * stride_ah + (c * DC + dc)[:, None], accs[c], mask=hmask[None, :])
        else:
            tl.store(ab + heads[:, None] * stride_ah + (c * DC + dc)[None, :], accs[c], mask=hmask[:, None])


@triton.jit
def _split_whole(q_ptr, kv_ptr, kvs_ptr, bt_ptr, seqlen_ptr, swa_ptr, swas_ptr, topk_ptr, m_ptr, l_ptr, acc_ptr,
                 H, n_topk, W, qk_scale, stride_qb, stride_qh, stride_kp, stride_ks, stride_sp, stride_ss,
                 stride_btb, stride_wb, stride_ww, stride_wsb, stride_wsw, stride_tb, stride_mb, stride_mh,
                 stride_ab, stride_ah, stride_as, D: tl.constexpr, PAGE: tl.constexpr, KV_DTYPE: tl.constexpr,
                 SPARSE: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_H: tl.constexpr, NUM_SPLITS: tl.constexpr,
                 SWAP_AB: tl.constexpr, INTERPRET: tl.constexpr, SPLIT0: tl.constexpr):
    """The split program with the whole ``[BLOCK_N, D]`` tile at once (``D_CHUNKS`` = 1)."""
    b = tl.program_id(0)
    hb = tl.program_id(1)
    split = tl.program_id(2) + SPLIT0
    heads = hb * BLOCK_H + tl.arange(0, BLOCK_H)
    hmask = heads < H
    d = tl.arange(0, D)
    offs_n = tl.arange(0, BLOCK_N)
    q = tl.load(q_ptr + b.to(tl.int64) * stride_qb + heads[:, None] * stride_qh + d[None, :],
                mask=hmask[:, None], other=0.0)
    seq_len = tl.load(seqlen_ptr + b)
    m_i = tl.full([BLOCK_H], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_H], tl.float32)
    if SWAP_AB:
        acc = tl.zeros([D, BLOCK_H], tl.float32)
    else:
        acc = tl.zeros([BLOCK_H, D], tl.float32)
    if split < NUM_SPLITS:
        # ---- global entries: one contiguous chunk of the sequence (dense) or of its top-k list
        start, end = _split_range(split, n_topk, seq_len, SPARSE, NUM_SPLITS, BLOCK_N)
        if KV_DTYPE == 0:
            qd = q.to(tl.float16)
            sc = qk_scale * _F16_SHIFT  # the fp16 tile holds value * 2^-14
        else:
            qd = q
            sc = qk_scale
        bt_row = bt_ptr + b.to(tl.int64) * stride_btb
        # Software pipeline by hand. The decoded tile is loop-carried (decoded one tile
        # ahead): a loop-carried value is one tensor in one layout, so Triton stores it to
        # shared memory once and both MMAs read that copy (q @ K^T through a transposed
        # view). Written straight, Triton re-derived the decode from the raw bytes once per
        # MMA operand layout: the decode ran twice per tile. The next tile's loads are
        # issued before this tile's MMAs, so their latency hides behind them.
        tk_row = topk_ptr + b.to(tl.int64) * stride_tb
        row_c, row_s, valid_next = _tile_rows(start, end, seq_len, offs_n, bt_row, tk_row, stride_kp, stride_ks,
                                              stride_sp, stride_ss, PAGE, BLOCK_N, SPARSE)
        raw_c, raw_s = _load_kv_raw(kv_ptr, kvs_ptr, row_c, row_s, valid_next, D, KV_DTYPE)
        kv_next = _decode_kv(raw_c, raw_s, KV_DTYPE)
        for n0 in range(start, end, BLOCK_N):
            kv = kv_next
            valid = valid_next
            row_c, row_s, valid_next = _tile_rows(n0 + BLOCK_N, end, seq_len, offs_n, bt_row, tk_row, stride_kp,
                                                  stride_ks, stride_sp, stride_ss, PAGE, BLOCK_N, SPARSE)
            raw_c, raw_s = _load_kv_raw(kv_ptr, kvs_ptr, row_c, row_s, valid_next, D, KV_DTYPE)
            s = _scores(qd, kv, sc, SWAP_AB, INTERPRET)
            m_i, l_i, acc = _attend(s, kv, valid, m_i, l_i, acc, SWAP_AB, INTERPRET)
            kv_next = _decode_kv(raw_c, raw_s, KV_DTYPE)
        if KV_DTYPE == 0:
            acc = acc * _F16_SHIFT
    else:
        # ---- the SWA window: min(seq_len, W) FP8 entries, always BF16 MMA (UE8M0 range)
        # (same hand-made pipeline as above; names differ: Triton merges same-named
        # values of both branches and the tiles' types differ)
        n_w = tl.minimum(seq_len, W)
        w_c = swa_ptr + b.to(tl.int64) * stride_wb
        w_s = swas_ptr + b.to(tl.int64) * stride_wsb
        valid_next = offs_n < n_w
        wraw_c, wraw_s = _load_kv_raw(w_c, w_s, offs_n * stride_ww, offs_n * stride_wsw, valid_next, D, 1)
        wkv_next = _decode_kv(wraw_c, wraw_s, 1)
        for n0 in range(0, n_w, BLOCK_N):
            wkv = wkv_next
            valid = valid_next
            w = n0 + BLOCK_N + offs_n
            valid_next = w < n_w
            wraw_c, wraw_s = _load_kv_raw(w_c, w_s, w * stride_ww, w * stride_wsw, valid_next, D, 1)
            s = _scores(q, wkv, qk_scale, SWAP_AB, INTERPRET)
            m_i, l_i, acc = _attend(s, wkv, valid, m_i, l_i, acc, SWAP_AB, INTERPRET)
            wkv_next = _decode_kv(wraw_c, wraw_s, 1)
    mo = b.to(tl.int64) * stride_mb + heads * stride_mh + split
    tl.store(m_ptr + mo, m_i, mask=hmask)
    tl.store(l_ptr + mo, l_i, mask=hmask)
    ab = acc_ptr + b.to(tl.int64) * stride_ab + split * stride_as
    if SWAP_AB:
        tl.store(ab + heads[None, :] * stride_ah + d[:, None], acc, mask=hmask[None, :])
    else:
        tl.store(ab + heads[:, None] * stride_ah + d[None, :], acc, mask=hmask[:, None])


@triton.jit
def _reduce_kernel(m_ptr, l_ptr, acc_ptr, sink_ptr, out_ptr, H,
                   stride_mb, stride_mh, stride_ab, stride_ah, stride_as, stride_ob, stride_oh,
                   D: tl.constexpr, NUM_SPLITS: tl.constexpr, BLOCK_HR: tl.constexpr, BLOCK_DR: tl.constexpr,
                   BLOCK_S: tl.constexpr, SPLITS_P2: tl.constexpr):
    """Merge the ``NUM_SPLITS + 1`` partials of ``BLOCK_HR`` heads x ``BLOCK_DR`` latent
    columns (program ``(b, head block, column block)``) with the sink into bf16 ``out``.

    Why it looks like this: it was one program per (b, 16 heads) over all 512 columns,
    looping over the splits with an online max. At B=8 that is 8 programs, and each
    iteration waited for its [16, 512] fp32 load (num_stages 1, and the running max made
    each step depend on the last): one memory round trip per split, 76 us on the H200 at
    128K (nvfp4, H=16; 8.6 MB of partials at 33 splits: a few us of bandwidth). Now:
    - the columns are split over programs too (``_reduce_blocks``: ~256 programs at B=8;
      every column block re-reads the few bytes of (m, l), which is cheap);
    - the (m, l) of all splits are one ``[BLOCK_HR, SPLITS_P2]`` load, so the global max
      ``M`` and the denominator come first, in one vectorised pass;
    - then the output is a plain weighted sum ``sum_s exp2(m_s - M) * acc_s``, no
      rescaling chain: the partials are loaded ``BLOCK_S`` splits at a time (one
      ``[BLOCK_HR, BLOCK_S, BLOCK_DR]`` load), the next chunk issued before this one is
      summed (the first chunk and the SWA partial even before ``M`` is known), and
      summed elementwise; the split axis is reduced once, at the end. (Triton's
      pipeliner does not pipeline these loads, num_stages 3 gives no cp.async: hence the
      prefetch by hand.)

    The sink joins the softmax as one more logit with a zero value: in ``M`` and in the
    denominator, not in the sum. It also keeps ``M`` finite, so empty splits (m = -inf,
    l = 0, acc = 0) weigh exp2(-inf) = 0 and merge without NaN.
    """
    b = tl.program_id(0)
    heads = tl.program_id(1) * BLOCK_HR + tl.arange(0, BLOCK_HR)
    hmask = heads < H
    d = tl.program_id(2) * BLOCK_DR + tl.arange(0, BLOCK_DR)
    mo = b.to(tl.int64) * stride_mb + heads * stride_mh  # [BLOCK_HR]
    ao = b.to(tl.int64) * stride_ab + heads * stride_ah
    # every load that does not need M first: (m, l) of all splits, the first chunk of the
    # global splits' partials (with their m), the SWA partial (split NUM_SPLITS), the sink
    sp = tl.arange(0, SPLITS_P2)
    ml_mask = hmask[:, None] & (sp[None, :] <= NUM_SPLITS)
    m_all = tl.load(m_ptr + mo[:, None] + sp[None, :], mask=ml_mask, other=float("-inf"))
    l_all = tl.load(l_ptr + mo[:, None] + sp[None, :], mask=ml_mask, other=0.0)
    so = tl.arange(0, BLOCK_S)
    a_rows = acc_ptr + ao[:, None, None] + so[None, :, None] * stride_as + d[None, None, :]
    c_mask = hmask[:, None] & (so[None, :] < NUM_SPLITS)
    a_next = tl.load(a_rows, mask=c_mask[:, :, None], other=0.0)
    m_next = tl.load(m_ptr + mo[:, None] + so[None, :], mask=c_mask, other=float("-inf"))
    a_w = tl.load(acc_ptr + ao[:, None] + NUM_SPLITS * stride_as + d[None, :], mask=hmask[:, None], other=0.0)
    m_w = tl.load(m_ptr + mo + NUM_SPLITS, mask=hmask, other=float("-inf"))
    sink = tl.load(sink_ptr + heads, mask=hmask, other=0.0) * 1.4426950408889634
    m_max = tl.maximum(sink, tl.max(m_all, 1))
    l_tot = tl.exp2(sink - m_max) + tl.sum(tl.exp2(m_all - m_max[:, None]) * l_all, 1)
    acc3 = tl.zeros([BLOCK_HR, BLOCK_S, BLOCK_DR], tl.float32)
    for s0 in range(0, NUM_SPLITS, BLOCK_S):
        a = a_next
        m_s = m_next
        # the next chunk (fully masked after the last: no memory traffic)
        nxt = s0 + BLOCK_S + so
        c_mask = hmask[:, None] & (nxt[None, :] < NUM_SPLITS)
        a_next = tl.load(a_rows + (s0 + BLOCK_S) * stride_as, mask=c_mask[:, :, None], other=0.0)
        m_next = tl.load(m_ptr + mo[:, None] + nxt[None, :], mask=c_mask, other=float("-inf"))
        acc3 += tl.exp2(m_s - m_max[:, None])[:, :, None] * a
    acc = tl.sum(acc3, 1) + tl.exp2(m_w - m_max)[:, None] * a_w
    out = acc / l_tot[:, None]
    tl.store(out_ptr + b.to(tl.int64) * stride_ob + heads[:, None] * stride_oh + d[None, :],
             out.to(tl.bfloat16), mask=hmask[:, None])

