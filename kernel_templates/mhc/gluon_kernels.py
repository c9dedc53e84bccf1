"""mHC's Gluon mix kernel for Hopper (sm_90), the ``GLUON`` configs of pre / seam.

The Triton kernel's fn GEMM puts each step's streams through shared memory as fp32 wgmma B
operands (a 64 x 16 step wrote and read ~4x the tile's HBM bytes there, and waited on it,
ncu on an H200). Here the new residual is the wgmma A operand, straight from the registers
it was computed in (tf32: bf16 values are exact), and fn the B operand:

- A step is 64 tokens x 32 columns of all four streams (and y): cp.async copies them,
  16 B a thread, into a ``STAGES``-deep ring in shared memory (``num_stages``: Gluon has no
  pipeliner), with fn's four [32, 32] fp32 tiles (rows 24..31 zero-filled: wgmma's N is 32).
- Each thread reads 8 contiguous columns of two rows (``_GL_XP``). Read as
  [64, m, q] -> [64, 32], that is exactly wgmma's tf32 A fragment if the MMA's K
  position 4 m + q holds column 8 q + m: a permutation of the reduction axis, applied to
  fn once a call (``_fn_k_order_kernel``, 2 MB) so its tiles come in 16 B a thread too
  (4-byte copies in the permuted order were 32 cp.async a thread a step, and the LSU
  queue was the wall). ``convert_layout(..., assert_trivial=True)`` proves no data moves
  between the arithmetic and the MMA.
- The 10 Gram sums stay per thread (two rows, one quarter of each step's columns) and
  are reduced across lanes once, after the loop.
- Each split stores its partial mix sums and Gram matrix; the Triton finish launch
  (``triton_kernels.finish_launch``) combines them and writes u. Combining in the mix launch
  (the block's splits waiting for its last, or a persistent grid deferring the u pass)
  measured 1.1-1.7x slower on an H200 and was removed.

The kernel's tile is fixed (``GL_FIXED``: 64 tokens, wgmma's M with one warpgroup; 32
columns a step). Never run under the interpreter; verified on the GPU.
"""
from __future__ import annotations

from typing import Any

import torch
import triton
import triton.language as tl

from kernel_templates._gluon import async_copy, async_load, cta_barrier, gl, gluon_jit, hopper
from kernel_templates._host import cdiv

GL_BLOCK_T = 64  # wgmma's M: one warpgroup, 4 warps
GL_BLOCK_D = 32  # columns a step
GL_FIXED = {"BLOCK_T": GL_BLOCK_T, "BLOCK_D": GL_BLOCK_D, "num_warps": 4}
"""The GLUON kernel's fixed tile, as config keys (what the search space pins them to)."""


@triton.jit
def _fn_k_order_kernel(fn_ptr, out_ptr, n_cols, BLOCK: tl.constexpr):
    """fn in the GLUON kernel's K order: within each 32-column block, position p holds
    column 8 (p % 4) + p // 4 (row by row; ``n_cols`` = 4D, a multiple of 32)."""
    row = tl.program_id(0)
    p = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    src = p - p % 32 + 8 * (p % 4) + (p % 32) // 4
    m = p < n_cols
    tl.store(out_ptr + row * n_cols + p, tl.load(fn_ptr + row * n_cols + src, mask=m), mask=m)


def _fn_k_order_launch(fn: torch.Tensor, out: torch.Tensor) -> tuple[Any, tuple[int, int], dict[str, Any]]:
    return _fn_k_order_kernel, (fn.shape[0], cdiv(fn.shape[1], 1024)), dict(
        fn_ptr=fn, out_ptr=out, n_cols=fn.shape[1], BLOCK=1024)


def fn_k_order(fn: torch.Tensor) -> torch.Tensor:
    """``fn [24, 4D]`` with each 32-column block permuted as the GLUON kernel's MMA reads it."""
    out = torch.empty_like(fn)
    kern, grid, args = _fn_k_order_launch(fn, out)
    kern[grid](**args)
    return out


