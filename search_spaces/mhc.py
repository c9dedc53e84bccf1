"""Search space for the mHC kernels (``kernel_templates/mhc.py``).

``BLOCK_T`` tokens per program, ``BLOCK_D`` columns of D per step (all four streams),
``SPLIT_K`` programs sharing one token block's 4D reduction (1 = one fused launch),
``DOT_PRECISION`` how the fn GEMM runs (``fma`` without tensor cores, or ``tl.dot``'s
tf32 / tf32x3 / ieee), ``SYNC`` how a split token block is combined (0: a second launch,
which re-reads the new residual after the whole grid wrote it, from HBM at large T;
1: one launch, the block's last program to finish writes u for its whole rows; 2: one
launch, the block's programs wait for each other and each writes u for its own chunk;
only 0 is admitted for the Triton kernel, see ``constraints``), ``GLUON`` the Gluon mix kernel
on sm_90 (register-A tf32 wgmma, its tile fixed at 64 x 32 with 4 warps, ``GL_FIXED``;
``num_stages`` is its cp.async ring's depth and ``SYNC`` 2 its one-pass form, tested but not
admitted like the Triton kernel's; ``SYNC`` 3 its persistent one pass, admitted, with
``PERSIST`` programs an SM and the u pass ``DEFER_LAG`` % of the grid behind the mix items).
The Sinkhorn layout is not a knob: it is a packed ``[BLOCK_T, 8, 4]`` register tile (pre, post
and the 4 comb rows of a token together), a few hundred flops per token, so the token block
(``BLOCK_T``) is what lays it out.
"""
from __future__ import annotations

from typing import Any

from kernel_templates._gluon import gluon_available
from kernel_templates._host import next_power_of_2
from kernel_templates.mhc import (
    DEFER_OFF, DOT_PRECISIONS, GL_FIXED, TENSOR_CORE_PRECISIONS, Workload, gl_resident, gluon_config_error,
    split_chunk,
)
from tuner.runtime.env import assumed_target_cc, target_cc
from tuner.space import Bool, Choice, Pow2, Space

SPLIT_KS = (1, 2, 4, 8, 10, 14, 16, 20, 28, 32, 40, 56, 64, 80, 112)
"""Split-K factors: the Triton kernels take the powers of two; the GLUON kernel any even
factor whose chunk is whole 32-column steps (``gluon_config_error``): at D = 5120 / 7168 the
powers of two stop at 16 steps (32: 5 / 7 steps, no whole ``XY_GROUP`` 2 pairs), where 20 / 40 /
80 and 28 / 56 / 112 give 8 / 4 / 2 steps (the persistent one pass, ``SYNC`` 3, wants small items)."""

SPACE = Space(
    BLOCK_T=Pow2(1, 64),
    BLOCK_D=Pow2(16, 256),
    SPLIT_K=Choice(SPLIT_KS),  # powers of two; the rest (even, dividing 4096 / 5120 / 7168 into 32-column steps
                               # in pieces of 2, 4 or 8 steps) for the GLUON kernel only (``canonical``)
    DOT_PRECISION=Choice(DOT_PRECISIONS),
    SYNC=Choice((0, 1, 2, 3)),
    num_warps=Pow2(1, 8),
    num_stages=Choice((1, 2, 3, 4)),
    GLUON=Bool(absent=False),
    XY_GROUP=Choice((1, 2), absent=1),  # GLUON: steps whose stream copies go together (128-byte row pieces at 2)
    PERSIST=Choice((1, 2), absent=DEFER_OFF["PERSIST"]),  # GLUON SYNC 3: persistent programs an SM
    DEFER_LAG=Choice((50, 100, 200), absent=DEFER_OFF["DEFER_LAG"]),  # GLUON SYNC 3: u pass lag, % of the
                                  # programs (+ SPLIT_K)
    LAUNCH_PDL=Bool(absent=False),  # GLUON: each launch after fn's reorder a programmatic dependent launch
)

_POST_FIXED = {"SPLIT_K": 1, "DOT_PRECISION": "fma", "SYNC": 0}
"""post has no GEMM: one value of each unused key, so the study never times duplicates."""

