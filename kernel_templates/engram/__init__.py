"""Engram: n-gram hashing, FP8 table lookup from GPU or host memory, async prefetch.

The public API: ``EngramTable`` (the table and its placement,
``table``), ``engram_hash`` (token ids -> 24 rows per token, ``hashing``), ``engram_lookup``
(rows -> dequantized ``[..., 256]`` bf16, the tuned kernel, ``lookup``) and
``EngramPrefetcher`` (lookups on a side stream, ``prefetch``). ``SPEC`` tunes the lookup
over (tokens, placement, table rows); the PyTorch reference is in ``reference``.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import torch

from kernel_templates._host import next_power_of_2
from kernel_templates.engram.hashing import MIN_TABLE_ROWS, ROWS_PER_TOKEN, engram_hash, make_params, token_shape, zipf_tokens
from kernel_templates.engram.lookup import GRID_SM_FRACS, check_config, grid_programs, launch, workload_of
from kernel_templates.engram.prefetch import EngramPrefetcher, PrefetchHandle, prefetch_config
from kernel_templates.engram.reference import reference, reference_hash
from kernel_templates.engram.table import D, N_SCALES, PLACEMENTS, ROW_BYTES, SPLIT_PLACEMENTS, EngramTable, shared_table
from tuner import runtime
from tuner.runtime.target import Target
from tuner.spec import KernelSpec
from tuner.verify import assert_close

__all__ = ["EngramTable", "EngramPrefetcher", "PrefetchHandle", "engram_hash", "engram_lookup", "prefetch_config",
           "Workload", "SPEC", "default_config", "feasible", "make_params", "zipf_tokens"]


# The kernels take row counts and table rows as int32.
MAX_TOKENS = (2**31 - 1) // ROWS_PER_TOKEN
MAX_TABLE_ROWS = 2**31 - 1


@dataclass(frozen=True)
class Workload:
    """One lookup shape: tokens (24 rows each), table placement and table rows."""

    tokens: int
    placement: str
    table_rows: int


def engram_lookup(table: EngramTable, rows: torch.Tensor, config: dict[str, Any] | None = None) -> torch.Tensor:
    """Rows ``[..., 24]`` (any shape) -> dequantized ``[..., 256]`` bf16 on the table's device.

    ``config=None`` takes the tuned config for (tokens, placement, table rows) from the
    active pack, or the default.
    """
    if not isinstance(table, EngramTable):
        raise TypeError(f"table must be an EngramTable, got {type(table).__name__}")
    if not isinstance(rows, torch.Tensor):
        raise TypeError(f"rows must be a torch.Tensor [..., 24], got {type(rows).__name__}")
    if config is None:
        config = runtime.select("engram", workload_of(table, rows), Target.of(table.device)).config
    return launch(config=config, table=table, rows=rows)


def make_inputs(workload: Workload, device: str = "cpu", seed: int = 0) -> dict[str, Any]:
    """A random table in the workload's placement and the rows of Zipfian tokens. ``seed``
    draws the tokens and the hash parameters; the table's values are the same for every
    seed and token count: one table per rows, placement and device (``shared_table``), so a
    study's two seeds and the grid's workloads that differ only in tokens (consecutive in its
    order) read one table instead of building their own (a 33M-row host table costs seconds
    to allocate, pin and fill, more than the trials that read it)."""
    p = make_params(workload.table_rows, seed)
    tokens = zipf_tokens(token_shape(workload.tokens), seed)
    rows = reference_hash(tokens, p["comp"], p["multipliers"], p["primes"], p["offsets"], pad_id=p["pad_id"])
    return dict(table=shared_table(workload.table_rows, workload.placement, device), rows=rows.to(device))


def default_config(workload: Workload, target: Target) -> dict[str, Any]:
    """H200 defaults from a sweep (``benchmarks/engram_sweep.py``). HBM: 32-row tiles, 8 warps,
    up to 16 programs per SM (bytes in flight: T=4096 31.0 -> 24.1 us, 74% of HBM). Host:
    PCIe-bound; 64-row tiles, 16 warps, a quarter of the SMs gather as fast as all of them
    (T=256 45.2 us for 33 to 264 programs), leaving the rest to the main stream; dedup
    once T is large enough for repeats."""
    n = max(1, workload.tokens) * ROWS_PER_TOKEN
    host = workload.placement != "hbm"
    rows = min(64 if host else 32, max(2, next_power_of_2(n)))
    vec = 16 if workload.placement in SPLIT_PLACEMENTS else 8  # 256-B rows: 16-B loads
    cfg = dict(ROWS=rows, VEC=vec, DEDUP=host and workload.tokens >= 4096, GRID_SM_FRAC=0.25 if host else 16.0,
               CHUNK_ROWS=0, STREAM=False, num_warps=max(1, min(16 if host else 8, rows // 4)),
               num_stages=3 if host else 1)
    if cfg["DEDUP"]:  # Triton 3.6 compiles DEDUP tiles of at most 16 rows (search_spaces/engram.py)
        cfg.update(ROWS=16, num_warps=4)
    # The smallest fraction giving the same grid: small T needs fewer programs than SMs.
    want = grid_programs(n, cfg, target.sms)
    cfg["GRID_SM_FRAC"] = min(f for f in GRID_SM_FRACS if grid_programs(n, dict(cfg, GRID_SM_FRAC=f), target.sms) == want
                              and f <= cfg["GRID_SM_FRAC"])
    return cfg


def cost(workload: Workload) -> tuple[float, float]:
    """The floor: 264 B read + 512 B written per row; one multiply per value."""
    n = workload.tokens * ROWS_PER_TOKEN
    return float(n * ROW_BYTES + n * D * 2), float(n * D)


def feasible(workload: Workload, target: Target | None = None) -> str | None:
    """None when the workload can run on ``target`` (None: the device at hand), else why not:
    an unknown placement, tokens or table rows out of the kernels' range, or a table larger
    than the memory it would live in."""
    if workload.placement not in PLACEMENTS:
        return f"unknown placement {workload.placement!r} (known: {', '.join(PLACEMENTS)})"
    if not 1 <= workload.tokens <= MAX_TOKENS:
        return f"tokens must be in [1, {MAX_TOKENS}], got {workload.tokens}"
    if not MIN_TABLE_ROWS <= workload.table_rows <= MAX_TABLE_ROWS:
        return (f"table_rows must be in [{MIN_TABLE_ROWS}, {MAX_TABLE_ROWS}] (24 distinct prime sub-tables, "
                f"int32 row ids), got {workload.table_rows}")
    need = workload.table_rows * ROW_BYTES
    target = target or Target.of()
    if target.interpret or not torch.cuda.is_available():
        return None if need <= 256 << 20 else f"a {need / 1e9:.1f} GB table is too big for the interpreter"
    if workload.placement == "hbm":
        budget = int(0.6 * torch.cuda.get_device_properties(torch.cuda.current_device()).total_memory)
    else:
        budget = int(0.4 * os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    return None if need <= budget else f"needs {need / 1e9:.1f} GB for the table, budget {budget / 1e9:.1f} GB"


def verify(out: torch.Tensor, ref: torch.Tensor, inputs: dict[str, Any]) -> None:
    """bf16 output equal to the fp32 reference: every value is exactly representable."""
    if out.dtype != torch.bfloat16:
        raise AssertionError(f"embeddings: dtype {out.dtype}, want bfloat16")
    assert_close("embeddings", out.float().cpu(), ref.float().cpu(), atol=0.0)


def _dequant_torch(g: torch.Tensor) -> torch.Tensor:
    v = g[:, :D].view(torch.float8_e4m3fn).float().view(-1, N_SCALES, 32)
    s = torch.exp2(g[:, D:].float() - 127.0)
    return (v * s[..., None]).view(-1, D).to(torch.bfloat16)


def _torch_eager(table: EngramTable, rows: torch.Tensor) -> torch.Tensor:
    """What a user writes first. HBM: index + dequant on the GPU. Host: ``index_select`` on
    the CPU, copy to the GPU, dequant there (host-synchronizing, so not graph-capturable)."""
    flat = rows.reshape(-1)
    if table.placement == "hbm" or table.device.type != "cuda":
        g = table.gather_packed(flat)
    elif table.split:  # values from the host, scales from HBM
        c = table.codes.index_select(0, flat.cpu()).to(table.device, non_blocking=True)
        g = torch.cat([c, table.scales.index_select(0, flat)], dim=1)
    else:
        g = table.data.index_select(0, flat.cpu()).to(table.device, non_blocking=True)
    return _dequant_torch(g).view(*rows.shape, D)


baselines = {"torch_eager": _torch_eager}

runtime.register_defaults("engram", lambda wd, target: default_config(Workload(**wd), target))
runtime.register_check("engram", lambda c: check_config(c, split=True))  # the launcher checks VEC again for the table's layout

SPEC = KernelSpec(
    name="engram", workload=Workload, make_inputs=make_inputs, reference=reference, launch=launch,
    default_config=default_config, cost=cost, verify=verify, baselines=baselines, launch_bound=True,
    description="Engram table lookup: hashed rows -> dequantized FP8 rows from HBM or host memory (UVA)",
)
