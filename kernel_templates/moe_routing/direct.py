"""The direct routing kernel: all T <= BLOCK_T tokens in one program, the layout straight from
their routing in registers (no counts or cursors in memory, no barrier between programs)."""
from __future__ import annotations

import functools
from typing import Any

import triton
import triton.language as tl

from kernel_templates._host import next_power_of_2
from kernel_templates.moe_routing.chunked import _meta
from kernel_templates.moe_routing.topk import _chosen, _route_rows, _row_tile, _slot


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


# Default: the direct kernel up to this many tokens. It holds up to 32 (8 warps of 4 tokens:
# dsv41-flash, 512 padded experts, 223 registers at T=32), but on an H200 (graph
# replay, us, dsv3 / dsv41-flash) it wins only to T=8: T=1 4.4 / 5.9, T=4 4.5 / 5.4, T=8 5.3 /
# 6.7 (the fused path: T=1 8.0 / 8.4, T=4 two launches 6.9 / 7.4); T=16 8.2 / 11.0 and T=32
# 13.6 / 24.2 lose to one-token programs (7.1 / 9.0 at T=16). Larger T stays a tuning option.
DIRECT_MAX_TOKENS = 8


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
    return config["FUSED"] and tokens <= config["BLOCK_T"]