# Both estimates are calibrated against sm_90 compiles (Triton 3.6, the H200's; shared
# memory from the compiled metadata, registers / stack from cuobjdump), see
# tests/test_mhc.py::test_default_configs_fit_sm90.
_REGS_PER_THREAD = 128
"""Estimated fp32 values per thread (below) that still compile with at most ~100 B of
stack on CUDA cores (fma / ieee): at 100-116 the seam kernel spilled 0-64 B, at >= 139 it
spilled 0.8-8 KB."""
_REGS_PER_THREAD_TC = 212
"""The same for the transposed tensor-core GEMM (tf32 / tf32x3), whose estimate counts
the 64-row padded fn tiles: up to 210 no stack (seam 16 x 64 at 4 warps, 214 registers;
16 x 128 at 8 warps, 249), from 228 on 8-352 B (64 x 64 at 8 warps, 64 x 32 at 4)."""
_SMEM_BYTES = 220 * 1024
"""Estimate cap; the hardware limit per block on an H100 / H200 SM is 232448 B (227 KB)."""


def smem_estimate(config: dict[str, Any], op: str) -> int:
    """Shared memory (bytes) of the pre / seam kernel; an upper bound on Triton 3.6 sm_90.

    ``fma`` / ``ieee`` (CUDA cores, fn tiles ``[BLOCK_D, 32]``): the loop's loads per stage
    (four fp32 fn tiles, four bf16 stream tiles, and y for the seam) times the
    ``num_stages - 1`` buffers the pipeliner keeps, plus layout-conversion scratch (two fn
    tiles and two fp32 stream tiles; for ``ieee`` at least the four fp32 stream tiles it
    stages as the dot's A operand) and 4 KB for reductions. tf32 / tf32x3 (tensor cores,
    transposed: fn tiles ``[64, BLOCK_D]`` as the A operand, the streams ``[BLOCK_D,
    BLOCK_T]`` fp32 as the B operand in shared memory): ``num_stages`` buffers of the
    loads, plus the four B tiles, plus 4 KB.

    Checked against sm_90 compiles (Triton 3.6, launch specialization as on the GPU) of
    every pre / seam config the constraints admit over the space (1388 distinct compiles,
    largest 196608 B; post needs <= 256 B, the split-K finish kernel <= 4 KB) and of 120
    rejected heavy ones (8 warps, 1-4 stages, BLOCK_T x BLOCK_D up to 64 x 128 / 16 x 256):
    never below the compiled size (D not a multiple of 16 compiles smaller). ``ieee``
    compiles to exactly ``(num_stages - 1) * per_stage + 4 * BLOCK_T * BLOCK_D * 4`` from 2
    stages on (pre 64 x 64, 8 warps, 3 stages: 196608 B, estimate 200704; the two-fn-tile
    scratch alone gave 184320, an under-estimate at every BLOCK_T = 64 ieee config).
    Heaviest tensor-core ones: seam 32 x 64 tf32, 8 warps, 2 stages: 188416 (208896); pre
    16 x 32 tf32, 8 warps, 4 stages: 155648 (159744). The H200 failure, seam 64 x 64
    tf32x3, 8 warps, 3 stages: 245760 (389120, rejected)."""
    bt, bd = config["BLOCK_T"], config["BLOCK_D"]
    streams = (5 if op == "seam" else 4) * bt * bd * 2
    if config["DOT_PRECISION"] in TENSOR_CORE_PRECISIONS:
        return max(1, config["num_stages"]) * (4 * 64 * bd * 4 + streams) + 4 * bd * bt * 4 + 4096
    per_stage = 4 * bd * 32 * 4 + streams
    scratch = 2 * bd * 32 * 4 + 2 * bt * bd * 4
    if config["DOT_PRECISION"] == "ieee":
        scratch = max(scratch, 4 * bt * bd * 4)
    return max(1, config["num_stages"] - 1) * per_stage + scratch + 4096


def reg_estimate(config: dict[str, Any], op: str) -> float:
    """Live fp32 values per thread: the four fn tiles (32 rows, 64 on tensor cores), the
    stream tiles (the seam also holds y and the four new streams), the mix accumulator
    (``[BLOCK_T, 32]``, ``[64, BLOCK_T]`` on tensor cores), the Gram sums, and for ``fma``
    the broadcast product before its reduction. sm_90 (Triton 3.6): seam 64 x 32 at 8
    warps, tf32: 124 estimated, 185 registers, no stack; at 4 warps: 248, 48 B stack."""
    bt, bd = config["BLOCK_T"], config["BLOCK_D"]
    rows = 64 if config["DOT_PRECISION"] in TENSOR_CORE_PRECISIONS else 32
    vals = 4 * bd * rows + (9 if op == "seam" else 4) * bt * bd + bt * rows + bt * 16
    if config["DOT_PRECISION"] == "fma":
        vals += bt * bd * 32
    return vals / (32 * config["num_warps"])