if gl is not None:
    _GL_XP = gl.constexpr(gl.DistributedLinearLayout(  # [64 tokens, 4 (q), 8 (m)]: column 8 q + m of a step
        reg_bases=[[0, 0, 1], [0, 0, 2], [0, 0, 4], [8, 0, 0]],
        lane_bases=[[0, 1, 0], [0, 2, 0], [1, 0, 0], [2, 0, 0], [4, 0, 0]],
        warp_bases=[[16, 0, 0], [32, 0, 0]], block_bases=[], shape=[64, 4, 8]))
    _GL_MMA = gl.constexpr(gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, 32, 8]))
    _GL_A = gl.constexpr(gl.DotOperandLayout(operand_index=0, parent=_GL_MMA, k_width=1))
    _GL_LD = gl.constexpr(gl.BlockedLayout([1, 8], [16, 2], [4, 1], [1, 0]))  # [64, 32] bf16 copies, 16 B a thread
    # XY_GROUP 2: [128, 32] bf16 copies of two steps, row 64 g + token holding step g's columns; a warp
    # instruction's 32 lanes cover 4 tokens x 128 contiguous bytes (both steps' 64 B) of each
    _GL_LD2 = gl.constexpr(gl.DistributedLinearLayout(
        reg_bases=[[0, 1], [0, 2], [0, 4], [16, 0], [32, 0]],
        lane_bases=[[0, 8], [0, 16], [64, 0], [1, 0], [2, 0]],
        warp_bases=[[4, 0], [8, 0]], block_bases=[], shape=[128, 32]))
    _GL_XP2 = gl.constexpr(gl.DistributedLinearLayout(  # _GL_XP as [64, 32]: a step tile read from a row slice
        reg_bases=[[0, 1], [0, 2], [0, 4], [8, 0]],
        lane_bases=[[0, 8], [0, 16], [1, 0], [2, 0], [4, 0]],
        warp_bases=[[16, 0], [32, 0]], block_bases=[], shape=[64, 32]))
    _GL_FL = gl.constexpr(gl.BlockedLayout([1, 4], [4, 8], [4, 1], [1, 0]))  # [32, 32] fp32 fn copies, 16 B a thread
    _GL_XS = gl.constexpr(gl.SwizzledSharedLayout(vec=1, per_phase=1, max_phase=1, order=[1, 0]))
    _GL_FS = gl.constexpr(gl.NVMMASharedLayout(swizzle_byte_width=128, element_bitwidth=32, rank=2))
else:  # pragma: no cover - no Gluon: GLUON configs are refused
    _GL_XP = _GL_MMA = _GL_A = _GL_LD = _GL_LD2 = _GL_XP2 = _GL_FL = _GL_XS = _GL_FS = None


@gluon_jit
def _gl_issue(x_ptr, y_ptr, fn_ptr, xb0, xb1, xb2, xb3, yb, fb0, fb1, fb2, fb3, slot, t_ld, tm_ld, c_ld, fn_off,
              fn_mask, d0, D, stride_xt, stride_xs, stride_yt, SEAM: gl.constexpr):
    """cp.async of one step into ring slot ``slot``: the four stream tiles (and y) and fn's
    four tiles (``fn_ptr`` is fn in the MMA's K order already), one commit group. One buffer
    per operand: Triton's barrier pass put a barrier between any two copies into the same buffer."""
    _gl_copy_streams(x_ptr + t_ld[:, None] * stride_xt + d0 + c_ld[None, :],
                     y_ptr + t_ld[:, None] * stride_yt + d0 + c_ld[None, :], xb0, xb1, xb2, xb3, yb, slot,
                     tm_ld[:, None], stride_xs, SEAM)
    _gl_copy_fn(fn_ptr, fb0, fb1, fb2, fb3, slot, fn_off, fn_mask, d0, D)
    async_copy.commit_group()


