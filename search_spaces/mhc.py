"""Search space for the mHC kernels (``kernel_templates/mhc.py``).

``BLOCK_T`` tokens per program, ``BLOCK_D`` columns of D per step (all four streams),
``SPLIT_K`` programs sharing one token block's 4D reduction (1 = one fused launch),
``DOT_PRECISION`` how the fn GEMM runs (``fma`` without tensor cores, or ``tl.dot``'s
tf32 / tf32x3 / ieee). The Sinkhorn layout is not a knob: it is a packed
``[BLOCK_T, 8, 4]`` register tile (pre, post and the 4 comb rows of a token together),
a few hundred flops per token, so the token block (``BLOCK_T``) is what lays it out.
"""
from __future__ import annotations

from typing import Any

from kernel_templates.mhc import DOT_PRECISIONS, Workload, split_chunk
from tuner.space import Choice, Pow2, Space

SPACE = Space(
    BLOCK_T=Pow2(1, 64),
    BLOCK_D=Pow2(16, 256),
    SPLIT_K=Pow2(1, 64),
    DOT_PRECISION=Choice(DOT_PRECISIONS),
    num_warps=Pow2(1, 8),
    num_stages=Choice((1, 2, 3, 4)),
)

_POST_FIXED = {"SPLIT_K": 1, "DOT_PRECISION": "fma"}
"""post has no GEMM: one value of each unused key, so the study never times duplicates."""

_REGS_PER_THREAD = 160  # fp32 live values a thread may hold before spilling (of 255)
_SMEM_BYTES = 200 * 1024  # under the 227 KB of an H100 / H200 / B200 SM


def _pow2_ceil(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


def constraints(config: dict[str, Any], workload: Workload) -> bool:
    """Cheap pruning before any compile: shapes an MMA accepts, no empty split programs,
    no token block wider than the tokens, register and shared-memory estimates."""
    bt, bd, sk, prec = config["BLOCK_T"], config["BLOCK_D"], config["SPLIT_K"], config["DOT_PRECISION"]
    threads = 32 * config["num_warps"]
    T, D = workload.tokens, workload.dim
    if bt > max(16 if prec != "fma" else 1, _pow2_ceil(T)):
        return False  # lanes with no token
    if workload.op == "post":
        if any(config[k] != v for k, v in _POST_FIXED.items()):
            return False
        return 6 * bt * bd <= _REGS_PER_THREAD * threads  # 4 streams + y + the new stream
    if prec != "fma" and bt < 16:
        return False  # an MMA needs M >= 16
    if bd > D or (sk - 1) * split_chunk(D, config) >= D:
        return False  # some split program would own no columns
    if sk > 1 and (T + bt - 1) // bt * sk > 4096:
        return False  # far past filling the GPU; partials traffic grows as SPLIT_K^2
    # live fp32 values: 4 stream tiles + y, the fn tile, the accumulators
    regs = 5 * bt * bd + bd * 32 + bt * 32 + bt * 16
    if prec == "fma":
        regs += bt * bd * 32  # the broadcast product before the reduction
    if regs > _REGS_PER_THREAD * threads:
        return False
    if prec != "fma":
        smem = (bt * bd + bd * 32) * 4 * max(1, config["num_stages"])
        if smem > _SMEM_BYTES:
            return False
    return True


_TOKENS = (1, 8, 64, 256, 1024, 4096, 8192)
WORKLOADS: list[Workload] = (
    [Workload("seam", t, d) for d in (4096, 5120, 7168) for t in _TOKENS]
    + [Workload(op, t, 5120) for op in ("pre", "post") for t in _TOKENS]
)
"""The fused seam over the whole grid; pre and post alone at D = 5120 (V4.1-Flash)."""

SMALL_WORKLOADS: list[Workload] = [Workload("seam", 3, 64), Workload("pre", 5, 48), Workload("post", 3, 80)]
