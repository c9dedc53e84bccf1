"""Search space of the Engram lookup kernel (kernel_templates/engram/lookup.py).

``ROWS`` table rows per loop step of a program (the ``[ROWS, 256]`` tile),
``GRID_SM_FRAC`` the persistent grid as a fraction of the SMs (< 1 leaves SMs to the main
stream while a prefetch runs; > 1 puts several programs on an SM for bytes in flight),
``VEC`` the load width in bytes (rows are 264 = 8*33 B apart: 8 at most; 16 for the
256-B rows of ``host_split``), ``DEDUP`` sort the rows first and read each distinct row
once per tile, ``CHUNK_ROWS`` rows per launch (0: one launch; chunks of whole tokens let
main-stream kernels in between launches), ``STREAM`` table reads evict-first and output
stores streaming (``.cs``): the lookup's bytes pass through the L2 without displacing what
kernels beside it keep there.
"""
from __future__ import annotations

from typing import Any

from kernel_templates._host import next_power_of_2
from kernel_templates.engram import MAX_TABLE_ROWS, MAX_TOKENS, Workload
from kernel_templates.engram.hashing import MIN_TABLE_ROWS, ROWS_PER_TOKEN
from kernel_templates.engram.lookup import GRID_SM_FRACS, grid_programs
from kernel_templates.engram.table import D, SPLIT_PLACEMENTS
from tuner.runtime.target import Target
from tuner.space import Bool, Choice, Pow2, Space


def _rows(workload: Workload) -> int:
    return max(1, workload.tokens) * ROWS_PER_TOKEN


def _whole_chunk(value: int, config: dict[str, Any], workload: Workload, target: Target) -> int:
    """A chunk as large as the rows is no chunk."""
    return 0 if value and value >= _rows(workload) else value


def _smallest_frac(value: float, config: dict[str, Any], workload: Workload, target: Target) -> float:
    """The smallest grid fraction giving the same grid on ``target``'s SMs."""
    n = _rows(workload)
    per_launch = min(config["CHUNK_ROWS"] or n, n)
    progs = grid_programs(per_launch, dict(config, GRID_SM_FRAC=value), target.sms)
    return min(f for f in GRID_SM_FRACS if grid_programs(per_launch, dict(config, GRID_SM_FRAC=f), target.sms) == progs)


SPACE = Space(
    ROWS=Pow2(2, 64),
    VEC=Pow2(1, 16),
    DEDUP=Bool(),
    CHUNK_ROWS=Choice((0, 6144, 24576, 98304), snap=_whole_chunk),  # 0, or 256 / 1024 / 4096 tokens per launch
    GRID_SM_FRAC=Choice(GRID_SM_FRACS, snap=_smallest_frac),
    STREAM=Bool(),
    num_warps=Pow2(1, 16),
    num_stages=Choice((1, 2, 3)),
)

_MAX_PER_THREAD = 64  # fp32 values of the decoded tile a thread holds (plus bytes and bf16 copies)
# DEDUP tiles of 32+ rows (4 or 8 warps) abort in Triton 3.6's TritonGPURemoveLayoutConversions
# ("'arith.select' op expected condition type to have the same shape": the where on the row
# mask ends up with two slice layouts); Triton 3.9 compiles them. Checked for sm_90, 2026-11-29.
_MAX_DEDUP_ROWS = 16


def constraints(config: dict[str, Any], workload: Workload, target: Target) -> bool:
    """Register estimate, whole vectors per thread, loads no wider than the rows' alignment."""
    rows, vec, nw = config["ROWS"], config["VEC"], config["num_warps"]
    threads = 32 * nw
    tile = rows * D
    if tile > _MAX_PER_THREAD * threads or tile < threads * vec:
        return False
    if vec > 8 and workload.placement not in SPLIT_PLACEMENTS:
        return False  # 264-B rows are 8-B aligned at best
    if config["DEDUP"] and rows > _MAX_DEDUP_ROWS:
        return False  # Triton 3.6 (the H200 host's) fails to compile these (see _MAX_DEDUP_ROWS)
    return rows <= max(2, next_power_of_2(_rows(workload)))  # else lanes with no row


_TOKENS = (1, 16, 64, 256, 4096, 16384)
_TABLE_ROWS = (8 << 20, 32 << 20)
LIMITS = {"tokens": (1, MAX_TOKENS), "table_rows": (MIN_TABLE_ROWS, MAX_TABLE_ROWS)}
WORKLOADS = [Workload(t, p, r) for r in _TABLE_ROWS for p in ("hbm", "host", "host_thp", "host_split") for t in _TOKENS]
SMALL_WORKLOADS = [Workload(3, "hbm", 4096), Workload(37, "host_thp", 8192)]
