"""Scores, group-limited top-k and weights of a tile of tokens: the device functions both
routing kernels (``chunked``, ``direct``) share."""
from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def _log1p(y):
    # Exact log1p without tl.math.log1p (not in the interpreter-portable API): the
    # rounding error of u = 1 + y cancels in log(u) * y / (u - 1).
    u = 1.0 + y
    return tl.where(u == 1.0, y, tl.log(u) * y / tl.where(u == 1.0, 1.0, u - 1.0))


@triton.jit
def _score(x, SCORING: tl.constexpr):
    if SCORING == "sigmoid":
        s0 = 1.0 / (1.0 + tl.exp(-x))
    else:  # sqrtsoftplus, softplus linear above 20
        sp = tl.maximum(x, 0.0) + _log1p(tl.exp(-tl.abs(x)))
        s0 = tl.sqrt(tl.where(x > 20.0, x, sp))
    return s0


@triton.jit
def _key(s, idx, PAD: tl.constexpr):
    # (score, index) packed in one int64 that orders like the score, ties to the lower
    # index: one max-reduction instead of a max and a masked min (half the reductions).
    b = s.to(tl.int32, bitcast=True)
    k32 = b ^ ((b >> 31) & 0x7FFFFFFF)  # float order as signed int order
    return (k32.to(tl.int64) << 32) | (PAD - 1 - idx).to(tl.int64)


@triton.jit
def _key_index(key, PAD: tl.constexpr):
    return PAD - 1 - (key & 0xFFFFFFFF).to(tl.int32)


@triton.jit
def _key_value(key):
    k32 = (key >> 32).to(tl.int32)
    return (k32 ^ ((k32 >> 31) & 0x7FFFFFFF)).to(tl.float32, bitcast=True)


# Final keys of chosen experts: _MARK + slot. A real key's high word is a float's order
# (>= that of -inf, 0x807FFFFF), above _MARK's 0x80000000, so marks never win a round.
_MARK = tl.constexpr(-9223372036854775807 - 1)


