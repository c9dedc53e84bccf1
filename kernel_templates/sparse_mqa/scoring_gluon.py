"""``SCORE_GLUON``: the scoring of fp8 or mxfp4 keys for one query token (next_n = 1) on the radix /
bound paths (and ``top_k=0`` with the logits), by a Gluon kernel with explicit layouts.
Every per-key value lives in the layout the head sum leaves (``SliceLayout(1, MMA)``: a
thread holds two keys' scores, replicated over the four lanes of a quad): the key scales
are loaded, the scores stored and the group max's in-warp steps done in it, where the
Triton kernel's layout passes put them through shared memory.
The key tiles (one page, 8 KB) come by TMA into a ring of ``num_stages`` slots completed by
mbarriers: TMA writes and wgmma reads are both in the async proxy, so the loop needs no
proxy fence. (A first form with cp.async into the ring needed two ``fence.proxy.async`` a
tile, each a ``MEMBAR.ALL.CTA`` waiting for every load in flight: 35.9 us against the
Triton kernel's 26.6 at dsv32 B=1 512K on an H200; with ldmatrix A operands instead,
as the Triton kernel does, no fence and 26.6 us.) A tile: a CTA barrier (every
warp done with the slot refilled next; Triton's membar pass adds more around the mbarrier
expect and the group max's scratch: 4-5 ``bar.sync`` a tile in all), the TMA of the tile
``num_stages - 1`` ahead, the block-table entry of the one after, the scales two tiles
ahead, the wait on the tile's mbarrier, one 64 x HP x 128 FP8 wgmma (keys on M, query
heads on N, q in shared memory once a program), the epilogue; the group max is the only
cross-warp step. mxfp4 keys (``MX``): the codes come by cp.async (a ring of four 64 x
16-byte buffers, one a scale block), each block is read by ldmatrix straight into wgmma's
register A layout and decoded there to E4M3 (``_gl_mx_operand``), one 64 x HP x 32 FP8
wgmma a block, and the four block products are summed with their UE8M0 factors. Where it
cannot score a call (``score_gluon_error``: not sm_90, next_n > 1, a strided cache, ...)
the launcher runs the Triton kernel with the same config.
Not runnable under the interpreter: verified on the GPU (tests marked gpu, and the
tuner's check of every config against the reference).
"""
from __future__ import annotations

from typing import Any

import triton.language as tl

from kernel_templates._gluon import (async_copy, async_load, cta_barrier, gl, gluon_available, gluon_jit,
                                    gluon_on_hopper, hopper, mbarrier, tma_load)
from kernel_templates._host import next_power_of_2
from kernel_templates.sparse_mqa.common import RADIX_SAMPLE, _order_bits, _row_digit
from kernel_templates.sparse_mqa.scoring import _E2M1_LO_HI_ASM, _mx_q_perm, _ue8m0_x64
from tuner.runtime.target import Target

GL_SCORE_BLOCK_N = 64  # wgmma's M: one warpgroup
GL_SCORE_MAX_HP = 128  # query rows (heads, padded): the accumulator is HP / 2 registers a thread


def score_gluon_error(config: dict[str, Any], k_format: str, next_n: int, heads: int, page: int, top_k: int,
                      algo: str, target: Target, return_logits: bool = True, contiguous: bool = True) -> str | None:
    """Why ``SCORE_GLUON`` cannot score this call on ``target`` (None: it can); the launcher
    then scores with the Triton kernel, and the search space pins the knob off."""
    if not gluon_available(target):
        return "SCORE_GLUON needs Triton's Gluon (triton >= 3.5) and does not run under the interpreter"
    if not gluon_on_hopper(target):
        return "SCORE_GLUON runs wgmma and TMA as sm_90 has them: not on this target"
    if next_n != 1:
        return f"SCORE_GLUON scores one query token (got next_n={next_n})"
    if config["BLOCK_N"] != GL_SCORE_BLOCK_N or page % GL_SCORE_BLOCK_N:
        return f"SCORE_GLUON needs BLOCK_N={GL_SCORE_BLOCK_N} and a page size divisible by it"
    if int(config["num_warps"]) != 4 or int(config["num_stages"]) < 2:
        return "SCORE_GLUON runs one warpgroup (num_warps=4) and a ring of num_stages >= 2 key tiles"
    if max(next_power_of_2(heads), 16) > GL_SCORE_MAX_HP:
        return f"SCORE_GLUON takes at most {GL_SCORE_MAX_HP} heads, got {heads}"
    if top_k > 0 and algo not in ("radix", "bound"):
        return f"SCORE_GLUON writes the scores for the radix / bound top-k paths, not {algo!r}"
    if top_k == 0 and not return_logits:
        return "SCORE_GLUON always writes the scores: a call asking for neither indices nor logits has none to write"
    if not contiguous:
        return "SCORE_GLUON reads the key cache through a TMA descriptor of its rows: it must be contiguous"
    return None


