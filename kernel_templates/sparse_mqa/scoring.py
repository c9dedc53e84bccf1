"""The Triton scoring kernel: ``I[t, s] = sum_j w[t, j] * relu(q[t, j] . k[s]) * k_scale[s]``
over a paged key cache, written as the rows of scores the top-k paths read.

``_score_kernel`` runs on ``(B, NUM_SPLITS)``: each program scans one contiguous chunk of a
sequence's keys in tiles of ``BLOCK_N`` and scores the tile for every query token of the
step at once: the ``next_n * H`` query rows share each key tile (MQA), so one ``tl.dot`` of
``[BLOCK_N, 128] x [128, next_n*H]`` (FP8 MMA for fp8 keys), relu, the weight, a per-token
head sum and the key scale. mxfp4 keys are decoded in registers: either exactly to BF16
with their block scales (``nvfp4.mxfp4_tile_to_f32``) for one BF16 MMA, or (``MX_FP8_DOT``)
the E2M1 nibbles straight into E4M3 bit patterns (value * 2^-6, exact) for four FP8 MMAs
over the 32-wide scale blocks, each block's partial scaled by its UE8M0 scale (* 2^6) in fp32.
The row path's scoring also histograms a first digit of its scores, the bound path's
writes the max of every ``BOUND_GROUP`` keys.
"""
from __future__ import annotations

import triton
import triton.language as tl

from kernel_templates.nvfp4 import mxfp4_tile_to_f32, ue8m0_to_f32
from kernel_templates.sparse_mqa.common import _RS, _n_visible, _order_bits, _row_digit


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
    scale loaded where it is used left its whole memory latency exposed every tile (ncu
    on an H200, dsv32 B=1 512K: 31% of the stall samples on the multiply by the scale).
    The prefetch moved those stalls but not the time (the scoring stayed ~29 us)."""
    if K_FORMAT == 0:
        return tl.load(ks_ptr + row_s, mask=valid, other=0.0)
    elif MX_FP8_DOT and MX_WORD_DECODE:
        return tl.load((ks_ptr + row_s).to(tl.pointer_type(tl.int32)), mask=valid, other=0x7F7F7F7F)
    else:
        return tl.load(ks_ptr + row_s[:, None] + tl.arange(0, 4)[None, :], mask=valid[:, None], other=127)


@triton.jit
def _score_kernel(q_ptr, w_ptr, k_ptr, ks_ptr, bt_ptr, seqlen_ptr, logits_ptr, rs_ptr, gmax_ptr, H, max_len,
                  stride_qb, stride_qt, stride_qh, stride_wb, stride_wt, stride_kp, stride_ks, stride_sp,
                  stride_ss, stride_btb, stride_lb, stride_lt, stride_gm,
                  D: tl.constexpr, PAGE: tl.constexpr, K_FORMAT: tl.constexpr, NEXT_N: tl.constexpr,
                  TP: tl.constexpr, HP: tl.constexpr, BLOCK_N: tl.constexpr, NUM_SPLITS: tl.constexpr,
                  MX_FP8_DOT: tl.constexpr, MX_WORD_DECODE: tl.constexpr, TOPK_ALGO: tl.constexpr,
                  BOUND_GROUP: tl.constexpr, INTERPRET: tl.constexpr, PDL: tl.constexpr = False):
    """Scores of one (sequence, split) chunk of keys for every query token of the step.
    ``TOPK_ALGO``: "radix" / "bound" (split 0 zeroes the rows' top-k state; "bound" also
    writes the group maxima), "row" (a first-digit histogram per split), "none" (scores only)."""
    if PDL:
        # LAUNCH_PDL: the top-k launches after this one may start their programs now (each
        # waits for this launch to finish before it reads anything: _pdl_enter)
        tl.extra.cuda.gdc_launch_dependents()
    b = tl.program_id(0)
    split = tl.program_id(1)
    if TOPK_ALGO == "radix" or TOPK_ALGO == "bound":
        # the rows' top-k state starts at zero (the top-k launches run after this one)
        if split == 0:
            zo = tl.arange(0, 2048)
            for t in tl.static_range(NEXT_N):
                tl.store(rs_ptr + (b * NEXT_N + t) * _RS + zo, tl.zeros([2048], tl.int32), mask=zo < _RS)
    QR: tl.constexpr = TP * HP
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
    if TOPK_ALGO == "row":
        # this split's histogram of the row kernel's first digit, per token (bins t*256 + digit)
        row_hist = tl.zeros([TP * 256], tl.int32)
    _, row_s, valid = _tile_rows(bt_row, start, offs_n, end, stride_kp, stride_ks, stride_sp, stride_ss, PAGE, BLOCK_N)
    scl_next = _tile_scales(ks_ptr, row_s, valid, K_FORMAT, MX_FP8_DOT, MX_WORD_DECODE)
    for n0 in range(start, end, BLOCK_N):
        idx = n0 + offs_n
        row_k, _, valid = _tile_rows(bt_row, n0, offs_n, end, stride_kp, stride_ks, stride_sp, stride_ss, PAGE,
                                     BLOCK_N)
        scl = scl_next  # this tile's scales, loaded an iteration ago; the next tile's now
        _, row_s_next, valid_next = _tile_rows(bt_row, n0 + BLOCK_N, offs_n, end, stride_kp, stride_ks, stride_sp,
                                               stride_ss, PAGE, BLOCK_N)
        scl_next = _tile_scales(ks_ptr, row_s_next, valid_next, K_FORMAT, MX_FP8_DOT, MX_WORD_DECODE)
        if K_FORMAT == 0:
            kt = tl.load(k_ptr + row_k[:, None] + d[None, :], mask=valid[:, None], other=0)
            s = tl.dot(kt.to(tl.float8e4nv, bitcast=True), tl.trans(q))  # [BLOCK_N, QR]
        elif MX_FP8_DOT and MX_WORD_DECODE:
            s = _mx_tile_dot_word(k_ptr, row_k, valid, scl, q0, q1, q2, q3, BLOCK_N, INTERPRET)
        elif MX_FP8_DOT:
            s = _mx_tile_dot(k_ptr, row_k, valid, scl, q0, q1, q2, q3, BLOCK_N)
        else:
            codes = tl.load(k_ptr + row_k[:, None] + tl.arange(0, D // 2)[None, :], mask=valid[:, None], other=0)
            kt = mxfp4_tile_to_f32(codes, scl).to(tl.bfloat16)  # exact
            s = _mma(kt, tl.trans(q), INTERPRET)
        s = tl.maximum(s, 0.0) * w[None, :]
        sc = tl.sum(tl.reshape(s, (BLOCK_N, TP, HP)), axis=2)  # [BLOCK_N, TP]: per-token head sum
        if K_FORMAT == 0:
            sc = sc * scl[:, None]
        vis = valid[:, None] & (idx[:, None] < n_vis[None, :])
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
    if TOPK_ALGO == "row":
        # written whole by every split, empty ones too: no zeroing launch, nothing to reset for a graph replay
        hb = tl.arange(0, TP * 256)
        tl.store(rs_ptr + ((b * NEXT_N + hb // 256) * NUM_SPLITS + split) * 256 + hb % 256, row_hist,
                 mask=hb // 256 < NEXT_N)
