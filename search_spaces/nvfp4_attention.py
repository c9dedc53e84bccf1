"""Search space of the NVFP4 decode attention template (kernel_templates/nvfp4_attention.py)."""
from __future__ import annotations

from typing import Any

import triton

from kernel_templates._gluon import gluon_available
from kernel_templates.nvfp4_attention import (D_LATENT, GL_MAX_HEADS, GL_WARPS, GL_WS_SLOTS, KV_DTYPES, Workload, feasible,
                                              gl_ws_error, gl_ws_launch, n_attended)
from tuner.runtime.env import assumed_target_cc, target_cc  # target_cc: this module's name for it
from tuner.space import Bool, Choice, Pow2, Space

__all__ = ["SPACE", "constraints", "feasible", "WORKLOADS", "SMALL_WORKLOADS", "target_cc"]

SPACE = Space(
    BLOCK_N=Pow2(16, 128),      # entries per KV tile (the MMA's M under SWAP_AB)
    BLOCK_H=Pow2(16, 64),       # heads per program sharing each dequantized tile
    NUM_SPLITS=Pow2(1, 128),    # KV splits per sequence (flash-decoding), + 1 SWA program
    DQ_FP16=Bool(),             # nvfp4: 2-op fp16 dequant + FP16 MMA, or fp32 decode + BF16 MMA
    USE_DOT_SCALED=Bool(),      # nvfp4 on sm_100: q @ K^T on native block-scaled FP4 MMA
    SWAP_AB=Bool(),             # compute K q^T and V^T P^T so entries / latent are the MMA's M
    D_CHUNKS=Choice((1, 2, 4)),  # latent column chunks decoded / multiplied one at a time
    GLUON=Bool(absent=False),   # nvfp4 on sm_90: the Gluon split kernel (register-A wgmma)
    GL_AHEAD=Choice((2, 4), absent=4),  # GLUON: 128-column chunks of raw codes loaded ahead (registers)
    GL_WS=Choice((0, 1, 2), absent=0),  # GLUON, dense, 64-entry tiles: decoder warpgroups (warp-specialised)
    GL_WS_A=Choice((0, 1), absent=0),  # GL_WS: the decoders' K q^T reads its decoded chunk from shared memory
    num_warps=Pow2(4, 8),
    num_stages=Choice((1, 2, 3)),
)

SMEM_BYTES = 232448   # opt-in shared memory per block on H100/H200 and B200 (227 KB)
SMS = 132             # H200; only used to tell over-splitting apart
_MAX_ACC_REGS = 128   # fp32 accumulator registers per thread before spills are likely
_MAX_REGS = 384       # accumulator + dequantized tile (part of it lives in shared memory)
# Shared memory of the split kernel, calibrated on Triton 3.6 for sm_90 (compiled, read
# from the kernel metadata): about 1056 bytes per tile entry (the one 16-bit decoded tile
# both MMAs read, plus row-sized scraps) and 2048 per head (q in the MMA dtypes of the
# global loop and of the SWA loop); num_stages no longer matters (the raw tiles are
# pipelined in registers by hand). Measured vs this estimate without the slack, all
# within +-2 KB for nvfp4: BN x BH 64x16 100352 (est 100352), 64x32 135168 (133120),
# 64x64 196608 (198656), 128x16 167936 (167936), 128x32 204800 (202752), 128x64 262144
# (266240); fp8 / bf16 are below it (64x16 83968, 64x64 131072).
_SMEM_PER_ENTRY = 1056
_SMEM_PER_HEAD = 2048
_SMEM_SLACK = 8192
# USE_DOT_SCALED (sm_100 only: BLOCK_N = 128, SWAP_AB) needs more, so it has its own estimate,
# measured for sm_100 (GPUTarget("cuda", 100, 32), split kernel, metadata.shared) on Triton 3.6
# and 3.9, heads 16 / 64, dense and sparse (mode, heads, num_warps change nothing); bytes
# for BLOCK_H 16 / 32, 3.6 | 3.9:
#   DQ_FP16,     num_stages 2-3: 200720 / 233488 | 176144 / 184336
#   DQ_FP16,     num_stages 1:   - / 196616       | - / 163848
#   bf16 decode, num_stages 2-3: 286752 / 311328 | 270368 / 278560
#   bf16 decode, num_stages 1:   not measured (estimated like num_stages 2-3: rejected)
# (BLOCK_H 64 is far above the limit already under the sm_90 estimate). Estimate: the
# largest of the two versions, as a base per decode path + 2048 per head + a term for the
# pipelined (num_stages > 1) raw tiles, and never below the sm_90 estimate; exact for the
# 3.6 DQ_FP16 pipelined numbers, above all the others. Admitted: DQ_FP16 with BLOCK_H 16
# (any num_stages) or 32 (num_stages 1 only).
_DS_SMEM_BASE = {True: 131080, False: 253984}      # by DQ_FP16
_DS_SMEM_PIPELINED = {True: 36872, False: 0}       # by DQ_FP16, added when num_stages > 1


# GLUON fixes these; its tile is BLOCK_N 64 or 128 entries (GL_WARPS: a warpgroup per 64) by BLOCK_H
GL_FIXED = {"DQ_FP16": True, "USE_DOT_SCALED": False, "SWAP_AB": True, "D_CHUNKS": 1, "num_stages": 2}