@triton.jit
def _row_tile(ptr, tok, rmask, stride, E, E_PAD: tl.constexpr, BLOCK_T: tl.constexpr, ROW_WARPS: tl.constexpr):
    """``[BLOCK_T, E_PAD]`` tile of rows ``tok`` (0 past E and in masked rows). ``ROW_WARPS``:
    loaded as ``[BLOCK_T, E_PAD/128, 128]``: Triton deals warps to the dims in contiguity
    order with ties in index order (2, 0, 1), so 32 lanes x 4 words cover a 128-expert
    chunk and the warps go to the tokens (with ``BLOCK_T >= num_warps`` and 16-byte aligned
    rows): every reduction along the experts stays in one warp (shuffles, no bar.sync). The
    reshape back to 2-D only renames registers. A 2-D load gives the warps to the experts."""
    if ROW_WARPS and E_PAD >= 128:
        c3 = (tl.arange(0, E_PAD // 128) * 128)[None, :, None] + tl.arange(0, 128)[None, None, :]
        return tl.reshape(tl.load(ptr + tok[:, None, None] * stride + c3, mask=rmask[:, None, None] & (c3 < E),
                                  other=0.0), [BLOCK_T, E_PAD])
    col = tl.arange(0, E_PAD)
    return tl.load(ptr + tok[:, None] * stride + col[None, :], mask=rmask[:, None] & (col < E)[None, :], other=0.0)


@triton.jit
def _route_rows(logits_ptr, w_ptr, ids_ptr, bias, tok, rmask, stride_lt, E, scaling,
                TOP_K: tl.constexpr, K_PAD: tl.constexpr, E_PAD: tl.constexpr, N_GROUP: tl.constexpr,
                GSIZE: tl.constexpr, G_PAD: tl.constexpr, TOPK_GROUP: tl.constexpr, SCORING: tl.constexpr,
                HAS_BIAS: tl.constexpr, RENORM: tl.constexpr, BLOCK_T: tl.constexpr, ROW_WARPS: tl.constexpr):
    """Scores, group-limited top-k and weights of the tokens ``tok`` (``rmask``: real rows):
    stores their topk_weights / topk_ids and returns the ids ``[BLOCK_T, K_PAD]`` and the
    final keys ``[BLOCK_T, E_PAD]``, where the expert chosen in slot j holds ``_MARK + j``
    (``_chosen`` / ``_slot``), so the align paths need not re-read them. ``ROW_WARPS``: the
    logits tile of ``_row_tile`` with a warp per token, ``bias`` a tile of it too."""
    col = tl.arange(0, E_PAD)
    cmask = col < E
    kcol = tl.arange(0, K_PAD)
    gcol = tl.arange(0, G_PAD)
    x = _row_tile(logits_ptr, tok, rmask, stride_lt, E, E_PAD, BLOCK_T, ROW_WARPS).to(tl.float32)
    if SCORING == "softmax":  # over the real experts
        xm = tl.where(cmask[None, :], x, float("-inf"))
        row_max = tl.max(xm, axis=1)
        row_sum = tl.sum(tl.exp(xm - row_max[:, None]), axis=1)
        s0 = tl.exp(xm - row_max[:, None]) / row_sum[:, None]
    else:
        s0 = _score(x, SCORING)
    if HAS_BIAS:
        s = s0 + bias  # [E_PAD], or with ROW_WARPS a [BLOCK_T, E_PAD] tile of the same layout
    else:
        s = s0
    # Every selection below works on packed (score, index) keys, made once.
    key = _key(tl.where(cmask[None, :], s, float("-inf")), col[None, :], E_PAD)
    if N_GROUP > 1:
        # group score: sum of the top-2 (max without bias); ties pick the lower index
        if N_GROUP * GSIZE == E_PAD:  # power-of-two groups: all groups in one reduction
            k3 = tl.reshape(key, [BLOCK_T, N_GROUP, GSIZE])
            k1 = tl.max(k3, axis=2)
            if HAS_BIAS:
                k2 = tl.max(tl.where(k3 == k1[:, :, None], -9223372036854775807, k3), axis=2)
                gs = _key_value(k1) + _key_value(k2)
            else:
                gs = _key_value(k1)
        else:
            gs = tl.full([BLOCK_T, G_PAD], float("-inf"), tl.float32)
            for g in tl.static_range(N_GROUP):
                in_g = (col >= g * GSIZE) & (col < (g + 1) * GSIZE)
                kg = tl.where(in_g[None, :], key, -9223372036854775807)
                k1 = tl.max(kg, axis=1)
                if HAS_BIAS:
                    k2 = tl.max(tl.where(kg == k1[:, None], -9223372036854775807, kg), axis=1)
                    score = _key_value(k1) + _key_value(k2)
                else:
                    score = _key_value(k1)
                gs = tl.where(gcol[None, :] == g, score[:, None], gs)
        # masked keys: below every real key, not a slot mark; power-of-two groups mask the
        # [BLOCK_T, N_GROUP, GSIZE] view (no layout change from the group scores back to the tile)
        kept = tl.zeros([BLOCK_T, G_PAD], dtype=tl.int1)
        keep = tl.zeros([BLOCK_T, E_PAD], dtype=tl.int1)
        egroup = col // GSIZE
        for r in tl.static_range(TOPK_GROUP):
            gi = _key_index(tl.max(_key(gs, gcol[None, :], G_PAD), axis=1), G_PAD)
            if N_GROUP * GSIZE == E_PAD:
                kept = kept | (gcol[None, :] == gi[:, None])
            else:
                keep = keep | (egroup[None, :] == gi[:, None])
            gs = tl.where(gcol[None, :] == gi[:, None], float("-inf"), gs)
        if N_GROUP * GSIZE == E_PAD:
            key = tl.reshape(tl.where(kept[:, :, None], k3, _MARK + TOP_K), [BLOCK_T, E_PAD])
        else:
            key = tl.where(keep, key, _MARK + TOP_K)
    ids = tl.zeros([BLOCK_T, K_PAD], dtype=tl.int32)
    for j in tl.static_range(TOP_K):
        kmax = tl.max(key, axis=1)
        ids = tl.where(kcol[None, :] == j, _key_index(kmax, E_PAD)[:, None], ids)
        key = tl.where(key == kmax[:, None], _MARK + j, key)
    # weights from the UNBIASED scores of the chosen experts: re-read k logits per
    # token (cached) and score them with the same formula, not k gathers over the tile
    kmask = rmask[:, None] & (kcol[None, :] < TOP_K)
    xk = tl.load(logits_ptr + tok[:, None] * stride_lt + ids, mask=kmask, other=0.0).to(tl.float32)
    if SCORING == "softmax":
        w = tl.exp(xk - row_max[:, None]) / row_sum[:, None]
    else:
        w = _score(xk, SCORING)
    w = tl.where(kcol[None, :] < TOP_K, w, 0.0)
    if RENORM:
        w = w / tl.sum(w, axis=1)[:, None]
    w = w * scaling
    optr = tok[:, None] * TOP_K + kcol[None, :]
    tl.store(w_ptr + optr, w, mask=kmask)
    tl.store(ids_ptr + optr, ids, mask=kmask)
    return ids, key


@triton.jit
def _chosen(key, TOP_K: tl.constexpr):
    """Experts ``_route_rows`` chose (its final keys)."""
    return key < _MARK + TOP_K


@triton.jit
def _slot(key):
    """The top-k slot of a chosen expert (its final key ``_MARK + slot``)."""
    return (key & 0xFFFFFFFF).to(tl.int32)
