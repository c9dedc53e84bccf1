"""Search space of the fused MoE routing kernel (kernel_templates/moe_routing.py)."""
from __future__ import annotations

from typing import Any

import triton

from kernel_templates.moe_routing import PROFILES, Workload, grid_programs, is_direct
from tuner.runtime.env import interpreting
from tuner.space import Bool, Choice, Pow2, Space

SPACE = Space(
    BLOCK_T=Pow2(1, 32),         # tokens per chunk: the [BLOCK_T, E_PAD] score tile
    MAX_PROGRAMS=Pow2(1, 1024),  # grid cap; FUSED also caps it at the SM count (direct: the grid)
    FUSED=Bool(),                # one launch (direct when T <= BLOCK_T), or two launches
    num_warps=Pow2(1, 8),
    num_stages=Choice((1, 2)),
)

# Values a thread may hold in one live tile before spills are likely (several such tiles
# are live at once: logits/scores/masked scores, or the pairwise rank tile).
_MAX_PER_THREAD = 64
# Grouped profiles (dsv3) at 64 values a thread hit 255 registers and spill inside the chunk
# loop (Triton 3.6, sm_90: BLOCK_T=8, 1 warp, 60 B); at <= 32 a thread the worst is 8 B
# (2 words) of spills. See benchmarks/NOTES.md "engram / moe: compile-level check".
_MAX_PER_THREAD_GROUPED = 32
_MAX_DIRECT_PROGRAMS = 32


def canonical(config: dict[str, Any], workload: Workload) -> dict[str, Any]:
    """The config the study evaluates for a draw: chunks no larger than the tokens need and
    grid caps no larger than the chunks (or, fused, the 256 the SM count caps them at).
    Larger ones only duplicate these: ``constraints`` rejects every config this changes."""
    c = dict(config)
    T = max(1, workload.tokens)
    c["BLOCK_T"] = min(c["BLOCK_T"], triton.next_power_of_2(T))
    if not is_direct(T, c):
        c["MAX_PROGRAMS"] = min(c["MAX_PROGRAMS"], triton.next_power_of_2(triton.cdiv(T, c["BLOCK_T"])))
        if c["FUSED"]:
            c["MAX_PROGRAMS"] = min(c["MAX_PROGRAMS"], 256)
    return c


def constraints(config: dict[str, Any], workload: Workload) -> bool:
    """Register-pressure estimates, no duplicate grids, no grid barrier in the interpreter."""
    prof = PROFILES.get(workload.profile)
    e_pad = triton.next_power_of_2(prof["num_experts"]) if prof else 512
    top_k = prof["top_k"] if prof else 8
    bt, nw = config["BLOCK_T"], config["num_warps"]
    threads = 32 * nw
    tile = bt * e_pad
    if tile > _MAX_PER_THREAD * threads or tile < threads:
        return False
    if prof and prof["n_group"] > 1 and tile > _MAX_PER_THREAD_GROUPED * threads:
        return False  # grouped top-k keeps [BLOCK_T, N_GROUP, GSIZE] key tiles live too
    T = max(1, workload.tokens)
    if canonical(config, workload) != config:
        return False  # larger chunks or caps than the work needs: a duplicate (see canonical)
    if is_direct(T, config):
        # one program routes, a warp per token or more tokens (more warps would split a token's
        # experts over warps: bar.sync in every top-k round); the rest only share the padding
        # fill (<= 48K words): no barrier, so the interpreter runs any grid; past 32 programs
        # a share is a store or two a lane
        return nw <= bt and config["MAX_PROGRAMS"] <= _MAX_DIRECT_PROGRAMS
    n_pad = triton.next_power_of_2(bt * top_k)
    if n_pad * n_pad > 2 * _MAX_PER_THREAD * threads:  # the [N, N] same-expert tile (int1)
        return False
    if config["FUSED"] and interpreting() and grid_programs(T, config)[0] > 1:
        return False  # the interpreter runs programs one after another: the barrier would deadlock
    return True


# Powers of four plus the largest: the runtime picks the nearest (log space) in between.
_TOKENS = (1, 4, 16, 64, 256, 1024, 4096, 8192)
LIMITS = {"tokens": (1, 8192)}
WORKLOADS = [Workload(t, p) for p in PROFILES for t in _TOKENS]
SMALL_WORKLOADS = [Workload(3, "dsv3"), Workload(20, "dsv41-flash")]
