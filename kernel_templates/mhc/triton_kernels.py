"""mHC's Triton kernels: post, the pre / seam mix kernel and the split-K finish launch.

- The ``fn`` weights (24 x 4D fp32, ~2 MB at D = 5120) are the whole cost at small T, so
  the 4D reduction is split over D (``SPLIT_K`` programs per token block, each owning a
  D-chunk of all four streams): every fn element is read from HBM once per call. Each
  program writes a partial ``[T, 32]`` mix sum and a partial 4x4 Gram matrix of the
  streams; a second launch (``_mhc_finish_kernel``, its own grid and tiles, ``finish_tiles``)
  reduces them, runs the sigmoid / softmax / Sinkhorn epilogue and writes ``u`` for its own
  D-chunk. (Combining in the first launch, the block's last program or all of them after a
  wait, measured 1.06-1.41x slower on an H200: the waiting programs idle their SMs.)
- The Gram matrix ``G[i, k] = sum_d X_i[d] X_k[d]`` gives both RMS factors without
  another pass: ``sum(x^2) = trace(G)`` and ``sum(h^2) = pre^T G pre`` for
  ``h = sum_i pre_i X_i``. So ``u`` needs only one more read of the chunk.
- ``SPLIT_K == 1`` is a single fused launch: each program owns whole token rows, does
  the epilogue in registers and re-reads its own rows for ``u`` (L2-hot at small T only).
- The GEMM is ``tl.dot`` in tf32 (X is bf16, so exact; only fn is rounded: ~3e-4 relative
  on ``mix``), transposed (fn tile as A, the streams as B from shared memory, see
  ``_dot_stream``). fp32 on CUDA cores (fma / ieee), 3xtf32 and a two-term bf16 split of fn
  measured 1.3-4.7x slower on an H200 and were removed.
- Per D step the loop keeps only ``[BLOCK_T]`` running sums for the Gram matrix (10 of
  them), the seam's 20 post / comb coefficients are loaded once before the loop, and
  the residual streams carry L2 eviction hints (read-once loads ``evict_first``, the
  seam's new residual ``evict_last`` for the u pass that re-reads it).
- ``SOFT_BF16`` (the interpreter): it truncates a plain fp32 -> bf16 cast (and its "rtne"
  drops the carry into the exponent); a GPU rounds to nearest even in one cvt. Rounding by
  hand there gives the same bits on both.
"""
from __future__ import annotations

from typing import Any

import torch
import triton
import triton.language as tl

from kernel_templates._host import cdiv, next_power_of_2
from tuner.runtime.target import Target

@triton.jit
def _to_bf16(x, SOFT_BF16: tl.constexpr):
    if SOFT_BF16:
        b = x.to(tl.uint32, bitcast=True)
        b = b + 0x7FFF + ((b >> 16) & 1)
        return (b >> 16).to(tl.uint16).to(tl.bfloat16, bitcast=True)
    else:
        return x.to(tl.bfloat16)


@triton.jit
def _load2(ptr, offs_t, mask_t, offs_d, D, stride_t, POLICY: tl.constexpr):
    m = mask_t[:, None] & (offs_d < D)[None, :]
    return tl.load(ptr + offs_t[:, None] * stride_t + offs_d[None, :], mask=m, other=0.0,
                   eviction_policy=POLICY).to(tl.float32)


@triton.jit
def _post_coeffs(pin_ptr, cin_ptr, j: tl.constexpr, offs_t, mask_t):
    """post_j and comb[0..3, j] of each token: five ``[BLOCK_T]`` vectors."""
    cb = cin_ptr + offs_t * 16 + j
    return (tl.load(pin_ptr + offs_t * 4 + j, mask=mask_t, other=0.0), tl.load(cb, mask=mask_t, other=0.0),
            tl.load(cb + 4, mask=mask_t, other=0.0), tl.load(cb + 8, mask=mask_t, other=0.0),
            tl.load(cb + 12, mask=mask_t, other=0.0))


@triton.jit
def _all_post_coeffs(pin_ptr, cin_ptr, offs_t, mask_t):
    """The 20 coefficient vectors of the new residual; loaded once per program, before
    the D loop (inside it the pipeliner re-issued all 20 loads every step)."""
    return (_post_coeffs(pin_ptr, cin_ptr, 0, offs_t, mask_t), _post_coeffs(pin_ptr, cin_ptr, 1, offs_t, mask_t),
            _post_coeffs(pin_ptr, cin_ptr, 2, offs_t, mask_t), _post_coeffs(pin_ptr, cin_ptr, 3, offs_t, mask_t))