def canonical(config: dict[str, Any], workload: Workload) -> dict[str, Any]:
    """The config the study evaluates for a draw: ``SYNC`` 0 (GLUON also 3, with its own keys
    at their absent values elsewhere), for ``post``
    the keys it has no use for at ``_POST_FIXED``, GLUON off where it cannot run (not sm_90,
    no Gluon, the interpreter) and its fixed tile on where it is drawn; ``constraints``
    rejects every config this changes.

    SYNC 1 / 2 on the Triton kernel (the one-launch split) measured 1.06-1.41x slower than
    SYNC 0 on the H200 (benchmarks/NOTES.md, runs 11, 28), GLUON's one pass (SYNC 2) 1.1-1.4x
    (runs 56-59): not admitted; they stay, tested.
    Both share per-stream counters that a concurrent launch on the same stream would corrupt."""
    c = dict(config)
    if c.get("GLUON") and (workload.op == "post" or not 90 <= target_cc() < 100
                           or not gluon_available(compile_only=assumed_target_cc() is not None)):
        c["GLUON"] = False
    if c.get("GLUON"):
        c.update(GL_FIXED)  # a draw's other tile keys would only duplicate trials
    else:
        if "XY_GROUP" in c:
            c["XY_GROUP"] = 1  # the Gluon kernel's alone
        if "LAUNCH_PDL" in c:
            c["LAUNCH_PDL"] = False  # the Gluon launches' alone
        c["SPLIT_K"] = 1 << (c["SPLIT_K"].bit_length() - 1)  # the Triton kernels: powers of two (rounded down)
    if not (c.get("GLUON") and c.get("SYNC") == 3):
        c["SYNC"] = 0
        c.update({k: v for k, v in DEFER_OFF.items() if k in c})
    if workload.op == "post":
        c.update(_POST_FIXED)
    return c


def constraints(config: dict[str, Any], workload: Workload) -> bool:
    """Cheap pruning before any compile: shapes an MMA accepts, no empty split programs,
    no token block wider than the tokens, register and shared-memory estimates."""
    bt, bd, sk, prec = config["BLOCK_T"], config["BLOCK_D"], config["SPLIT_K"], config["DOT_PRECISION"]
    threads = 32 * config["num_warps"]
    T, D = workload.tokens, workload.dim
    if bt > max(16 if prec != "fma" else 1, next_power_of_2(max(1, T))):
        return False  # lanes with no token
    if canonical(config, workload) != config:
        return False  # SYNC != 0, or a post key off _POST_FIXED (see canonical)
    if workload.op == "post":
        return 6 * bt * bd <= _REGS_PER_THREAD * threads  # 4 streams + y + the new stream
    if config.get("GLUON"):
        # its own fixed tile and ring (<= 4 x 36 KB of shared memory, at most 255 registers: no
        # estimate needed); SYNC 0's partials (a row a split) cap the items like the Triton kernel's,
        # SYNC 3 adds them into one row a token, its counters holding 4096 token blocks, and runs
        # PERSIST programs an SM only where its shared memory holds them (4 stages at XY_GROUP 1 fit
        # once: PERSIST 2 would start half the grid late, the lag sized for all of it; PERSIST 1 runs that)
        n_tb = (T + bt - 1) // bt
        if config.get("SYNC") == 3:
            return (int(config.get("PERSIST", DEFER_OFF["PERSIST"])) <= gl_resident(config)
                    and gluon_config_error(config, D) is None and n_tb <= 4096)
        return gluon_config_error(config, D) is None and n_tb * sk <= 4096
    if prec != "fma" and bt < 16:
        return False  # an MMA needs M >= 16
    if bd > D or (sk - 1) * split_chunk(D, config) >= D:
        return False  # some split program would own no columns
    if sk > 1 and (T + bt - 1) // bt * sk > 4096:
        return False  # far past filling the GPU; partials traffic grows as SPLIT_K^2
    if reg_estimate(config, workload.op) > (_REGS_PER_THREAD_TC if prec in TENSOR_CORE_PRECISIONS
                                            else _REGS_PER_THREAD):
        return False
    return smem_estimate(config, workload.op) <= _SMEM_BYTES


_TOKENS = (1, 8, 64, 256, 1024, 4096, 8192)
WORKLOADS: list[Workload] = (
    [Workload("seam", t, d) for d in (4096, 5120, 7168) for t in _TOKENS]
    + [Workload(op, t, 5120) for op in ("pre", "post") for t in _TOKENS]
)
"""The fused seam over the whole grid; pre and post alone at D = 5120 (V4.1-Flash)."""

SMALL_WORKLOADS: list[Workload] = [Workload("seam", 3, 64), Workload("pre", 5, 48), Workload("post", 3, 80)]