@gluon_jit
def _gl_copy_streams(xp, yp, xb0, xb1, xb2, xb3, yb, slot, m, stride_xs, SEAM: gl.constexpr):
    """cp.async of the four stream tiles (and y) into slot ``slot``: ``xp`` / ``yp`` address
    stream 0's / y's elements and ``m`` masks rows, in the copies' layout (one step, or
    XY_GROUP's two)."""
    async_load(xb0.index(slot), xp, mask=m, eviction_policy="evict_first")
    async_load(xb1.index(slot), xp + stride_xs, mask=m, eviction_policy="evict_first")
    async_load(xb2.index(slot), xp + 2 * stride_xs, mask=m, eviction_policy="evict_first")
    async_load(xb3.index(slot), xp + 3 * stride_xs, mask=m, eviction_policy="evict_first")
    if SEAM:
        async_load(yb.index(slot), yp, mask=m, eviction_policy="evict_first")


@gluon_jit
def _gl_copy_fn(fn_ptr, fb0, fb1, fb2, fb3, slot, fn_off, fn_mask, d0, D):
    """cp.async of fn's four [32, 32] tiles of the step at column ``d0`` into slot ``slot``."""
    fp = fn_ptr + fn_off + d0
    async_load(fb0.index(slot), fp, mask=fn_mask)
    async_load(fb1.index(slot), fp + D, mask=fn_mask)
    async_load(fb2.index(slot), fp + 2 * D, mask=fn_mask)
    async_load(fb3.index(slot), fp + 3 * D, mask=fn_mask)


@gluon_jit
def _gl_stream(tile, SLICE: gl.constexpr):
    """A [64, 32] step tile of shared memory in ``_GL_XP``: a slot reshaped in shared memory,
    or (``SLICE``: a row slice of XY_GROUP's slot, which cannot be reshaped there) loaded 2-D
    and reshaped in registers for free (4 more registers on the slot form, so it keeps its own)."""
    if SLICE:
        x = gl.convert_layout(gl.reshape(tile.load(_GL_XP2), [64, 4, 8]), _GL_XP, assert_trivial=True)
    else:
        x = tile.reshape([64, 4, 8]).load(_GL_XP)
    return x.to(gl.float32)


@gluon_jit
def _gl_a(x):
    """A stream's step tile as wgmma's tf32 A operand (K position 4 m + q: column 8 q + m)."""
    return gl.convert_layout(gl.reshape(gl.permute(x, (0, 2, 1)), [64, 32]), _GL_A, assert_trivial=True)


_GL_ROUND_BF16 = tl.constexpr("""
cvt.rn.bf16x2.f32 $0, $4, $3;
shl.b32 $1, $0, 16;
and.b32 $2, $0, 0xffff0000;
""")


@gluon_jit
def _gl_round_bf16(x):
    """x rounded to bf16 (nearest even) twice over: packed two a register for the stores, and
    as fp32 values for the MMA and the Gram sums. One ``cvt.rn.bf16x2.f32`` and a shift / mask
    per pair; ``.to(bf16)`` then ``.to(fp32)`` took an F2F an element, a PRMT a pair to pack
    and a PRMT / SHF an element to unpack (Triton 3.6)."""
    return gl.inline_asm_elementwise(_GL_ROUND_BF16, "=r,=r,=r,r,r", [x], dtype=(gl.bfloat16, gl.float32),
                                     is_pure=True, pack=2)


@gluon_jit
def _gl_post_coeffs(pin_ptr, cin_ptr, j: gl.constexpr, t, tm):
    """``_post_coeffs`` (a Gluon function cannot call a Triton one): post_j, comb[0..3, j]."""
    cb = cin_ptr + t * 16 + j
    return (gl.load(pin_ptr + t * 4 + j, mask=tm, other=0.0), gl.load(cb, mask=tm, other=0.0),
            gl.load(cb + 4, mask=tm, other=0.0), gl.load(cb + 8, mask=tm, other=0.0),
            gl.load(cb + 12, mask=tm, other=0.0))


@gluon_jit
def _gl_mix_in(xi, c0, c1, c2, c3, x0, x1, x2, x3):
    """Input stream i's share of the four new streams: X'_j += comb[i, j] X_i."""
    return (x0 + c0[:, None, None] * xi, x1 + c1[:, None, None] * xi, x2 + c2[:, None, None] * xi,
            x3 + c3[:, None, None] * xi)


