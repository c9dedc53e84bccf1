"""Search space for the mHC kernels (``kernel_templates/mhc``).

``GLUON`` the Gluon mix kernel on sm_90 (pre / seam; its tile fixed at 64 x 32 with 4 warps,
``GL_FIXED``), ``BLOCK_T`` tokens per program, ``BLOCK_D`` columns of D per step (all four
streams), ``SPLIT_K`` programs sharing one token block's 4D reduction (1 = one fused launch),
``num_stages`` the Triton pipeline's depth or the Gluon kernel's cp.async ring, ``XY_GROUP``
the Gluon kernel's steps whose stream copies go together (128-byte row pieces at 2).
``num_warps`` is post's alone: pre / seam run 4 (2 and 8 warps measured 1.29x or more
slower, median 2.8x, than the best 4-warp config at every workload tried on an H200). The Sinkhorn layout is not a knob: it is a packed
``[BLOCK_T, 8, 4]`` register tile (pre, post and the 4 comb rows of a token together), a
few hundred flops per token, so the token block is what lays it out.
"""
from __future__ import annotations

from typing import Any

from kernel_templates._gluon import gluon_on_hopper
from kernel_templates._host import cdiv, next_power_of_2
from kernel_templates.mhc import GL_BLOCK_D, GL_BLOCK_T, Workload, gluon_config_error, split_chunk
from tuner.runtime.target import Target
from tuner.space import Bool, Choice, Pow2, Space


def _mixes(c: dict[str, Any], w: Workload, t: Target) -> bool:
    return w.op != "post"


def _triton(c: dict[str, Any], w: Workload, t: Target) -> bool:
    return not c["GLUON"]


SPACE = Space(
    GLUON=Bool(when=lambda c, w, t: w.op != "post" and gluon_on_hopper(t)),
    BLOCK_T=Pow2(1, 64, when=_triton, off=GL_BLOCK_T),
    BLOCK_D=Pow2(16, 256, when=_triton, off=GL_BLOCK_D),
    SPLIT_K=Pow2(1, 64, when=_mixes, off=1),
    num_warps=Pow2(1, 8, when=lambda c, w, t: w.op == "post", off=4),
    num_stages=Choice((2, 3, 4), when=_mixes, off=2),  # post has no loop; 1 stage was 1.7-2.7x slower
    XY_GROUP=Choice((1, 2), when=lambda c, w, t: c["GLUON"]),
)

# Both estimates are calibrated against sm_90 compiles (Triton 3.6, the H200's; shared
# memory from the compiled metadata, registers / stack from cuobjdump), see
# tests/test_mhc.py::test_default_configs_fit_sm90.
_REGS_PER_THREAD = 128
"""post: estimated fp32 values per thread that still compile without spilling."""
_REGS_PER_THREAD_TC = 212
"""pre / seam (the transposed tf32 GEMM, counting the 64-row padded fn tiles): up to 210 no
stack (seam 16 x 64 at 4 warps, 214 registers), from 228 on 8-352 B (64 x 32 at 4 warps)."""
_SMEM_BYTES = 220 * 1024
"""Estimate cap; the hardware limit per block on an H100 / H200 SM is 232448 B (227 KB)."""


def smem_estimate(config: dict[str, Any], op: str) -> int:
    """Shared memory (bytes) of the Triton pre / seam kernel; an upper bound on Triton 3.6 sm_90:
    ``num_stages`` buffers of the loop's loads (fn tiles ``[64, BLOCK_D]`` fp32 as the MMA's A
    operand, the bf16 streams, and y for the seam), plus the four ``[BLOCK_D, BLOCK_T]`` fp32
    B tiles, plus 4 KB for reductions. Checked against every admitted config's compile (largest:
    seam 32 x 64, 8 warps, 2 stages: 188416 B, estimate 208896); the seam at 64 x 64 with 8
    warps and 3 stages needed more than a block may have on an H200 (rejected)."""
    bt, bd = config["BLOCK_T"], config["BLOCK_D"]
    streams = (5 if op == "seam" else 4) * bt * bd * 2
    return config["num_stages"] * (4 * 64 * bd * 4 + streams) + 4 * bd * bt * 4 + 4096


def reg_estimate(config: dict[str, Any], op: str) -> float:
    """Live fp32 values per thread of the Triton pre / seam kernel: the four fn tiles (64 rows),
    the stream tiles (the seam also holds y and the four new streams), the ``[64, BLOCK_T]``
    accumulator and the Gram sums."""
    bt, bd = config["BLOCK_T"], config["BLOCK_D"]
    vals = 4 * bd * 64 + (9 if op == "seam" else 4) * bt * bd + bt * 64 + bt * 16
    return vals / (32 * config["num_warps"])


def constraints(config: dict[str, Any], workload: Workload, target: Target) -> bool:
    """Cheap pruning before any compile: shapes an MMA accepts, no empty split programs,
    no token block wider than the tokens, register and shared-memory estimates."""
    bt, bd, sk = config["BLOCK_T"], config["BLOCK_D"], config["SPLIT_K"]
    T, D = workload.tokens, workload.dim
    if workload.op == "post":  # 4 streams + y + the new stream in registers
        return bt <= next_power_of_2(max(1, T)) and 6 * bt * bd <= _REGS_PER_THREAD * 32 * config["num_warps"]
    if config["GLUON"]:  # its own fixed tile and ring (<= 4 x 36 KB, at most 255 registers)
        return gluon_config_error(config, D) is None and cdiv(T, GL_BLOCK_T) * sk <= 4096
    if not 16 <= bt <= max(16, next_power_of_2(max(1, T))):
        return False  # an MMA needs N >= 16 tokens; past that, lanes with no token
    if bd > D or (sk - 1) * split_chunk(D, config) >= D:
        return False  # some split program would own no columns
    if sk > 1 and cdiv(T, bt) * sk > 4096:
        return False  # far past filling the GPU; partials traffic grows as SPLIT_K^2
    if reg_estimate(config, workload.op) > _REGS_PER_THREAD_TC:
        return False
    return smem_estimate(config, workload.op) <= min(_SMEM_BYTES, target.smem)


_TOKENS = (1, 8, 64, 256, 1024, 4096, 8192)
WORKLOADS: list[Workload] = (
    [Workload("seam", t, d) for d in (4096, 5120, 7168) for t in _TOKENS]
    + [Workload(op, t, 5120) for op in ("pre", "post") for t in _TOKENS]
)
"""The fused seam over the whole grid; pre and post alone at D = 5120 (V4.1-Flash)."""

SMALL_WORKLOADS: list[Workload] = [Workload("seam", 3, 64), Workload("pre", 5, 48), Workload("post", 3, 80)]