@triton.jit
def _post_stream(j: tl.constexpr, x0, x1, x2, x3, y, cf, xn_ptr, offs_t, mask_t, offs_d, D,
                 stride_nt, stride_ns, STORE_POLICY: tl.constexpr, SOFT_BF16: tl.constexpr):
    """X'_j = post_j y + sum_i comb[i, j] X_i, stored as bf16; returns the stored values."""
    p, c0, c1, c2, c3 = cf
    xn = p[:, None] * y + c0[:, None] * x0 + c1[:, None] * x1 + c2[:, None] * x2 + c3[:, None] * x3
    xb = _to_bf16(xn, SOFT_BF16)
    tl.store(xn_ptr + offs_t[:, None] * stride_nt + j * stride_ns + offs_d[None, :], xb,
             mask=mask_t[:, None] & (offs_d < D)[None, :], eviction_policy=STORE_POLICY)
    return xb.to(tl.float32)


@triton.jit
def _post_tile(x_ptr, y_ptr, coeffs, xn_ptr, offs_t, mask_t, offs_d, D,
               stride_xt, stride_xs, stride_yt, stride_nt, stride_ns, STORE_POLICY: tl.constexpr,
               SOFT_BF16: tl.constexpr):
    """One tile of the new residual, all four streams: 4 x [BLOCK_T, BLOCK_D] fp32.
    X and y are read once per call (``evict_first``: leave L2 to what is read again);
    the seam stores with ``evict_last`` because its u pass re-reads the new residual."""
    x0 = _load2(x_ptr, offs_t, mask_t, offs_d, D, stride_xt, "evict_first")
    x1 = _load2(x_ptr + stride_xs, offs_t, mask_t, offs_d, D, stride_xt, "evict_first")
    x2 = _load2(x_ptr + 2 * stride_xs, offs_t, mask_t, offs_d, D, stride_xt, "evict_first")
    x3 = _load2(x_ptr + 3 * stride_xs, offs_t, mask_t, offs_d, D, stride_xt, "evict_first")
    y = _load2(y_ptr, offs_t, mask_t, offs_d, D, stride_yt, "evict_first")
    cf0, cf1, cf2, cf3 = coeffs
    n0 = _post_stream(0, x0, x1, x2, x3, y, cf0, xn_ptr, offs_t, mask_t, offs_d, D, stride_nt, stride_ns,
                      STORE_POLICY, SOFT_BF16)
    n1 = _post_stream(1, x0, x1, x2, x3, y, cf1, xn_ptr, offs_t, mask_t, offs_d, D, stride_nt, stride_ns,
                      STORE_POLICY, SOFT_BF16)
    n2 = _post_stream(2, x0, x1, x2, x3, y, cf2, xn_ptr, offs_t, mask_t, offs_d, D, stride_nt, stride_ns,
                      STORE_POLICY, SOFT_BF16)
    n3 = _post_stream(3, x0, x1, x2, x3, y, cf3, xn_ptr, offs_t, mask_t, offs_d, D, stride_nt, stride_ns,
                      STORE_POLICY, SOFT_BF16)
    return n0, n1, n2, n3


@triton.jit
def _dot_stream(x, i: tl.constexpr, fn_ptr, offs_d, D, acc):
    """This tile's share of stream i's mix sums, transposed: ``acc[n, t] += sum_d fn[n, i*D + d]
    X_i[t, d]`` (tf32; fn rows padded to the 64 rows of a Hopper MMA, the padding masked, never
    read). Why transposed: with X as the A operand the compiler re-derived the new residual
    separately for the A-operand register layouts (loads, 20 FMAs and the bf16 rounding per
    element done three times per step); as the B operand it is only written to shared memory,
    from the layout it was computed in."""
    n = tl.arange(0, 64)
    w = tl.load(fn_ptr + n[:, None] * (4 * D) + i * D + offs_d[None, :],
                mask=(n < 24)[:, None] & (offs_d < D)[None, :], other=0.0)  # [64, BLOCK_D]
    return tl.dot(w, tl.trans(x), acc, input_precision="tf32")


