"""Fused MoE routing: router logits -> top-k experts, weights and the expert-sorted layout.

KERNELS.md section 4. One ``@triton.jit`` kernel does scoring, group-limited top-k,
weights and ``moe_align_block_size`` (the padded, expert-sorted token layout grouped
GEMMs read). With ``FUSED`` it is ONE launch: the programs meet at a grid barrier (an
arrive counter in a cached scratch word, reset by the last program to leave, so no
memset launch is needed); without it, the same kernel runs as two launches (PHASE 1
then PHASE 2). The interpreter runs programs one after another, so a grid barrier with
more than one program would deadlock there: it always takes the two-launch path then.
"""
from __future__ import annotations

import functools
import itertools
from dataclasses import dataclass
from typing import Any, NamedTuple

import torch
import torch.nn.functional as F
import triton
import triton.language as tl

from kernel_templates._host import cdiv, next_power_of_2, sm_count
from tuner import runtime
from tuner.runtime.env import interpreting, stream_counters
from tuner.spec import KernelSpec
from tuner.verify import assert_close, assert_equal

SCORINGS = ("sigmoid", "sqrtsoftplus", "softmax")
BLOCK_MS = (16, 32, 64, 128)

PROFILES: dict[str, dict[str, Any]] = {
    "dsv3": dict(num_experts=256, n_group=8, topk_group=4, top_k=8, scoring="sigmoid",
                 routed_scaling_factor=2.5, renormalize=True),
    "dsv4-flash": dict(num_experts=256, n_group=1, topk_group=1, top_k=6, scoring="sqrtsoftplus",
                       routed_scaling_factor=1.5, renormalize=True),
    "dsv41-flash": dict(num_experts=384, n_group=1, topk_group=1, top_k=6, scoring="sqrtsoftplus",
                        routed_scaling_factor=1.5, renormalize=True),
}
_PROFILE_BY_KEY = {(p["num_experts"], p["top_k"], p["n_group"], p["topk_group"], p["scoring"],
                    float(p["routed_scaling_factor"])): name for name, p in PROFILES.items()}


class MoeRouting(NamedTuple):
    """Routing result: top-k per token and the align triple grouped GEMMs read."""

    topk_weights: torch.Tensor      # [T, k] fp32
    topk_ids: torch.Tensor          # [T, k] int32, global expert ids
    sorted_token_ids: torch.Tensor  # [T*k + E*(block_m-1)] int32, pad value T*k
    expert_ids: torch.Tensor        # [cdiv(len(sorted_token_ids), block_m)] int32, -1 past the end / not local
    num_tokens_post_pad: torch.Tensor  # [1] int32


# ----------------------------------------------------------------------------- reference

def _scores(logits: torch.Tensor, scoring: str) -> torch.Tensor:
    x = logits.float()
    if scoring == "sigmoid":
        return torch.sigmoid(x)
    if scoring == "sqrtsoftplus":
        return torch.sqrt(F.softplus(x, beta=1.0, threshold=20.0))
    if scoring == "softmax":
        return torch.softmax(x, dim=-1)
    raise ValueError(f"unknown scoring {scoring!r} (want one of {SCORINGS})")


def _stable_topk_desc(x: torch.Tensor, k: int) -> torch.Tensor:
    """Indices of the k largest along the last dim; ties: lower index first."""
    return torch.sort(x, dim=-1, descending=True, stable=True).indices[..., :k]


