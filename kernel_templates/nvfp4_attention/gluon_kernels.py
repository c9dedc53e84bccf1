"""The Gluon split kernels (sm_90, ``GLUON``): the global splits with explicit layouts.

The SWA window's program stays the Triton one, launched on its own with ``SPLIT0 =
NUM_SPLITS``. What Triton's layout choices could not give the Triton kernel: the decoded K tile
never goes through shared memory for ``K q^T``. The codes are loaded so that each thread's 16
bytes a row decode straight into the register A operand of wgmma (Hopper's A fragment: lane %
4 holds column pairs 2t, 2t+1 and 2t+8, 2t+9 of every 16); the MMA's reduction axis is a
permutation of the latent, and q is stored to shared memory in that same permuted order, once
a program. Only ``P V`` reads the decoded tile from shared memory (stored once, with
stmatrix). Needs Triton's Gluon (3.5+) and an sm_90 GPU; the interpreter cannot run it, so it
is verified on the GPU (tests marked gpu, and the tuner's check of every config against the
reference).

``_gl_split_kernel``: decode, both products and the softmax in the same warps (64- or
128-entry tiles, a warpgroup per 64 entries). ``_gl_ws_kernel`` (``GL_WS``): warp-specialised,
a decoder warpgroup beside the softmax / ``P V`` warps (below).
"""
from __future__ import annotations

import triton.language as tl

from kernel_templates._gluon import cta_barrier, gl, gl_constexpr_function, gluon_jit, hopper, mbarrier

GL_WARPS = {64: 4, 128: 8}  # entries a tile (wgmma's M) -> the kernel's warps: a warpgroup per 64
GL_MAX_HEADS = {64: 32, 128: 64}  # -> the most heads a program (accumulators of 64-128 registers a thread)


# E2M1 nibbles -> fp16 * 2^-14 with the block scale, one 32-bit word of codes (8 nibbles) an
# instance: each nibble becomes an E4M3 byte (sign to bit 7, the 3 magnitude bits to bits 2-4:
# value * 2^-6, exact, subnormals included), two bytes a ``cvt.rn.f16x2.e4m3x2``, then one
# ``mul.rn.f16x2`` with the scale as fp16 ``E4M3 bits << 7`` (= scale * 2^-8, exact). Every
# product is a multiple of 2^-24 with <= 8 significant bits: exact in fp16. Outputs (f16x2
# words): $0 = low nibbles of bytes 0, 1; $1 = low of bytes 2, 3; $2, $3 the high nibbles.
# Inputs: $4 the code word, $5 the scale (fp16 bits).
_GL_DECODE_ASM = tl.constexpr("""{
.reg .b32 a, b, c, d, s;
.reg .b16 a0, a1, c0, c1;
mov.b32 s, {$5, $5};
and.b32 a, $4, 0x07070707;
shl.b32 a, a, 2;
and.b32 b, $4, 0x08080808;
shl.b32 b, b, 4;
or.b32 a, a, b;
shr.b32 c, $4, 2;
and.b32 c, c, 0x1C1C1C1C;
and.b32 d, $4, 0x80808080;
or.b32 c, c, d;
mov.b32 {a0, a1}, a;
mov.b32 {c0, c1}, c;
cvt.rn.f16x2.e4m3x2 $0, a0;
cvt.rn.f16x2.e4m3x2 $1, a1;
cvt.rn.f16x2.e4m3x2 $2, c0;
cvt.rn.f16x2.e4m3x2 $3, c1;
mul.rn.f16x2 $0, $0, s;
mul.rn.f16x2 $1, $1, s;
mul.rn.f16x2 $2, $2, s;
mul.rn.f16x2 $3, $3, s;
}""")


@gluon_jit
def _gl_load_chunk(kv_ptr, kvs_ptr, rc, rsc, valid, woff, soff, c: gl.constexpr):
    """Chunk ``c`` of a tile's raw bytes: code words ``[BLOCK_N, 4, 4]`` int32 (row, t4, w: bytes
    ``64 t4 + 16 c + 4 w`` .. + 4 of the row, one 16-byte load a thread and row) and the
    E4M3 bits of their two scales as one int16 ``[BLOCK_N, 4]`` (blocks ``8 t4 + 2 c``, ``+ 1``).
    Words, not bytes: a loop-carried uint8 tensor holds one byte a register."""
    codes = gl.load(kv_ptr + rc[:, None, None] + 4 * c + woff, mask=valid[:, None, None], other=0)
    sbits = gl.load(kvs_ptr + rsc[:, None] + c + soff, mask=valid[:, None], other=0)
    return codes, sbits


@gluon_jit
def _gl_pair(w):
    """An f16x2 word as ``[..., 2]`` fp16 (the low half first)."""
    return gl.join(w.to(gl.uint16).to(gl.float16, bitcast=True), (w >> 16).to(gl.uint16).to(gl.float16, bitcast=True))


@gluon_jit
def _gl_latent(c):
    """The latent index held by MMA reduction column ``c`` of the decoded chunks
    (``_gl_decode_chunk``): chunk ``c >> 7`` column ``16 jj + 8 i + 2 t4 + e0`` is latent
    ``128 t4 + 32 chunk + 2 e + i`` with ``e = 2 jj + e0``. q is stored in this order, and
    the ``P V`` accumulator rows come out in it."""
    e = 2 * ((c >> 4) & 7) + (c & 1)
    return 128 * ((c >> 1) & 3) + 32 * (c >> 7) + 2 * e + ((c >> 3) & 1)