@triton.jit
def _mix_sums(acc, BLOCK_T: tl.constexpr):
    """``[BLOCK_T, 32]`` mix sums (24 used) from the ``[64, BLOCK_T]`` accumulator: rows 32..63
    are zero (masked fn rows), so the sum over the middle axis of [T, 2, 32] is the first 32."""
    return tl.sum(tl.reshape(tl.trans(acc), [BLOCK_T, 2, 32]), axis=1)


@triton.jit
def _accumulate(x0, x1, x2, x3, fn_ptr, offs_d, D, acc, g):
    """The tile's share of the 4D reduction (mix) and of the stream Gram matrix, kept as
    its 10 distinct entries, one ``[BLOCK_T]`` sum each, in the tiles' own row layout: no
    layout conversion or 4x4 select per step (``_gram_matrix`` builds the 4x4 once)."""
    acc = _dot_stream(x0, 0, fn_ptr, offs_d, D, acc)
    acc = _dot_stream(x1, 1, fn_ptr, offs_d, D, acc)
    acc = _dot_stream(x2, 2, fn_ptr, offs_d, D, acc)
    acc = _dot_stream(x3, 3, fn_ptr, offs_d, D, acc)
    g00, g01, g02, g03, g11, g12, g13, g22, g23, g33 = g
    g00 += tl.sum(x0 * x0, axis=1)
    g01 += tl.sum(x0 * x1, axis=1)
    g02 += tl.sum(x0 * x2, axis=1)
    g03 += tl.sum(x0 * x3, axis=1)
    g11 += tl.sum(x1 * x1, axis=1)
    g12 += tl.sum(x1 * x2, axis=1)
    g13 += tl.sum(x1 * x3, axis=1)
    g22 += tl.sum(x2 * x2, axis=1)
    g23 += tl.sum(x2 * x3, axis=1)
    g33 += tl.sum(x3 * x3, axis=1)
    return acc, (g00, g01, g02, g03, g11, g12, g13, g22, g23, g33)


@triton.jit
def _gram_entry(gram, v, i: tl.constexpr, k: tl.constexpr):
    ii = tl.arange(0, 4)[None, :, None]
    kk = tl.arange(0, 4)[None, None, :]
    sel = ((ii == i) & (kk == k)) | ((ii == k) & (kk == i))
    return gram + tl.where(sel, v[:, None, None], 0.0)


@triton.jit
def _gram_matrix(g, BLOCK_T: tl.constexpr):
    """``[BLOCK_T, 4, 4]`` symmetric Gram matrix from its 10 distinct entries (once per program)."""
    g00, g01, g02, g03, g11, g12, g13, g22, g23, g33 = g
    gram = tl.zeros([BLOCK_T, 4, 4], dtype=tl.float32)
    gram = _gram_entry(gram, g00, 0, 0)
    gram = _gram_entry(gram, g01, 0, 1)
    gram = _gram_entry(gram, g02, 0, 2)
    gram = _gram_entry(gram, g03, 0, 3)
    gram = _gram_entry(gram, g11, 1, 1)
    gram = _gram_entry(gram, g12, 1, 2)
    gram = _gram_entry(gram, g13, 1, 3)
    gram = _gram_entry(gram, g22, 2, 2)
    gram = _gram_entry(gram, g23, 2, 3)
    gram = _gram_entry(gram, g33, 3, 3)
    return gram