@gluon_jit
def _gl_page(bt_row, start, j, n_tiles, PAGE: gl.constexpr):
    """Block-table entry of the program's tile ``j`` (0 past its last tile)."""
    return gl.load(bt_row + (start + j * 64) // PAGE, mask=j < n_tiles, other=0).to(gl.int64)


@gluon_jit
def _gl_tma_keys(k_desc, kbuf, bars, page, start, j, n_tiles, STAGES: gl.constexpr, PAGE: gl.constexpr):
    """TMA of the program's key tile ``j`` (if it has one) into its ring slot, completing on its mbarrier."""
    n0 = start + j * 64
    bar = bars.index(j % STAGES)
    ok = j < n_tiles
    mbarrier.expect(bar, 64 * 128, ok)
    tma_load(k_desc, [(page * PAGE + n0 % PAGE).to(gl.int32), 0], bar, kbuf.index(j % STAGES), ok)


@gluon_jit
def _gl_cp_codes(k_ptr, kb0, kb1, kb2, kb3, coff, page, start, j, n_tiles, stride_kp, stride_ks,
                 STAGES: gl.constexpr, PAGE: gl.constexpr):
    """cp.async of the program's mxfp4 code tile ``j`` (if it has one): its four 64 x 16-byte
    scale blocks into their buffers' ring slot, one commit group. cp.async, not TMA: the codes
    are read by generic loads (``_gl_mx_operand``), and a TMA refill of a slot read that way
    made Triton put a proxy fence (a ``MEMBAR.ALL.CTA``, waiting for every load in flight)
    and a barrier a copy in the loop."""
    n0 = start + j * 64
    at = k_ptr + page * stride_kp + (n0 % PAGE) * stride_ks + coff
    ok = j < n_tiles
    slot = j % STAGES
    async_load(kb0.index(slot), at, mask=ok)
    async_load(kb1.index(slot), at + 16, mask=ok)
    async_load(kb2.index(slot), at + 32, mask=ok)
    async_load(kb3.index(slot), at + 48, mask=ok)
    async_copy.commit_group()


@gluon_jit
def _gl_scales(ks_ptr, bt_row, start, j, n_tiles, end, rows, stride_sp, stride_ss, PAGE: gl.constexpr,
               MX: gl.constexpr):
    """The key scales of tile ``j`` in the head sum's layout: fp8 keys their fp32 scale (0 past
    ``end``), mxfp4 keys their four UE8M0 bytes as one int32 word (2^0 each past ``end``)."""
    n0 = start + j * 64
    page = _gl_page(bt_row, start, j, n_tiles, PAGE)
    at = ks_ptr + page * stride_sp + (n0 % PAGE + rows) * stride_ss
    if MX:
        return gl.load(at.to(gl.pointer_type(gl.int32)), mask=n0 + rows < end, other=0x7F7F7F7F)
    else:
        return gl.load(at, mask=n0 + rows < end, other=0.0)


@gluon_jit
def _gl_mx_operand(buf, CL: gl.constexpr, AL: gl.constexpr):
    """One scale block of an mxfp4 key tile, ``buf [64, 16]`` code bytes in shared memory ->
    wgmma's register A operand ``[64, 32]`` FP8 (the E2M1 values * 2^-6, exactly) in the K
    order of ``_lo_hi_operand``: the 16 low nibbles, then the 16 high ones (q is stored the
    same way). ``CL`` gives each thread one 4-byte word of two rows 8 apart, the word wgmma's
    A layout wants there, so the operand needs no data movement after the decode."""
    lo, hi = gl.inline_asm_elementwise(_E2M1_LO_HI_ASM, "=r,=r,r", [buf.load(CL)], dtype=(gl.uint8, gl.uint8),
                                       is_pure=True, pack=4)
    a = gl.reshape(gl.permute(gl.join(lo, hi), (0, 2, 1)), [64, 32]).to(gl.float8e4nv, bitcast=True)
    return gl.convert_layout(a, AL)


@gluon_jit
def _gl_score_kernel(q_ptr, w_ptr, k_src, ks_ptr, bt_ptr, seqlen_ptr, logits_ptr, rs_ptr, gmax_ptr, H, max_len,
                     stride_qb, stride_qh, stride_wb, stride_kp, stride_ks, stride_sp, stride_ss, stride_btb,
                     stride_lb, stride_gm,
                     HP: gl.constexpr, PAGE: gl.constexpr, NUM_SPLITS: gl.constexpr, STAGES: gl.constexpr,
                     ZERO_RS: gl.constexpr, RS: gl.constexpr, GMAX: gl.constexpr, BOUND_GROUP: gl.constexpr,
                     PDL: gl.constexpr = False, MX: gl.constexpr = False, SAMPLE: gl.constexpr = False):
    """Scores of one (sequence, split) chunk of keys for one query token (see above). fp8 keys:
    ``k_src`` is a TMA descriptor of the key cache as ``[pages * PAGE, 128]`` rows, boxes of one
    64-key tile. mxfp4 keys (``MX``): ``k_src`` is the code cache itself (strides ``stride_kp``,
    ``stride_ks``); each tile comes by cp.async as four 64 x 16-byte scale blocks, each block is
    decoded to a register A operand (``_gl_mx_operand``), one FP8 wgmma a block against q's
    block (stored in the same K order), and the four products are summed with their scale
    factors before the ReLU.

    ``SAMPLE`` (``SCORE_SAMPLE``): also the radix passes' sampled digit-0 histogram (MODE 1:
    ``_row_digit`` of every ``RADIX_SAMPLE``-th key of the row), added atomically into the
    row state, which the launcher zero-fills before this launch (no ``ZERO_RS``: the row's
    other programs would add before its split 0 zeroed it)."""
    BLOCK_N: gl.constexpr = 64
    D: gl.constexpr = 128
    MMA: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, HP, 32])
    ROW: gl.constexpr = gl.SliceLayout(1, MMA)
    COL: gl.constexpr = gl.SliceLayout(0, MMA)
    KS: gl.constexpr = gl.NVMMASharedLayout(swizzle_byte_width=128, element_bitwidth=8, rank=2)
    LD: gl.constexpr = gl.BlockedLayout([1, 16], [4, 8], [4, 1], [1, 0])
    ZL: gl.constexpr = gl.BlockedLayout([4], [32], [4], [0])
    # mxfp4: the code blocks (unswizzled 16-byte rows), their copies' layout (8 bytes a thread), q's
    # scale blocks, the decode's layout
    KC: gl.constexpr = gl.NVMMASharedLayout(swizzle_byte_width=0, element_bitwidth=8, rank=2)
    CP: gl.constexpr = gl.BlockedLayout([1, 8], [16, 2], [4, 1], [1, 0])
    KQ: gl.constexpr = gl.NVMMASharedLayout(swizzle_byte_width=32, element_bitwidth=8, rank=2)
    LQ: gl.constexpr = gl.BlockedLayout([1, 8], [8, 4], [4, 1], [1, 0])
    CL: gl.constexpr = gl.DistributedLinearLayout(reg_bases=[[0, 1], [0, 2], [8, 0]],
                                                  lane_bases=[[0, 4], [0, 8], [1, 0], [2, 0], [4, 0]],
                                                  warp_bases=[[16, 0], [32, 0]], block_bases=[], shape=[64, 16])
    AL: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=MMA, k_width=4)
    if PDL:
        tl.extra.cuda.gdc_launch_dependents()
    b = gl.program_id(0)
    split = gl.program_id(1)
    # the start is a chain of dependent loads (seq_len, the block table, the first key tiles): q and the
    # weights are requested first and stored to shared memory only after the first TMA copies are issued
    if MX:
        hq = gl.arange(0, HP, layout=gl.SliceLayout(1, LQ))
        kq = gl.arange(0, 32, layout=gl.SliceLayout(0, LQ))
        kcol = _mx_q_perm(kq)  # q column at K position kq
        qrow = q_ptr + b.to(gl.int64) * stride_qb + hq[:, None] * stride_qh + kcol[None, :]
        qm = (hq < H)[:, None]
        qv0 = gl.load(qrow, mask=qm, other=0.0)
        qv1 = gl.load(qrow + 32, mask=qm, other=0.0)
        qv2 = gl.load(qrow + 64, mask=qm, other=0.0)
        qv3 = gl.load(qrow + 96, mask=qm, other=0.0)
    else:
        hq = gl.arange(0, HP, layout=gl.SliceLayout(1, LD))
        dq = gl.arange(0, D, layout=gl.SliceLayout(0, LD))
        qv = gl.load(q_ptr + b.to(gl.int64) * stride_qb + hq[:, None] * stride_qh + dq[None, :],
                     mask=(hq < H)[:, None], other=0.0)
    hw = gl.arange(0, HP, layout=COL)
    w = gl.load(w_ptr + b.to(gl.int64) * stride_wb + hw, mask=hw < H, other=0.0)
    seq_len = gl.minimum(gl.maximum(gl.load(seqlen_ptr + b), 0), max_len)
    if ZERO_RS:
        if split == 0:
            zo = gl.arange(0, 2048, layout=ZL)
            gl.store(rs_ptr + b * RS + zo, gl.zeros([2048], gl.int32, ZL), mask=zo < RS)
    chunk = gl.cdiv(gl.cdiv(seq_len, NUM_SPLITS), BLOCK_N) * BLOCK_N
    start = split * chunk
    end = gl.minimum(start + chunk, seq_len)
    n_tiles = gl.cdiv(gl.maximum(end - start, 0), BLOCK_N)
    bt_row = bt_ptr + b.to(gl.int64) * stride_btb

    if MX:
        kb0 = gl.allocate_shared_memory(gl.uint8, [STAGES, BLOCK_N, 16], KC)
        kb1 = gl.allocate_shared_memory(gl.uint8, [STAGES, BLOCK_N, 16], KC)
        kb2 = gl.allocate_shared_memory(gl.uint8, [STAGES, BLOCK_N, 16], KC)
        kb3 = gl.allocate_shared_memory(gl.uint8, [STAGES, BLOCK_N, 16], KC)
        coff = (gl.arange(0, BLOCK_N, layout=gl.SliceLayout(1, CP))[:, None] * stride_ks
                + gl.arange(0, 16, layout=gl.SliceLayout(0, CP))[None, :])
        for j in gl.static_range(STAGES - 1):
            _gl_cp_codes(k_src, kb0, kb1, kb2, kb3, coff, _gl_page(bt_row, start, j, n_tiles, PAGE), start, j,
                         n_tiles, stride_kp, stride_ks, STAGES, PAGE)
    else:
        bars = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
        for s in gl.static_range(STAGES):
            mbarrier.init(bars.index(s), count=1)
        kbuf = gl.allocate_shared_memory(gl.float8e4nv, [STAGES, BLOCK_N, D], KS)
        hopper.fence_async_shared()  # the barrier inits, before the TMA copies complete on them
        cta_barrier()
        for j in gl.static_range(STAGES - 1):
            _gl_tma_keys(k_src, kbuf, bars, _gl_page(bt_row, start, j, n_tiles, PAGE), start, j, n_tiles, STAGES,
                         PAGE)
    page_next = _gl_page(bt_row, start, STAGES - 1, n_tiles, PAGE)
    rows = gl.arange(0, BLOCK_N, layout=ROW)
    scl = _gl_scales(ks_ptr, bt_row, start, 0, n_tiles, end, rows, stride_sp, stride_ss, PAGE, MX)
    scl_next = _gl_scales(ks_ptr, bt_row, start, 1, n_tiles, end, rows, stride_sp, stride_ss, PAGE, MX)
    if MX:
        q_smem = gl.allocate_shared_memory(gl.float8e4nv, [4, HP, 32], KQ)
        q_smem.index(0).store(qv0)
        q_smem.index(1).store(qv1)
        q_smem.index(2).store(qv2)
        q_smem.index(3).store(qv3)
    else:
        q_smem = gl.allocate_shared_memory(gl.float8e4nv, [HP, D], KS, qv)
    hopper.fence_async_shared()  # q's generic stores, before the wgmma reads them
    cta_barrier()
    zero = gl.zeros([BLOCK_N, HP], gl.float32, MMA)
    lrow = logits_ptr + b.to(gl.int64) * stride_lb
    grow = gmax_ptr + b.to(gl.int64) * stride_gm
    NG: gl.constexpr = BLOCK_N // BOUND_GROUP
    gcol = gl.arange(0, NG, layout=COL)
    for i in range(n_tiles):
        cta_barrier()  # every warp's wgmma (mxfp4: code loads) of tile i - 1 is done: its slot may be refilled
        if MX:
            _gl_cp_codes(k_src, kb0, kb1, kb2, kb3, coff, page_next, start, i + STAGES - 1, n_tiles, stride_kp,
                         stride_ks, STAGES, PAGE)
        else:
            _gl_tma_keys(k_src, kbuf, bars, page_next, start, i + STAGES - 1, n_tiles, STAGES, PAGE)
        page_next = _gl_page(bt_row, start, i + STAGES, n_tiles, PAGE)
        scl_after = _gl_scales(ks_ptr, bt_row, start, i + 2, n_tiles, end, rows, stride_sp, stride_ss, PAGE, MX)
        if MX:
            async_copy.wait_group(STAGES - 1)  # this thread's copies of tile i
            cta_barrier()  # everyone's
            slot = i % STAGES
            a0 = _gl_mx_operand(kb0.index(slot), CL, AL)
            d0 = hopper.warpgroup_mma(a0, q_smem.index(0).permute((1, 0)), zero, use_acc=False, is_async=True)
            a1 = _gl_mx_operand(kb1.index(slot), CL, AL)
            d1 = hopper.warpgroup_mma(a1, q_smem.index(1).permute((1, 0)), zero, use_acc=False, is_async=True)
            a2 = _gl_mx_operand(kb2.index(slot), CL, AL)
            d2 = hopper.warpgroup_mma(a2, q_smem.index(2).permute((1, 0)), zero, use_acc=False, is_async=True)
            a3 = _gl_mx_operand(kb3.index(slot), CL, AL)
            d3 = hopper.warpgroup_mma(a3, q_smem.index(3).permute((1, 0)), zero, use_acc=False, is_async=True)
            d0, d1, d2, d3 = hopper.warpgroup_mma_wait(0, deps=[d0, d1, d2, d3])
            acc = d0 * _ue8m0_x64(scl & 0xFF)[:, None] + d1 * _ue8m0_x64((scl >> 8) & 0xFF)[:, None]
            acc += d2 * _ue8m0_x64((scl >> 16) & 0xFF)[:, None] + d3 * _ue8m0_x64((scl >> 24) & 0xFF)[:, None]
            sc = gl.sum(gl.maximum(acc, 0.0) * w[None, :], axis=1)
        else:
            mbarrier.wait(bars.index(i % STAGES), (i // STAGES) & 1)
            acc = hopper.warpgroup_mma(kbuf.index(i % STAGES), q_smem.permute((1, 0)), zero, use_acc=False,
                                       is_async=True)
            acc = hopper.warpgroup_mma_wait(0, deps=[acc])
            sc = gl.sum(gl.maximum(acc, 0.0) * w[None, :], axis=1) * scl
        n0 = start + i * BLOCK_N
        key = n0 + rows
        vis = key < end
        gl.store(lrow + key, sc, mask=vis)
        if SAMPLE:
            gl.atomic_add(rs_ptr + b * RS + _row_digit(_order_bits(sc)), gl.full([BLOCK_N], 1, gl.int32, ROW),
                          mask=vis & (key % RADIX_SAMPLE == 0), sem="relaxed", scope="gpu")
        if GMAX:
            xm = gl.where((((rows // BOUND_GROUP)[:, None] == gcol[None, :]) & vis[:, None]), sc[:, None],
                          float("-inf"))
            gi = n0 // BOUND_GROUP + gcol
            gl.store(grow + gi, gl.max(xm, axis=0), mask=gi * BOUND_GROUP < end)
        scl = scl_next
        scl_next = scl_after
    if not MX:
        for s in gl.static_range(STAGES):
            mbarrier.invalidate(bars.index(s))