@gluon_jit
def _gl_gram_store(gb, i: gl.constexpr, k: gl.constexpr, g, tm):
    """G[i, k] (and G[k, i]) of each token: the per-thread sums reduced across the row's lanes,
    stored in this split's partial row."""
    v = gl.sum(g, axis=1)
    gl.store(gb + 4 * i + k, v, mask=tm)
    if i != k:
        gl.store(gb + 4 * k + i, v, mask=tm)


@gluon_jit
def _gl_ld_offsets(t0, T, D):
    """An item's copy offsets: its rows / columns in ``_GL_LD`` (one step's stream tiles) and
    fn's [32, 32] tile offsets in ``_GL_FL`` (rows 24..31 masked: zero-filled, wgmma's N is 32)."""
    t_ld = t0 + gl.arange(0, 64, layout=gl.SliceLayout(1, _GL_LD))
    c_ld = gl.arange(0, 32, layout=gl.SliceLayout(0, _GL_LD))
    fn_n = gl.arange(0, 32, layout=gl.SliceLayout(1, _GL_FL))
    fn_p = gl.arange(0, 32, layout=gl.SliceLayout(0, _GL_FL))
    # fn_ptr is fn in the MMA's K order (_fn_k_order_kernel)
    return t_ld, t_ld < T, c_ld, fn_n[:, None] * (4 * D) + fn_p[None, :], (fn_n < 24)[:, None]