@triton.jit
def _epilogue(m3, gram, scale_ptr, base_ptr, post_ptr, comb_ptr, offs_t, mask_t, D, eps, n_iters, store):
    """From the full mix sums ``m3 [BLOCK_T, 8, 4]`` (row 0 pre, 1 post, 2..5 comb rows,
    6..7 padding) and the Gram matrix: if ``store``, compute and store post / comb (the
    Sinkhorn rounds); return pre_0..3 and the RMS factor of h = sum_i pre_i X_i (from
    pre^T G pre, no pass over h needed), which is all that u needs."""
    row = tl.arange(0, 8)[None, :, None]
    col = tl.arange(0, 4)[None, None, :]
    s = tl.arange(0, 4)
    diag = (s[:, None] == s[None, :])[None, :, :]
    ss = tl.sum(tl.sum(tl.where(diag, gram, 0.0), axis=2), axis=1)  # sum x^2 = trace(G)
    rms = 1.0 / tl.sqrt(ss / (4 * D) + eps)
    sc = tl.load(scale_ptr + tl.minimum(row, 2))
    bs = tl.load(base_ptr + row * 4 + col, mask=row < 6, other=0.0)
    z = m3 * rms[:, None, None] * sc + bs
    sig = 1.0 / (1.0 + tl.exp(-z))
    pre = tl.sum(tl.where(row == 0, sig + eps, 0.0), axis=1)  # [BLOCK_T, 4]
    if store:
        tl.store(post_ptr + offs_t[:, None, None] * 4 + col + row * 0, 2.0 * sig,
                 mask=mask_t[:, None, None] & (row == 1))
        # Sinkhorn on the comb rows only; the other rows are zero so column sums ignore them.
        is_comb = (row >= 2) & (row < 6)
        e = tl.exp(z - tl.max(z, axis=2)[:, :, None])
        c = tl.where(is_comb, e / tl.sum(e, axis=2)[:, :, None] + eps, 0.0)
        c = c / (tl.sum(c, axis=1)[:, None, :] + eps)
        for _ in range(n_iters - 1):
            c = c / (tl.sum(c, axis=2)[:, :, None] + eps)
            c = c / (tl.sum(c, axis=1)[:, None, :] + eps)
        tl.store(comb_ptr + offs_t[:, None, None] * 16 + (row - 2) * 4 + col, c,
                 mask=mask_t[:, None, None] & is_comb)
    hss = tl.sum(tl.sum(pre[:, :, None] * gram * pre[:, None, :], axis=2), axis=1)  # pre^T G pre
    p0 = tl.sum(tl.where(s[None, :] == 0, pre, 0.0), axis=1)
    p1 = tl.sum(tl.where(s[None, :] == 1, pre, 0.0), axis=1)
    p2 = tl.sum(tl.where(s[None, :] == 2, pre, 0.0), axis=1)
    p3 = tl.sum(tl.where(s[None, :] == 3, pre, 0.0), axis=1)
    return p0, p1, p2, p3, 1.0 / tl.sqrt(hss / D + eps)


@triton.jit
def _u_tile(src_ptr, w_ptr, u_ptr, p0, p1, p2, p3, urms, offs_t, mask_t, d0, D, stride_st, stride_ss, stride_ut,
            BLOCK_D: tl.constexpr, SOFT_BF16: tl.constexpr):
    """u[t, d] = (sum_i pre_i X_i[d]) * urms * norm_w[d] over ``[d0, d0 + BLOCK_D)``."""
    offs_d = d0 + tl.arange(0, BLOCK_D)
    h = p0[:, None] * _load2(src_ptr, offs_t, mask_t, offs_d, D, stride_st, "evict_first")
    h += p1[:, None] * _load2(src_ptr + stride_ss, offs_t, mask_t, offs_d, D, stride_st, "evict_first")
    h += p2[:, None] * _load2(src_ptr + 2 * stride_ss, offs_t, mask_t, offs_d, D, stride_st, "evict_first")
    h += p3[:, None] * _load2(src_ptr + 3 * stride_ss, offs_t, mask_t, offs_d, D, stride_st, "evict_first")
    w = tl.load(w_ptr + offs_d, mask=offs_d < D, other=0.0).to(tl.float32)
    tl.store(u_ptr + offs_t[:, None] * stride_ut + offs_d[None, :], _to_bf16(h * urms[:, None] * w[None, :], SOFT_BF16),
             mask=mask_t[:, None] & (offs_d < D)[None, :])


@triton.jit
def _u_pass(src_ptr, w_ptr, u_ptr, p0, p1, p2, p3, urms, offs_t, mask_t, d_lo, d_hi, D,
            stride_st, stride_ss, stride_ut, BLOCK_D: tl.constexpr, SOFT_BF16: tl.constexpr, REVERSE: tl.constexpr):
    """u over [d_lo, d_hi) in ``BLOCK_D`` tiles (``_u_tile``) from ``d_lo`` up, or with
    ``REVERSE`` from the last tile down."""
    if REVERSE:
        n_tiles = tl.cdiv(d_hi - d_lo, BLOCK_D)
        for i in range(n_tiles):
            _u_tile(src_ptr, w_ptr, u_ptr, p0, p1, p2, p3, urms, offs_t, mask_t, d_lo + (n_tiles - 1 - i) * BLOCK_D,
                    D, stride_st, stride_ss, stride_ut, BLOCK_D, SOFT_BF16)
    else:
        for d0 in range(d_lo, d_hi, BLOCK_D):
            _u_tile(src_ptr, w_ptr, u_ptr, p0, p1, p2, p3, urms, offs_t, mask_t, d0, D, stride_st, stride_ss,
                    stride_ut, BLOCK_D, SOFT_BF16)


