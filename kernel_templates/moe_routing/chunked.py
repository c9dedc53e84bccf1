"""The chunked routing kernel: each program routes contiguous chunks of ``BLOCK_T`` tokens,
counts its experts, and (after a grid barrier when ``FUSED``, or in a second launch)
scatters its tokens into the expert-sorted layout; ``_moe_prefix_kernel`` sums the lower
programs' counts in a launch between the two when the grid is large.
"""
from __future__ import annotations

import functools

import torch
import triton
import triton.language as tl

from kernel_templates._host import next_power_of_2
from kernel_templates.moe_routing.topk import _chosen, _route_rows
from tuner.runtime.env import stream_counters


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
def _moe_prefix_kernel(cnt_ptr, before_ptr, tot_ptr, NP, E, NP_PAD: tl.constexpr, BLOCK_E: tl.constexpr):
    """Per expert, the counts of all lower programs (exclusive scan over the phase-1 grid)
    and the total: one ``[NP_PAD, BLOCK_E]`` tile per program, programs over experts."""
    e = tl.program_id(0) * BLOCK_E + tl.arange(0, BLOCK_E)
    q = tl.arange(0, NP_PAD)
    m = (q[:, None] < NP) & (e[None, :] < E)
    c = tl.load(cnt_ptr + q[:, None] * E + e[None, :], mask=m, other=0)
    tl.store(before_ptr + q[:, None] * E + e[None, :], tl.cumsum(c, axis=0) - c, mask=m)
    tl.store(tot_ptr + e, tl.sum(c, axis=0), mask=e < E)


FILL_BLOCK = 1024
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