def canonical(config: dict[str, Any], workload: Workload) -> dict[str, Any]:
    """The config the study evaluates for a draw: the nvfp4-only knobs off for other KV
    dtypes (they would only duplicate trials), and the native block-scaled MMA off where the
    target has none (below sm_100); ``constraints`` rejects every config this changes."""
    c = dict(config)
    if workload.kv_dtype != "nvfp4":
        c.update(DQ_FP16=False, USE_DOT_SCALED=False, GLUON=False)
    if target_cc() < 100:
        c["USE_DOT_SCALED"] = False
    if not 90 <= target_cc() < 100 or not gluon_available(compile_only=assumed_target_cc() is not None):
        c["GLUON"] = False  # wgmma (sm_90 only), never under the interpreter
    if c.get("GLUON"):
        # the Gluon kernel fixes the other knobs (its SWA window's program has a tile of its own)
        c.update(GL_FIXED)
        c["num_warps"] = GL_WARPS.get(c["BLOCK_N"], c["num_warps"])
        if c.get("GL_WS"):  # the warp-specialised kernel: its default partition's warps; no raw chunks ahead
            c["num_warps"] = gl_ws_launch(c["BLOCK_H"], c["GL_WS"])["NW"]
            c["GL_AHEAD"] = 4
        elif "GL_WS_A" in c:
            c["GL_WS_A"] = 0
    else:
        for knob, off in (("GL_AHEAD", 4), ("GL_WS", 0), ("GL_WS_A", 0)):
            if knob in c:
                c[knob] = off
    return c


def constraints(config: dict[str, Any], workload: Workload) -> bool:
    """Shared-memory and register estimates, page / tile divisibility, variants that only
    make sense for one KV dtype or GPU, and splits that only duplicate smaller ones."""
    w = workload
    bn, bh, S, nw = config["BLOCK_N"], config["BLOCK_H"], config["NUM_SPLITS"], config["num_warps"]
    nvfp4 = w.kv_dtype == "nvfp4"
    if w.page % bn and bn % w.page:
        return False
    if bh > max(16, triton.next_power_of_2(w.heads)):
        return False
    if canonical(config, w) != config:
        return False  # see canonical
    if nvfp4 and config["DQ_FP16"] and bn < 32:
        # Wrong results on the H200 (Triton 3.6) while the interpreter agrees with the
        # reference: benchmarks/results/nvfp4_debug-20261129.log. Cause not found yet.
        return False
    if config.get("GL_WS"):
        if gl_ws_error(config, w.mode == "sparse"):
            return False
    elif config.get("GLUON") and bh > GL_MAX_HEADS.get(bn, 0):
        return False  # the Gluon kernel's tiles; accumulators of 64 to 128 registers a thread
    if config["D_CHUNKS"] > 1 and config["USE_DOT_SCALED"]:
        return False  # the chunked loop has no dot_scaled path
    if config["USE_DOT_SCALED"]:
        # native tcgen05 block-scaled MMA: sm_100+, M = BLOCK_N = 128 entries (SWAP_AB);
        # the interpreter decodes E4M3 block scales of dot_scaled as UE8M0, so never there
        if not config["SWAP_AB"] or bn != 128:
            return False
    # splits: at least one tile each, and no more than it takes to fill the GPU ~4 times
    n = n_attended(w)
    if S > max(1, triton.cdiv(n, bn)):
        return False
    progs = w.batch * triton.cdiv(w.heads, bh)
    if S > 1 and progs * S // 2 >= 4 * SMS:
        return False
    # registers: fp32 accumulator [BLOCK_H, D] plus the dequantized tile (fp32 while decoding
    # on the generic path, 16-bit otherwise)
    threads = 32 * nw
    acc_words = bh * D_LATENT
    wide = nvfp4 and not config["DQ_FP16"] or w.kv_dtype == "fp8"
    tile_words = bn * D_LATENT * (1 if wide else 0.5)
    if acc_words / threads > _MAX_ACC_REGS or (acc_words + tile_words) / threads > _MAX_REGS:
        return False
    # shared memory (calibrated above); the SMEM_BYTES limit is the opt-in maximum per block
    if smem_estimate(config) > SMEM_BYTES:
        return False
    return True


def smem_estimate(config: dict[str, Any]) -> int:
    """Estimated shared memory (bytes) of the split kernel for ``config`` (calibrated above)."""
    bn, bh = config["BLOCK_N"], config["BLOCK_H"]
    if config.get("GLUON") and config.get("GL_WS"):  # q^T, the ring of decoded tiles, fp32 scores, P^T
        # (Triton 3.6 sm_90, BN x BH: 64 x 64 221484, 64 x 32 176336, 64 x 16 153808)
        return 512 * bh * 2 + GL_WS_SLOTS * bn * 512 * 2 + bn * bh * 6 + 2048
    if config.get("GLUON"):  # q^T, the decoded tile, P^T (Triton 3.6 sm_90, BN x BH: 64 x 16 84224, 64 x 32
        # 102912, 128 x 16 152064, 128 x 32 173056, 128 x 64 215040)
        return 512 * bh * 2 + bn * 512 * 2 + bn * bh * 2 + 2048
    smem = bn * _SMEM_PER_ENTRY + bh * _SMEM_PER_HEAD + _SMEM_SLACK
    if config.get("D_CHUNKS", 1) > 1:
        # chunked loop (measured like the above, Triton 3.6 sm_90, nvfp4 / fp8, 33 configs): one
        # 16-bit tile's worth of chunk copies + q / P per head + 48 KB; an upper bound of every
        # measured one (e.g. 64x16 mma.sync: 114688 with 2 chunks, 98304 with 4; 64x64: 131072;
        # SWAP_AB 64x16: 51200 / 34816; 128x64: 196608 -> rejected, it spills anyway)
        smem = bn * 1024 + bh * 1024 + 49152
    if config["USE_DOT_SCALED"]:
        dq = bool(config["DQ_FP16"])
        ds = _DS_SMEM_BASE[dq] + bh * _SMEM_PER_HEAD + (_DS_SMEM_PIPELINED[dq] if config["num_stages"] > 1 else 0)
        smem = max(smem, ds)
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