@triton.jit
def _combine(pmix_ptr, pgram_ptr, scale_ptr, base_ptr, post_ptr, comb_ptr, offs_t, mask_t, T, D, eps, n_iters,
             store, BLOCK_T: tl.constexpr, SPLIT_K: tl.constexpr):
    """Sum the SPLIT_K partial mix sums / Gram matrices of a token block and run the
    epilogue (post / comb stored if ``store``); returns pre_0..3 and u's RMS factor.
    ``.cg`` loads: the partials were written by other programs (other SMs)."""
    row = tl.arange(0, 8)[None, :, None]
    col = tl.arange(0, 4)[None, None, :]
    s = tl.arange(0, 4)
    m3 = tl.zeros([BLOCK_T, 8, 4], dtype=tl.float32)
    gram = tl.zeros([BLOCK_T, 4, 4], dtype=tl.float32)
    # Unrolled by 2 (SPLIT_K is even here): the loads of two splits are in flight together
    # (one L2 round trip per split was the latency chain); the adds stay in split order.
    for k0 in range(0, SPLIT_K, 2):
        for kk in tl.static_range(2):
            bt = ((k0 + kk) * T + offs_t)[:, None, None]
            m3 += tl.load(pmix_ptr + bt * 32 + row * 4 + col, mask=mask_t[:, None, None], other=0.0,
                          cache_modifier=".cg")
            gram += tl.load(pgram_ptr + bt * 16 + s[None, :, None] * 4 + s[None, None, :],
                            mask=mask_t[:, None, None], other=0.0, cache_modifier=".cg")
    return _epilogue(m3, gram, scale_ptr, base_ptr, post_ptr, comb_ptr, offs_t, mask_t, D, eps, n_iters, store)


@triton.jit
def _mix_body(x_ptr, y_ptr, pin_ptr, cin_ptr, xn_ptr, fn_ptr, scale_ptr, base_ptr, w_ptr,
              u_ptr, post_ptr, comb_ptr, pmix_ptr, pgram_ptr,
              T, D, stride_xt, stride_xs, stride_yt, stride_nt, stride_ns, stride_ut, eps, n_iters,
              SEAM: tl.constexpr, BLOCK_T: tl.constexpr, BLOCK_D: tl.constexpr, SPLIT_K: tl.constexpr,
              SOFT_BF16: tl.constexpr):
    pid_t = tl.program_id(0)
    pid_k = tl.program_id(1)
    offs_t = pid_t * BLOCK_T + tl.arange(0, BLOCK_T)
    mask_t = offs_t < T
    # Program pid_k owns a D-chunk of all four streams: that is a 4*chunk slice of the
    # 4D reduction, and the seam's new residual for it needs nothing from other chunks.
    chunk = tl.cdiv(tl.cdiv(D, SPLIT_K), BLOCK_D) * BLOCK_D
    d_lo = pid_k * chunk
    d_hi = tl.minimum(d_lo + chunk, D)
    acc = tl.zeros([64, BLOCK_T], dtype=tl.float32)
    z = tl.zeros([BLOCK_T], dtype=tl.float32)
    g = (z, z, z, z, z, z, z, z, z, z)
    if SEAM:
        coeffs = _all_post_coeffs(pin_ptr, cin_ptr, offs_t, mask_t)
    for d0 in range(d_lo, d_hi, BLOCK_D):
        offs_d = d0 + tl.arange(0, BLOCK_D)
        if SEAM:
            x0, x1, x2, x3 = _post_tile(x_ptr, y_ptr, coeffs, xn_ptr, offs_t, mask_t, offs_d, D,
                                        stride_xt, stride_xs, stride_yt, stride_nt, stride_ns, "evict_last",
                                        SOFT_BF16)
        else:
            x0 = _load2(x_ptr, offs_t, mask_t, offs_d, D, stride_xt, "")
            x1 = _load2(x_ptr + stride_xs, offs_t, mask_t, offs_d, D, stride_xt, "")
            x2 = _load2(x_ptr + 2 * stride_xs, offs_t, mask_t, offs_d, D, stride_xt, "")
            x3 = _load2(x_ptr + 3 * stride_xs, offs_t, mask_t, offs_d, D, stride_xt, "")
        acc, g = _accumulate(x0, x1, x2, x3, fn_ptr, offs_d, D, acc, g)
    gram = _gram_matrix(g, BLOCK_T)
    acc = _mix_sums(acc, BLOCK_T)
    if SPLIT_K == 1:
        p0, p1, p2, p3, urms = _epilogue(tl.reshape(acc, [BLOCK_T, 8, 4]), gram, scale_ptr, base_ptr, post_ptr,
                                         comb_ptr, offs_t, mask_t, D, eps, n_iters, True)
        # u from the rows this program read (pre) or wrote (seam) in its loop: L2-hot at small T only.
        if SEAM:
            _u_pass(xn_ptr, w_ptr, u_ptr, p0, p1, p2, p3, urms, offs_t, mask_t, 0, D, D,
                    stride_nt, stride_ns, stride_ut, BLOCK_D, SOFT_BF16, False)
        else:
            _u_pass(x_ptr, w_ptr, u_ptr, p0, p1, p2, p3, urms, offs_t, mask_t, 0, D, D,
                    stride_xt, stride_xs, stride_ut, BLOCK_D, SOFT_BF16, False)
    else:
        n = tl.arange(0, 32)
        tl.store(pmix_ptr + (pid_k * T + offs_t)[:, None] * 32 + n[None, :], acc, mask=mask_t[:, None])
        s = tl.arange(0, 4)
        tl.store(pgram_ptr + (pid_k * T + offs_t)[:, None, None] * 16 + s[None, :, None] * 4 + s[None, None, :],
                 gram, mask=mask_t[:, None, None])


