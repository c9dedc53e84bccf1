"""sm_100 only: ``USE_DOT_SCALED``, ``q @ K^T`` on Blackwell's native block-scaled FP4 MMA.

Not yet measured on a GPU: compiled for sm_100 (``tcgen05.mma ... kind::mxf4nvf4
.block_scale.block16``, its shared memory checked against the search space's estimate), never
timed, and never verified on a Blackwell GPU. The search space admits it for a target with
cc >= 100 only.

``tl.dot_scaled`` on E2M1 with E4M3 block-16 scales. Native FP4 MMA needs both operands in
FP4, so q is split in the kernel into three NVFP4 terms (q ~ q1 + q2 + q3, residual
quantization, ~bf16 accuracy) and the scores are three block-scaled MMAs (``K q^T``: the
entries are the MMA's M, ``BLOCK_N`` = 128, the native instruction's M). ``P @ V`` cannot use
it (V's scales run along D, not along the reduction axis), so V is still decoded to fp16
(the Triton kernel's decode). This kernel runs the global splits; the SWA window's program is
the Triton split kernel's (launched with ``SPLIT0 = NUM_SPLITS``). Triton 3.9's interpreter
decodes E4M3 block scales of ``dot_scaled`` as UE8M0, so it cannot check this kernel.
"""
from __future__ import annotations

import triton
import triton.language as tl

from kernel_templates.nvfp4 import nvfp4_quantize_tile, nvfp4_tile_to_f32
from kernel_templates.nvfp4_attention.triton_kernels import (_F16_SHIFT, _attend, _decode_kv, _load_kv_raw,
                                                             _split_range, _tile_rows)


@triton.jit
def _scaled_scores(q1, s1, q2, s2, q3, s3, kv_ptr, kvs_ptr, row_c, row_s, valid, live, D: tl.constexpr):
    """``K q^T`` ``[BLOCK_N, BLOCK_H]`` with native block-scaled FP4 MMA: q as three NVFP4
    terms, K as stored.

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
    acc = tl.zeros([codes.shape[0], q1.shape[0]], tl.float32)
    if live:
        acc = tl.dot_scaled(codes, ks1, "e2m1", tl.trans(q1), s1, "e2m1")
        acc = tl.dot_scaled(codes, ks2, "e2m1", tl.trans(q2), s2, "e2m1", acc)
        acc = tl.dot_scaled(codes, ks3, "e2m1", tl.trans(q3), s3, "e2m1", acc)
    return acc


@triton.jit
def _bw_split_kernel(q_ptr, kv_ptr, kvs_ptr, bt_ptr, seqlen_ptr, topk_ptr, m_ptr, l_ptr, acc_ptr,
                     H, n_topk, qk_scale,
                     stride_qb, stride_qh, stride_kp, stride_ks, stride_sp, stride_ss, stride_btb, stride_tb,
                     stride_mb, stride_mh, stride_ab, stride_ah, stride_as,
                     D: tl.constexpr, PAGE: tl.constexpr, SPARSE: tl.constexpr, BLOCK_N: tl.constexpr,
                     BLOCK_H: tl.constexpr, NUM_SPLITS: tl.constexpr):
    """One global split of one (sequence, head block), nvfp4: partial (m, l, acc ``[D, BLOCK_H]``)
    like the Triton split kernel's, with the scores from ``_scaled_scores``."""
    b = tl.program_id(0)
    hb = tl.program_id(1)
    split = tl.program_id(2)
    heads = hb * BLOCK_H + tl.arange(0, BLOCK_H)
    hmask = heads < H
    d = tl.arange(0, D)
    offs_n = tl.arange(0, BLOCK_N)
    q = tl.load(q_ptr + b.to(tl.int64) * stride_qb + heads[:, None] * stride_qh + d[None, :],
                mask=hmask[:, None], other=0.0)
    seq_len = tl.load(seqlen_ptr + b)
    m_i = tl.full([BLOCK_H], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_H], tl.float32)
    acc = tl.zeros([D, BLOCK_H], tl.float32)
    start, end = _split_range(split, n_topk, seq_len, SPARSE, NUM_SPLITS, BLOCK_N)
    # q = q1 + q2 + q3 (+ a residual below bf16 precision), each term NVFP4
    qf = q.to(tl.float32)
    q1, s1 = nvfp4_quantize_tile(qf)
    qf = qf - nvfp4_tile_to_f32(q1, s1)
    q2, s2 = nvfp4_quantize_tile(qf)
    qf = qf - nvfp4_tile_to_f32(q2, s2)
    q3, s3 = nvfp4_quantize_tile(qf)
    bt_row = bt_ptr + b.to(tl.int64) * stride_btb
    tk_row = topk_ptr + b.to(tl.int64) * stride_tb
    # the Triton split kernel's hand-made pipeline: V decoded a tile ahead, raw loads before the MMAs
    row_c, row_s, valid_next = _tile_rows(start, end, seq_len, offs_n, bt_row, tk_row, stride_kp, stride_ks,
                                          stride_sp, stride_ss, PAGE, BLOCK_N, SPARSE)
    raw_c, raw_s = _load_kv_raw(kv_ptr, kvs_ptr, row_c, row_s, valid_next, D, 0)
    kv_next = _decode_kv(raw_c, raw_s, 0)
    for n0 in range(start, end, BLOCK_N):
        kv = kv_next
        valid = valid_next
        cur_c = row_c
        cur_s = row_s
        row_c, row_s, valid_next = _tile_rows(n0 + BLOCK_N, end, seq_len, offs_n, bt_row, tk_row, stride_kp,
                                              stride_ks, stride_sp, stride_ss, PAGE, BLOCK_N, SPARSE)
        raw_c, raw_s = _load_kv_raw(kv_ptr, kvs_ptr, row_c, row_s, valid_next, D, 0)
        s = _scaled_scores(q1, s1, q2, s2, q3, s3, kv_ptr, kvs_ptr, cur_c, cur_s, valid, n0 < end, D) * qk_scale
        m_i, l_i, acc = _attend(s, kv, valid, m_i, l_i, acc, True, False)
        kv_next = _decode_kv(raw_c, raw_s, 0)
    acc = acc * _F16_SHIFT  # P @ V ran on the fp16 tile of value * 2^-14
    mo = b.to(tl.int64) * stride_mb + heads * stride_mh + split
    tl.store(m_ptr + mo, m_i, mask=hmask)
    tl.store(l_ptr + mo, l_i, mask=hmask)
    ab = acc_ptr + b.to(tl.int64) * stride_ab + split * stride_as
    tl.store(ab + heads[None, :] * stride_ah + d[:, None], acc, mask=hmask[None, :])
