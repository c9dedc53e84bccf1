"""Search space of the NVFP4 decode attention template (kernel_templates/nvfp4_attention/).

Which kernel runs the global splits is decided first (``USE_DOT_SCALED``: sm_100 only;
``GLUON``: sm_90 only), and the knobs of the other kernels are pinned where they do not
apply (``when=``), so a draw that differs only there is a duplicate, not a new trial.
"""
from __future__ import annotations

from typing import Any

import triton

from kernel_templates._gluon import gluon_on_hopper
from kernel_templates.nvfp4_attention import (D_LATENT, GL_MAX_HEADS, GL_WARPS, KV_DTYPES, Workload, feasible,
                                              gl_ws_launch, n_attended)
from kernel_templates.nvfp4_attention.gluon_kernels import GL_WS_SLOTS
from tuner.runtime.target import Target
from tuner.space import Bool, Choice, Pow2, Space

__all__ = ["SPACE", "constraints", "feasible", "WORKLOADS", "SMALL_WORKLOADS"]


def _nvfp4(c: dict[str, Any], w: Workload, t: Target) -> bool:
    return w.kv_dtype == "nvfp4"


def _triton_kernel(c: dict[str, Any], w: Workload, t: Target) -> bool:
    return not c["GLUON"] and not c["USE_DOT_SCALED"]


def _gl_warps(n: int, c: dict[str, Any], w: Workload, t: Target) -> int:
    """The Gluon kernels' warps follow from their tile: a warpgroup per 64 entries, or (``GL_WS``)
    the default partition's warpgroup per 32 heads."""
    if not c["GLUON"]:
        return n
    return gl_ws_launch(c["BLOCK_H"])["NW"] if c["GL_WS"] else GL_WARPS[c["BLOCK_N"]]


SPACE = Space(
    BLOCK_N=Pow2(64, 128),      # entries per KV tile (the MMA's M under SWAP_AB); 16 / 32 measured 1.2-6.2x slower
    BLOCK_H=Pow2(16, 64),       # heads per program sharing each dequantized tile
    NUM_SPLITS=Pow2(1, 128),    # KV splits per sequence (flash-decoding), + 1 SWA program
    # sm_100: q @ K^T on native block-scaled FP4 MMA (kernel_templates/nvfp4_attention/blackwell.py)
    USE_DOT_SCALED=Bool(when=lambda c, w, t: _nvfp4(c, w, t) and t.cc >= 100),
    # sm_90: the Gluon split kernels (register-A wgmma)
    GLUON=Bool(when=lambda c, w, t: _nvfp4(c, w, t) and gluon_on_hopper(t)),
    # the Triton kernel's: K q^T and V^T P^T so entries / latent are the MMA's M (the others' always)
    SWAP_AB=Bool(when=_triton_kernel, off=True),
    D_CHUNKS=Choice((1, 4), when=_triton_kernel),  # latent column chunks decoded / multiplied one at a time
    # GLUON, dense, 64-entry tiles: warp-specialised (one decoder warpgroup)
    GL_WS=Choice((0, 1), when=lambda c, w, t: c["GLUON"] and w.mode == "dense" and c["BLOCK_N"] == 64),
    GL_WS_A=Choice((0, 1), when=lambda c, w, t: c["GL_WS"] == 1),  # GL_WS: the decoder's K q^T from shared memory
    GL_AHEAD=Choice((2, 4), when=lambda c, w, t: c["GLUON"] and not c["GL_WS"], off=4),  # raw code chunks ahead
    num_warps=Pow2(4, 8, snap=_gl_warps),
    # the launch option every config names; the loops are pipelined by hand (1 and 3 measured slower)
    num_stages=Choice((2,)),
)

_MAX_ACC_REGS = 128   # fp32 accumulator registers per thread before spills are likely
_MAX_REGS = 384       # accumulator + dequantized tile (part of it lives in shared memory)
# Shared memory of the Triton split kernel, calibrated on Triton 3.6 for sm_90 (compiled,
# read from the kernel metadata): about 1056 bytes per tile entry (the one 16-bit decoded
# tile both MMAs read, plus row-sized scraps) and 2048 per head (q in the MMA dtypes of the
# global loop and of the SWA loop). Measured vs this estimate without the slack, all within
# +-2 KB for nvfp4: BN x BH 64x16 100352 (est 100352), 64x32 135168 (133120), 64x64 196608
# (198656), 128x16 167936 (167936), 128x32 204800 (202752), 128x64 262144 (266240); fp8 /
# bf16 are below it (64x16 83968, 64x64 131072).
_SMEM_PER_ENTRY = 1056
_SMEM_PER_HEAD = 2048
_SMEM_SLACK = 8192
# USE_DOT_SCALED (sm_100, BLOCK_N = 128) needs more: measured for sm_100 (GPUTarget("cuda",
# 100, 32), metadata.shared) on Triton 3.6 / 3.9 with the window's program in the same kernel,
# BLOCK_H 16 / 32: 200720 / 233488 | 176144 / 184336. Estimate: a base + 2048 per head (exact
# for 3.6), never below the Triton kernel's: BLOCK_H 16 fits.
_DS_SMEM_BASE = 167952