@triton.jit
def _mhc_pre_kernel(x_ptr, fn_ptr, scale_ptr, base_ptr, w_ptr, u_ptr, post_ptr, comb_ptr, pmix_ptr, pgram_ptr,
                    T, D, stride_xt, stride_xs, stride_ut, eps, n_iters,
                    BLOCK_T: tl.constexpr, BLOCK_D: tl.constexpr, SPLIT_K: tl.constexpr, SOFT_BF16: tl.constexpr):
    _mix_body(x_ptr, x_ptr, x_ptr, x_ptr, x_ptr, fn_ptr, scale_ptr, base_ptr, w_ptr, u_ptr, post_ptr, comb_ptr,
              pmix_ptr, pgram_ptr, T, D, stride_xt, stride_xs, 0, 0, 0, stride_ut, eps, n_iters,
              False, BLOCK_T, BLOCK_D, SPLIT_K, SOFT_BF16)


@triton.jit
def _mhc_seam_kernel(x_ptr, y_ptr, pin_ptr, cin_ptr, xn_ptr, fn_ptr, scale_ptr, base_ptr, w_ptr,
                     u_ptr, post_ptr, comb_ptr, pmix_ptr, pgram_ptr,
                     T, D, stride_xt, stride_xs, stride_yt, stride_nt, stride_ns, stride_ut, eps, n_iters,
                     BLOCK_T: tl.constexpr, BLOCK_D: tl.constexpr, SPLIT_K: tl.constexpr, SOFT_BF16: tl.constexpr):
    _mix_body(x_ptr, y_ptr, pin_ptr, cin_ptr, xn_ptr, fn_ptr, scale_ptr, base_ptr, w_ptr, u_ptr, post_ptr,
              comb_ptr, pmix_ptr, pgram_ptr, T, D, stride_xt, stride_xs, stride_yt, stride_nt, stride_ns,
              stride_ut, eps, n_iters, True, BLOCK_T, BLOCK_D, SPLIT_K, SOFT_BF16)