@gluon_jit
def _gl_decode_chunk(codes, sbits, A_L: gl.constexpr):
    """Raw chunk -> ``[BLOCK_N, 128]`` fp16 (value * 2^-14) in wgmma's register A layout ``A_L``.
    MMA column ``c = 16 jj + 8 i + 2 t4 + e0`` holds latent ``128 t4 + 32 chunk + 2 e + i``
    (byte ``e = 2 jj + e0`` of the thread's 16, nibble ``i``): a permutation of the
    reduction axis, matched by q's order in shared memory."""
    R: gl.constexpr = codes.shape[0]
    w4 = gl.reshape(codes, [R, 4, 2, 2])  # [R, t4, wh, wl]: word 2 wh + wl, scale wh
    s2 = gl.join(sbits & 0xFF, (sbits >> 8) & 0xFF)  # [R, t4, wh]
    s2 = gl.convert_layout(s2, gl.SliceLayout(3, w4.type.layout))
    s16 = gl.expand_dims((s2.to(gl.uint16) << 7).to(gl.float16, bitcast=True), 3)
    p0, p1, p2, p3 = gl.inline_asm_elementwise(_GL_DECODE_ASM, "=r,=r,=r,=r,r,h", [w4, s16],
                                               dtype=(gl.uint32, gl.uint32, gl.uint32, gl.uint32),
                                               is_pure=True, pack=1)
    v = gl.join(gl.join(_gl_pair(p0), _gl_pair(p1)), gl.join(_gl_pair(p2), _gl_pair(p3)))
    # [R, t4, wh, wl, e0, hw, i] -> [R, wh, wl, hw, i, t4, e0]: jj = 2 (2 wh + wl) + hw
    v = gl.permute(v, (0, 2, 3, 5, 6, 1, 4))
    return gl.convert_layout(gl.reshape(v, [R, 128]), A_L, assert_trivial=True)