def constraints(config: dict[str, Any], workload: Workload, target: Target) -> bool:
    """Shared-memory and register estimates, page / tile divisibility, the tiles each kernel
    takes, and splits that only duplicate smaller ones."""
    w = workload
    bn, bh, S, nw = config["BLOCK_N"], config["BLOCK_H"], config["NUM_SPLITS"], config["num_warps"]
    if w.page % bn and bn % w.page:
        return False
    if bh > max(16, triton.next_power_of_2(w.heads)):
        return False
    if config["GLUON"] and not config["GL_WS"] and bh > GL_MAX_HEADS[bn]:
        return False  # the Gluon kernel's tiles; accumulators of 64 to 128 registers a thread
    if config["USE_DOT_SCALED"] and bn != 128:
        return False  # the native block-scaled MMA's M
    # splits: at least one tile each, and no more than it takes to fill the GPU ~4 times
    if S > max(1, triton.cdiv(n_attended(w), bn)):
        return False
    progs = w.batch * triton.cdiv(w.heads, bh)
    if S > 1 and progs * S // 2 >= 4 * target.sms:
        return False
    # registers: fp32 accumulator [BLOCK_H, D] plus the dequantized tile (fp32 while decoding
    # fp8, 16-bit otherwise)
    threads = 32 * nw
    acc_words = bh * D_LATENT
    tile_words = bn * D_LATENT * (1 if w.kv_dtype == "fp8" else 0.5)
    if acc_words / threads > _MAX_ACC_REGS or (acc_words + tile_words) / threads > _MAX_REGS:
        return False
    return smem_estimate(config) <= target.smem


def smem_estimate(config: dict[str, Any]) -> int:
    """Estimated shared memory (bytes) of the split kernel for ``config`` (calibrated above)."""
    bn, bh = config["BLOCK_N"], config["BLOCK_H"]
    if config["GLUON"] and config["GL_WS"]:  # q^T, the ring of decoded tiles, fp32 scores, P^T
        # (Triton 3.6 sm_90, BN x BH: 64 x 64 221484, 64 x 32 176336, 64 x 16 153808)
        return 512 * bh * 2 + GL_WS_SLOTS * bn * 512 * 2 + bn * bh * 6 + 2048
    if config["GLUON"]:  # q^T, the decoded tile, P^T (Triton 3.6 sm_90, BN x BH: 64 x 16 84224, 64 x 32
        # 102912, 128 x 16 152064, 128 x 32 173056, 128 x 64 215040)
        return 512 * bh * 2 + bn * 512 * 2 + bn * bh * 2 + 2048
    smem = bn * _SMEM_PER_ENTRY + bh * _SMEM_PER_HEAD + _SMEM_SLACK
    if config["D_CHUNKS"] > 1:
        # chunked loop (measured like the above, Triton 3.6 sm_90, nvfp4 / fp8): one 16-bit
        # tile's worth of chunk copies + q / P per head + 48 KB; an upper bound of every measured
        # one (64x64: 131072; 128x64: 196608 -> rejected, it spills anyway)
        smem = bn * 1024 + bh * 1024 + 49152
    if config["USE_DOT_SCALED"]:
        smem = max(smem, _DS_SMEM_BASE + bh * _SMEM_PER_HEAD)
    return smem


_BATCH = (1, 4, 16, 64, 256)
_CONTEXT = (8192, 32768, 131072, 524288)
_HEADS = (16, 64)
WORKLOADS = (
    [Workload(b, n, h, kv, "dense") for kv in KV_DTYPES for h in _HEADS for n in _CONTEXT for b in _BATCH]
    + [Workload(b, 131072, h, kv, "sparse") for kv in KV_DTYPES for h in _HEADS for b in (1, 16, 64)]
)
"""The default GPU grid (memory-infeasible points are reported by ``feasible`` and skipped)."""

SMALL_WORKLOADS = [Workload(2, 200, 16, "nvfp4", "dense"), Workload(2, 600, 16, "fp8", "sparse")]