@triton.jit
def _mhc_finish_kernel(pmix_ptr, pgram_ptr, src_ptr, scale_ptr, base_ptr, w_ptr, u_ptr, post_ptr, comb_ptr,
                       T, D, chunk, stride_st, stride_ss, stride_ut, eps, n_iters,
                       BLOCK_T: tl.constexpr, U_BLOCK_D: tl.constexpr, SPLIT_K: tl.constexpr,
                       SOFT_BF16: tl.constexpr):
    """Split-K epilogue as a second launch, grid (token tiles of ``BLOCK_T`` rows, D-chunks of
    ``chunk`` columns; ``finish_tiles``). Every program reduces the SPLIT_K partials (rather
    than waiting on one that did); chunk 0 also runs the Sinkhorn and stores post / comb;
    each writes u for its own chunk in ``[BLOCK_T, U_BLOCK_D]`` tiles. Its tiling is its own,
    not the first launch's: that one's ``BLOCK_D`` is set by the GEMM's registers (16 at 64
    tokens), and with it this streaming pass kept ~8 KB a program in flight (H200, T = 4096:
    124 us for ~210 MB, ~40% of HBM bandwidth)."""
    pid_t = tl.program_id(0)
    pid_k = tl.program_id(1)
    offs_t = pid_t * BLOCK_T + tl.arange(0, BLOCK_T)
    mask_t = offs_t < T
    # Only chunk 0 stores post / comb, so only it runs the Sinkhorn rounds; u needs just
    # pre and the RMS factor.
    p0, p1, p2, p3, urms = _combine(pmix_ptr, pgram_ptr, scale_ptr, base_ptr, post_ptr, comb_ptr, offs_t, mask_t,
                                    T, D, eps, n_iters, pid_k == 0, BLOCK_T, SPLIT_K)
    d_lo = pid_k * chunk
    # each chunk's columns from the top down: the mix launch's programs (the same column
    # ranges at SPLIT_K 2-4, T 4096-8192) wrote theirs from the bottom up, with evict_last, so
    # the last-written ones, the likeliest still in L2, are read first
    _u_pass(src_ptr, w_ptr, u_ptr, p0, p1, p2, p3, urms, offs_t, mask_t, d_lo, tl.minimum(d_lo + chunk, D), D,
            stride_st, stride_ss, stride_ut, U_BLOCK_D, SOFT_BF16, True)


@triton.jit
def _mhc_post_kernel(x_ptr, y_ptr, pin_ptr, cin_ptr, xn_ptr, T, D,
                     stride_xt, stride_xs, stride_yt, stride_nt, stride_ns,
                     BLOCK_T: tl.constexpr, BLOCK_D: tl.constexpr, SOFT_BF16: tl.constexpr):
    offs_t = tl.program_id(0) * BLOCK_T + tl.arange(0, BLOCK_T)
    offs_d = tl.program_id(1) * BLOCK_D + tl.arange(0, BLOCK_D)
    mask_t = offs_t < T
    x0 = _load2(x_ptr, offs_t, mask_t, offs_d, D, stride_xt, "evict_first")
    x1 = _load2(x_ptr + stride_xs, offs_t, mask_t, offs_d, D, stride_xt, "evict_first")
    x2 = _load2(x_ptr + 2 * stride_xs, offs_t, mask_t, offs_d, D, stride_xt, "evict_first")
    x3 = _load2(x_ptr + 3 * stride_xs, offs_t, mask_t, offs_d, D, stride_xt, "evict_first")
    y = _load2(y_ptr, offs_t, mask_t, offs_d, D, stride_yt, "evict_first")
    # No loop here: each stream's five coefficients are loaded right where they are used
    # (all 20 up front took 80 registers instead of 64).
    for j in tl.static_range(4):
        _post_stream(j, x0, x1, x2, x3, y, _post_coeffs(pin_ptr, cin_ptr, j, offs_t, mask_t), xn_ptr, offs_t,
                     mask_t, offs_d, D, stride_nt, stride_ns, "", SOFT_BF16)


# ----------------------------------------------------------------------------- launch plans

Launch = tuple[Any, tuple[int, ...], dict[str, Any]]
"""One kernel launch: (jit function, grid, keyword arguments in the kernel's order)."""

FINISH_PROGRAMS_PER_SM = 4
"""The split-K finish launch aims at about this many programs an SM (a power-of-two number
of D-chunks per token tile, rounded down): with 128 registers at 4 warps (sm_90, 16 x 256)
they are all resident, each with a [rows, U_BLOCK_D] x 4-stream tile (32 KB) in flight."""

FINISH_ROWS = 16
"""Token rows a finish program takes at most (its partials are per token, so its token tile is
its own). Fewer rows, wider row pieces: a streaming pass over 64-byte pieces of each row ran at
2.6 TB/s on the H200, 128-byte 3.4, >= 256-byte 3.8; at 64 rows the finish read 128-byte pieces
(64 x 64 tiles), at 16 it reads 512-byte ones (16 x 256)."""