@gluon_jit
def _gl_ahead(n0, end, rows, bt_row, tk_row, PAGE: gl.constexpr, SPARSE: gl.constexpr, BLOCK_N: gl.constexpr):
    """What the tile at ``n0`` needs from memory before its own loads can be addressed,
    loaded a tile early: its page (dense; each row's when the tile spans pages) or its
    top-k indices (sparse)."""
    if SPARSE:
        pos = n0 + rows
        return gl.load(tk_row + pos, mask=pos < end, other=-1)
    elif BLOCK_N > PAGE:
        pos = n0 + rows
        return gl.load(bt_row + pos // PAGE, mask=pos < end, other=0)
    else:
        return gl.load(bt_row + n0 // PAGE, mask=n0 < end, other=0)


@gluon_jit
def _gl_rows(n0, end, seq_len, rows, ahead, bt_row, stride_kp, stride_ks, stride_sp, stride_ss,
             PAGE: gl.constexpr, SPARSE: gl.constexpr, BLOCK_N: gl.constexpr):
    """Row offsets (codes, scales) and validity of the tile at ``n0`` (``_tile_rows``), from
    ``_gl_ahead``'s value for it (sparse: one dependent load left, the pages)."""
    if SPARSE:
        valid = (ahead >= 0) & (ahead < seq_len)
        idx = gl.where(valid, ahead, 0)
        page = gl.load(bt_row + idx // PAGE, mask=valid, other=0).to(gl.int64)
        slot = idx % PAGE
    else:
        valid = n0 + rows < end
        page = ahead.to(gl.int64)
        if BLOCK_N > PAGE:
            slot = (n0 + rows) % PAGE
        else:
            slot = n0 % PAGE + rows
    return page * stride_kp + slot * stride_ks, page * stride_sp + slot * stride_ss, valid


@gluon_jit
def _gl_pv(v_buf, zero, p_smem, o0, o1, o2, o3):
    """``o_k += V_k^T P^T`` for the four 128-column chunks, async (tokens). The accumulators
    come in already rescaled: arithmetic on them between these wgmmas makes ptxas wait."""
    t0 = hopper.warpgroup_mma(v_buf.index(zero).permute((1, 0)), p_smem, o0, is_async=True)
    t1 = hopper.warpgroup_mma(v_buf.index(zero + 1).permute((1, 0)), p_smem, o1, is_async=True)
    t2 = hopper.warpgroup_mma(v_buf.index(zero + 2).permute((1, 0)), p_smem, o2, is_async=True)
    t3 = hopper.warpgroup_mma(v_buf.index(zero + 3).permute((1, 0)), p_smem, o3, is_async=True)
    return t0, t1, t2, t3


@gluon_jit
def _gl_split_bounds(n_items, split, NUM_SPLITS: gl.constexpr, BLOCK_N: gl.constexpr):
    """[start, end) of global split ``split`` of ``n_items`` entries (whole tiles a split)."""
    chunk = gl.cdiv(gl.cdiv(n_items, NUM_SPLITS), BLOCK_N) * BLOCK_N
    start = split * chunk
    return start, gl.minimum(start + chunk, n_items)


@gluon_jit
def _gl_softmax_init(BLOCK_H: gl.constexpr, ML: gl.constexpr, O_L: gl.constexpr):
    """A split's running max / sum (per head, layout ``ML``) and its four [128, heads] ``P V``
    accumulators (``O_L``) before the first tile."""
    zo = gl.zeros([128, BLOCK_H], gl.float32, O_L)
    return (gl.full([BLOCK_H], float("-inf"), gl.float32, ML), gl.zeros([BLOCK_H], gl.float32, ML), zo, zo, zo,
            zo)


@gluon_jit
def _gl_softmax_step(s, ok, m_i, l_i, sc):
    """One tile of the online softmax over the entries (rows of the scores ``s``, rows where ``ok``
    is false masked): (P, the rescale of what came before, the new running max and sum)."""
    s = gl.where(ok[:, None], s * sc, float("-inf"))
    m_new = gl.maximum(m_i, gl.max(s, 0))
    m_use = gl.where(m_new == float("-inf"), 0.0, m_new)
    alpha = gl.exp2(m_i - m_use)
    p = gl.exp2(s - m_use[None, :])
    return p, alpha, m_new, l_i * alpha + gl.sum(p, 0)


@gluon_jit
def _gl_store_partials(m_ptr, l_ptr, acc_ptr, m_i, l_i, o0, o1, o2, o3, b, hb, split, H,
                       stride_mb, stride_mh, stride_ab, stride_ah, stride_as, BLOCK_H: gl.constexpr):
    """A split's partials: (m, l) per head, acc [D, heads] * 2^14 (latent d of MMA row c)."""
    hs = hb * BLOCK_H + gl.arange(0, BLOCK_H, layout=m_i.type.layout)
    mo = b.to(gl.int64) * stride_mb + hs * stride_mh + split
    gl.store(m_ptr + mo, m_i, mask=hs < H)
    gl.store(l_ptr + mo, l_i, mask=hs < H)
    O_L: gl.constexpr = o0.type.layout
    ho = hb * BLOCK_H + gl.arange(0, BLOCK_H, layout=gl.SliceLayout(0, O_L))
    cr = gl.arange(0, 128, layout=gl.SliceLayout(1, O_L))
    ab = acc_ptr + b.to(gl.int64) * stride_ab + split * stride_as + ho[None, :] * stride_ah
    hm = (ho < H)[None, :]
    gl.store(ab + _gl_latent(cr)[:, None], o0 * 16384.0, mask=hm)
    gl.store(ab + _gl_latent(cr + 128)[:, None], o1 * 16384.0, mask=hm)
    gl.store(ab + _gl_latent(cr + 256)[:, None], o2 * 16384.0, mask=hm)
    gl.store(ab + _gl_latent(cr + 384)[:, None], o3 * 16384.0, mask=hm)


@gl_constexpr_function
def _gl_code_layout(block_n):
    """``[BLOCK_N, t4, w]`` code words of a chunk, laid out as wgmma's register A operand
    wants the decoded values (``_gl_decode_chunk``): a warp a 16-row slab."""
    warps = [[16 << i, 0, 0] for i in range((block_n // 16).bit_length() - 1)]
    return gl.DistributedLinearLayout(
        reg_bases=[[0, 0, 1], [0, 0, 2], [8, 0, 0]],
        lane_bases=[[0, 1, 0], [0, 2, 0], [1, 0, 0], [2, 0, 0], [4, 0, 0]],
        warp_bases=warps, block_bases=[], shape=[block_n, 4, 4])


@gluon_jit
def _gl_split_kernel(q_ptr, kv_ptr, kvs_ptr, bt_ptr, seqlen_ptr, topk_ptr, m_ptr, l_ptr, acc_ptr,
                     H, n_topk, qk_scale,
                     stride_qb, stride_qh, stride_kp, stride_ks, stride_sp, stride_ss, stride_btb, stride_tb,
                     stride_mb, stride_mh, stride_ab, stride_ah, stride_as,
                     PAGE: gl.constexpr, SPARSE: gl.constexpr, BLOCK_H: gl.constexpr, NUM_SPLITS: gl.constexpr,
                     BLOCK_N: gl.constexpr, AHEAD: gl.constexpr):
    """One global split of one (sequence, head block): partial (m, l, acc) like ``_split_whole``.

    ``BLOCK_N // 16`` warps: a warpgroup per 64 entries of a tile in ``K q^T`` and per 64
    latent rows of a chunk in ``V^T P^T`` (128 entries: two warpgroups share each decoded
    tile, each holding half of every accumulator). Per tile: the previous tile's ``P V``
    wgmmas are issued; each of the four 128-column chunks of this tile is decoded into
    wgmma's A registers (raw code chunks ``AHEAD`` chunks ahead loaded into registers in
    its place), multiplied into the scores (``K q^T``, async, chained) and stored to shared
    memory for ``P V``; the previous ``P V`` is waited for only before the first store."""
    NW: gl.constexpr = BLOCK_N // 16
    L3: gl.constexpr = _gl_code_layout(BLOCK_N)  # [BLOCK_N, t4, w] code words of a chunk
    S2: gl.constexpr = gl.SliceLayout(2, L3)   # [BLOCK_N, t4] scale pairs of a chunk
    R1: gl.constexpr = gl.SliceLayout(1, S2)
    MMA: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[NW, 1],
                                                  instr_shape=[16, BLOCK_H, 16])
    A_L: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=MMA, k_width=2)
    HS: gl.constexpr = gl.NVMMASharedLayout(swizzle_byte_width=2 * BLOCK_H, element_bitwidth=16, rank=2)
    VS: gl.constexpr = gl.NVMMASharedLayout(swizzle_byte_width=128, element_bitwidth=16, rank=2)
    QL: gl.constexpr = gl.BlockedLayout([1, BLOCK_H // 4], [32, 1], [NW // 4, 4], [1, 0])

    b = gl.program_id(0)
    hb = gl.program_id(1)
    split = gl.program_id(2)
    seq_len = gl.load(seqlen_ptr + b)

    # q^T in shared memory, its rows in the decoded chunks' order (_gl_latent)
    dq = _gl_latent(gl.arange(0, 512, layout=gl.SliceLayout(1, QL)))
    hq = hb * BLOCK_H + gl.arange(0, BLOCK_H, layout=gl.SliceLayout(0, QL))
    qv = gl.load(q_ptr + b.to(gl.int64) * stride_qb + hq[None, :] * stride_qh + dq[:, None],
                 mask=(hq < H)[None, :], other=0.0)
    # Buffers indexed in the loop by a loop-variant zero (n0 >> 30): the wgmma descriptors of the
    # 64 MMAs a tile are then recomputed in the loop (uniform adds) instead of being hoisted
    # out of it and held in 128 registers (which spilled).
    q_buf = gl.allocate_shared_memory(gl.float16, [1, 512, BLOCK_H], HS)
    q_buf.index(0).store(qv.to(gl.float16))
    # the decoded tile, a [BLOCK_N, 128] buffer a chunk (a slice of one [4 BLOCK_N, 128] buffer
    # read as wgmma's A by two warpgroups gave the wrong chunks' columns on an H200)
    v_buf = gl.allocate_shared_memory(gl.float16, [4, BLOCK_N, 128], VS)
    p_buf = gl.allocate_shared_memory(gl.float16, [1, BLOCK_N, BLOCK_H], HS)
    hopper.fence_async_shared()  # q's generic-proxy stores before wgmma (async proxy) reads them
    cta_barrier()

    if SPARSE:
        n_items = n_topk
    else:
        n_items = seq_len
    start, end = _gl_split_bounds(n_items, split, NUM_SPLITS, BLOCK_N)

    rows = gl.arange(0, BLOCK_N, layout=R1)
    t4 = gl.arange(0, 4, layout=gl.SliceLayout(0, S2))
    wv = gl.arange(0, 4, layout=gl.SliceLayout(0, gl.SliceLayout(1, L3)))
    soff = 4 * t4[None, :]                                                  # [1, 4] in S2 (int16 units)
    woff = 16 * t4[None, :, None] + wv[None, None, :]                       # [1, 4, 4] in L3 (words)
    bt_row = bt_ptr + b.to(gl.int64) * stride_btb
    tk_row = topk_ptr + b.to(gl.int64) * stride_tb

    m_i, l_i, o0, o1, o2, o3 = _gl_softmax_init(BLOCK_H, gl.SliceLayout(0, MMA), MMA)
    sc = qk_scale * 16384.0  # the decoded values are value * 2^-14
    srow = gl.arange(0, BLOCK_N, layout=gl.SliceLayout(1, MMA))
    # P V of a tile is issued at the top of the next iteration, so it runs while that tile's
    # first chunk is decoded, and is waited for before the first chunk's store overwrites
    # v_buf (no wgmma is in flight across the loop's back edge: ptxas then serialises every
    # wgmma, C7514). Before the first tile it multiplies zeros.
    for k in gl.static_range(4):
        v_buf.index(k).store(gl.zeros([BLOCK_N, 128], gl.float16, A_L))
    p_buf.index(0).store(gl.zeros([BLOCK_N, BLOCK_H], gl.float16, MMA))
    hopper.fence_async_shared()
    cta_barrier()

    ahead = _gl_ahead(start, end, rows, bt_row, tk_row, PAGE, SPARSE, BLOCK_N)
    rc, rsc, valid = _gl_rows(start, end, seq_len, rows, ahead, bt_row, stride_kp, stride_ks, stride_sp,
                              stride_ss, PAGE, SPARSE, BLOCK_N)
    ahead = _gl_ahead(start + BLOCK_N, end, rows, bt_row, tk_row, PAGE, SPARSE, BLOCK_N)
    c0, s0 = _gl_load_chunk(kv_ptr, kvs_ptr, rc, rsc, valid, woff, soff, 0)
    c1, s1 = _gl_load_chunk(kv_ptr, kvs_ptr, rc, rsc, valid, woff, soff, 1)
    if AHEAD == 4:
        c2, s2 = _gl_load_chunk(kv_ptr, kvs_ptr, rc, rsc, valid, woff, soff, 2)
        c3, s3 = _gl_load_chunk(kv_ptr, kvs_ptr, rc, rsc, valid, woff, soff, 3)
    for n0 in range(start, end, BLOCK_N):
        zero = n0 >> 30  # entries < 2^30: always 0, but not known to the compiler
        q_smem = q_buf.index(zero)
        p_smem = p_buf.index(zero)
        t0, t1, t2, t3 = _gl_pv(v_buf, zero, p_smem, o0, o1, o2, o3)  # the previous tile's P V
        if SPARSE:
            ok = gl.convert_layout(valid, gl.SliceLayout(1, MMA))
        else:
            ok = n0 + srow < end
        # raw bytes AHEAD chunks ahead, a chunk loaded as one is decoded (masked off past the
        # end: no traffic): 4, the next tile's chunk c as this tile's chunk c is decoded (one
        # tile of raw bytes live); 2, chunks 2 and 3 of this tile as chunks 0 and 1 are
        # decoded, then chunks 0 and 1 of the next tile (half the registers)
        rn, rsn, vn = _gl_rows(n0 + BLOCK_N, end, seq_len, rows, ahead, bt_row, stride_kp, stride_ks,
                               stride_sp, stride_ss, PAGE, SPARSE, BLOCK_N)
        ahead = _gl_ahead(n0 + 2 * BLOCK_N, end, rows, bt_row, tk_row, PAGE, SPARSE, BLOCK_N)
        a = _gl_decode_chunk(c0, s0, A_L)
        if AHEAD == 4:
            c0, s0 = _gl_load_chunk(kv_ptr, kvs_ptr, rn, rsn, vn, woff, soff, 0)
        else:
            c2, s2 = _gl_load_chunk(kv_ptr, kvs_ptr, rc, rsc, valid, woff, soff, 2)
        acc = hopper.warpgroup_mma(a, q_smem.slice(0, 128, dim=0), gl.zeros([BLOCK_N, BLOCK_H], gl.float32, MMA),
                                   use_acc=False, is_async=True)
        o0, o1, o2, o3 = hopper.warpgroup_mma_wait(1, deps=[t0, t1, t2, t3])  # P V done with v_buf, p_smem
        if NW > 4:
            cta_barrier()  # both warpgroups' (each reads every entry of the tile)
        v_buf.index(zero).store(a)
        a = _gl_decode_chunk(c1, s1, A_L)
        if AHEAD == 4:
            c1, s1 = _gl_load_chunk(kv_ptr, kvs_ptr, rn, rsn, vn, woff, soff, 1)
        else:
            c3, s3 = _gl_load_chunk(kv_ptr, kvs_ptr, rc, rsc, valid, woff, soff, 3)
        acc = hopper.warpgroup_mma(a, q_smem.slice(128, 128, dim=0), acc, is_async=True)
        acc = hopper.warpgroup_mma_wait(1, deps=[acc])  # chunk 0's A registers free again
        v_buf.index(zero + 1).store(a)
        a = _gl_decode_chunk(c2, s2, A_L)
        if AHEAD == 4:
            c2, s2 = _gl_load_chunk(kv_ptr, kvs_ptr, rn, rsn, vn, woff, soff, 2)
        else:
            c0, s0 = _gl_load_chunk(kv_ptr, kvs_ptr, rn, rsn, vn, woff, soff, 0)
        acc = hopper.warpgroup_mma(a, q_smem.slice(256, 128, dim=0), acc, is_async=True)
        acc = hopper.warpgroup_mma_wait(1, deps=[acc])  # chunk 1's A registers free again
        v_buf.index(zero + 2).store(a)
        a = _gl_decode_chunk(c3, s3, A_L)
        if AHEAD == 4:
            c3, s3 = _gl_load_chunk(kv_ptr, kvs_ptr, rn, rsn, vn, woff, soff, 3)
        else:
            c1, s1 = _gl_load_chunk(kv_ptr, kvs_ptr, rn, rsn, vn, woff, soff, 1)
        rc, rsc, valid = rn, rsn, vn
        acc = hopper.warpgroup_mma(a, q_smem.slice(384, 128, dim=0), acc, is_async=True)
        acc = hopper.warpgroup_mma_wait(1, deps=[acc])  # chunk 2's A registers free again
        v_buf.index(zero + 3).store(a)
        s = hopper.warpgroup_mma_wait(0, deps=[acc])
        p, alpha, m_i, l_i = _gl_softmax_step(s, ok, m_i, l_i, sc)  # online, over the tile's entries (rows)
        p_smem.store(p.to(gl.float16))
        al = alpha[None, :]
        o0 = o0 * al
        o1 = o1 * al
        o2 = o2 * al
        o3 = o3 * al
        hopper.fence_async_shared()
        cta_barrier()
    t0, t1, t2, t3 = _gl_pv(v_buf, 0, p_buf.index(0), o0, o1, o2, o3)  # the last tile's
    o0, o1, o2, o3 = hopper.warpgroup_mma_wait(0, deps=[t0, t1, t2, t3])
    _gl_store_partials(m_ptr, l_ptr, acc_ptr, m_i, l_i, o0, o1, o2, o3, b, hb, split, H,
                       stride_mb, stride_mh, stride_ab, stride_ah, stride_as, BLOCK_H)


# ``GL_WS``: the GLUON split kernel, warp-specialised. The split kernel above decodes, multiplies and
# runs the softmax in the same warps, one after the other (one program an SM at 64 heads, ~10 us a
# 128-entry tile on an H200 where its MMAs alone would take ~2.2). Here a decoder warpgroup (a
# worker partition) decodes each 64-entry tile chunk by chunk into wgmma's A registers, multiplies
# ``K q^T`` from them (as the split kernel does) and stores the decoded chunks to a ring of
# ``GL_WS_SLOTS`` shared-memory tiles and the scores to one shared [64, heads] fp32 tile; the
# default partition (4 warps up to 32 heads, 8 at 64, the latent rows split between its
# warpgroups) runs the online softmax and ``V^T P^T`` from shared memory. mbarriers: ``ready`` a
# slot (tile decoded and its scores stored), ``free`` a slot (its ``P V`` done), ``s_free`` (the
# scores read). A first form with ``K q^T`` in the MMA partition too (A from shared memory, the
# heads split between its warpgroups) left that partition the wall: its decoders waited on
# ``free`` half the time (ncu). Two decoder warpgroups were no faster than the plain GLUON kernel
# at 16 heads (0.87-0.96x on an H200) and spilled at 64: dropped. Dense mode only (the sparse
# rows' validity would have to travel with the tile).
GL_WS_SLOTS = 2  # decoded 64-entry tiles in shared memory (64 KB each)
GL_WS_NBUF = tl.constexpr(GL_WS_SLOTS)


@gl_constexpr_function
def _gl_ws_softmax_layout(block_h, num_warps):
    """[64 entries, heads] fp32 scores for the online softmax: a thread holds a run of entries of
    one head, the heads across lanes and warps (the max / sum over entries stay in a warp)."""
    lanes_h = max(1, block_h // num_warps)
    return gl.BlockedLayout([64 // (32 // lanes_h), 1], [32 // lanes_h, lanes_h], [1, num_warps], [0, 1])


# Prefetch a line into L2 (no registers held): $0 a dummy output, $1 the address, $2 the predicate.
_GL_PREFETCH_ASM = tl.constexpr("""{
.reg .pred p;
setp.ne.b32 p, $2, 0;
@p prefetch.global.L2 [$1];
mov.u32 $0, 0;
}""")


@gluon_jit
def _gl_prefetch_tile(kv_ptr, kvs_ptr, rc, rsc, valid, t4):
    """Ask L2 for a tile's raw rows (``_gl_rows``' offsets: lanes ``t4`` 0 and 1 a 128-byte line of
    codes each, 2 the line of its scales) well before its chunks are loaded into registers (ncu:
    the decoder's loads two chunks ahead stalled on HBM latency)."""
    code = kv_ptr + rc[:, None] + 32 * (t4 & 1)[None, :]
    scl = kvs_ptr + rsc[:, None] + 0 * t4[None, :]
    on_code = (valid[:, None] & (t4 < 2)[None, :]).to(gl.int32)
    on_scl = (valid[:, None] & (t4 == 2)[None, :]).to(gl.int32)
    gl.inline_asm_elementwise(_GL_PREFETCH_ASM, "=r,l,r", [code, on_code], dtype=gl.int32, is_pure=False, pack=1)
    gl.inline_asm_elementwise(_GL_PREFETCH_ASM, "=r,l,r", [scl, on_scl], dtype=gl.int32, is_pure=False, pack=1)


@gluon_jit
def _gl_ws_decoder(kv_ptr, kvs_ptr, bt_ptr, seqlen_ptr, stride_kp, stride_ks, stride_sp, stride_ss, stride_btb,
                   q_buf, v_buf, s_buf, ready, free, s_free, PAGE: gl.constexpr, NUM_SPLITS: gl.constexpr,
                   BLOCK_N: gl.constexpr, NBUF: gl.constexpr, SMEM_A: gl.constexpr):
    """The decoder partition (one warpgroup), every tile of the split in turn: each chunk
    decoded into A registers, multiplied into the scores (async, chained) and
    stored to ring slot ``tile % NBUF``; raw codes two chunks ahead in registers (as ``GL_AHEAD``
    2: chunks 2 and 3 loaded as chunks 0 and 1 are decoded, then the next tile's 0 and 1; a tile
    ahead spilled at 184 registers). ``SMEM_A`` (``GL_WS_A`` 1): each decoded chunk is stored first
    and ``K q^T`` reads it from the ring slot, so no decoded chunk stays in registers and the raw
    codes run a whole tile ahead (loaded as the same chunk of the tile before is decoded)."""
    BLOCK_H: gl.constexpr = q_buf.shape[2]
    L3: gl.constexpr = _gl_code_layout(BLOCK_N)
    S2: gl.constexpr = gl.SliceLayout(2, L3)
    R1: gl.constexpr = gl.SliceLayout(1, S2)
    MMA: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                  instr_shape=[16, BLOCK_H, 16])
    A_L: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=MMA, k_width=2)
    b = gl.program_id(0)
    split = gl.program_id(2)
    seq_len = gl.load(seqlen_ptr + b)
    start, end = _gl_split_bounds(seq_len, split, NUM_SPLITS, BLOCK_N)
    n_tiles = gl.cdiv(gl.maximum(end - start, 0), BLOCK_N)
    rows = gl.arange(0, BLOCK_N, layout=R1)
    t4 = gl.arange(0, 4, layout=gl.SliceLayout(0, S2))
    wv = gl.arange(0, 4, layout=gl.SliceLayout(0, gl.SliceLayout(1, L3)))
    soff = 4 * t4[None, :]
    woff = 16 * t4[None, :, None] + wv[None, None, :]
    bt_row = bt_ptr + b.to(gl.int64) * stride_btb
    STEP: gl.constexpr = BLOCK_N
    q_smem = q_buf.index(0)
    s_smem = s_buf.index(0)

    n0 = start
    ahead = _gl_ahead(n0, end, rows, bt_row, bt_row, PAGE, False, BLOCK_N)
    rc, rsc, valid = _gl_rows(n0, end, seq_len, rows, ahead, bt_row, stride_kp, stride_ks, stride_sp, stride_ss,
                              PAGE, False, BLOCK_N)
    ahead = _gl_ahead(n0 + STEP, end, rows, bt_row, bt_row, PAGE, False, BLOCK_N)
    c0, s0 = _gl_load_chunk(kv_ptr, kvs_ptr, rc, rsc, valid, woff, soff, 0)
    c1, s1 = _gl_load_chunk(kv_ptr, kvs_ptr, rc, rsc, valid, woff, soff, 1)
    if SMEM_A:
        c2, s2 = _gl_load_chunk(kv_ptr, kvs_ptr, rc, rsc, valid, woff, soff, 2)
        c3, s3 = _gl_load_chunk(kv_ptr, kvs_ptr, rc, rsc, valid, woff, soff, 3)
        for i in range(n_tiles):
            n0 = start + i * BLOCK_N
            rn, rsn, vn = _gl_rows(n0 + STEP, end, seq_len, rows, ahead, bt_row, stride_kp, stride_ks, stride_sp,
                                   stride_ss, PAGE, False, BLOCK_N)
            ahead = _gl_ahead(n0 + 2 * STEP, end, rows, bt_row, bt_row, PAGE, False, BLOCK_N)
            _gl_prefetch_tile(kv_ptr, kvs_ptr, rn, rsn, vn, t4)
            slot = i % NBUF
            a = _gl_decode_chunk(c0, s0, A_L)
            c0, s0 = _gl_load_chunk(kv_ptr, kvs_ptr, rn, rsn, vn, woff, soff, 0)
            mbarrier.wait(free.index(slot), ((i // NBUF) & 1) ^ 1)  # the slot's last P V done (fresh: passes)
            acc = _gl_ws_chunk_qk(a, v_buf.index(4 * slot), q_smem.slice(0, 128, dim=0),
                                  gl.zeros([BLOCK_N, BLOCK_H], gl.float32, MMA), False)
            a = _gl_decode_chunk(c1, s1, A_L)
            c1, s1 = _gl_load_chunk(kv_ptr, kvs_ptr, rn, rsn, vn, woff, soff, 1)
            acc = _gl_ws_chunk_qk(a, v_buf.index(4 * slot + 1), q_smem.slice(128, 128, dim=0), acc, True)
            a = _gl_decode_chunk(c2, s2, A_L)
            c2, s2 = _gl_load_chunk(kv_ptr, kvs_ptr, rn, rsn, vn, woff, soff, 2)
            acc = _gl_ws_chunk_qk(a, v_buf.index(4 * slot + 2), q_smem.slice(256, 128, dim=0), acc, True)
            a = _gl_decode_chunk(c3, s3, A_L)
            c3, s3 = _gl_load_chunk(kv_ptr, kvs_ptr, rn, rsn, vn, woff, soff, 3)
            acc = _gl_ws_chunk_qk(a, v_buf.index(4 * slot + 3), q_smem.slice(384, 128, dim=0), acc, True)
            s = hopper.warpgroup_mma_wait(0, deps=[acc])
            mbarrier.wait(s_free, (i & 1) ^ 1)  # the tile before's scores read (fresh: passes)
            s_smem.store(s)
            cta_barrier()  # the warpgroup's stores all made before its thread 0 arrives
            mbarrier.arrive(ready.index(slot), count=1)
        return
    for i in range(n_tiles):
        n0 = start + i * BLOCK_N
        rn, rsn, vn = _gl_rows(n0 + STEP, end, seq_len, rows, ahead, bt_row, stride_kp, stride_ks, stride_sp,
                               stride_ss, PAGE, False, BLOCK_N)
        ahead = _gl_ahead(n0 + 2 * STEP, end, rows, bt_row, bt_row, PAGE, False, BLOCK_N)
        _gl_prefetch_tile(kv_ptr, kvs_ptr, rn, rsn, vn, t4)  # the next tile's rows, a tile ahead
        slot = i % NBUF
        a = _gl_decode_chunk(c0, s0, A_L)
        c2, s2 = _gl_load_chunk(kv_ptr, kvs_ptr, rc, rsc, valid, woff, soff, 2)
        acc = hopper.warpgroup_mma(a, q_smem.slice(0, 128, dim=0), gl.zeros([BLOCK_N, BLOCK_H], gl.float32, MMA),
                                   use_acc=False, is_async=True)
        mbarrier.wait(free.index(slot), ((i // NBUF) & 1) ^ 1)  # the slot's last P V done (fresh: passes)
        v_buf.index(4 * slot).store(a)
        a = _gl_decode_chunk(c1, s1, A_L)
        c3, s3 = _gl_load_chunk(kv_ptr, kvs_ptr, rc, rsc, valid, woff, soff, 3)
        acc = hopper.warpgroup_mma(a, q_smem.slice(128, 128, dim=0), acc, is_async=True)
        acc = hopper.warpgroup_mma_wait(1, deps=[acc])  # chunk 0's A registers free again
        v_buf.index(4 * slot + 1).store(a)
        a = _gl_decode_chunk(c2, s2, A_L)
        c0, s0 = _gl_load_chunk(kv_ptr, kvs_ptr, rn, rsn, vn, woff, soff, 0)
        acc = hopper.warpgroup_mma(a, q_smem.slice(256, 128, dim=0), acc, is_async=True)
        acc = hopper.warpgroup_mma_wait(1, deps=[acc])
        v_buf.index(4 * slot + 2).store(a)
        a = _gl_decode_chunk(c3, s3, A_L)
        c1, s1 = _gl_load_chunk(kv_ptr, kvs_ptr, rn, rsn, vn, woff, soff, 1)
        acc = hopper.warpgroup_mma(a, q_smem.slice(384, 128, dim=0), acc, is_async=True)
        acc = hopper.warpgroup_mma_wait(1, deps=[acc])
        v_buf.index(4 * slot + 3).store(a)
        rc, rsc, valid = rn, rsn, vn
        s = hopper.warpgroup_mma_wait(0, deps=[acc])
        mbarrier.wait(s_free, (i & 1) ^ 1)  # the tile before's scores read (fresh: passes)
        s_smem.store(s)
        hopper.fence_async_shared()  # the decoded chunks (generic proxy) before the MMA partition's wgmma
        cta_barrier()  # the warpgroup's stores all made before its thread 0 arrives
        mbarrier.arrive(ready.index(slot), count=1)


@gluon_jit
def _gl_ws_chunk_qk(a, v_smem, q_smem, acc, use_acc: gl.constexpr):
    """``GL_WS_A`` 1: a decoded chunk to its ring slot, then ``K q^T`` on it from there (async,
    chained on ``acc``); the warpgroup's stores are fenced and all made before the wgmma reads them."""
    v_smem.store(a)
    hopper.fence_async_shared()
    cta_barrier()
    return hopper.warpgroup_mma(v_smem, q_smem, acc, use_acc=use_acc, is_async=True)


@gluon_jit
def _gl_ws_attend(v_buf, s_buf, p_buf, ready, free, s_free, seqlen_ptr, m_ptr, l_ptr, acc_ptr, H, qk_scale,
                  stride_mb, stride_mh, stride_ab, stride_ah, stride_as,
                  NUM_SPLITS: gl.constexpr, BLOCK_N: gl.constexpr, NBUF: gl.constexpr):
    """The default partition: per tile, the previous tile's ``P V`` (issued at the top: no wgmma in
    flight across the back edge), the scores once stored, the previous slot freed once its ``P V``
    is done, the online softmax; then the partials."""
    BLOCK_H: gl.constexpr = p_buf.shape[2]
    NW: gl.constexpr = gl.num_warps()
    O_L: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[NW, 1],
                                                  instr_shape=[16, BLOCK_H, 16])  # latent rows over warpgroups
    SL: gl.constexpr = _gl_ws_softmax_layout(BLOCK_H, NW)
    b = gl.program_id(0)
    hb = gl.program_id(1)
    split = gl.program_id(2)
    seq_len = gl.load(seqlen_ptr + b)
    start, end = _gl_split_bounds(seq_len, split, NUM_SPLITS, BLOCK_N)
    n_tiles = gl.cdiv(gl.maximum(end - start, 0), BLOCK_N)

    m_i, l_i, o0, o1, o2, o3 = _gl_softmax_init(BLOCK_H, gl.SliceLayout(0, SL), O_L)
    sc = qk_scale * 16384.0  # the decoded values are value * 2^-14
    srow = gl.arange(0, BLOCK_N, layout=gl.SliceLayout(1, SL))
    s_smem = s_buf.index(0)
    p_smem = p_buf.index(0)
    for i in range(n_tiles):
        n0 = start + i * BLOCK_N
        slot = i % NBUF
        prev = (i + NBUF - 1) % NBUF  # before the first tile: P = 0 on the zeroed slot
        t0, t1, t2, t3 = _gl_pv(v_buf, 4 * prev, p_smem, o0, o1, o2, o3)
        mbarrier.wait(ready.index(slot), (i // NBUF) & 1)
        s = s_smem.load(SL)
        o0, o1, o2, o3 = hopper.warpgroup_mma_wait(0, deps=[t0, t1, t2, t3])  # the previous P V done
        cta_barrier()  # every warp's score loads and P V
        mbarrier.arrive(s_free, count=1)
        mbarrier.arrive(free.index(prev), count=1, pred=i > 0)
        p, alpha, m_i, l_i = _gl_softmax_step(s, n0 + srow < end, m_i, l_i, sc)
        p_smem.store(p.to(gl.float16))
        al = gl.convert_layout(alpha, gl.SliceLayout(0, O_L))[None, :]
        o0 = o0 * al
        o1 = o1 * al
        o2 = o2 * al
        o3 = o3 * al
        hopper.fence_async_shared()
        cta_barrier()
    last = (n_tiles + NBUF - 1) % NBUF
    t0, t1, t2, t3 = _gl_pv(v_buf, 4 * last, p_smem, o0, o1, o2, o3)
    o0, o1, o2, o3 = hopper.warpgroup_mma_wait(0, deps=[t0, t1, t2, t3])
    _gl_store_partials(m_ptr, l_ptr, acc_ptr, m_i, l_i, o0, o1, o2, o3, b, hb, split, H,
                       stride_mb, stride_mh, stride_ab, stride_ah, stride_as, BLOCK_H)


@gluon_jit
def _gl_ws_kernel(q_ptr, kv_ptr, kvs_ptr, bt_ptr, seqlen_ptr, m_ptr, l_ptr, acc_ptr, H, qk_scale,
                  stride_qb, stride_qh, stride_kp, stride_ks, stride_sp, stride_ss, stride_btb,
                  stride_mb, stride_mh, stride_ab, stride_ah, stride_as,
                  PAGE: gl.constexpr, BLOCK_H: gl.constexpr, NUM_SPLITS: gl.constexpr, BLOCK_N: gl.constexpr,
                  DEC_REGS: gl.constexpr, SMEM_A: gl.constexpr):
    """One global split of one (sequence, head block), dense, warp-specialised (``GL_WS``):
    partial (m, l, acc) like ``_gl_split_kernel``. ``num_warps`` is the default partition's."""
    NBUF: gl.constexpr = GL_WS_NBUF
    NW: gl.constexpr = gl.num_warps()
    HS: gl.constexpr = gl.NVMMASharedLayout(swizzle_byte_width=2 * BLOCK_H, element_bitwidth=16, rank=2)
    VS: gl.constexpr = gl.NVMMASharedLayout(swizzle_byte_width=128, element_bitwidth=16, rank=2)
    SS: gl.constexpr = gl.SwizzledSharedLayout(vec=1, per_phase=1, max_phase=1, order=[1, 0])
    QL: gl.constexpr = gl.BlockedLayout([1, BLOCK_H // 4], [32, 1], [NW // 4, 4], [1, 0])
    ZL: gl.constexpr = gl.BlockedLayout([1, 8], [2, 16], [NW, 1], [1, 0])  # [BLOCK_N, 128]
    b = gl.program_id(0)
    hb = gl.program_id(1)
    dq = _gl_latent(gl.arange(0, 512, layout=gl.SliceLayout(1, QL)))
    hq = hb * BLOCK_H + gl.arange(0, BLOCK_H, layout=gl.SliceLayout(0, QL))
    qv = gl.load(q_ptr + b.to(gl.int64) * stride_qb + hq[None, :] * stride_qh + dq[:, None],
                 mask=(hq < H)[None, :], other=0.0)
    q_buf = gl.allocate_shared_memory(gl.float16, [1, 512, BLOCK_H], HS)
    q_buf.index(0).store(qv.to(gl.float16))
    v_buf = gl.allocate_shared_memory(gl.float16, [4 * NBUF, BLOCK_N, 128], VS)
    s_buf = gl.allocate_shared_memory(gl.float32, [1, BLOCK_N, BLOCK_H], SS)
    p_buf = gl.allocate_shared_memory(gl.float16, [1, BLOCK_N, BLOCK_H], HS)
    ready = gl.allocate_shared_memory(gl.int64, [NBUF, 1], mbarrier.MBarrierLayout())
    free = gl.allocate_shared_memory(gl.int64, [NBUF, 1], mbarrier.MBarrierLayout())
    s_free = gl.allocate_shared_memory(gl.int64, [1, 1], mbarrier.MBarrierLayout())
    for k in gl.static_range(NBUF):
        mbarrier.init(ready.index(k), count=1)
        mbarrier.init(free.index(k), count=1)
    mbarrier.init(s_free.index(0), count=1)
    # the first tile's P V multiplies P = 0 by the last slot: zeros there (uninitialised shared
    # memory may hold NaN bit patterns; the decoder writes finite values only)
    for k in gl.static_range(4):
        v_buf.index(4 * (NBUF - 1) + k).store(gl.zeros([BLOCK_N, 128], gl.float16, ZL))
    p_buf.index(0).store(gl.zeros([BLOCK_N, BLOCK_H], gl.float16, QL))
    hopper.fence_async_shared()
    cta_barrier()
    # the argument tuples written out in the call: a tuple held in a variable turns its constexprs
    # into values (Triton 3.6)
    gl.warp_specialize([
        (_gl_ws_attend, (v_buf, s_buf, p_buf, ready, free, s_free.index(0), seqlen_ptr, m_ptr, l_ptr, acc_ptr,
                         H, qk_scale, stride_mb, stride_mh, stride_ab, stride_ah, stride_as, NUM_SPLITS,
                         BLOCK_N, NBUF)),
        (_gl_ws_decoder, (kv_ptr, kvs_ptr, bt_ptr, seqlen_ptr, stride_kp, stride_ks, stride_sp, stride_ss,
                          stride_btb, q_buf, v_buf, s_buf, ready, free, s_free.index(0), PAGE, NUM_SPLITS,
                          BLOCK_N, NBUF, SMEM_A)),
    ], [4], [DEC_REGS])

