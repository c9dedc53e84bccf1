"""Search space of the fused MoE routing kernel (kernel_templates/moe_routing.py)."""
from __future__ import annotations

from typing import Any

from kernel_templates._host import cdiv, next_power_of_2
from kernel_templates.moe_routing import PROFILES, Workload, grid_programs, is_direct
from tuner.runtime.target import Target
from tuner.space import Bool, Choice, Pow2, Space


def _tokens_block(value: int, config: dict[str, Any], workload: Workload, target: Target) -> int:
    """A chunk no larger than the tokens need."""
    return min(value, next_power_of_2(max(1, workload.tokens)))


def _chunks_cap(value: int, config: dict[str, Any], workload: Workload, target: Target) -> int:
    """A grid cap no larger than the chunks (fused: than the SM count, rounded up to a power
    of two, that caps the resident grid); the direct kernel's cap is its grid as it is."""
    T = max(1, workload.tokens)
    if is_direct(T, config):
        return value
    value = min(value, next_power_of_2(cdiv(T, config["BLOCK_T"])))
    return min(value, next_power_of_2(target.sms)) if config["FUSED"] else value


SPACE = Space(
    BLOCK_T=Pow2(1, 32, snap=_tokens_block),        # tokens per chunk: the [BLOCK_T, E_PAD] score tile
    FUSED=Bool(),                                   # one launch (direct when T <= BLOCK_T), or two launches
    MAX_PROGRAMS=Pow2(1, 1024, snap=_chunks_cap),   # grid cap; FUSED also caps it at the SM count (direct: the grid)
    num_warps=Pow2(1, 8),
    num_stages=Choice((1, 2)),
)

# Values a thread may hold in one live tile before spills are likely (several such tiles
# are live at once: logits/scores/masked scores, or the pairwise rank tile).
_MAX_PER_THREAD = 64
# Grouped profiles (dsv3) at 64 values a thread hit 255 registers and spill inside the chunk
# loop (Triton 3.6, sm_90: BLOCK_T=8, 1 warp, 60 B); at <= 32 a thread the worst is 8 B
# (2 words) of spills.
_MAX_PER_THREAD_GROUPED = 32
_MAX_DIRECT_PROGRAMS = 32


def constraints(config: dict[str, Any], workload: Workload, target: Target) -> bool:
    """Register-pressure estimates, no grid barrier in the interpreter."""
    prof = PROFILES.get(workload.profile)
    e_pad = next_power_of_2(prof["num_experts"]) if prof else 512
    top_k = prof["top_k"] if prof else 8
    bt, nw = config["BLOCK_T"], config["num_warps"]
    threads = 32 * nw
    tile = bt * e_pad
    if tile > _MAX_PER_THREAD * threads or tile < threads:
        return False
    if prof and prof["n_group"] > 1 and tile > _MAX_PER_THREAD_GROUPED * threads:
        return False  # grouped top-k keeps [BLOCK_T, N_GROUP, GSIZE] key tiles live too
    T = max(1, workload.tokens)
    if is_direct(T, config):
        # one program routes, a warp per token or more tokens (more warps would split a token's
        # experts over warps: bar.sync in every top-k round); the rest only share the padding
        # fill (<= 48K words): no barrier, so the interpreter runs any grid; past 32 programs
        # a share is a store or two a lane
        return nw <= bt and config["MAX_PROGRAMS"] <= _MAX_DIRECT_PROGRAMS
    n_pad = next_power_of_2(bt * top_k)
    if n_pad * n_pad > 2 * _MAX_PER_THREAD * threads:  # the [N, N] same-expert tile (int1)
        return False
    if config["FUSED"] and target.interpret and grid_programs(T, config)[0] > 1:
        return False  # the interpreter runs programs one after another: the barrier would deadlock
    return True


# Powers of four plus the largest: the runtime picks the nearest (log space) in between.
_TOKENS = (1, 4, 16, 64, 256, 1024, 4096, 8192)
LIMITS = {"tokens": (1, 8192)}
WORKLOADS = [Workload(t, p) for p in PROFILES for t in _TOKENS]
SMALL_WORKLOADS = [Workload(3, "dsv3"), Workload(20, "dsv41-flash")]
