"""NVFP4 decode attention: shared-KV MQA over a paged latent cache + FP8 SWA window + sink.

KERNELS.md section 2. One query token per sequence, ``H`` query heads against one latent
per entry (used as both K and V), global entries from a paged cache in ``nvfp4`` /
``fp8`` / ``bf16``, the last ``W = 128`` entries (SWA window) in FP8 E4M3 + UE8M0, and a
per-head sink logit that joins the softmax and is dropped.

Design:
- Split-KV (flash-decoding), two launches. ``_split_kernel`` runs on a grid
  ``(B, cdiv(H, BLOCK_H), NUM_SPLITS + 1)``: programs ``0..NUM_SPLITS-1`` each scan one
  contiguous chunk of the sequence's global entries (dense) or of its top-k list
  (sparse); program ``NUM_SPLITS`` scans the SWA window. Each writes a partial
  (max, sum, unnormalised acc) in fp32; ``_reduce_kernel`` merges them with the sink.
- The reduce is latency-bound, not bandwidth-bound: its bytes are small (B=8, H=16:
  8.6 MB of partials at 33 splits, 17 MB at 65), but the first version ran one program
  per (sequence, 16 heads), 8 at B=8, each a serial chain over the splits (online max,
  one [16, 512] load per split, no pipelining): 76 us on the H200 next to the split
  kernel's 406 (fp8 87 / 496, H=64 110 / 788). Now the latent columns are split over
  programs too (~256 at B=8), the global max comes first from the (m, l) of all splits,
  and the partials are then a plain weighted sum loaded many splits per load, two loads
  in flight (``_reduce_kernel``).
- MQA is what makes it MMA-friendly: ``BLOCK_H`` heads share every KV tile, so a tile is
  dequantized once and used by two ``tl.dot`` (``q @ K^T`` and ``P @ V``, BF16 or FP16
  MMA, fp32 accumulation). Dense tiles with ``BLOCK_N <= PAGE`` never straddle a page:
  one block-table load per tile and contiguous rows (128-bit loads of the codes).
- Decode once, by a software pipeline written by hand: the decoded tile is loop-carried
  (decoded at the end of the previous iteration), and the raw loads of tile i+1 are
  issued before tile i's MMAs. A loop-carried value has one layout, so Triton stores it
  to shared memory once and both MMAs read that copy (``q @ K^T`` through a transposed
  view). Written the plain way, Triton's layout propagation re-derived the decode from
  the raw bytes once per MMA operand layout, i.e. decoded every tile twice (sm_90
  SASS: 1793 -> 747 instructions per warp per 32-entry nvfp4 tile).
- ``SWAP_AB``: compute ``K q^T`` and ``V^T P^T`` so that the entries (``BLOCK_N``) and
  the latent (512) are the MMA's M: Hopper's wgmma needs M >= 64, which 16 heads cannot
  give (without it Triton falls back to mma.sync; likewise tcgen05 on sm_100).
- ``D_CHUNKS`` (1, 2, 4): the latent in column chunks of ``512 / D_CHUNKS``, each decoded,
  stored and multiplied on its own (``_split_chunked``; the scores accumulate over the
  chunks by chained MMAs, each chunk has its own accumulator); only the raw bytes are
  loop-carried. Meant to cut the registers of the whole decoded tile (128 per thread at
  4 warps) and the shared-memory bank conflicts of its stores (narrower rows put more rows
  per warp, i.e. more swizzle phases per store). Triton 3.6 sm_90 compiles say it is no
  free lunch: a decoded chunk that is not loop-carried is not "from a load or block
  argument", so under SWAP_AB Triton makes it a register A operand of wgmma through a
  shared round trip of its own and transposes it in registers for ``V^T P^T`` (two copies
  per chunk, ~2900 SASS instructions per warp per 64-entry tile vs 2068, spills); without
  SWAP_AB (mma.sync) the two MMAs read two differently swizzled copies. At H=64 (64 x 64,
  8 warps) it lowers shared memory from 196608 to 131072 bytes and halves the spill
  traffic inside the loop (STL+LDL per tile 158 -> 81). A search-space switch, not a
  default: the tuner times it.
- ``DQ_FP16`` (nvfp4): the cheap exact dequant (``_nvfp4_tile_to_f16_words``, the bits
  of ``nvfp4.nvfp4_tile_to_f16_scaled`` computed two elements per 32-bit word) and FP16
  MMA; the 2^14 it leaves out is folded into the softmax scale and the partial output.
  Off: the generic exact fp32 decode, then BF16. Either way the K/V values are exact;
  only P is rounded (to bf16 / fp16) for the MMA.
- ``USE_DOT_SCALED`` (nvfp4, sm_100 only): ``q @ K^T`` through ``tl.dot_scaled`` on E2M1
  with E4M3 block-16 scales, which lowers to ``tcgen05.mma ... kind::mxf4nvf4
  .block_scale.block16``. Native FP4 MMA needs both operands in FP4, so q is split in
  the kernel into three NVFP4 terms (q ~ q1 + q2 + q3, residual quantization, ~bf16
  accuracy) and the product is three block-scaled MMAs (needs SWAP_AB and BLOCK_N = 128:
  the native instruction's M). ``P @ V`` cannot use it (V's scales run along D, not
  along the reduction axis), so V is still dequantized. Triton 3.9's interpreter decodes
  E4M3 block scales of ``dot_scaled`` as UE8M0, so this variant is verified on the GPU only.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import torch
import triton
import triton.language as tl

from kernel_templates._gluon import (cta_barrier, gl, gl_constexpr_function, gluon, gluon_jit, gluon_on_hopper, hopper,
                                     mbarrier)
from kernel_templates._host import cdiv, next_power_of_2
from kernel_templates.nvfp4 import (
    F16_SHIFT, dequantize_fp8_ue8m0, dequantize_nvfp4, e4m3_bits_to_f32, fp8_ue8m0_tile_to_f32,
    nvfp4_quantize_tile, nvfp4_tile_to_f32, quantize_fp8_ue8m0, quantize_nvfp4,
)
from tuner import lowering, runtime
from tuner.runtime.env import interpreting
from tuner.spec import KernelSpec
from tuner.verify import assert_close

log = logging.getLogger(__name__)

D_LATENT = 512
SWA_WINDOW = 128
TOPK = 512
KV_DTYPES = ("nvfp4", "fp8", "bf16")
MODES = ("dense", "sparse")
BYTES_PER_ENTRY = {"nvfp4": 288, "fp8": 528, "bf16": 1024}
SWA_BYTES_PER_ENTRY = 528
_KV_CODE = {"nvfp4": 0, "fp8": 1, "bf16": 2}
LOG2E = 1.4426950408889634
_F16_SHIFT = tl.constexpr(F16_SHIFT)
GL_WARPS = {64: 4, 128: 8}  # the GLUON kernel's entries a tile (wgmma's M) -> its warps: a warpgroup per 64
GL_MAX_HEADS = {64: 32, 128: 64}  # -> the most heads a program (accumulators of 64-128 registers a thread)


# ----------------------------------------------------------------------------- reference


def _dequant_entries(kv_dtype: str, codes: torch.Tensor, scales: torch.Tensor | None) -> torch.Tensor:
    if kv_dtype == "nvfp4":
        return dequantize_nvfp4(codes, scales)
    if kv_dtype == "fp8":
        return dequantize_fp8_ue8m0(codes, scales)
    return codes.float()


def reference(q: torch.Tensor, kv_codes: torch.Tensor, kv_scales: torch.Tensor | None, block_table: torch.Tensor,
              seq_lens: torch.Tensor, swa_kv: torch.Tensor, swa_scales: torch.Tensor, sink: torch.Tensor, *,
              sm_scale: float | None = None, topk_idx: torch.Tensor | None = None, kv_dtype: str = "nvfp4"
              ) -> torch.Tensor:
    """KERNELS.md section 2 in fp32, one sequence at a time: ``[B, H, D]`` fp32."""
    B, H, D = q.shape
    page = kv_codes.shape[1]
    tau = D ** -0.5 if sm_scale is None else sm_scale
    W = swa_kv.shape[1]
    out = torch.empty(B, H, D, dtype=torch.float32, device=q.device)
    for b in range(B):
        n = int(seq_lens[b])
        if n == 0:  # nothing but the sink, whose value is zero
            out[b] = 0.0
            continue
        if topk_idx is not None:
            idx = topk_idx[b].long()
            idx = idx[(idx >= 0) & (idx < n)]
        else:
            idx = torch.arange(n, device=q.device)
        pages = block_table[b].long()[idx // page]
        slots = idx % page
        c = _dequant_entries(kv_dtype, kv_codes[pages, slots], None if kv_scales is None else kv_scales[pages, slots])
        nw = min(n, W)
        sw = dequantize_fp8_ue8m0(swa_kv[b, :nw], swa_scales[b, :nw])
        ent = torch.cat([c, sw], dim=0)  # [n_att, D]
        logits = tau * (q[b].float() @ ent.t())  # [H, n_att]
        full = torch.cat([logits, sink.float()[:, None]], dim=1)
        p = torch.softmax(full, dim=1)[:, :-1]
        out[b] = p @ ent
    return out


# ----------------------------------------------------------------------------- Triton kernels


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
def _nvfp4_tile_to_f16_words(packed, scales):
    """``nvfp4.nvfp4_tile_to_f16_scaled`` (same bits: value * 2^-14, exact) with the bit
    placement done on 32-bit words that hold both nibbles of a byte: ``t = x * 0x1001``
    puts the low nibble at bits 0-3 and the high one at bits 16-19, then two shifted masks
    make an fp16 pair per word (one multiply, two shifts, two logic ops per two elements,
    instead of a chain per 16-bit element plus the packing of the pairs).

    Tried and dropped (session 7, H200 run 29, A/B in one call): the block scales by the
    hardware E4M3 -> fp16 conversion and each pair word scaled by one ``mul.rn.f16x2``
    before the split. 26% fewer SASS instructions per tile at H16 (2068 -> 1529) but no
    faster (split kernel 809-813 vs 799 us at B=16 128K), and 42% slower at H64 (584 vs
    411 us: more spills in the loop). This kernel is not issue-bound: 2 warps a scheduler,
    L1/shared pipe 69% busy, 0.49 eligible warps (ncu)."""
    t = (packed.to(tl.uint32) & 0xFF) * 0x1001
    w = ((t << 9) & 0x0E000E00) | ((t << 12) & 0x80008000)
    R: tl.constexpr = packed.shape[0]
    C: tl.constexpr = packed.shape[1]
    v = tl.reshape(tl.join(w.to(tl.uint16), (w >> 16).to(tl.uint16)), (R, 2 * C)).to(tl.float16, bitcast=True)
    s = e4m3_bits_to_f32(scales).to(tl.float16)  # every E4M3 value is an exact fp16
    return tl.reshape(tl.reshape(v, (R, C // 8, 16)) * s[:, :, None], (R, 2 * C))


@triton.jit
def _decode_kv(codes, scales, KV_DTYPE: tl.constexpr, DQ_FP16: tl.constexpr):
    """Raw tile -> ``[BLOCK_N, D]`` in the MMA dtype (fp16 value * 2^-14 under DQ_FP16, else bf16)."""
    if KV_DTYPE == 0:
        if DQ_FP16:
            kv = _nvfp4_tile_to_f16_words(codes, scales)
        else:
            kv = nvfp4_tile_to_f32(codes, scales).to(tl.bfloat16)
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
def _attend_chunks(qs, raw, valid, m_i, l_i, accs, sc, KV_DTYPE: tl.constexpr, DQ_FP16: tl.constexpr,
                   SWAP_AB: tl.constexpr, INTERPRET: tl.constexpr):
    """One tile, the latent split in chunks (``D_CHUNKS`` > 1): each chunk is decoded on its
    own (a ``[BLOCK_N, D / D_CHUNKS]`` tensor, so the decode's registers are a fraction of
    the tile's), stored to shared memory once and read there by both MMAs: the scores
    accumulate over the chunks (chained MMAs), then each chunk's accumulator takes
    ``P @ V_chunk``. ``qs`` / ``raw`` / ``accs``: tuples of the chunks."""
    kvs = ()
    for c in tl.static_range(len(raw)):
        kv = _decode_kv(raw[c][0], raw[c][1], KV_DTYPE, DQ_FP16)
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
def _scaled_scores(q1, s1, q2, s2, q3, s3, kv_ptr, kvs_ptr, row_c, row_s, valid, live, D: tl.constexpr,
                   SWAP_AB: tl.constexpr):
    """q @ K^T with native block-scaled FP4 MMA: q as three NVFP4 terms, K as stored.

    Written around two Triton 3.6 bugs that abort the sm_100 compile (3.9 has neither;
    the MMAs and their results are the same either way):
    - ``live`` is always true (the caller's ``n0 < end``, inside its loop): the runtime
      ``if`` keeps the MMAs out of the loop body proper, where OptimizeAccumulatorInit
      turns the zero-initialised first MMA into use_acc=false and then also drops the
      init of the TMEM allocs holding its *scales* ("uninitialized alloc must have a
      mutable memdesc type").
    - each MMA gets its own K-scale tensor (equal bits; ``ks3`` differs only on invalid
      rows, whose codes are 0): one tensor shared by the three MMAs becomes one TMEM
      alloc with three users, and NVWSInsertTmemAref asserts ``allocOp->hasOneUse()``.
    """
    codes = tl.load(kv_ptr + row_c[:, None] + tl.arange(0, D // 2)[None, :], mask=valid[:, None], other=0)
    ks = tl.load(kvs_ptr + row_s[:, None] + tl.arange(0, D // 16)[None, :], mask=valid[:, None], other=0)
    ks1 = ks.to(tl.float8e4nv, bitcast=True)
    ks2 = tl.where(valid[:, None], ks, 0).to(tl.float8e4nv, bitcast=True)
    ks3 = tl.where(valid[:, None], ks, 1).to(tl.float8e4nv, bitcast=True)
    s1 = s1.to(tl.float8e4nv, bitcast=True)
    s2 = s2.to(tl.float8e4nv, bitcast=True)
    s3 = s3.to(tl.float8e4nv, bitcast=True)
    if SWAP_AB:
        acc = tl.zeros([codes.shape[0], q1.shape[0]], tl.float32)
    else:
        acc = tl.zeros([q1.shape[0], codes.shape[0]], tl.float32)
    if live:
        if SWAP_AB:  # [BLOCK_N, BLOCK_H] = K [BLOCK_N, D] @ q^T [D, BLOCK_H]
            acc = tl.dot_scaled(codes, ks1, "e2m1", tl.trans(q1), s1, "e2m1")
            acc = tl.dot_scaled(codes, ks2, "e2m1", tl.trans(q2), s2, "e2m1", acc)
            acc = tl.dot_scaled(codes, ks3, "e2m1", tl.trans(q3), s3, "e2m1", acc)
        else:
            kt = tl.trans(codes)  # [D/2, BLOCK_N]: packed along the reduction axis
            acc = tl.dot_scaled(q1, s1, "e2m1", kt, ks1, "e2m1")
            acc = tl.dot_scaled(q2, s2, "e2m1", kt, ks2, "e2m1", acc)
            acc = tl.dot_scaled(q3, s3, "e2m1", kt, ks3, "e2m1", acc)
    return acc


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
                  DQ_FP16: tl.constexpr, USE_DOT_SCALED: tl.constexpr, SWAP_AB: tl.constexpr,
                  D_CHUNKS: tl.constexpr, INTERPRET: tl.constexpr, SPLIT0: tl.constexpr = 0):
    """Split ``program_id(2) + SPLIT0`` (``SPLIT0 = NUM_SPLITS`` on a grid of one: the SWA
    window's program alone, next to the Gluon kernel's global splits)."""
    if D_CHUNKS > 1:
        _split_chunked(q_ptr, kv_ptr, kvs_ptr, bt_ptr, seqlen_ptr, swa_ptr, swas_ptr, topk_ptr, m_ptr, l_ptr, acc_ptr,
                       H, n_topk, W, qk_scale, stride_qb, stride_qh, stride_kp, stride_ks, stride_sp, stride_ss,
                       stride_btb, stride_wb, stride_ww, stride_wsb, stride_wsw, stride_tb, stride_mb, stride_mh,
                       stride_ab, stride_ah, stride_as, D, PAGE, KV_DTYPE, SPARSE, BLOCK_N, BLOCK_H, NUM_SPLITS,
                       DQ_FP16, SWAP_AB, D_CHUNKS, INTERPRET, SPLIT0)
    else:
        _split_whole(q_ptr, kv_ptr, kvs_ptr, bt_ptr, seqlen_ptr, swa_ptr, swas_ptr, topk_ptr, m_ptr, l_ptr, acc_ptr,
                     H, n_topk, W, qk_scale, stride_qb, stride_qh, stride_kp, stride_ks, stride_sp, stride_ss,
                     stride_btb, stride_wb, stride_ww, stride_wsb, stride_wsw, stride_tb, stride_mb, stride_mh,
                     stride_ab, stride_ah, stride_as, D, PAGE, KV_DTYPE, SPARSE, BLOCK_N, BLOCK_H, NUM_SPLITS,
                     DQ_FP16, USE_DOT_SCALED, SWAP_AB, INTERPRET, SPLIT0)


@triton.jit
def _split_chunked(q_ptr, kv_ptr, kvs_ptr, bt_ptr, seqlen_ptr, swa_ptr, swas_ptr, topk_ptr, m_ptr, l_ptr, acc_ptr,
                   H, n_topk, W, qk_scale, stride_qb, stride_qh, stride_kp, stride_ks, stride_sp, stride_ss,
                   stride_btb, stride_wb, stride_ww, stride_wsb, stride_wsw, stride_tb, stride_mb, stride_mh,
                   stride_ab, stride_ah, stride_as, D: tl.constexpr, PAGE: tl.constexpr, KV_DTYPE: tl.constexpr,
                   SPARSE: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_H: tl.constexpr, NUM_SPLITS: tl.constexpr,
                   DQ_FP16: tl.constexpr, SWAP_AB: tl.constexpr, D_CHUNKS: tl.constexpr, INTERPRET: tl.constexpr,
                   SPLIT0: tl.constexpr):
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
            if DQ_FP16 and KV_DTYPE == 0:
                qc = qc.to(tl.float16)
            qs = qs + (qc,)
        if DQ_FP16 and KV_DTYPE == 0:
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
            m_i, l_i, accs = _attend_chunks(qs, raw, valid, m_i, l_i, accs, sc, KV_DTYPE, DQ_FP16, SWAP_AB,
                                            INTERPRET)
        if DQ_FP16 and KV_DTYPE == 0:
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
            m_i, l_i, accs = _attend_chunks(wqs, wraw, wvalid, m_i, l_i, accs, qk_scale, 1, False, SWAP_AB,
                                            INTERPRET)
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
                 DQ_FP16: tl.constexpr, USE_DOT_SCALED: tl.constexpr, SWAP_AB: tl.constexpr,
                 INTERPRET: tl.constexpr, SPLIT0: tl.constexpr):
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
        if DQ_FP16 and KV_DTYPE == 0:
            qd = q.to(tl.float16)
            sc = qk_scale * _F16_SHIFT  # the fp16 tile holds value * 2^-14
        else:
            qd = q
            sc = qk_scale
        if USE_DOT_SCALED:
            # q = q1 + q2 + q3 (+ a residual below bf16 precision), each term NVFP4
            qf = q.to(tl.float32)
            q1, s1 = nvfp4_quantize_tile(qf)
            qf = qf - nvfp4_tile_to_f32(q1, s1)
            q2, s2 = nvfp4_quantize_tile(qf)
            qf = qf - nvfp4_tile_to_f32(q2, s2)
            q3, s3 = nvfp4_quantize_tile(qf)
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
        kv_next = _decode_kv(raw_c, raw_s, KV_DTYPE, DQ_FP16)
        for n0 in range(start, end, BLOCK_N):
            kv = kv_next
            valid = valid_next
            if USE_DOT_SCALED:
                cur_c = row_c
                cur_s = row_s
            row_c, row_s, valid_next = _tile_rows(n0 + BLOCK_N, end, seq_len, offs_n, bt_row, tk_row, stride_kp,
                                                  stride_ks, stride_sp, stride_ss, PAGE, BLOCK_N, SPARSE)
            raw_c, raw_s = _load_kv_raw(kv_ptr, kvs_ptr, row_c, row_s, valid_next, D, KV_DTYPE)
            if USE_DOT_SCALED:
                s = _scaled_scores(q1, s1, q2, s2, q3, s3, kv_ptr, kvs_ptr, cur_c, cur_s, valid, n0 < end, D,
                                   SWAP_AB) * qk_scale
            else:
                s = _scores(qd, kv, sc, SWAP_AB, INTERPRET)
            m_i, l_i, acc = _attend(s, kv, valid, m_i, l_i, acc, SWAP_AB, INTERPRET)
            kv_next = _decode_kv(raw_c, raw_s, KV_DTYPE, DQ_FP16)
        if DQ_FP16 and KV_DTYPE == 0:
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
        wkv_next = _decode_kv(wraw_c, wraw_s, 1, False)
        for n0 in range(0, n_w, BLOCK_N):
            wkv = wkv_next
            valid = valid_next
            w = n0 + BLOCK_N + offs_n
            valid_next = w < n_w
            wraw_c, wraw_s = _load_kv_raw(w_c, w_s, w * stride_ww, w * stride_wsw, valid_next, D, 1)
            s = _scores(q, wkv, qk_scale, SWAP_AB, INTERPRET)
            m_i, l_i, acc = _attend(s, wkv, valid, m_i, l_i, acc, SWAP_AB, INTERPRET)
            wkv_next = _decode_kv(wraw_c, wraw_s, 1, False)
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


# ----------------------------------------------------------------------------- Gluon split kernel (sm_90)
#
# ``GLUON``: the global splits by a Gluon kernel with explicit layouts (the SWA window's
# program stays the Triton one, launched on its own with SPLIT0 = NUM_SPLITS). What Triton's
# layout choices could not give the Triton template (see the module docstring): the decoded
# K tile never goes through shared memory for ``K q^T``. The codes are loaded so that each
# thread's 16 bytes a row decode straight into the register A operand of wgmma (Hopper's
# A fragment: lane % 4 holds column pairs 2t, 2t+1 and 2t+8, 2t+9 of every 16); the MMA's
# reduction axis is a permutation of the latent, and q is stored to shared memory in that
# same permuted order, once a program. Only ``P V`` reads the decoded tile from shared
# memory (stored once, with stmatrix). Needs Triton's Gluon (3.5+) and an sm_90+ GPU; the
# interpreter cannot run it, so it is verified on the GPU (tests marked gpu, and the
# tuner's check of every config against the reference).

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
    # read as wgmma's A by two warpgroups gave the wrong chunks' columns: run 116)
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
# 128-entry tile where its MMAs alone would take ~2.2: runs 117-119). Here ``GL_WS`` decoder
# warpgroups (worker partitions, taking 64-entry tiles in turn) decode a tile chunk by chunk into
# wgmma's A registers, multiply ``K q^T`` from them (as the split kernel does) and store the decoded
# chunks to a ring of ``GL_WS_SLOTS`` shared-memory tiles and the scores to one shared [64, heads]
# fp32 tile; the default partition (4 warps up to 32 heads, 8 at 64, the latent rows split between
# its warpgroups) runs the online softmax and ``V^T P^T`` from shared memory. mbarriers: ``ready`` a
# slot (tile decoded and its scores stored), ``free`` a slot (its ``P V`` done), ``s_free`` (the
# scores read). A first form with ``K q^T`` in the MMA partition too (A from shared memory, the heads
# split between its warpgroups) left that partition the wall: its decoders waited on ``free`` half
# the time (run 122). Dense mode only (the sparse rows' validity would have to travel with the tile).
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
    codes each, 2 the line of its scales) well before its chunks are loaded into registers (run
    124: the decoder's loads two chunks ahead stalled on HBM latency)."""
    code = kv_ptr + rc[:, None] + 32 * (t4 & 1)[None, :]
    scl = kvs_ptr + rsc[:, None] + 0 * t4[None, :]
    on_code = (valid[:, None] & (t4 < 2)[None, :]).to(gl.int32)
    on_scl = (valid[:, None] & (t4 == 2)[None, :]).to(gl.int32)
    gl.inline_asm_elementwise(_GL_PREFETCH_ASM, "=r,l,r", [code, on_code], dtype=gl.int32, is_pure=False, pack=1)
    gl.inline_asm_elementwise(_GL_PREFETCH_ASM, "=r,l,r", [scl, on_scl], dtype=gl.int32, is_pure=False, pack=1)


@gluon_jit
def _gl_ws_decoder(kv_ptr, kvs_ptr, bt_ptr, seqlen_ptr, stride_kp, stride_ks, stride_sp, stride_ss, stride_btb,
                   q_buf, v_buf, s_buf, ready, free, s_free, PAGE: gl.constexpr, NUM_SPLITS: gl.constexpr,
                   BLOCK_N: gl.constexpr, WID: gl.constexpr, NDEC: gl.constexpr, NBUF: gl.constexpr,
                   SMEM_A: gl.constexpr):
    """Decoder partition ``WID`` of ``NDEC`` (one warpgroup): tiles ``WID``, ``WID + NDEC``, ... of
    the split; each chunk decoded into A registers, multiplied into the scores (async, chained) and
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
    STEP: gl.constexpr = NDEC * BLOCK_N
    q_smem = q_buf.index(0)
    s_smem = s_buf.index(0)

    n0 = start + WID * BLOCK_N
    ahead = _gl_ahead(n0, end, rows, bt_row, bt_row, PAGE, False, BLOCK_N)
    rc, rsc, valid = _gl_rows(n0, end, seq_len, rows, ahead, bt_row, stride_kp, stride_ks, stride_sp, stride_ss,
                              PAGE, False, BLOCK_N)
    ahead = _gl_ahead(n0 + STEP, end, rows, bt_row, bt_row, PAGE, False, BLOCK_N)
    c0, s0 = _gl_load_chunk(kv_ptr, kvs_ptr, rc, rsc, valid, woff, soff, 0)
    c1, s1 = _gl_load_chunk(kv_ptr, kvs_ptr, rc, rsc, valid, woff, soff, 1)
    if SMEM_A:
        c2, s2 = _gl_load_chunk(kv_ptr, kvs_ptr, rc, rsc, valid, woff, soff, 2)
        c3, s3 = _gl_load_chunk(kv_ptr, kvs_ptr, rc, rsc, valid, woff, soff, 3)
        for i in range(WID, n_tiles, NDEC):
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
    for i in range(WID, n_tiles, NDEC):
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
                  NDEC: gl.constexpr, DEC_REGS: gl.constexpr, SMEM_A: gl.constexpr):
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
    # memory may hold NaN bit patterns; the decoders write finite values only)
    for k in gl.static_range(4):
        v_buf.index(4 * (NBUF - 1) + k).store(gl.zeros([BLOCK_N, 128], gl.float16, ZL))
    p_buf.index(0).store(gl.zeros([BLOCK_N, BLOCK_H], gl.float16, QL))
    hopper.fence_async_shared()
    cta_barrier()
    # the argument tuples written out in each call: a tuple held in a variable turns its constexprs
    # into values (Triton 3.6)
    if NDEC == 1:
        gl.warp_specialize([
            (_gl_ws_attend, (v_buf, s_buf, p_buf, ready, free, s_free.index(0), seqlen_ptr, m_ptr, l_ptr, acc_ptr,
                             H, qk_scale, stride_mb, stride_mh, stride_ab, stride_ah, stride_as, NUM_SPLITS,
                             BLOCK_N, NBUF)),
            (_gl_ws_decoder, (kv_ptr, kvs_ptr, bt_ptr, seqlen_ptr, stride_kp, stride_ks, stride_sp, stride_ss,
                              stride_btb, q_buf, v_buf, s_buf, ready, free, s_free.index(0), PAGE, NUM_SPLITS,
                              BLOCK_N, 0, 1, NBUF, SMEM_A)),
        ], [4], [DEC_REGS])
    else:
        gl.warp_specialize([
            (_gl_ws_attend, (v_buf, s_buf, p_buf, ready, free, s_free.index(0), seqlen_ptr, m_ptr, l_ptr, acc_ptr,
                             H, qk_scale, stride_mb, stride_mh, stride_ab, stride_ah, stride_as, NUM_SPLITS,
                             BLOCK_N, NBUF)),
            (_gl_ws_decoder, (kv_ptr, kvs_ptr, bt_ptr, seqlen_ptr, stride_kp, stride_ks, stride_sp, stride_ss,
                              stride_btb, q_buf, v_buf, s_buf, ready, free, s_free.index(0), PAGE, NUM_SPLITS,
                              BLOCK_N, 0, 2, NBUF, SMEM_A)),
            (_gl_ws_decoder, (kv_ptr, kvs_ptr, bt_ptr, seqlen_ptr, stride_kp, stride_ks, stride_sp, stride_ss,
                              stride_btb, q_buf, v_buf, s_buf, ready, free, s_free.index(0), PAGE, NUM_SPLITS,
                              BLOCK_N, 1, 2, NBUF, SMEM_A)),
        ], [4, 4], [DEC_REGS, DEC_REGS])


# ----------------------------------------------------------------------------- launcher


def _check(name: str, t: Any, shape: tuple, dtypes: tuple[torch.dtype, ...]) -> None:
    if not isinstance(t, torch.Tensor):
        raise ValueError(f"{name} must be a tensor, got {type(t).__name__}")
    if t.dtype not in dtypes:
        raise ValueError(f"{name} must be {' or '.join(str(d) for d in dtypes)}, got {t.dtype}")
    if len(shape) != t.dim() or any(s is not None and s != ts for s, ts in zip(shape, t.shape)):
        want = ", ".join("?" if s is None else str(s) for s in shape)
        raise ValueError(f"{name} must have shape [{want}], got {list(t.shape)}")
    if t.numel() and t.stride(-1) != 1:
        raise ValueError(f"{name} must be contiguous in its last dimension")


def _validate(q, kv_codes, kv_scales, block_table, seq_lens, swa_kv, swa_scales, sink, topk_idx, kv_dtype) -> None:
    if kv_dtype not in KV_DTYPES:
        raise ValueError(f"kv_dtype must be one of {KV_DTYPES}, got {kv_dtype!r}")
    _check("q", q, (None, None, None), (torch.bfloat16,))
    B, H, D = q.shape
    if D < 32 or D & (D - 1):
        raise ValueError(f"latent width D={D} must be a power of two >= 32")
    P = kv_codes.shape[0] if isinstance(kv_codes, torch.Tensor) and kv_codes.dim() == 3 else None
    page = kv_codes.shape[1] if P is not None else None
    if kv_dtype == "nvfp4":
        _check("kv_codes", kv_codes, (None, None, D // 2), (torch.uint8,))
        _check("kv_scales", kv_scales, (P, page, D // 16), (torch.uint8,))
    elif kv_dtype == "fp8":
        _check("kv_codes", kv_codes, (None, None, D), (torch.float8_e4m3fn,))
        _check("kv_scales", kv_scales, (P, page, D // 32), (torch.uint8,))
    else:
        _check("kv_codes", kv_codes, (None, None, D), (torch.bfloat16,))
        if kv_scales is not None:
            raise ValueError("kv_scales must be None for kv_dtype='bf16'")
    page = kv_codes.shape[1]
    if page < 16 or page & (page - 1):
        raise ValueError(f"page size {page} must be a power of two >= 16")
    _check("block_table", block_table, (B, None), (torch.int32,))
    _check("seq_lens", seq_lens, (B,), (torch.int32,))
    _check("swa_kv", swa_kv, (B, None, D), (torch.float8_e4m3fn,))
    _check("swa_scales", swa_scales, (B, swa_kv.shape[1], D // 32), (torch.uint8,))
    _check("sink", sink, (H,), (torch.float32,))
    if topk_idx is not None:
        _check("topk_idx", topk_idx, (B, None), (torch.int32,))


REDUCE_PROGRAMS = 256     # the reduce's target grid: ~2 programs per SM of 132
REDUCE_TILE = 4096        # fp32 elements of one partial chunk load of the reduce (32 per thread)


def _reduce_blocks(B: int, H: int, D: int, S: int) -> tuple[int, int, int, int]:
    """Host heuristic for ``_reduce_kernel`` (not tuned; configs do not name it):
    (BLOCK_HR, BLOCK_DR, BLOCK_S, num_warps).

    Columns 128 wide, 64 while the grid is short of ``REDUCE_PROGRAMS`` (never narrower:
    a row of a partial stays 256 contiguous bytes); then fewer heads per program (8 down
    to 2) until the grid reaches ``REDUCE_PROGRAMS``. B=8 H=16: 4 heads x 64 columns,
    grid (8, 4, 8) = 256; B=8 H=64: 8 x 128, grid (8, 8, 4) = 256. At most 8 heads: the
    (m, l) of all splits are one ``[BLOCK_HR, SPLITS_P2]`` tile, and 16 heads x 128
    splits took 225 registers (sm_90, Triton 3.6) where 8 take <= 168. ``BLOCK_S``:
    splits per partial load, ``REDUCE_TILE`` fp32 elements (B=8 H=16: 16 splits x 4 x 64;
    two chunks are in flight at a time)."""
    bdr = min(D, 128)
    bhr = min(8, next_power_of_2(H))
    progs = lambda: B * cdiv(H, bhr) * (D // bdr)  # noqa: E731
    if progs() < REDUCE_PROGRAMS:
        bdr = min(D, 64)
    while progs() < REDUCE_PROGRAMS and bhr > 2:
        bhr //= 2
    bs = max(1, min(next_power_of_2(S), REDUCE_TILE // (bhr * bdr)))
    return bhr, bdr, bs, 4


def _plan(q, kv_codes, kv_scales, block_table, seq_lens, swa_kv, swa_scales, sink, topk_idx, kv_dtype,
          sm_scale, config, out, partials):
    """The two launches as (kernel, grid, args dict); shared by ``launch`` and ``lower_signatures``."""
    B, H, D = q.shape
    page = kv_codes.shape[1]
    S = int(config["NUM_SPLITS"])
    BH, BN = int(config["BLOCK_H"]), int(config["BLOCK_N"])
    if page % BN and BN % page:
        raise ValueError(f"BLOCK_N={BN} and the page size {page} must divide one another")
    if BH < 16 or BN < 16:
        raise ValueError("BLOCK_H and BLOCK_N must be >= 16 (MMA tile)")
    if (config["DQ_FP16"] or config["USE_DOT_SCALED"]) and kv_dtype != "nvfp4":
        raise ValueError("DQ_FP16 / USE_DOT_SCALED apply to kv_dtype='nvfp4' only")
    chunks = int(config.get("D_CHUNKS", 1))
    if chunks not in (1, 2, 4) or (chunks > 1 and config["USE_DOT_SCALED"]):
        raise ValueError(f"D_CHUNKS={chunks}: must be 1, 2 or 4, and 1 with USE_DOT_SCALED")
    m_buf, l_buf, acc_buf = partials
    tau = D ** -0.5 if sm_scale is None else float(sm_scale)
    kv = kv_codes.view(torch.uint8) if kv_dtype == "fp8" else kv_codes
    kvs = kv_scales if kv_scales is not None else kv_codes  # unused for bf16: any pointer
    tk = topk_idx if topk_idx is not None else seq_lens
    split_args = dict(
        q_ptr=q, kv_ptr=kv, kvs_ptr=kvs, bt_ptr=block_table, seqlen_ptr=seq_lens,
        swa_ptr=swa_kv.view(torch.uint8), swas_ptr=swa_scales, topk_ptr=tk,
        m_ptr=m_buf, l_ptr=l_buf, acc_ptr=acc_buf,
        H=H, n_topk=topk_idx.shape[1] if topk_idx is not None else 0, W=swa_kv.shape[1], qk_scale=tau * LOG2E,
        stride_qb=q.stride(0), stride_qh=q.stride(1), stride_kp=kv.stride(0), stride_ks=kv.stride(1),
        stride_sp=kvs.stride(0), stride_ss=kvs.stride(1), stride_btb=block_table.stride(0),
        stride_wb=swa_kv.stride(0), stride_ww=swa_kv.stride(1), stride_wsb=swa_scales.stride(0),
        stride_wsw=swa_scales.stride(1), stride_tb=tk.stride(0),
        stride_mb=m_buf.stride(0), stride_mh=m_buf.stride(1), stride_ab=acc_buf.stride(0),
        stride_ah=acc_buf.stride(1), stride_as=acc_buf.stride(2),
        D=D, PAGE=page, KV_DTYPE=_KV_CODE[kv_dtype], SPARSE=topk_idx is not None,
        BLOCK_N=BN, BLOCK_H=BH, NUM_SPLITS=S, DQ_FP16=bool(config["DQ_FP16"]),
        USE_DOT_SCALED=bool(config["USE_DOT_SCALED"]), SWAP_AB=bool(config["SWAP_AB"]),
        D_CHUNKS=int(config.get("D_CHUNKS", 1)),  # absent in configs tuned before the switch existed
        SPLIT0=0,
        INTERPRET=interpreting(),
        num_warps=int(config["num_warps"]), num_stages=int(config["num_stages"]),
    )
    if config.get("GLUON", False):
        if kv_dtype != "nvfp4" or D != D_LATENT or BH > GL_MAX_HEADS.get(BN, 0) and not config.get("GL_WS"):
            raise ValueError(f"GLUON applies to kv_dtype='nvfp4', D={D_LATENT}, BLOCK_N 64 (BLOCK_H <= 32) or 128 "
                             "(BLOCK_H <= 64)")
        if gluon is None:
            raise ValueError("GLUON needs Triton's Gluon (triton >= 3.5)")
        if interpreting():
            raise ValueError("GLUON kernels do not run under TRITON_INTERPRET")
        gl_args = {k: split_args[k] for k in (
            "q_ptr", "kv_ptr", "kvs_ptr", "bt_ptr", "seqlen_ptr", "topk_ptr", "m_ptr", "l_ptr", "acc_ptr", "H", "n_topk",
            "qk_scale", "stride_qb", "stride_qh", "stride_kp", "stride_ks", "stride_sp", "stride_ss", "stride_btb",
            "stride_tb", "stride_mb", "stride_mh", "stride_ab", "stride_ah", "stride_as", "PAGE", "SPARSE", "BLOCK_H",
            "NUM_SPLITS", "BLOCK_N")}
        gl_args["AHEAD"] = int(config.get("GL_AHEAD", 4))
        if gl_args["AHEAD"] not in (2, 4):
            raise ValueError(f"GL_AHEAD={gl_args['AHEAD']}: 128-column chunks of raw codes ahead, 2 or 4")
        ws = int(config.get("GL_WS", 0))
        if ws:
            why = gl_ws_error(config, topk_idx is not None)
            if why:
                raise ValueError(why)
            gl_args.pop("AHEAD")
            for k in ("topk_ptr", "n_topk", "stride_tb", "SPARSE"):
                gl_args.pop(k)
            gl_args.update(NDEC=ws, SMEM_A=bool(config.get("GL_WS_A", 0)), **gl_ws_launch(BH, ws))
        words = kv_codes.view(torch.int32)  # whole 32-bit words of codes
        pairs = kv_scales.view(torch.int16)  # the two scales of a 32-column chunk at once
        gl_args.update(kv_ptr=words, stride_kp=words.stride(0), stride_ks=words.stride(1), kvs_ptr=pairs,
                       stride_sp=pairs.stride(0), stride_ss=pairs.stride(1), num_warps=GL_WARPS[BN])
        # the window's Triton program keeps the 64 x 16 / 64 x 32 tile of the 4-warp SWAP_AB default
        swa_bh = min(BH, 32)
        swa_args = dict(split_args, SPLIT0=S, DQ_FP16=False, USE_DOT_SCALED=False, D_CHUNKS=1, BLOCK_N=64,
                        BLOCK_H=swa_bh, SWAP_AB=True, num_warps=4)
        if ws:
            gl_args["num_warps"] = gl_args.pop("NW")
        return [(_gl_ws_kernel if ws else _gl_split_kernel, (B, cdiv(H, BH), S), gl_args), (_split_kernel, (B, cdiv(H, swa_bh), 1), swa_args),
                _reduce_launch(m_buf, l_buf, acc_buf, sink, out)]
    return [(_split_kernel, (B, cdiv(H, BH), S + 1), split_args), _reduce_launch(m_buf, l_buf, acc_buf, sink, out)]


def gl_ws_error(config: dict[str, Any], sparse: bool) -> str | None:
    """Why ``config`` cannot run the warp-specialised GLUON kernel (``GL_WS``); None: it can."""
    ws, bn, bh = int(config.get("GL_WS", 0)), config["BLOCK_N"], config["BLOCK_H"]
    if ws not in (1, 2):
        return f"GL_WS={ws}: decoder warpgroups, 1 or 2"
    if not config.get("GLUON", False) or bn != 64 or bh not in (16, 32, 64) or sparse:
        return "GL_WS applies to GLUON, dense mode, BLOCK_N 64, BLOCK_H 16, 32 or 64"
    if ws == 2 and bh == 64:  # 16 warps: 128 registers a thread, ~400 B of spills (Triton 3.6 sm_90)
        return "GL_WS=2 takes BLOCK_H <= 32"
    return None


def gl_ws_launch(block_h: int, ndec: int) -> dict[str, int]:
    """Warps and registers of the ``GL_WS`` kernel: the default partition's warps (``NW``: a
    warpgroup per 32 heads), the decoders' register cap (``DEC_REGS``) and the kernel's
    ``maxnreg``, which spreads the SM's 64K registers over all the warps (the default partition
    gets what the decoders leave)."""
    nw = 4 if block_h <= 32 else 8
    total = 32 * (nw + 4 * ndec)
    maxnreg = min(248, (65536 // total) // 8 * 8)
    return {"NW": nw, "DEC_REGS": GL_WS_DEC_REGS, "maxnreg": maxnreg}


GL_WS_DEC_REGS = 168
"""The decoder warpgroup's register cap (setmaxnreg): raw codes two chunks ahead (18 registers),
two decoded chunks while a wgmma reads one (64), the scores' accumulator (8-32) and the row
addresses. At 64 heads (12 warps, ``maxnreg`` 168) the MMA partition gets 168 too; Triton 3.6
sm_90 then spills ~10 scalar loads a tile in the decoder (a tile of raw codes ahead spilled at
184)."""


def _reduce_launch(m_buf: torch.Tensor, l_buf: torch.Tensor, acc_buf: torch.Tensor, sink: torch.Tensor,
                   out: torch.Tensor) -> tuple[Any, tuple[int, int, int], dict[str, Any]]:
    """The reduce launch (kernel, grid, args) for partials ``m, l [B, H, S + 1]``,
    ``acc [B, H, S + 1, D]`` into ``out [B, H, D]``; blocks from ``_reduce_blocks``."""
    B, H, S1, D = acc_buf.shape
    bhr, bdr, bs, nw = _reduce_blocks(B, H, D, S1 - 1)
    args = dict(
        m_ptr=m_buf, l_ptr=l_buf, acc_ptr=acc_buf, sink_ptr=sink, out_ptr=out, H=H,
        stride_mb=m_buf.stride(0), stride_mh=m_buf.stride(1), stride_ab=acc_buf.stride(0),
        stride_ah=acc_buf.stride(1), stride_as=acc_buf.stride(2), stride_ob=out.stride(0), stride_oh=out.stride(1),
        D=D, NUM_SPLITS=S1 - 1, BLOCK_HR=bhr, BLOCK_DR=bdr, BLOCK_S=bs, SPLITS_P2=next_power_of_2(S1),
        num_warps=nw, num_stages=1,
    )
    return _reduce_kernel, (B, cdiv(H, bhr), D // bdr), args


def launch(*, config: dict[str, Any], q: torch.Tensor, kv_codes: torch.Tensor, kv_scales: torch.Tensor | None,
           block_table: torch.Tensor, seq_lens: torch.Tensor, swa_kv: torch.Tensor, swa_scales: torch.Tensor,
           sink: torch.Tensor, sm_scale: float | None = None, topk_idx: torch.Tensor | None = None,
           kv_dtype: str = "nvfp4") -> torch.Tensor:
    """Validate, allocate the partials and the output, and run split + reduce. ``[B, H, D]`` bf16.

    ``seq_lens[b]`` must not exceed ``block_table.shape[1] * PAGE`` (not checked: a host sync).
    """
    _validate(q, kv_codes, kv_scales, block_table, seq_lens, swa_kv, swa_scales, sink, topk_idx, kv_dtype)
    B, H, D = q.shape
    S = int(config["NUM_SPLITS"])
    dev = q.device
    out = torch.empty(B, H, D, dtype=torch.bfloat16, device=dev)
    partials = (torch.empty(B, H, S + 1, dtype=torch.float32, device=dev),
                torch.empty(B, H, S + 1, dtype=torch.float32, device=dev),
                torch.empty(B, H, S + 1, D, dtype=torch.float32, device=dev))
    for kern, grid, args in _plan(q, kv_codes, kv_scales, block_table, seq_lens, swa_kv, swa_scales, sink, topk_idx,
                                  kv_dtype, sm_scale, config, out, partials):
        kern[grid](**args)
    return out


# ----------------------------------------------------------------------------- public API


def nvfp4_decode_attention(q: torch.Tensor, kv_codes: torch.Tensor, kv_scales: torch.Tensor | None,
                           block_table: torch.Tensor, seq_lens: torch.Tensor, swa_kv: torch.Tensor,
                           swa_scales: torch.Tensor, sink: torch.Tensor, *, sm_scale: float | None = None,
                           topk_idx: torch.Tensor | None = None, kv_dtype: str = "nvfp4",
                           config: dict[str, Any] | None = None) -> torch.Tensor:
    """Decode attention over the paged global KV + FP8 SWA window + sink: ``[B, H, 512]`` bf16.

    Layouts (KERNELS.md section 2): ``q [B, H, D]`` bf16; ``nvfp4``: ``kv_codes [pages,
    PAGE, D/2] uint8`` + ``kv_scales [pages, PAGE, D/16] uint8`` (E4M3 bits); ``fp8``:
    ``float8_e4m3fn [pages, PAGE, D]`` + UE8M0 ``[pages, PAGE, D/32]``; ``bf16``: bf16
    codes, ``kv_scales=None``. ``block_table [B, max_pages] int32``, ``seq_lens [B]
    int32``, ``swa_kv [B, W, D] float8_e4m3fn`` + ``swa_scales [B, W, D/32]`` (the first
    ``min(seq_len, W)`` rows valid), ``sink [H] fp32``; ``topk_idx [B, K] int32`` (sparse
    mode, -1 skipped). ``config=None`` picks the tuned config of the active pack.
    """
    if config is None:
        if kv_dtype not in KV_DTYPES:
            raise ValueError(f"kv_dtype must be one of {KV_DTYPES}, got {kv_dtype!r}")
        B, H, _ = q.shape
        wl = Workload(batch=B, context=int(block_table.shape[1]) * int(kv_codes.shape[1]), heads=H,
                      kv_dtype=kv_dtype, mode="dense" if topk_idx is None else "sparse", page=int(kv_codes.shape[1]))
        config = runtime.select("nvfp4_attention", _wdict(wl)).config
    return launch(config=config, q=q, kv_codes=kv_codes, kv_scales=kv_scales, block_table=block_table,
                  seq_lens=seq_lens, swa_kv=swa_kv, swa_scales=swa_scales, sink=sink, sm_scale=sm_scale,
                  topk_idx=topk_idx, kv_dtype=kv_dtype)


# ----------------------------------------------------------------------------- workloads


@dataclass(frozen=True)
class Workload:
    """One decode step: ``batch`` sequences of ``context`` global entries each."""

    batch: int
    context: int
    heads: int
    kv_dtype: str
    mode: str
    page: int = 64

    def __post_init__(self) -> None:
        if self.kv_dtype not in KV_DTYPES:
            raise ValueError(f"kv_dtype must be one of {KV_DTYPES}, got {self.kv_dtype!r}")
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {self.mode!r}")


def _wdict(w: Workload) -> dict[str, Any]:
    return {"batch": w.batch, "context": w.context, "heads": w.heads, "kv_dtype": w.kv_dtype, "mode": w.mode,
            "page": w.page}


def n_attended(w: Workload) -> int:
    """Global entries each query attends (the SWA window comes on top)."""
    return min(TOPK, w.context) if w.mode == "sparse" else w.context


def make_inputs(workload: Workload, device: str, seed: int) -> dict[str, Any]:
    """Latents ~ N(0, 1) quantized to the workload's KV dtype, pages shuffled across the
    pool, q with logits of std ~2, sinks ~ N(1, 1); sparse mode draws 512 distinct
    indices per sequence. A pool of at most 64K distinct quantized entries is tiled over
    the cache so inputs for 100+ GB caches are built in seconds."""
    w = workload
    g = torch.Generator(device="cpu").manual_seed(seed)
    B, H, N, D, page = w.batch, w.heads, w.context, D_LATENT, w.page
    pages_per_seq = cdiv(N, page)
    n_pages = B * pages_per_seq
    n_rows = n_pages * page
    n_pool = min(n_rows, 65536)
    pool = torch.randn(n_pool, D, generator=g).to(device)
    pick = torch.randint(0, n_pool, (n_rows,), generator=g).to(device)
    if w.kv_dtype == "nvfp4":
        pc, ps = quantize_nvfp4(pool)
        kv_codes, kv_scales = pc[pick].view(n_pages, page, D // 2), ps[pick].view(n_pages, page, D // 16)
    elif w.kv_dtype == "fp8":
        pc, ps = quantize_fp8_ue8m0(pool)
        kv_codes = pc.view(torch.uint8)[pick].view(torch.float8_e4m3fn).view(n_pages, page, D)
        kv_scales = ps[pick].view(n_pages, page, D // 32)
    else:
        kv_codes, kv_scales = pool.to(torch.bfloat16)[pick].view(n_pages, page, D), None
    del pool, pick
    block_table = torch.randperm(n_pages, generator=g).to(torch.int32).view(B, pages_per_seq).to(device)
    seq_lens = torch.full((B,), N, dtype=torch.int32, device=device)
    swa_kv, swa_scales = quantize_fp8_ue8m0(torch.randn(B, SWA_WINDOW, D, generator=g).to(device))
    q = (2.0 * torch.randn(B, H, D, generator=g)).to(torch.bfloat16).to(device)
    sink = (1.0 + torch.randn(H, generator=g)).to(device)
    topk_idx = None
    if w.mode == "sparse":
        k = min(TOPK, N)
        topk_idx = torch.stack([torch.randperm(N, generator=g)[:k] for _ in range(B)]).to(torch.int32).to(device)
    return dict(q=q, kv_codes=kv_codes, kv_scales=kv_scales, block_table=block_table, seq_lens=seq_lens,
                swa_kv=swa_kv, swa_scales=swa_scales, sink=sink, sm_scale=None, topk_idx=topk_idx,
                kv_dtype=w.kv_dtype)


def default_splits(w: Workload, block_h: int, block_n: int, sms: int = 132) -> int:
    """Enough splits for ~2 waves of programs (one program per SM fits: ~255 registers x 256
    threads), none shorter than 2 tiles (sparse top-512 at B=16: 4 splits of 128 entries,
    80 programs), at most 128 (so B=1 still fills 132 SMs)."""
    progs = w.batch * cdiv(w.heads, block_h)
    want = next_power_of_2(max(1, cdiv(2 * sms, progs)))
    most = max(1, n_attended(w) // (2 * block_n))
    s = 1
    while s * 2 <= min(want, most, 128):
        s *= 2
    return s


def default_config(workload: Workload) -> dict[str, Any]:
    """Heuristic: 64-entry tiles, all heads of a KV tile in one program up to 64 (16 at
    H <= 16), 8 warps, no SWAP_AB, fp16 fast dequant for nvfp4.

    From ptxas reports for sm_90 with Triton 3.6 (no timings yet; divisibility-16
    specialisation as at launch; "loop" = SASS instructions per warp per tile of the
    global-KV loop, x8 warps / BLOCK_N = per entry). Every one spills nothing (0 bytes
    local memory):

    ======================  ====  ======  ====  ====  ==============
    kv, H, BN x BH          regs  smem    loop  SWA   per entry
    ======================  ====  ======  ====  ====  ==============
    nvfp4 H16  64 x 16      248   100352   936   836  117 (was 448)
    fp8   H16  64 x 16      246    83968   850   841  106 (was 466)
    bf16  H16  64 x 16      250    83968   545   836   68 (was  95)
    nvfp4 H64  64 x 64      255   196608  1627  1615  203
    fp8   H64  64 x 64      255   131072  1495  1795  187
    bf16  H64  64 x 64      255   131072  1219  1781  152
    ======================  ====  ======  ====  ====  ==============

    ("was": the previous default, BLOCK_N=32 at H=16, before the decode-once pipeline;
    SWA = the window loop, per 64-entry tile.) 64 x 64 runs on wgmma (M = 64 heads). At
    H=64 one 64-head program per tile beats two 32-head programs (2 x 186 per entry for
    nvfp4) and four 16-head ones (4 x 117): the tile is decoded once for all heads.
    Occupancy: ~250 registers x 256 threads is one program per SM, so the bytes in flight
    per SM are the one prefetched raw tile (nvfp4 18 KB, fp8 33 KB, bf16 64 KB).

    Measured on the H200 (run 11, B=16, N=32K, graph replay, L2 flushed): nvfp4 at 16 heads
    runs faster on wgmma (SWAP_AB, 4 warps: 253 us vs 325 for mma.sync at 8 warps), fp8 does
    not (336 vs 302); nvfp4 at 64 heads with the latent in 4 column chunks (D_CHUNKS 4:
    477 vs 618 us). Those two are the nvfp4 defaults; the rest as above.

    ``GLUON`` at 16 heads on an sm_90 GPU (its 64 x 16 tile is the SWAP_AB default's): H200
    runs 50-51 (session 9), 1.4-1.95x this template's pack configs at B 16 / 64, 32K / 128K;
    raw codes two chunks ahead (``GL_AHEAD`` 2: 225 registers, not 255), 1.02-1.05x at those
    four points and the tuner's pick at all of them (runs 116-117). Dense nvfp4 with more
    than 16 heads on sm_90: ``_gl_wide_default``.
    """
    w = workload
    bh = min(64, max(16, next_power_of_2(w.heads)))
    bn = 64
    nvfp4 = w.kv_dtype == "nvfp4"
    if nvfp4 and w.mode == "dense" and bh > 16 and gluon_on_hopper():
        return _gl_wide_default(w)
    swap = nvfp4 and bh == 16
    gluon = swap and gluon_on_hopper()
    return {"BLOCK_N": bn, "BLOCK_H": bh, "NUM_SPLITS": default_splits(w, bh, bn),
            "DQ_FP16": nvfp4, "USE_DOT_SCALED": False, "SWAP_AB": swap, "D_CHUNKS": 4 if nvfp4 and bh == 64 else 1,
            "num_warps": 4 if swap else 8, "num_stages": 2, "GLUON": gluon, "GL_AHEAD": 2 if gluon else 4,
            "GL_WS": 0, "GL_WS_A": 0}


def _gl_wide_default(w: Workload) -> dict[str, Any]:
    """GLUON on 128-entry tiles (two warpgroups, one program an SM: 169-210 KB shared) for
    dense nvfp4 with more than 16 heads: 32 heads a program and ~128 programs in all (32 splits
    at B = 1 8K, 16 at B = 4), but never under 2 tiles a split (runs 117-118: the tuned Triton
    template was 1.03-1.51x slower on the H200's 64-head grid). Fewer splits than
    ``default_splits``: the fp32 partials of 32 heads are 64 KB a split and sequence. With more
    than 32 heads and 2^18 or more (64-head block x entry) pairs, ``GL_WS`` instead
    (``_gl_ws_default``); it replaced 64 heads a program on 128-entry tiles at B >= 64 (runs
    125-126)."""
    blocks = w.batch * cdiv(w.heads, 64)
    if w.heads > 32 and blocks * n_attended(w) >= 1 << 18:
        return _gl_ws_default(w, blocks)
    progs = w.batch * cdiv(w.heads, 32)
    cap = min(128 // progs, n_attended(w) // 256, 128)
    s = 1
    while s * 2 <= cap:
        s *= 2
    return {"BLOCK_N": 128, "BLOCK_H": 32, "NUM_SPLITS": s, "DQ_FP16": True, "USE_DOT_SCALED": False,
            "SWAP_AB": True, "D_CHUNKS": 1, "num_warps": 8, "num_stages": 2, "GLUON": True,
            "GL_AHEAD": 4, "GL_WS": 0, "GL_WS_A": 0}


def _gl_ws_default(w: Workload, blocks: int) -> dict[str, Any]:
    """``GL_WS`` with ``GL_WS_A`` (one decoder warpgroup, 64 heads a program on 64-entry tiles,
    the decoder's ``K q^T`` from shared memory) with ~128 programs (one split from 128 blocks up),
    where ~128 programs get 32 or more tiles each: 2^18 (64-head block x entry) pairs. On the
    H200 at 64 heads it won B = 16 (32K, 128K: 1.19x / 1.30x the 128-entry default; 8K, 16 tiles
    a split: a tie) and B = 64 (8K-128K: 1.23-1.35x) in run 125; B = 256 (8K / 32K: 1.20x / 1.21x),
    B = 8 32K (16 splits: 1.10x the 128-entry default) and B = 4 128K (32 splits: 1.19x) in runs
    126-127. It lost at B = 4 32K (1.02x slower) and 8K and at B = 1 (up to 128 splits: at most
    16 tiles each). ``GL_WS_A`` 1 won every re-tuned 64-head GL_WS entry by 1.03-1.04x (run 127)."""
    cap = min(max(1, 128 // blocks), max(1, n_attended(w) // 1024))
    s = 1
    while s * 2 <= cap:
        s *= 2
    return {"BLOCK_N": 64, "BLOCK_H": 64, "NUM_SPLITS": s, "DQ_FP16": True, "USE_DOT_SCALED": False,
            "SWAP_AB": True, "D_CHUNKS": 1, "num_warps": gl_ws_launch(64, 1)["NW"], "num_stages": 2, "GLUON": True,
            "GL_AHEAD": 4, "GL_WS": 1, "GL_WS_A": 1}


def cost(workload: Workload) -> tuple[float, float]:
    """KERNELS.md floor: ``B*(N_att*b_kv + 128*528 + H*512*2*2)`` bytes, ``4*H*512*(N_att+128)*B`` flops."""
    w = workload
    n = n_attended(w)
    nbytes = w.batch * (n * BYTES_PER_ENTRY[w.kv_dtype] + SWA_WINDOW * SWA_BYTES_PER_ENTRY + w.heads * D_LATENT * 4)
    flops = 4 * w.heads * D_LATENT * (n + SWA_WINDOW) * w.batch
    return float(nbytes), float(flops)


def memory_bytes(workload: Workload, num_splits: int = 64) -> int:
    """Device memory the kernel's inputs, partials and output take (no baseline, no reference)."""
    w = workload
    rows = w.batch * cdiv(w.context, w.page) * w.page
    cache = rows * BYTES_PER_ENTRY[w.kv_dtype]
    swa = w.batch * SWA_WINDOW * SWA_BYTES_PER_ENTRY
    partials = w.batch * w.heads * (num_splits + 1) * (D_LATENT + 2) * 4
    return cache + swa + partials + w.batch * w.heads * D_LATENT * 4 + w.batch * 4 * cdiv(w.context, w.page)


def feasible(workload: Workload, budget_bytes: int | None = None) -> str | None:
    """None when the workload fits on the device, else the reason (the point is skipped).

    Budget: 70% of the GPU's memory when one is visible (room for the reference and
    the timing buffers), else the 141 GB of an H200.
    """
    if budget_bytes is None:
        total = 141 * 10**9
        if torch.cuda.is_available() and not interpreting():
            total = torch.cuda.get_device_properties(0).total_memory
        budget_bytes = int(0.7 * total)
    need = memory_bytes(workload)
    if need > budget_bytes:
        return (f"needs {need / 1e9:.1f} GB of device memory for the {workload.kv_dtype} cache and partials, "
                f"budget {budget_bytes / 1e9:.1f} GB")
    return None


# ----------------------------------------------------------------------------- baselines, verify


def torch_eager(q, kv_codes, kv_scales, block_table, seq_lens, swa_kv, swa_scales, sink, *, sm_scale=None,
                topk_idx=None, kv_dtype="nvfp4", chunk_bytes: int = 2**32) -> torch.Tensor:
    """What a user would write: dequantize the whole cache to BF16 (every call: the timed
    baseline includes it; with ``kv_dtype="bf16"`` there is nothing to dequantize), gather each
    sequence's entries, append the SWA window and a zero "sink" key whose logit comes
    from the mask, then ``F.scaled_dot_product_attention`` (MQA via ``enable_gqa``).
    With a 512-wide head and a float mask SDPA takes its math path, which expands K/V
    over the heads; sequences go through it in groups of at most ``chunk_bytes`` of that
    expansion (whole batches ran out of the H200's memory from B=16 at 128K).
    No host syncs, so it can be captured in a CUDA graph."""
    if kv_dtype == "nvfp4":
        cache = dequantize_nvfp4(kv_codes, kv_scales, dtype=torch.bfloat16)
    elif kv_dtype == "fp8":
        cache = dequantize_fp8_ue8m0(kv_codes, kv_scales, dtype=torch.bfloat16)
    else:
        cache = kv_codes
    B, H, D = q.shape
    per_seq = H * (block_table.shape[1] * kv_codes.shape[1] + swa_kv.shape[1] + 1) * D * 2
    step = max(1, min(B, chunk_bytes // per_seq))
    outs = []
    for i in range(0, B, step):
        j = slice(i, i + step)
        outs.append(_sdpa_dequantized(q[j], cache, block_table[j], seq_lens[j], swa_kv[j], swa_scales[j], sink,
                                      sm_scale, None if topk_idx is None else topk_idx[j]))
    return outs[0] if len(outs) == 1 else torch.cat(outs)


def _sdpa_dequantized(q, cache, block_table, seq_lens, swa_kv, swa_scales, sink, sm_scale, topk_idx) -> torch.Tensor:
    B, H, D = q.shape
    tau = D ** -0.5 if sm_scale is None else sm_scale
    dense = cache[block_table.long()].reshape(B, -1, D)  # [B, max_pages*PAGE, D]
    if topk_idx is not None:
        idx = topk_idx.long()
        valid_g = (idx >= 0) & (idx < seq_lens[:, None])
        glob = torch.gather(dense, 1, idx.clamp(min=0)[..., None].expand(-1, -1, D))
    else:
        glob = dense
        valid_g = torch.arange(dense.shape[1], device=q.device)[None, :] < seq_lens[:, None]
    W = swa_kv.shape[1]
    swa = dequantize_fp8_ue8m0(swa_kv, swa_scales, dtype=torch.bfloat16)
    valid_w = torch.arange(W, device=q.device)[None, :] < seq_lens.clamp(max=W)[:, None]
    kv = torch.cat([torch.zeros(B, 1, D, dtype=torch.bfloat16, device=q.device), glob, swa], dim=1)
    valid = torch.cat([valid_g, valid_w], dim=1)
    base = torch.zeros(valid.shape, dtype=torch.bfloat16, device=q.device).masked_fill(~valid, float("-inf"))
    mask = torch.cat([sink.to(torch.bfloat16)[None, :, None, None].expand(B, H, 1, 1),
                      base[:, None, None, :].expand(B, H, 1, base.shape[1])], dim=-1)
    o = torch.nn.functional.scaled_dot_product_attention(q[:, :, None, :], kv[:, None], kv[:, None], attn_mask=mask,
                                                         scale=tau, enable_gqa=True)
    return o[:, :, 0, :]


baselines = {"torch_eager": torch_eager}


def verify(out: torch.Tensor, ref: torch.Tensor, inputs: dict[str, Any]) -> None:
    """bf16 output against the fp32 reference: P is rounded to 16 bits for the MMA and the
    output to bf16, so ``|out - ref| <= 1e-2 * |ref| + 4e-3 * max|ref|`` per sequence."""
    if out.dtype != torch.bfloat16:
        raise AssertionError(f"out: dtype {out.dtype}, want torch.bfloat16")
    scale = ref.abs().amax(dim=(1, 2), keepdim=True).clamp(min=1e-6)
    assert_close("out", out.float() / scale, ref.float() / scale, atol=4e-3, rtol=1e-2)


def lower_signatures(workload: Workload, config: dict[str, Any]) -> list[tuple[Any, dict[str, str], dict[str, Any]]]:
    """Each launch ``launch`` does for this workload/config: (jit fn, signature, constexprs).

    Needs ``TRITON_INTERPRET`` unset (under the interpreter the kernels are not compilable).
    """
    w = workload
    B, H, D, page = w.batch, w.heads, D_LATENT, w.page
    m = lambda *s, dt=torch.float32: torch.empty(*s, dtype=dt, device="meta")  # noqa: E731
    pages = B * cdiv(w.context, page)
    codes = {"nvfp4": m(pages, page, D // 2, dt=torch.uint8), "fp8": m(pages, page, D, dt=torch.float8_e4m3fn),
             "bf16": m(pages, page, D, dt=torch.bfloat16)}[w.kv_dtype]
    scales = {"nvfp4": m(pages, page, D // 16, dt=torch.uint8), "fp8": m(pages, page, D // 32, dt=torch.uint8),
              "bf16": None}[w.kv_dtype]
    S = int(config["NUM_SPLITS"])
    partials = (m(B, H, S + 1), m(B, H, S + 1), m(B, H, S + 1, D))
    launches = _plan(m(B, H, D, dt=torch.bfloat16), codes, scales, m(B, pages // B, dt=torch.int32),
                     m(B, dt=torch.int32), m(B, SWA_WINDOW, D, dt=torch.float8_e4m3fn),
                     m(B, SWA_WINDOW, D // 32, dt=torch.uint8), m(H),
                     m(B, TOPK, dt=torch.int32) if w.mode == "sparse" else None, w.kv_dtype, None, config,
                     m(B, H, D, dt=torch.bfloat16), partials)
    return [(kern, *lowering.signature(kern, args)) for kern, _grid, args in launches]


runtime.register_defaults("nvfp4_attention", lambda wd: default_config(Workload(**wd)))

SPEC = KernelSpec(
    name="nvfp4_attention",
    workload=Workload,
    make_inputs=make_inputs,
    reference=reference,
    launch=launch,
    default_config=default_config,
    cost=cost,
    verify=verify,
    baselines=baselines,
    launch_bound=True,
    description="NVFP4 / FP8 / BF16 paged decode attention (MQA latent 512 + FP8 SWA window + sink), split-KV",
)