@gluon_jit
def _gl_ld2_offsets(t0, T, stride_xt, stride_yt):
    """XY_GROUP 2's [128, 32] copy offsets (row 64 g + token holding step g's columns) into X
    and y, and the rows' mask."""
    r2 = gl.arange(0, 128, layout=gl.SliceLayout(1, _GL_LD2))
    c2 = gl.arange(0, 32, layout=gl.SliceLayout(0, _GL_LD2))
    t2 = t0 + r2 % 64
    g2 = (32 * (r2 // 64))[:, None] + c2[None, :]  # step g's columns
    return t2[:, None] * stride_xt + g2, t2[:, None] * stride_yt + g2, (t2 < T)[:, None]


@gluon_jit
def _gl_prologue(x_ptr, y_ptr, fn_ptr, xb0, xb1, xb2, xb3, yb, fb0, fb1, fb2, fb3, t0, d_lo, n_steps, T, D,
                 stride_xt, stride_xs, stride_yt, SEAM: gl.constexpr, STAGES: gl.constexpr, XY_GROUP: gl.constexpr):
    """The copies of an item's first steps (token block ``t0``, columns from ``d_lo``) into the ring."""
    t_ld, tm_ld, c_ld, fn_off, fn_mask = _gl_ld_offsets(t0, T, D)
    if XY_GROUP == 1:
        for s in gl.static_range(STAGES - 1):
            if s < n_steps:  # a split shorter than the ring (e.g. 1 step at 4 stages) reads nothing past its chunk
                _gl_issue(x_ptr, y_ptr, fn_ptr, xb0, xb1, xb2, xb3, yb, fb0, fb1, fb2, fb3, s, t_ld, tm_ld, c_ld,
                          fn_off, fn_mask, d_lo + s * 32, D, stride_xt, stride_xs, stride_yt, SEAM)
            else:
                async_copy.commit_group()  # an empty group keeps the wait count uniform
    else:  # the launcher checks n_steps % 2 == 0 and 2 stages
        xoff2, yoff2, m2 = _gl_ld2_offsets(t0, T, stride_xt, stride_yt)
        _gl_copy_streams(x_ptr + d_lo + xoff2, y_ptr + d_lo + yoff2, xb0, xb1, xb2, xb3, yb, 0, m2, stride_xs, SEAM)
        async_copy.commit_group()
        _gl_copy_fn(fn_ptr, fb0, fb1, fb2, fb3, 0, fn_off, fn_mask, d_lo, D)
        async_copy.commit_group()


@gluon_jit
def _gl_mix_loop(x_ptr, y_ptr, pin_ptr, cin_ptr, xn_ptr, fn_ptr, xb0, xb1, xb2, xb3, yb, fb0, fb1, fb2, fb3,
                 t0, d_lo, n_steps, T, D, stride_xt, stride_xs, stride_yt, stride_nt, stride_ns,
                 SEAM: gl.constexpr, STAGES: gl.constexpr, XY_GROUP: gl.constexpr):
    """An item's steps after ``_gl_prologue``: the seam's new residual (stored), the fn GEMM
    and the Gram sums. Returns the mix accumulator and the 10 per-thread Gram sums; every copy
    has landed when it returns (the ring is free once all threads are past it)."""
    BLOCK_T: gl.constexpr = 64
    BLOCK_D: gl.constexpr = 32
    t_ld, tm_ld, c_ld, fn_off, fn_mask = _gl_ld_offsets(t0, T, D)
    G2: gl.constexpr = gl.SliceLayout(2, _GL_XP)
    t_r = t0 + gl.arange(0, BLOCK_T, layout=gl.SliceLayout(1, G2))
    tm_r = t_r < T
    col3 = (8 * gl.arange(0, 4, layout=gl.SliceLayout(0, G2)))[None, :, None] + \
        gl.arange(0, 8, layout=gl.SliceLayout(0, gl.SliceLayout(1, _GL_XP)))[None, None, :]
    off3 = t_r[:, None, None] * stride_nt + col3  # int32 offsets: a hoisted pointer tensor took 32 registers
    msk3 = tm_r[:, None, None] & (col3 < BLOCK_D)
    if XY_GROUP != 1:
        xoff2, yoff2, m2 = _gl_ld2_offsets(t0, T, stride_xt, stride_yt)

    acc = gl.zeros([BLOCK_T, 32], gl.float32, _GL_MMA)
    z = gl.zeros([BLOCK_T, 4], gl.float32, G2)
    g00 = z
    g01 = z
    g02 = z
    g03 = z
    g11 = z
    g12 = z
    g13 = z
    g22 = z
    g23 = z
    g33 = z
    if SEAM:
        # the 20 coefficients of each token, once: loaded in the loop they were 32 global loads a
        # thread a step, waited on (long scoreboard, behind the copies in the LSU queue)
        p0, c00, c10, c20, c30 = _gl_post_coeffs(pin_ptr, cin_ptr, 0, t_r, tm_r)
        p1, c01, c11, c21, c31 = _gl_post_coeffs(pin_ptr, cin_ptr, 1, t_r, tm_r)
        p2, c02, c12, c22, c32 = _gl_post_coeffs(pin_ptr, cin_ptr, 2, t_r, tm_r)
        p3, c03, c13, c23, c33 = _gl_post_coeffs(pin_ptr, cin_ptr, 3, t_r, tm_r)
    for grp in range(n_steps // XY_GROUP):
        for g in gl.static_range(XY_GROUP):  # a group's steps, unrolled (static row slices)
            st = XY_GROUP * grp + g
            cta_barrier()  # every thread is done with the slots refilled next (read at step s - 1)
            if XY_GROUP == 1:
                slot = st % STAGES
                fslot = slot
                nxt = st + STAGES - 1
                if nxt < n_steps:
                    _gl_issue(x_ptr, y_ptr, fn_ptr, xb0, xb1, xb2, xb3, yb, fb0, fb1, fb2, fb3, nxt % STAGES,
                              t_ld, tm_ld, c_ld, fn_off, fn_mask, d_lo + nxt * BLOCK_D, D, stride_xt, stride_xs,
                              stride_yt, SEAM)
                else:
                    async_copy.commit_group()  # an empty group keeps the wait count uniform
                async_copy.wait_group(STAGES - 1)
                xt0 = xb0.index(slot)
                xt1 = xb1.index(slot)
                xt2 = xb2.index(slot)
                xt3 = xb3.index(slot)
                yt = yb.index(slot)
            else:
                fslot = g  # fn(s) in slot s % 2
                if st + 1 < n_steps:
                    _gl_copy_fn(fn_ptr, fb0, fb1, fb2, fb3, 1 - g, fn_off, fn_mask, d_lo + (st + 1) * BLOCK_D, D)
                async_copy.commit_group()
                if g == 0:
                    if grp + 1 < n_steps // XY_GROUP:
                        d1 = d_lo + (st + XY_GROUP) * BLOCK_D
                        _gl_copy_streams(x_ptr + d1 + xoff2, y_ptr + d1 + yoff2, xb0, xb1, xb2, xb3, yb,
                                         (grp + 1) % 2, m2, stride_xs, SEAM)
                    async_copy.commit_group()
                async_copy.wait_group(2)  # pending: fn(s + 1) and the next group's streams
                xs = grp % 2
                xt0 = xb0.index(xs).slice(g * BLOCK_T, BLOCK_T, dim=0)
                xt1 = xb1.index(xs).slice(g * BLOCK_T, BLOCK_T, dim=0)
                xt2 = xb2.index(xs).slice(g * BLOCK_T, BLOCK_T, dim=0)
                xt3 = xb3.index(xs).slice(g * BLOCK_T, BLOCK_T, dim=0)
                yt = yb.index(xs).slice(g * BLOCK_T, BLOCK_T, dim=0)
            hopper.fence_async_shared()  # the copies into fn's tiles, before wgmma reads them
            cta_barrier()
            if SEAM:
                # X'_j = post_j y + sum_i comb[i, j] X_i, one input stream at a time (4 tiles live, not 9)
                y = _gl_stream(yt, XY_GROUP > 1)
                x0 = p0[:, None, None] * y
                x1 = p1[:, None, None] * y
                x2 = p2[:, None, None] * y
                x3 = p3[:, None, None] * y
                xi = _gl_stream(xt0, XY_GROUP > 1)
                x0, x1, x2, x3 = _gl_mix_in(xi, c00, c01, c02, c03, x0, x1, x2, x3)
                xi = _gl_stream(xt1, XY_GROUP > 1)
                x0, x1, x2, x3 = _gl_mix_in(xi, c10, c11, c12, c13, x0, x1, x2, x3)
                xi = _gl_stream(xt2, XY_GROUP > 1)
                x0, x1, x2, x3 = _gl_mix_in(xi, c20, c21, c22, c23, x0, x1, x2, x3)
                xi = _gl_stream(xt3, XY_GROUP > 1)
                x0, x1, x2, x3 = _gl_mix_in(xi, c30, c31, c32, c33, x0, x1, x2, x3)
                n0, x0 = _gl_round_bf16(x0)
                n1, x1 = _gl_round_bf16(x1)
                n2, x2 = _gl_round_bf16(x2)
                n3, x3 = _gl_round_bf16(x3)
                xo = xn_ptr + (d_lo + st * BLOCK_D) + off3
                gl.store(xo, n0, mask=msk3, eviction_policy="evict_last")  # re-read by the u pass
                gl.store(xo + stride_ns, n1, mask=msk3, eviction_policy="evict_last")
                gl.store(xo + 2 * stride_ns, n2, mask=msk3, eviction_policy="evict_last")
                gl.store(xo + 3 * stride_ns, n3, mask=msk3, eviction_policy="evict_last")
            else:
                x0 = _gl_stream(xt0, XY_GROUP > 1)
                x1 = _gl_stream(xt1, XY_GROUP > 1)
                x2 = _gl_stream(xt2, XY_GROUP > 1)
                x3 = _gl_stream(xt3, XY_GROUP > 1)
            g00 += gl.sum(x0 * x0, axis=2)
            g01 += gl.sum(x0 * x1, axis=2)
            g02 += gl.sum(x0 * x2, axis=2)
            g03 += gl.sum(x0 * x3, axis=2)
            g11 += gl.sum(x1 * x1, axis=2)
            g12 += gl.sum(x1 * x2, axis=2)
            g13 += gl.sum(x1 * x3, axis=2)
            g22 += gl.sum(x2 * x2, axis=2)
            g23 += gl.sum(x2 * x3, axis=2)
            g33 += gl.sum(x3 * x3, axis=2)
            acc = hopper.warpgroup_mma(_gl_a(x0), fb0.index(fslot).permute((1, 0)), acc, is_async=True)
            acc = hopper.warpgroup_mma(_gl_a(x1), fb1.index(fslot).permute((1, 0)), acc, is_async=True)
            acc = hopper.warpgroup_mma(_gl_a(x2), fb2.index(fslot).permute((1, 0)), acc, is_async=True)
            acc = hopper.warpgroup_mma(_gl_a(x3), fb3.index(fslot).permute((1, 0)), acc, is_async=True)
            acc = hopper.warpgroup_mma_wait(0, deps=[acc])
    async_copy.wait_group(0)
    return acc, g00, g01, g02, g03, g11, g12, g13, g22, g23, g33


@gluon_jit
def _gl_partials(pmix_ptr, pgram_ptr, acc, g00, g01, g02, g03, g11, g12, g13, g22, g23, g33, part, t0, T):
    """A split's partial mix sums and Gram matrix in its own rows (``part``: its first row), the
    layout the finish launch's ``_combine`` reads."""
    mt = t0 + gl.arange(0, 64, layout=gl.SliceLayout(1, _GL_MMA))
    mn = gl.arange(0, 32, layout=gl.SliceLayout(0, _GL_MMA))
    gl.store(pmix_ptr + (part + mt)[:, None] * 32 + mn[None, :], acc, mask=(mt < T)[:, None])
    t_r = t0 + gl.arange(0, 64, layout=gl.SliceLayout(1, gl.SliceLayout(2, _GL_XP)))
    tm_r = t_r < T
    gb = pgram_ptr + (part + t_r) * 16
    _gl_gram_store(gb, 0, 0, g00, tm_r)
    _gl_gram_store(gb, 0, 1, g01, tm_r)
    _gl_gram_store(gb, 0, 2, g02, tm_r)
    _gl_gram_store(gb, 0, 3, g03, tm_r)
    _gl_gram_store(gb, 1, 1, g11, tm_r)
    _gl_gram_store(gb, 1, 2, g12, tm_r)
    _gl_gram_store(gb, 1, 3, g13, tm_r)
    _gl_gram_store(gb, 2, 2, g22, tm_r)
    _gl_gram_store(gb, 2, 3, g23, tm_r)
    _gl_gram_store(gb, 3, 3, g33, tm_r)


@gluon_jit
def _gl_mix_kernel(x_ptr, y_ptr, pin_ptr, cin_ptr, xn_ptr, fn_ptr, pmix_ptr, pgram_ptr,
                   T, D, stride_xt, stride_xs, stride_yt, stride_nt, stride_ns,
                   SEAM: gl.constexpr, SPLIT_K: gl.constexpr, STAGES: gl.constexpr, XY_GROUP: gl.constexpr):
    """pre (``SEAM`` False) or seam for one (64-token block, D-chunk): the seam's new residual,
    the split's partial mix sums and Gram matrix; see the module notes.

    ``XY_GROUP`` 2: the streams (X, y) of two steps are requested together, 128 contiguous
    bytes of a row a warp instruction (one step's 64-byte reads ran at 2.6 TB/s on an H200,
    128-byte pieces at 3.4), into two slots (one group in use, the next in flight); fn keeps a
    two-slot ring a step. Each step commits fn(s + 1), a group's first step then the next
    group's streams, and waits with two groups pending: exactly those two (the copies share
    one FIFO of groups: waiting on fn alone would wait on streams committed before it)."""
    pid_t = gl.program_id(0)
    pid_k = gl.program_id(1)
    t0 = pid_t * 64
    n_steps = D // (SPLIT_K * 32)  # the launcher checks D % (SPLIT_K * 32) == 0
    d_lo = pid_k * n_steps * 32  # step s: columns [d_lo + 32 s, + 32)
    xb0, xb1, xb2, xb3, yb, fb0, fb1, fb2, fb3 = _gl_ring(STAGES, XY_GROUP)
    _gl_prologue(x_ptr, y_ptr, fn_ptr, xb0, xb1, xb2, xb3, yb, fb0, fb1, fb2, fb3, t0, d_lo, n_steps, T, D,
                 stride_xt, stride_xs, stride_yt, SEAM, STAGES, XY_GROUP)
    acc, g00, g01, g02, g03, g11, g12, g13, g22, g23, g33 = _gl_mix_loop(
        x_ptr, y_ptr, pin_ptr, cin_ptr, xn_ptr, fn_ptr, xb0, xb1, xb2, xb3, yb, fb0, fb1, fb2, fb3, t0, d_lo,
        n_steps, T, D, stride_xt, stride_xs, stride_yt, stride_nt, stride_ns, SEAM, STAGES, XY_GROUP)
    _gl_partials(pmix_ptr, pgram_ptr, acc, g00, g01, g02, g03, g11, g12, g13, g22, g23, g33, pid_k * T, t0, T)


@gluon_jit
def _gl_ring(STAGES: gl.constexpr, XY_GROUP: gl.constexpr):
    """The cp.async ring: four stream slots and y's (``[STAGES, 64 XY_GROUP, 32]`` bf16, step g
    of a group at rows 64 g) and fn's four ``[32, 32]`` fp32 tiles a slot."""
    XB: gl.constexpr = XY_GROUP * 64
    return (gl.allocate_shared_memory(gl.bfloat16, [STAGES, XB, 32], _GL_XS),
            gl.allocate_shared_memory(gl.bfloat16, [STAGES, XB, 32], _GL_XS),
            gl.allocate_shared_memory(gl.bfloat16, [STAGES, XB, 32], _GL_XS),
            gl.allocate_shared_memory(gl.bfloat16, [STAGES, XB, 32], _GL_XS),
            gl.allocate_shared_memory(gl.bfloat16, [STAGES, XB, 32], _GL_XS),
            gl.allocate_shared_memory(gl.float32, [STAGES, 32, 32], _GL_FS),
            gl.allocate_shared_memory(gl.float32, [STAGES, 32, 32], _GL_FS),
            gl.allocate_shared_memory(gl.float32, [STAGES, 32, 32], _GL_FS),
            gl.allocate_shared_memory(gl.float32, [STAGES, 32, 32], _GL_FS))



def gluon_config_error(config: dict[str, Any], D: int) -> str | None:
    """Why ``config`` cannot run the GLUON kernel at hidden size ``D`` (None: it can)."""
    sk = config["SPLIT_K"]
    if any(config[k] != v for k, v in GL_FIXED.items()):
        return f"GLUON takes BLOCK_T {GL_BLOCK_T}, BLOCK_D {GL_BLOCK_D}, 4 warps"
    if sk < 2 or sk % 2 or D % (GL_BLOCK_D * sk):
        return f"GLUON takes an even SPLIT_K >= 2 dividing D into {GL_BLOCK_D}-column steps"
    if not 2 <= config["num_stages"] <= 4:
        return "GLUON pipelines 2-4 stages"
    xy = config["XY_GROUP"]
    if xy not in (1, 2) or xy == 2 and (config["num_stages"] != 2 or (D // (GL_BLOCK_D * sk)) % 2):
        return "GLUON takes XY_GROUP 1, or 2 with 2 stages and an even number of 32-column steps a split"
    return None


def gl_plan(op: str, config: dict[str, Any], args: dict[str, Any]) -> list[tuple[Any, tuple[int, ...], dict[str, Any]]]:
    """The GLUON mix launches of a pre / seam call: fn's reorder, then the mix kernel (grid:
    token blocks x splits). The caller appends the Triton finish launch. ``args`` as for the
    Triton kernels (``__init__._plan``; for pre, the seam-only pointers stand in for unused ones)."""
    T, sk, seam = args["T"], config["SPLIT_K"], op == "seam"
    fnk = torch.empty_like(args["fn_ptr"])
    a = dict(args, fn_ptr=fnk, SEAM=seam, SPLIT_K=sk, STAGES=config["num_stages"], XY_GROUP=config["XY_GROUP"])
    mix = {k: a[k] for k in _gl_mix_kernel.arg_names}
    return [_fn_k_order_launch(args["fn_ptr"], fnk), (_gl_mix_kernel, (cdiv(T, GL_BLOCK_T), sk), mix)]