def finish_tiles(T: int, D: int, block_t: int, num_warps: int, block_d: int, sms: int) -> tuple[int, int, int]:
    """(token rows, U_BLOCK_D, columns per program) of the split-K finish launch: at most
    ``FINISH_ROWS`` of the first launch's ``block_t`` rows, tiles of ~32 fp32 values a thread
    (``1024 * num_warps / rows`` columns, 16..256, never narrower than the first launch's
    ``BLOCK_D``), D-chunks of whole tiles, about ``FINISH_PROGRAMS_PER_SM`` programs an SM
    over the token tiles."""
    rows = min(block_t, FINISH_ROWS)
    ubd = max(16, min(256, next_power_of_2(max(1, D)), max(block_d, 1024 * num_warps // rows)))
    want = max(1, (FINISH_PROGRAMS_PER_SM * sms) // max(1, cdiv(T, rows)))  # T = 0 plans too (launch skips it)
    splits = min(1 << (want.bit_length() - 1), cdiv(D, ubd))
    return rows, ubd, cdiv(cdiv(D, splits), ubd) * ubd


def _ordered(kern: Any, args: dict[str, Any]) -> dict[str, Any]:
    """``args`` in the kernel's own argument order (the lowering signature follows it)."""
    return {k: args[k] for k in kern.arg_names}


def post_plan(config: dict[str, Any], target: Target, X: torch.Tensor, y: torch.Tensor, post: torch.Tensor,
              comb: torch.Tensor, Xn: torch.Tensor) -> list[Launch]:
    """The post launch: ``Xn`` from X, y and the coefficients, one ``BLOCK_T x BLOCK_D`` tile a program."""
    T, D = X.shape[0], X.shape[2]
    BT, BD = config["BLOCK_T"], config["BLOCK_D"]
    args = dict(x_ptr=X, y_ptr=y, pin_ptr=post, cin_ptr=comb, xn_ptr=Xn, T=T, D=D,
                stride_xt=X.stride(0), stride_xs=X.stride(1), stride_yt=y.stride(0),
                stride_nt=Xn.stride(0), stride_ns=Xn.stride(1), BLOCK_T=BT, BLOCK_D=BD, SOFT_BF16=target.interpret)
    return [(_mhc_post_kernel, (cdiv(T, BT), cdiv(D, BD)), args)]


def mix_plan(op: str, config: dict[str, Any], target: Target, args: dict[str, Any]) -> list[Launch]:
    """The Triton pre / seam launches: the mix kernel, then with ``SPLIT_K`` > 1 the finish.
    ``args`` holds every pointer, size and stride either kernel takes (``__init__._plan``)."""
    T = args["T"]
    BT, SK = config["BLOCK_T"], config["SPLIT_K"]
    kern = _mhc_seam_kernel if op == "seam" else _mhc_pre_kernel
    a = dict(args, BLOCK_T=BT, BLOCK_D=config["BLOCK_D"], SPLIT_K=SK, SOFT_BF16=target.interpret)
    plan: list[Launch] = [(kern, (cdiv(T, BT), SK), _ordered(kern, a))]
    if SK > 1:
        plan.append(finish_launch(config, target, args))
    return plan


def finish_launch(config: dict[str, Any], target: Target, args: dict[str, Any]) -> Launch:
    """The split-K finish launch after either mix kernel (Triton's or the Gluon one), whose
    ``args`` hold the partials, outputs and ``src_ptr`` (the rows u is formed from)."""
    T, D, src, u = args["T"], args["D"], args["src_ptr"], args["u_ptr"]
    BT, ubd, chunk = finish_tiles(T, D, config["BLOCK_T"], config["num_warps"], config["BLOCK_D"], target.sms)
    fin = dict(args, chunk=chunk, stride_st=src.stride(0), stride_ss=src.stride(1), stride_ut=u.stride(0),
               BLOCK_T=BT, U_BLOCK_D=ubd, SPLIT_K=config["SPLIT_K"], SOFT_BF16=target.interpret)
    return _mhc_finish_kernel, (cdiv(T, BT), cdiv(D, chunk)), _ordered(_mhc_finish_kernel, fin)