def reference_topk(logits: torch.Tensor, bias: torch.Tensor | None, *, top_k: int, n_group: int = 1,
                   topk_group: int = 1, scoring: str = "sigmoid", routed_scaling_factor: float = 1.0,
                   renormalize: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """Grouped top-k straight from KERNELS.md in fp32 with the exact tie rule."""
    s0 = _scores(logits, scoring)
    s = s0 + bias.float() if bias is not None else s0
    T, E = s.shape
    if n_group > 1:
        g = s.view(T, n_group, E // n_group)
        if bias is not None:
            top2 = torch.sort(g, dim=-1, descending=True).values[..., :2]
            gscore = top2[..., 0] + top2[..., 1]
        else:
            gscore = g.amax(dim=-1)
        keep = torch.zeros(T, n_group, dtype=torch.bool, device=s.device)
        keep.scatter_(1, _stable_topk_desc(gscore, topk_group), True)
        s = s.masked_fill(~keep.repeat_interleave(E // n_group, dim=1), float("-inf"))
    ids = _stable_topk_desc(s, top_k)
    w = s0.gather(1, ids)
    if renormalize:
        w = w / w.sum(dim=-1, keepdim=True)
    return w * routed_scaling_factor, ids.to(torch.int32)


def reference_align(topk_ids: torch.Tensor, num_experts: int, block_m: int,
                    expert_map: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``moe_align_block_size`` as a pure function of ``topk_ids``: capturable, no host syncs.

    Returns ``(sorted_token_ids, expert_ids, num_tokens_post_pad)``; the layout is over
    GLOBAL experts; ``expert_map`` only renames ``expert_ids`` (-1 = not local).
    """
    flat = topk_ids.reshape(-1).long()
    n = flat.numel()
    dev = flat.device
    # scatter_add, not bincount: bincount syncs with the host on CUDA (not capturable)
    counts = torch.zeros(num_experts, dtype=torch.long, device=dev).scatter_add_(0, flat, torch.ones_like(flat))
    padded = (counts + block_m - 1) // block_m * block_m
    off_incl = torch.cumsum(padded, 0)
    off = off_incl - padded
    order = torch.sort(flat, stable=True).indices            # flat indices grouped by expert, increasing
    sorted_e = flat[order]
    first = torch.cumsum(counts, 0) - counts                 # start of each expert in `order`
    pos = off[sorted_e] + torch.arange(n, device=dev) - first[sorted_e]
    length = n + num_experts * (block_m - 1)
    sorted_ids = torch.full((length,), n, dtype=torch.int32, device=dev)
    sorted_ids[pos] = order.to(torch.int32)
    starts = torch.arange(cdiv(length, block_m), device=dev) * block_m
    total = off_incl[-1:]
    eids = torch.searchsorted(off_incl, starts, right=True)  # experts whose padded end <= block start
    eids = torch.where(starts < total, eids, -1)
    if expert_map is not None:
        eids = torch.where(eids >= 0, expert_map.long()[eids.clamp(min=0, max=num_experts - 1)], -1)
    return sorted_ids, eids.to(torch.int32), total.to(torch.int32)


def reference(logits: torch.Tensor, bias: torch.Tensor | None, *, top_k: int, n_group: int = 1,
              topk_group: int = 1, scoring: str = "sigmoid", routed_scaling_factor: float = 1.0,
              renormalize: bool = True, block_m: int = 64, expert_map: torch.Tensor | None = None) -> MoeRouting:
    """The whole step in plain PyTorch (fp32 scores, exact tie rule)."""
    w, ids = reference_topk(logits, bias, top_k=top_k, n_group=n_group, topk_group=topk_group, scoring=scoring,
                            routed_scaling_factor=routed_scaling_factor, renormalize=renormalize)
    return MoeRouting(w, ids, *reference_align(ids, logits.shape[1], block_m, expert_map))


# ----------------------------------------------------------------------------- kernel

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


@triton.jit
def _moe_routing_kernel(
    logits_ptr, bias_ptr, emap_ptr,
    w_ptr, ids_ptr, sorted_ptr, eids_ptr, npad_ptr,
    cnt_ptr, cur_ptr, sync_ptr, tot_ptr,
    T, E, stride_lt, n_sorted, max_blocks, block_m, chunks_per_prog, scaling,
    TOP_K: tl.constexpr, K_PAD: tl.constexpr, E_PAD: tl.constexpr, N_PAD: tl.constexpr,
    N_GROUP: tl.constexpr, GSIZE: tl.constexpr, G_PAD: tl.constexpr, TOPK_GROUP: tl.constexpr, SCORING: tl.constexpr,
    HAS_BIAS: tl.constexpr, RENORM: tl.constexpr, HAS_MAP: tl.constexpr,
    CNT_ROWS: tl.constexpr, EID_BLOCK: tl.constexpr, FILL_BLOCK: tl.constexpr,
    PHASE: tl.constexpr, BLOCK_T: tl.constexpr, MAX_PROGRAMS: tl.constexpr, FUSED: tl.constexpr,
    GRID_SYNC: tl.constexpr, PREFIX: tl.constexpr,
):
    # MAX_PROGRAMS only sizes the grid (launcher); the kernel reads the real count below.
    pid = tl.program_id(0)
    NP = tl.num_programs(0)
    # Contiguous token ranges per program keep "increasing flat index within an expert"
    # a matter of adding the counts of lower programs.
    t_begin = pid * chunks_per_prog * BLOCK_T
    t_end = tl.minimum(T, t_begin + chunks_per_prog * BLOCK_T)
    col = tl.arange(0, E_PAD)
    cmask = col < E

    if PHASE != 2:
        rows = tl.arange(0, BLOCK_T)
        bias = tl.load(bias_ptr + col, mask=cmask & HAS_BIAS, other=0.0)
        hist = tl.zeros([E_PAD], dtype=tl.int32)
        for c in range(0, chunks_per_prog):
            tok = t_begin + c * BLOCK_T + rows
            rmask = tok < t_end
            ids, key = _route_rows(logits_ptr, w_ptr, ids_ptr, bias, tok, rmask, stride_lt, E, scaling, TOP_K, K_PAD,
                                   E_PAD, N_GROUP, GSIZE, G_PAD, TOPK_GROUP, SCORING, HAS_BIAS, RENORM, BLOCK_T, False)
            # one column reduction per chunk for the expert histogram, not one per slot
            hist += tl.sum((_chosen(key, TOP_K) & rmask[:, None]).to(tl.int32), axis=0)
        tl.store(cnt_ptr + pid * E + col, hist, mask=cmask)
        # Pad fill of this program's strided share; the scatter after the barrier overwrites.
        pad = T * TOP_K
        for f0 in range(pid * FILL_BLOCK, n_sorted, NP * FILL_BLOCK):
            f = f0 + tl.arange(0, FILL_BLOCK)
            tl.store(sorted_ptr + f, tl.full([FILL_BLOCK], 0, tl.int32) + pad, mask=f < n_sorted)

    if FUSED:
        # bar.sync first so this CTA's stores precede the release (and, with one program,
        # are visible to its other threads: then no grid barrier is needed at all).
        tl.debug_barrier()
        if GRID_SYNC:
            # Grid barrier: all programs are co-resident (launcher caps the grid at the SM count).
            tl.atomic_add(sync_ptr, 1, sem="acq_rel", scope="gpu")
            while tl.atomic_add(sync_ptr, 0, sem="acquire", scope="gpu") < NP:
                pass
            tl.debug_barrier()

    if PHASE != 1:
        # Totals and the counts of lower programs, CNT_ROWS programs per load (.cg: written
        # by other SMs, must not come from a stale L1 line).
        if PREFIX:
            # _moe_prefix_kernel (a launch in between) left this program's exclusive prefix
            # over the lower programs in its cursor row and the per-expert totals in tot.
            totals = tl.load(tot_ptr + col, mask=cmask, other=0, cache_modifier=".cg")
            before = tl.load(cur_ptr + pid * E + col, mask=cmask, other=0, cache_modifier=".cg")
            tl.debug_barrier()  # every lane has read its row before the cursors overwrite it
        else:
            totals = tl.zeros([E_PAD], dtype=tl.int32)
            before = tl.zeros([E_PAD], dtype=tl.int32)
            prow = tl.arange(0, CNT_ROWS)
            for q0 in range(0, NP, CNT_ROWS):
                q = q0 + prow
                c2 = tl.load(cnt_ptr + q[:, None] * E + col[None, :], mask=(q[:, None] < NP) & cmask[None, :],
                             other=0, cache_modifier=".cg")
                totals += tl.sum(c2, axis=0)
                before += tl.sum(tl.where(q[:, None] < pid, c2, 0), axis=0)
        padded = (totals + block_m - 1) // block_m * block_m
        off_incl = tl.cumsum(padded, axis=0)
        npad = tl.sum(padded, axis=0)
        if pid == 0:
            tl.store(npad_ptr, npad)
        # expert_ids: each expert writes the range of blocks it owns (experts dealt out to
        # programs round-robin), O(E + blocks) stores instead of a blocks x experts search;
        # blocks past num_tokens_post_pad get -1.
        mine = cmask & ((col % NP) == pid)
        nblk = padded // block_m
        first_blk = off_incl // block_m - nblk
        if HAS_MAP:
            label = tl.load(emap_ptr + col, mask=mine, other=-1)
        else:
            label = col
        for r in range(0, tl.max(tl.where(mine, nblk, 0), axis=0)):
            tl.store(eids_ptr + first_blk + r, label, mask=mine & (r < nblk))
        eb = tl.arange(0, EID_BLOCK)
        for j0 in range(npad // block_m + pid * EID_BLOCK, max_blocks, NP * EID_BLOCK):
            j = j0 + eb
            tl.store(eids_ptr + j, tl.full([EID_BLOCK], -1, tl.int32), mask=j < max_blocks)
        # Scatter: cursor per expert (in scratch, gathered by id) starts at the expert's
        # padded offset plus the assignments of lower programs.
        cur_row = cur_ptr + pid * E
        tl.store(cur_row + col, off_incl - padded + before, mask=cmask)
        tl.debug_barrier()
        a = tl.arange(0, N_PAD)
        lower = a[:, None] < a[None, :]
        for c in range(0, chunks_per_prog):
            t0 = t_begin + c * BLOCK_T
            i = t0 * TOP_K + a
            valid = (a < BLOCK_T * TOP_K) & (i < t_end * TOP_K)
            eid = tl.load(ids_ptr + i, mask=valid, other=-1, cache_modifier=".cg")
            same = (eid[:, None] == eid[None, :]) & valid[:, None] & valid[None, :]
            rank = tl.sum((same & lower).to(tl.int32), axis=0)       # earlier same-expert entries
            later = tl.sum((same & lower).to(tl.int32), axis=1)      # later same-expert entries
            pos = tl.load(cur_row + eid, mask=valid, other=0) + rank
            tl.store(sorted_ptr + pos, i, mask=valid)
            tl.debug_barrier()  # every lane read the cursors before any moves them
            tl.store(cur_row + eid, pos + 1, mask=valid & (later == 0))
            tl.debug_barrier()

    if GRID_SYNC:
        # The last program out resets both counters: the scratch needs no memset per call.
        if tl.atomic_add(sync_ptr + 1, 1, sem="acq_rel", scope="gpu") == NP - 1:
            tl.atomic_xchg(sync_ptr, 0, sem="relaxed", scope="gpu")
            tl.atomic_xchg(sync_ptr + 1, 0, sem="relaxed", scope="gpu")


@triton.jit
def _count_keep(c_a, v_a, c_b, v_b):
    """Scan combine: running count, and the later element's value kept as it is."""
    return c_a + c_b, v_b


@triton.jit
def _moe_direct_kernel(
    logits_ptr, bias_ptr, emap_ptr,
    w_ptr, ids_ptr, sorted_ptr, eids_ptr, npad_ptr,
    T, E, stride_lt, n_sorted, max_blocks, block_m, scaling,
    TOP_K: tl.constexpr, K_PAD: tl.constexpr, E_PAD: tl.constexpr,
    N_GROUP: tl.constexpr, GSIZE: tl.constexpr, G_PAD: tl.constexpr, TOPK_GROUP: tl.constexpr, SCORING: tl.constexpr,
    HAS_BIAS: tl.constexpr, RENORM: tl.constexpr, HAS_MAP: tl.constexpr,
    EID_BLOCK: tl.constexpr, FILL_BLOCK: tl.constexpr, BLK_PAD: tl.constexpr, BLOCK_T: tl.constexpr,
):
    """All T <= BLOCK_T tokens in program 0, the align layout straight from their routing in
    registers: no counts or cursors in memory, no barrier between programs. Small T is a
    chain of dependent steps; this path drops the global round trips (counts, cursors,
    re-read ids) from it.

    Each warp routes its own tokens (``_route_rows`` with ``ROW_WARPS``: every top-k
    reduction is warp shuffles). Then one CTA-wide step over the ``[BLOCK_T, E_PAD]`` tile
    of chosen experts: an expert appears at most once per token and flat indices
    ``t*k + slot`` order like the tokens, so an entry's rank within its expert is the count
    of lower tokens that chose the expert (an exclusive scan down the tokens), and the
    column sums are the expert counts; the padded offsets are a scan over the experts.

    Whatever the routing, num_tokens_post_pad <= U = N + min(N, E) * (block_m - 1) (N = T*k:
    at most N experts, each padded by < block_m), so positions past U and blocks past
    cdiv(U, block_m) are padding / -1: the other programs fill those, program 0 writes
    [0, U) itself (pad, then the scatter over it after a CTA barrier). Both boundaries and
    both ends are rounded up to 4 words (the launcher allocates the outputs to a multiple
    of 4; [U, U4) is padding either way): every fill is 16-byte vector stores, not scalar
    ones from an unaligned start or a ragged end.
    """
    pid = tl.program_id(0)
    NP = tl.num_programs(0)
    N = T * TOP_K
    U = N + tl.minimum(N, E) * (block_m - 1)
    U4 = tl.cdiv(U, 4) * 4
    UB4 = tl.cdiv(tl.cdiv(U, block_m), 4) * 4
    fb = tl.arange(0, FILL_BLOCK)
    eb = tl.arange(0, EID_BLOCK)
    if (NP == 1) | (pid > 0):  # the fill tail, over the programs other than 0 when there are any
        q = pid - (NP > 1).to(tl.int32)
        nq = NP - (NP > 1).to(tl.int32)
        n_end = tl.cdiv(n_sorted, 4) * 4
        b_end = tl.cdiv(max_blocks, 4) * 4
        for f0 in range(U4 + q * FILL_BLOCK, n_end, nq * FILL_BLOCK):
            f = tl.multiple_of(f0, 4) + fb
            tl.store(sorted_ptr + f, tl.full([FILL_BLOCK], 0, tl.int32) + N, mask=f < n_end)
        for j0 in range(UB4 + q * EID_BLOCK, b_end, nq * EID_BLOCK):
            j = tl.multiple_of(j0, 4) + eb
            tl.store(eids_ptr + j, tl.full([EID_BLOCK], -1, tl.int32), mask=j < b_end)
    if pid == 0:
        # pad of [0, U4) first: the stores drain while the tokens are routed
        for f0 in range(0, U4, FILL_BLOCK):
            tl.store(sorted_ptr + f0 + fb, tl.full([FILL_BLOCK], 0, tl.int32) + N, mask=f0 + fb < U4)
        col = tl.arange(0, E_PAD)
        tok = tl.arange(0, BLOCK_T)
        bias = _row_tile(bias_ptr, tok, (tok < BLOCK_T) & HAS_BIAS, 0, E, E_PAD, BLOCK_T, True)  # the logits' layout
        _, key = _route_rows(logits_ptr, w_ptr, ids_ptr, bias, tok, tok < T, stride_lt, E, scaling, TOP_K, K_PAD,
                             E_PAD, N_GROUP, GSIZE, G_PAD, TOPK_GROUP, SCORING, HAS_BIAS, RENORM, BLOCK_T, True)
        # the flat index of each chosen (token, expert), else -1: the one tile the CTA-wide step moves
        # (int16: T*k < 2^15 on this path, half the shared memory of the move)
        v = tl.where(_chosen(key, TOP_K) & (tok < T)[:, None], tok[:, None] * TOP_K + _slot(key), -1).to(tl.int16)
        # one scan carries v through unchanged: everything after it is in the scan's layout
        incl, v = tl.associative_scan(((v >= 0).to(tl.int32), v), 0, _count_keep)
        c = (v >= 0).to(tl.int32)
        cnt = tl.sum(c, axis=0)
        rank = incl - c  # same-expert entries of lower tokens
        padded = (cnt + block_m - 1) // block_m * block_m
        off_incl = tl.cumsum(padded, axis=0)
        off = off_incl - padded
        npad = tl.sum(padded, axis=0)
        tl.store(npad_ptr, npad)
        tl.debug_barrier()  # the pad stores of [0, U4) before the scatter over them
        # flattened: the store keeps the scan's layout (a 2-D scatter gets a layout of its own)
        NT: tl.constexpr = BLOCK_T * E_PAD
        tl.store(sorted_ptr + tl.reshape(off[None, :] + rank, [NT]), tl.reshape(v, [NT]), mask=tl.reshape(v >= 0, [NT]))
        # expert_ids of blocks [0, UB4) (UB4 <= BLK_PAD): each expert writes its own blocks
        # (at most cdiv(T, block_m) each), the rest up to UB4 is past num_tokens_post_pad
        nblk = padded // block_m
        first_blk = off // block_m
        if HAS_MAP:
            label = tl.load(emap_ptr + col, mask=nblk > 0, other=-1)
        else:
            label = col
        for r in range(0, tl.max(nblk, axis=0)):
            tl.store(eids_ptr + first_blk + r, label, mask=r < nblk)
        b = tl.arange(0, BLK_PAD)
        tl.store(eids_ptr + b, tl.full([BLK_PAD], -1, tl.int32), mask=(b >= npad // block_m) & (b < UB4))


@triton.jit
def _moe_prefix_kernel(cnt_ptr, before_ptr, tot_ptr, NP, E, NP_PAD: tl.constexpr, BLOCK_E: tl.constexpr):
    """Per expert, the counts of all lower programs (exclusive scan over the phase-1 grid)
    and the total: one ``[NP_PAD, BLOCK_E]`` tile per program, programs over experts."""
    e = tl.program_id(0) * BLOCK_E + tl.arange(0, BLOCK_E)
    q = tl.arange(0, NP_PAD)
    m = (q[:, None] < NP) & (e[None, :] < E)
    c = tl.load(cnt_ptr + q[:, None] * E + e[None, :], mask=m, other=0)
    tl.store(before_ptr + q[:, None] * E + e[None, :], tl.cumsum(c, axis=0) - c, mask=m)
    tl.store(tot_ptr + e, tl.sum(c, axis=0), mask=e < E)


# ----------------------------------------------------------------------------- launcher

FILL_BLOCK = 1024
# Default: the direct kernel up to this many tokens. It holds up to 32 (8 warps of 4 tokens:
# dsv41-flash, 512 padded experts, 223 registers at T=32), but on the H200 (run 20, graph
# replay, us, dsv3 / dsv41-flash) it wins only to T=8: T=1 4.4 / 5.9, T=4 4.5 / 5.4, T=8 5.3 /
# 6.7 (the fused path: T=1 8.0 / 8.4, T=4 two launches 6.9 / 7.4); T=16 8.2 / 11.0 and T=32
# 13.6 / 24.2 lose to one-token programs (7.1 / 9.0 at T=16). Larger T stays a tuning option.
DIRECT_MAX_TOKENS = 8
# Two-launch grids above this many programs take the lower programs' counts from one scan
# launch (_moe_prefix_kernel) instead of every phase-2 program summing them itself: that
# sum is O(programs x experts) per program, O(programs^2 x experts) in all.
PREFIX_MIN_PROGRAMS = 256
_PREFIX_TILE = 4096  # elements of the scan's [programs, experts] tile per program


@functools.lru_cache(maxsize=256)  # pure in its ints; callers only read the dict
def _prefix_meta(np_: int, E: int) -> dict[str, int]:
    """Constexprs of the scan over ``np_`` programs' counts of ``E`` experts."""
    np_pad = next_power_of_2(np_)
    return dict(NP_PAD=np_pad, BLOCK_E=max(1, min(next_power_of_2(E), _PREFIX_TILE // np_pad)))


def _sm_count(device: torch.device) -> int:
    return sm_count(device, 1 << 30)  # no residency cap off a GPU


def _sync_scratch(device: torch.device) -> torch.Tensor:
    # Arrive/depart counters of the grid barrier, per (device, stream): two fused launches
    # on two streams sharing one pair would corrupt each other's barrier.
    return stream_counters("moe_routing", device, 2)


@functools.lru_cache(maxsize=256)  # pure in its ints; callers only read the dict
def _meta(E: int, top_k: int, n_group: int, block_t: int) -> dict[str, int]:
    e_pad = next_power_of_2(E)
    return dict(K_PAD=next_power_of_2(top_k), E_PAD=e_pad,
                N_PAD=next_power_of_2(block_t * top_k), G_PAD=next_power_of_2(n_group), GSIZE=E // n_group,
                CNT_ROWS=max(1, 4096 // e_pad), EID_BLOCK=256, FILL_BLOCK=FILL_BLOCK)


@functools.lru_cache(maxsize=256)  # pure in its ints; callers only read the dict
def _direct_meta(E: int, top_k: int, n_group: int, block_t: int) -> dict[str, int]:
    """Constexprs of ``_moe_direct_kernel``: most of ``_meta`` (no chunk loop, no counts) and
    the blocks program 0 covers, cdiv(U, block_m) <= T*k rounded up to 4."""
    m = _meta(E, top_k, n_group, 1)
    return dict({name: m[name] for name in ("K_PAD", "E_PAD", "G_PAD", "GSIZE", "EID_BLOCK", "FILL_BLOCK")},
                BLK_PAD=max(4, next_power_of_2(block_t * top_k)))


def is_direct(tokens: int, config: dict[str, Any]) -> bool:
    """A fused config whose tokens fit one chunk runs ``_moe_direct_kernel``: one program routes
    them all and lays them out from registers, ``MAX_PROGRAMS - 1`` others share the padding fill."""
    return bool(config["FUSED"]) and tokens <= config["BLOCK_T"]


def grid_programs(tokens: int, config: dict[str, Any], sms: int | None = None) -> tuple[int, int]:
    """(programs, chunks per program) the launcher uses for ``tokens`` under ``config``."""
    if is_direct(tokens, config):
        return config["MAX_PROGRAMS"], 1
    chunks = max(1, cdiv(tokens, config["BLOCK_T"]))
    np_ = min(config["MAX_PROGRAMS"], chunks)
    if config["FUSED"] and sms is not None:
        np_ = min(np_, sms)  # the grid barrier needs every program resident at once
    cpp = cdiv(chunks, np_)
    return cdiv(chunks, cpp), cpp


def _check_args(logits: torch.Tensor, bias: torch.Tensor | None, top_k: int, n_group: int, topk_group: int,
                scoring: str, block_m: int, expert_map: torch.Tensor | None) -> None:
    if logits.dim() != 2:
        raise ValueError(f"logits must be [T, E], got shape {tuple(logits.shape)}")
    if logits.dtype not in (torch.float32, torch.bfloat16):
        raise ValueError(f"logits must be float32 or bfloat16, got {logits.dtype}")
    T, E = logits.shape
    if E < 1:
        raise ValueError("logits needs at least one expert column")
    if logits.stride(1) != 1:
        raise ValueError("logits must be contiguous along the expert dimension")
    if bias is not None and (bias.shape != (E,) or bias.dtype != torch.float32 or bias.device != logits.device):
        raise ValueError(f"bias must be float32 [E={E}] on {logits.device}, got {bias.dtype} "
                         f"{tuple(bias.shape)} on {bias.device}")
    if scoring not in SCORINGS:
        raise ValueError(f"scoring must be one of {SCORINGS}, got {scoring!r}")
    if n_group < 1 or E % n_group:
        raise ValueError(f"n_group={n_group} must divide the {E} experts")
    if not 1 <= topk_group <= n_group:
        raise ValueError(f"topk_group={topk_group} must be in [1, n_group={n_group}]")
    if n_group > 1 and bias is not None and E // n_group < 2:
        raise ValueError("the top-2 group score needs at least 2 experts per group")
    if not 1 <= top_k <= topk_group * (E // n_group):
        raise ValueError(f"top_k={top_k} must be in [1, experts in the kept groups = {topk_group * (E // n_group)}]")
    if block_m not in BLOCK_MS:
        raise ValueError(f"block_m must be one of {BLOCK_MS}, got {block_m}")
    if expert_map is not None and (expert_map.shape != (E,) or expert_map.dtype != torch.int32
                                   or expert_map.device != logits.device):
        raise ValueError(f"expert_map must be int32 [E={E}] on {logits.device}, got {expert_map.dtype} "
                         f"{tuple(expert_map.shape)} on {expert_map.device}")


def launch(*, config: dict[str, Any], logits: torch.Tensor, bias: torch.Tensor | None, top_k: int,
           n_group: int = 1, topk_group: int = 1, scoring: str = "sigmoid", routed_scaling_factor: float = 1.0,
           renormalize: bool = True, block_m: int = 64, expert_map: torch.Tensor | None = None) -> MoeRouting:
    """Validate, allocate and launch: one launch when FUSED and it can be (the direct kernel when
    the tokens fit one chunk), else two (three when the two-launch grid has more than
    PREFIX_MIN_PROGRAMS programs: the prefix scan between)."""
    _check_args(logits, bias, top_k, n_group, topk_group, scoring, block_m, expert_map)
    T, E = logits.shape
    dev = logits.device
    n = T * top_k
    n_sorted = n + E * (block_m - 1)
    max_blocks = cdiv(n_sorted, block_m)
    w = torch.empty(T, top_k, dtype=torch.float32, device=dev)
    ids = torch.empty(T, top_k, dtype=torch.int32, device=dev)
    # whole 4-word groups underneath, so the direct kernel's fills are 16-byte stores to the end
    sorted_ids = torch.empty(cdiv(n_sorted, 4) * 4, dtype=torch.int32, device=dev)[:n_sorted]
    eids = torch.empty(cdiv(max_blocks, 4) * 4, dtype=torch.int32, device=dev)[:max_blocks]
    npad = torch.empty(1, dtype=torch.int32, device=dev)
    np_, cpp = grid_programs(T, config, _sm_count(dev))
    if is_direct(T, config):
        _moe_direct_kernel[(np_,)](
            logits, bias if bias is not None else w, expert_map if expert_map is not None else ids,
            w, ids, sorted_ids, eids, npad, T, E, logits.stride(0), n_sorted, max_blocks, block_m,
            float(routed_scaling_factor), TOP_K=top_k, N_GROUP=n_group, TOPK_GROUP=topk_group, SCORING=scoring,
            HAS_BIAS=bias is not None, RENORM=bool(renormalize), HAS_MAP=expert_map is not None,
            BLOCK_T=config["BLOCK_T"], num_warps=config["num_warps"], num_stages=config["num_stages"],
            **_direct_meta(E, top_k, n_group, config["BLOCK_T"]))
        return MoeRouting(w, ids, sorted_ids, eids, npad)
    cnt = torch.empty(np_, E, dtype=torch.int32, device=dev)
    cur = torch.empty(np_, E, dtype=torch.int32, device=dev)
    fused = bool(config["FUSED"]) and not (interpreting() and np_ > 1)
    prefix = not fused and np_ > PREFIX_MIN_PROGRAMS
    tot = torch.empty(E if prefix else 1, dtype=torch.int32, device=dev)
    args = (logits, bias if bias is not None else w, expert_map if expert_map is not None else ids,
            w, ids, sorted_ids, eids, npad, cnt, cur, _sync_scratch(dev), tot,
            T, E, logits.stride(0), n_sorted, max_blocks, block_m, cpp, float(routed_scaling_factor))
    meta = dict(TOP_K=top_k, N_GROUP=n_group, TOPK_GROUP=topk_group, SCORING=scoring,
                HAS_BIAS=bias is not None, RENORM=bool(renormalize), HAS_MAP=expert_map is not None,
                BLOCK_T=config["BLOCK_T"], MAX_PROGRAMS=config["MAX_PROGRAMS"],
                num_warps=config["num_warps"], num_stages=config["num_stages"], **_meta(E, top_k, n_group, config["BLOCK_T"]))
    for phase in ((0,) if fused else (1, 2)):
        if phase == 2 and prefix:
            pm = _prefix_meta(np_, E)
            _moe_prefix_kernel[(cdiv(E, pm["BLOCK_E"]),)](cnt, cur, tot, np_, E, **pm, num_warps=4)
        _moe_routing_kernel[(np_,)](*args, PHASE=phase, FUSED=fused, GRID_SYNC=fused and np_ > 1,
                                    PREFIX=prefix and phase == 2, **meta)
    return MoeRouting(w, ids, sorted_ids, eids, npad)


# ----------------------------------------------------------------------------- public API

def profile_of(num_experts: int, top_k: int, n_group: int, topk_group: int, scoring: str,
               routed_scaling_factor: float) -> str:
    """The PROFILES name these routing arguments match, else ``"custom"``."""
    return _PROFILE_BY_KEY.get((num_experts, top_k, n_group, topk_group, scoring, float(routed_scaling_factor)),
                               "custom")


def moe_routing(logits: torch.Tensor, bias: torch.Tensor | None, *, top_k: int, n_group: int = 1,
                topk_group: int = 1, scoring: str = "sigmoid", routed_scaling_factor: float = 1.0,
                renormalize: bool = True, block_m: int = 64, expert_map: torch.Tensor | None = None,
                config: dict[str, Any] | None = None) -> MoeRouting:
    """Route tokens to experts and lay them out for the grouped GEMM, in one launch.

    ``config=None`` takes the tuned config for (tokens, profile) from the active pack, or
    the default. Ties between equal scores go to the lower expert (and group) index.
    """
    if config is None:
        prof = profile_of(logits.shape[-1], top_k, n_group, topk_group, scoring, routed_scaling_factor)
        config = runtime.select("moe_routing", {"tokens": int(logits.shape[0]), "profile": prof}).config
    return launch(config=config, logits=logits, bias=bias, top_k=top_k, n_group=n_group, topk_group=topk_group,
                  scoring=scoring, routed_scaling_factor=routed_scaling_factor, renormalize=renormalize,
                  block_m=block_m, expert_map=expert_map)


# ----------------------------------------------------------------------------- workloads

@dataclass(frozen=True)
class Workload:
    """One routing shape: number of tokens and a model profile (PROFILES or "custom")."""

    tokens: int
    profile: str


def _profile(workload: Workload) -> dict[str, Any]:
    try:
        return PROFILES[workload.profile]
    except KeyError:
        raise ValueError(f"unknown moe_routing profile {workload.profile!r} (known: {', '.join(PROFILES)})") from None


def make_inputs(workload: Workload, device: str = "cpu", seed: int = 0) -> dict[str, Any]:
    """Router GEMM output (fp32 logits) and a skewed correction bias, as a profile sees."""
    p = _profile(workload)
    E = p["num_experts"]
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(workload.tokens, E, generator=g)
    # Uneven expert loads: a few hot experts get a larger bias.
    skew = 0.3 * torch.rand(E, generator=g) ** 4
    bias = 0.1 * torch.randn(E, generator=g) + skew
    return dict(logits=logits.to(device), bias=bias.to(device), top_k=p["top_k"], n_group=p["n_group"],
                topk_group=p["topk_group"], scoring=p["scoring"],
                routed_scaling_factor=p["routed_scaling_factor"], renormalize=p["renormalize"],
                block_m=64, expert_map=None)


def default_config(workload: Workload) -> dict[str, Any]:
    """H200 heuristic (from the phase profile, benchmarks/NOTES.md): up to DIRECT_MAX_TOKENS
    the direct kernel with a warp per token (every top-k reduction a warp shuffle, one
    CTA-wide step for the layout; sm_90 compile check: no bar.sync before the layout step,
    48-80 registers up to T=8, no spills), 7 more programs sharing the padding fill; then many one-token programs while T <= 128
    (per-token latency, not throughput, is what a small T costs); beyond, chunks grow so
    that <= 128 programs share the tokens, all resident for the single-launch grid barrier;
    from T = 2048 two launches of up to 1024 programs."""
    E = PROFILES.get(workload.profile, {}).get("num_experts", 512)
    e_pad = next_power_of_2(E)
    T = max(1, workload.tokens)
    if T <= DIRECT_MAX_TOKENS:
        bt = next_power_of_2(T)
        return dict(BLOCK_T=bt, MAX_PROGRAMS=8, FUSED=True, num_warps=min(8, bt), num_stages=1)
    cap = 16 if e_pad <= 256 else 8  # keeps the [BLOCK_T, E_PAD] tiles at <= 32 values a thread
    bt = min(cap, next_power_of_2(cdiv(T, 128)))
    cfg = dict(BLOCK_T=bt, MAX_PROGRAMS=min(128, next_power_of_2(cdiv(T, bt))), FUSED=True,
               num_warps=4 if bt * e_pad >= 2048 else 2, num_stages=1)
    if T >= 2048:
        # Two launches around the prefix scan, up to 1024 programs of small chunks: the
        # H200 winners at T = 4096 / 8192 (run 14: dsv41-flash 72.4 -> 30.4 us and 126.5 ->
        # 51.2 us, dsv3 T=8192 109.6 -> 45.3 us against the 128-program fused default).
        bt = 2 if e_pad > 256 else 8
        cfg.update(BLOCK_T=bt, MAX_PROGRAMS=min(1024, next_power_of_2(cdiv(T, bt))), FUSED=False,
                   num_warps=4)
    if interpreting() and grid_programs(T, cfg)[0] > 1:
        cfg["FUSED"] = False  # the interpreter runs programs sequentially: no grid barrier
    return cfg


def cost(workload: Workload) -> tuple[float, float]:
    """Fewest bytes (logits, bias, outputs, one re-read of topk_ids) and rough flops."""
    p = _profile(workload)
    T, E, k = workload.tokens, p["num_experts"], p["top_k"]
    n_sorted = T * k + E * 63
    out = T * k * 8 + n_sorted * 4 + cdiv(n_sorted, 64) * 4 + 4
    return float(T * E * 4 + E * 4 + out + T * k * 4), float(T * E * (12 + 3 * k))


_TIE_RTOL = 1e-6


def _near_equal(s_row: torch.Tensor, ids: torch.Tensor, want: torch.Tensor) -> bool:
    """Same ids slot by slot, or ids whose scores differ by at most a near-tie."""
    a, b = s_row[ids.long()], s_row[want.long()]
    return bool(((ids == want) | ((a - b).abs() <= _TIE_RTOL * torch.maximum(a.abs(), b.abs()))).all())


def _group_tie_alternatives(s_row: torch.Tensor, has_bias: bool, n_group: int, topk_group: int,
                            top_k: int) -> list[torch.Tensor]:
    """Reference top-k ids for every choice among groups near-tied at the keep boundary."""
    if n_group <= 1:
        return []
    g = s_row.view(n_group, -1)
    gs = g.sort(dim=-1, descending=True).values[:, :2].sum(-1) if has_bias else g.amax(-1)
    boundary = gs.sort(descending=True).values[topk_group - 1]
    band = _TIE_RTOL * boundary.abs().clamp(min=1e-30)
    sure = (gs > boundary + band).nonzero().flatten().tolist()
    tied = ((gs - boundary).abs() <= band).nonzero().flatten().tolist()
    alts = []
    for combo in itertools.combinations(tied, topk_group - len(sure)):
        keep = torch.zeros(n_group, dtype=torch.bool)
        keep[sure + list(combo)] = True
        masked = s_row.masked_fill(~keep.repeat_interleave(g.shape[1]), float("-inf"))
        alts.append(_stable_topk_desc(masked, top_k).to(torch.int32))
    return alts


def verify(out: MoeRouting, ref: MoeRouting, inputs: dict[str, Any]) -> None:
    """ids as the reference up to near-ties (1e-6 relative), weights of the kernel's own ids,
    and the align triple exactly as ``reference_align`` of the kernel's own ids."""
    out, ref = MoeRouting(*out), MoeRouting(*ref)
    logits, bias = inputs["logits"], inputs["bias"]
    E = logits.shape[1]
    ids, rids = out.topk_ids.cpu(), ref.topk_ids.cpu()
    if ids.shape != rids.shape or ids.dtype != torch.int32:
        raise AssertionError(f"topk_ids: got {ids.dtype} {tuple(ids.shape)}, want int32 {tuple(rids.shape)}")
    if ((ids < 0) | (ids >= E)).any():
        raise AssertionError("topk_ids: expert id out of range")
    s0 = _scores(logits.cpu(), inputs["scoring"])
    s = s0 + bias.cpu().float() if bias is not None else s0
    for t in (ids != rids).any(dim=1).nonzero().flatten().tolist():
        # A row may differ only where scores are near-tied: between experts, or between
        # groups at the keep boundary (a 1-ulp difference in a score can flip either).
        alts = [rids[t]] + _group_tie_alternatives(s[t], bias is not None, inputs["n_group"], inputs["topk_group"],
                                                   inputs["top_k"])
        if not any(_near_equal(s[t], ids[t], alt) for alt in alts):
            j = int((ids[t] != rids[t]).nonzero()[0, 0])
            raise AssertionError(f"topk_ids: token {t} differs beyond near-ties at slot {j}: "
                                 f"got {ids[t, j].item()} want {rids[t, j].item()}")
    if (ids.sort(dim=1).values[:, 1:] == ids.sort(dim=1).values[:, :-1]).any():
        raise AssertionError("topk_ids: an expert chosen twice for one token")
    w = s0.gather(1, ids.long())
    if inputs["renormalize"]:
        w = w / w.sum(dim=-1, keepdim=True)
    w = w * inputs["routed_scaling_factor"]
    if out.topk_weights.dtype != torch.float32:
        raise AssertionError(f"topk_weights: dtype {out.topk_weights.dtype}, want float32")
    assert_close("topk_weights", out.topk_weights.cpu(), w, atol=1e-5, rtol=1e-5)
    emap = inputs.get("expert_map")
    want = reference_align(ids, E, inputs["block_m"], emap.cpu() if emap is not None else None)
    for name, o, r in zip(("sorted_token_ids", "expert_ids", "num_tokens_post_pad"), out[2:], want):
        assert_equal(name, o.cpu(), r)


# ----------------------------------------------------------------------------- baselines

def _torch_eager(logits: torch.Tensor, bias: torch.Tensor | None, *, top_k: int, n_group: int = 1,
                 topk_group: int = 1, scoring: str = "sigmoid", routed_scaling_factor: float = 1.0,
                 renormalize: bool = True, block_m: int = 64, expert_map: torch.Tensor | None = None) -> MoeRouting:
    """vLLM-style grouped_topk then a torch moe_align_block_size: what engines run natively."""
    scores = _scores(logits, scoring)
    T, E = scores.shape
    s = scores + bias.unsqueeze(0) if bias is not None else scores
    if n_group > 1:
        g = s.view(T, n_group, -1)
        gscore = g.topk(2, dim=-1)[0].sum(dim=-1) if bias is not None else g.amax(dim=-1)
        gidx = torch.topk(gscore, k=topk_group, dim=-1, sorted=False)[1]
        gmask = torch.zeros_like(gscore).scatter_(1, gidx, 1)
        smask = gmask.unsqueeze(-1).expand(T, n_group, E // n_group).reshape(T, E)
        s = s.masked_fill(~smask.bool(), float("-inf"))
    ids = torch.topk(s, k=top_k, dim=-1, sorted=True)[1]  # sorted: the slot order the kernel and verify use
    w = scores.gather(1, ids)
    if renormalize:
        w = w / w.sum(dim=-1, keepdim=True)
    ids = ids.to(torch.int32)
    return MoeRouting(w * routed_scaling_factor, ids, *reference_align(ids, E, block_m, expert_map))


baselines = {"torch_eager": _torch_eager}


# ----------------------------------------------------------------------------- lowering

def lower_signatures(workload: Workload, config: dict[str, Any]) -> list[tuple[Any, dict[str, str], dict[str, Any]]]:
    """Each launch ``launch`` does on a GPU for this workload/config: (jit fn, signature, constexprs).

    Needs ``TRITON_INTERPRET`` unset (the interpreter wraps the kernel in a non-compilable object).
    """
    p = _profile(workload)
    E, k = p["num_experts"], p["top_k"]
    fused = bool(config["FUSED"])  # GPU lowering: the interpreter's two-launch fallback does not apply
    sig = {"logits_ptr": "*fp32", "bias_ptr": "*fp32", "emap_ptr": "*i32", "w_ptr": "*fp32", "ids_ptr": "*i32",
           "sorted_ptr": "*i32", "eids_ptr": "*i32", "npad_ptr": "*i32", "cnt_ptr": "*i32", "cur_ptr": "*i32",
           "sync_ptr": "*i32", "tot_ptr": "*i32", "T": "i32", "E": "i32", "stride_lt": "i32", "n_sorted": "i32",
           "max_blocks": "i32",
           "block_m": "i32", "chunks_per_prog": "i32", "scaling": "fp32"}
    base = dict(TOP_K=k, N_GROUP=p["n_group"], TOPK_GROUP=p["topk_group"], SCORING=p["scoring"], HAS_BIAS=True,
                RENORM=p["renormalize"], HAS_MAP=False, BLOCK_T=config["BLOCK_T"])
    if is_direct(workload.tokens, config):
        dsig = {name: t for name, t in sig.items()
                if name not in ("cnt_ptr", "cur_ptr", "sync_ptr", "tot_ptr", "chunks_per_prog")}
        dx = dict(base, **_direct_meta(E, k, p["n_group"], config["BLOCK_T"]))
        return [(_moe_direct_kernel, {**dsig, **{name: "constexpr" for name in dx}}, dx)]
    cx = dict(base, MAX_PROGRAMS=config["MAX_PROGRAMS"], **_meta(E, k, p["n_group"], config["BLOCK_T"]))
    np_ = grid_programs(workload.tokens, config, 132)[0]  # an H100/H200's SM count
    prefix = not fused and np_ > PREFIX_MIN_PROGRAMS
    out = []
    for phase in ((0,) if fused else (1, 2)):
        if phase == 2 and prefix:
            pc = dict(_prefix_meta(np_, E))  # a copy: the cached dict is shared
            psig = {"cnt_ptr": "*i32", "before_ptr": "*i32", "tot_ptr": "*i32", "NP": "i32", "E": "i32"}
            out.append((_moe_prefix_kernel, {**psig, **{name: "constexpr" for name in pc}}, pc))
        c = dict(cx, PHASE=phase, FUSED=fused, GRID_SYNC=fused and np_ > 1, PREFIX=prefix and phase == 2)
        out.append((_moe_routing_kernel, {**sig, **{name: "constexpr" for name in c}}, c))
    return out


runtime.register_defaults("moe_routing", lambda wd: default_config(Workload(**wd)))

SPEC = KernelSpec(
    name="moe_routing", workload=Workload, make_inputs=make_inputs, reference=reference, launch=launch,
    default_config=default_config, cost=cost, verify=verify, baselines=baselines, launch_bound=True,
    cold_l2=False,
    description="router logits -> grouped top-k, weights and moe_align_block_size layout, one launch",
)
