"""The Engram lookup (the tuned kernel): table rows -> ``[..., 256]`` bf16, the dequantized
FP8 E4M3 values times their UE8M0 scale (one per 32), from any table placement.

Rows are 264 = 8 * 33 B apart, so loads are at most 8 B wide: ``VEC`` is the alignment hint
(1, 2, 4 or 8 B; 16 for ``host_split``'s 256-B rows) given on the row offsets, i.e. the load
width the compiler emits (the row stride is a runtime int Triton cannot see). The kernel
takes the values and the scales as two pointers with their own row strides, so both table
layouts run the same code. Out-of-range rows (``< 0`` or ``>= table rows``) read nothing and
give zeros: a bad id must never turn into a wild read of host memory.
"""
from __future__ import annotations

from typing import Any

import torch
import triton
import triton.language as tl

from kernel_templates._host import cdiv
from kernel_templates.engram.hashing import ROWS_PER_TOKEN
from kernel_templates.engram.table import D, N_SCALES, ROW_BYTES, EngramTable
from kernel_templates.nvfp4 import fp8_ue8m0_tile_to_f32
from tuner.runtime.target import Target


@triton.jit
def _imax(a, b):
    return tl.maximum(a, b)


@triton.jit
def _engram_lookup_kernel(
    codes_ptr, scales_ptr, rows_ptr, perm_ptr, out_ptr, sout_ptr,
    n_rows, row_begin, table_rows, stride_c, stride_s,
    D: tl.constexpr, N_SCALES: tl.constexpr,
    ROWS: tl.constexpr, VEC: tl.constexpr, DEDUP: tl.constexpr,
    GRID_SM_FRAC: tl.constexpr, CHUNK_ROWS: tl.constexpr, STREAM: tl.constexpr, RAW: tl.constexpr,
):
    # RAW (a staged prefetch, never with DEDUP): the rows' values and scales are copied as they are,
    # into out_ptr ([n, D] uint8) and sout_ptr ([n, N_SCALES] uint8); ``unstage`` dequantizes them later.
    # GRID_SM_FRAC only sizes the persistent grid (launcher); the loop strides by the real count.
    pid = tl.program_id(0)
    nprog = tl.num_programs(0)
    if CHUNK_ROWS > 0:
        end = tl.minimum(n_rows, row_begin + CHUNK_ROWS)
    else:
        end = n_rows
    n_blocks = tl.cdiv(end - row_begin, ROWS)
    lane = tl.arange(0, ROWS)
    col = tl.arange(0, D)
    scol = tl.arange(0, N_SCALES)
    for blk in range(pid, n_blocks, nprog):
        j = row_begin + blk * ROWS + lane
        live = j < end
        r = tl.load(rows_ptr + j, mask=live, other=-1)
        ok = live & (r >= 0) & (r < table_rows)
        if DEDUP:
            # rows arrive sorted: only the first of each run in this block reads the table,
            # the others take its decoded row from registers (gather across the tile).
            prev = tl.load(rows_ptr + j - 1, mask=live & (lane > 0), other=-1)
            lead = (lane == 0) | (r != prev)
            src = tl.associative_scan(tl.where(lead, lane, 0), 0, _imax)
            dst = tl.load(perm_ptr + j, mask=live, other=0)
            ok = ok & lead
        else:
            dst = j
        # 264-B rows are 8-B aligned at best; VEC tells the compiler how wide it may load.
        rr = tl.where(ok, r, 0)
        base = tl.multiple_of(rr * stride_c, VEC)
        sbase = tl.multiple_of(rr * stride_s, 8)
        # STREAM: rows read once, output read layers later: neither should displace the L2's other lines
        evict: tl.constexpr = "evict_first" if STREAM else ""
        vals = tl.load(codes_ptr + base[:, None] + col[None, :], mask=ok[:, None], other=0, eviction_policy=evict)
        sc = tl.load(scales_ptr + sbase[:, None] + scol[None, :], mask=ok[:, None], other=0, eviction_policy=evict)
        if RAW:
            tl.store(out_ptr + dst.to(tl.int64)[:, None] * D + col[None, :], vals, mask=live[:, None],
                     cache_modifier=".cs" if STREAM else "")
            tl.store(sout_ptr + dst.to(tl.int64)[:, None] * N_SCALES + scol[None, :], sc, mask=live[:, None],
                     cache_modifier=".cs" if STREAM else "")
        else:
            x = fp8_ue8m0_tile_to_f32(vals.to(tl.float8e4nv, bitcast=True), sc).to(tl.bfloat16)
            if DEDUP:
                x = tl.gather(x, tl.broadcast_to(src[:, None], (ROWS, D)), 0)
            tl.store(out_ptr + dst.to(tl.int64)[:, None] * D + col[None, :], x, mask=live[:, None],
                     cache_modifier=".cs" if STREAM else "")


# ----------------------------------------------------------------------------- launcher

GRID_SM_FRACS = (1 / 32, 1 / 16, 1 / 8, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0)
CONFIG_KEYS = ("ROWS", "VEC", "DEDUP", "GRID_SM_FRAC", "CHUNK_ROWS", "STREAM", "num_warps", "num_stages")
# Launch keys outside the tuned space, set only by ``prefetch.prefetch_config``: NUM_CTAS makes
# each program a cluster of that many CTAs (one per SM, the tile split between them; ignored by
# the interpreter and before sm_90); STAGE makes a prefetch a raw copy + a later dequant.
PREFETCH_KEYS = ("NUM_CTAS", "STAGE")


def grid_programs(n_rows: int, config: dict[str, Any], sms: int) -> int:
    """Programs of one launch over ``n_rows`` rows (the persistent grid, capped by the work)."""
    blocks = cdiv(max(1, n_rows), config["ROWS"])
    return max(1, min(blocks, round(config["GRID_SM_FRAC"] * sms)))


def workload_of(table: EngramTable, rows: torch.Tensor) -> dict[str, Any]:
    """The workload (as a dict) a lookup of ``rows`` in ``table`` is."""
    return {"tokens": cdiv(rows.numel(), ROWS_PER_TOKEN), "placement": table.placement, "table_rows": table.num_rows}


def _pow2(v: Any) -> bool:
    return type(v) is int and v >= 1 and not v & (v - 1)


def check_config(config: dict[str, Any], split: bool) -> None:
    """ValueError naming the first knob of ``config`` missing or of the wrong type or range."""
    missing = [k for k in CONFIG_KEYS if k not in config]
    if missing:
        raise ValueError(f"config lacks {missing} (keys: {list(CONFIG_KEYS)})")
    vecs = (1, 2, 4, 8, 16) if split else (1, 2, 4, 8)
    if config["VEC"] not in vecs or type(config["VEC"]) is not int:
        why = "" if split else " (rows are 264 = 8*33 B apart)"
        raise ValueError(f"VEC must be one of {vecs} bytes{why}, got {config['VEC']!r}")
    for k, hi in (("ROWS", 1024), ("num_warps", 32)):
        if not _pow2(config[k]) or config[k] > hi:
            raise ValueError(f"{k} must be a power of two in [1, {hi}], got {config[k]!r}")
    for k in ("DEDUP", "STREAM"):
        if not isinstance(config[k], bool):
            raise ValueError(f"{k} must be a bool, got {config[k]!r}")
    frac = config["GRID_SM_FRAC"]
    if isinstance(frac, bool) or not isinstance(frac, (int, float)) or not 0 < frac <= 64:
        raise ValueError(f"GRID_SM_FRAC must be a number in (0, 64] (programs per SM), got {frac!r}")
    if type(config["CHUNK_ROWS"]) is not int or not 0 <= config["CHUNK_ROWS"] <= 2**24:
        raise ValueError(f"CHUNK_ROWS must be an int in [0, 2**24] (0: one launch), got {config['CHUNK_ROWS']!r}")
    if type(config["num_stages"]) is not int or not 1 <= config["num_stages"] <= 8:
        raise ValueError(f"num_stages must be an int in [1, 8], got {config['num_stages']!r}")
    if config.get("NUM_CTAS", 1) not in (1, 2, 4):
        raise ValueError(f"NUM_CTAS must be 1, 2 or 4 (CTAs per program, one cluster), got {config['NUM_CTAS']!r}")


def _check_lookup(table: Any, rows: torch.Tensor, config: dict[str, Any]) -> None:
    if not isinstance(table, EngramTable):
        raise ValueError(f"table must be an EngramTable, got {type(table).__name__}")
    if table.closed:
        raise ValueError("table is closed")
    if not isinstance(rows, torch.Tensor) or rows.dtype != torch.int64:
        raise ValueError(f"rows must be an int64 tensor, got {getattr(rows, 'dtype', type(rows).__name__)}")
    if rows.device != table.device:
        raise ValueError(f"rows are on {rows.device} but the table serves {table.device}")
    want = (D, 1) if table.split else (ROW_BYTES, 1)
    if table.codes.stride() != want or table.scales.stride() != ((N_SCALES, 1) if table.split else want):
        raise ValueError(f"table rows must be contiguous uint8 ({table.placement}: values strides {want}), "
                         f"got {table.codes.stride()} / {table.scales.stride()}")
    check_config(config, table.split)


def lookup_constexprs(config: dict[str, Any]) -> dict[str, Any]:
    """The lookup kernel's constexpr arguments for ``config`` (``launch`` and ``lower_signatures``)."""
    return dict(D=D, N_SCALES=N_SCALES, ROWS=config["ROWS"], VEC=config["VEC"], DEDUP=config["DEDUP"],
                GRID_SM_FRAC=config["GRID_SM_FRAC"], CHUNK_ROWS=config["CHUNK_ROWS"], STREAM=config["STREAM"],
                RAW=False)


def launch(*, config: dict[str, Any], table: EngramTable, rows: torch.Tensor) -> torch.Tensor:
    """Validate, allocate ``[*rows.shape, 256]`` bf16 and launch the lookup (per chunk)."""
    _check_lookup(table, rows, config)
    out = torch.empty(*rows.shape, D, dtype=torch.bfloat16, device=table.device)
    cptr, sptr = table.kernel_args()
    _run(config, cptr, sptr, table.codes.stride(0), table.scales.stride(0), table.num_rows, rows.reshape(-1), out)
    return out


def _run(config: dict[str, Any], cptr: Any, sptr: Any, stride_c: int, stride_s: int, table_rows: int,
         flat: torch.Tensor, out: torch.Tensor, sout: torch.Tensor | None = None) -> None:
    """The lookup kernel over the rows ``flat`` (per chunk) into ``out``; with ``sout`` a raw
    copy (values into ``out`` uint8, scales into ``sout``: ``stage``)."""
    n = flat.numel()
    if n == 0:
        return
    if config["DEDUP"]:
        flat, perm = torch.sort(flat)  # on the device, no host sync: capturable
    else:
        perm = flat                    # unused
    chunk = config["CHUNK_ROWS"] or n
    target = Target.of(out.device)
    meta = dict(lookup_constexprs(config), num_warps=config["num_warps"], num_stages=config["num_stages"])
    meta["RAW"] = sout is not None
    if config.get("NUM_CTAS", 1) > 1 and not target.interpret and target.cc >= 90:  # clusters from sm_90 on
        meta["num_ctas"] = config["NUM_CTAS"]  # each program a cluster of CTAs on as many SMs, its tile split
    for begin in range(0, n, chunk):
        grid = (grid_programs(min(chunk, n - begin), config, target.sms),)
        _engram_lookup_kernel[grid](cptr, sptr, flat, perm, out, out if sout is None else sout, n, begin, table_rows,
                                    stride_c, stride_s, **meta)


def stage(config: dict[str, Any], table: EngramTable, rows: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The first half of a staged lookup: the rows' bytes copied as they are into HBM,
    ``(values [n, 256] uint8, scales [n, 8] uint8)`` (n = ``rows.numel()``), with the
    lookup tile of ``config`` (no DEDUP); ``unstage`` turns them into the lookup's output."""
    _check_lookup(table, rows, config)
    if config["DEDUP"]:
        raise ValueError("a staged lookup copies rows in order: DEDUP must be off")
    n = rows.numel()
    vals = torch.empty(n, D, dtype=torch.uint8, device=table.device)
    scales = torch.empty(n, N_SCALES, dtype=torch.uint8, device=table.device)
    cptr, sptr = table.kernel_args()
    _run(config, cptr, sptr, table.codes.stride(0), table.scales.stride(0), table.num_rows, rows.reshape(-1), vals,
         sout=scales)
    return vals, scales


def unstage(config: dict[str, Any], vals: torch.Tensor, scales: torch.Tensor, shape: tuple[int, ...]) -> torch.Tensor:
    """Staged rows (``stage``) -> ``[*shape, 256]`` bf16: the lookup kernel with ``config`` over
    the staged rows in order, as over a split table in HBM (DEDUP and clusters off)."""
    cfg = {k: v for k, v in config.items() if k not in PREFETCH_KEYS}
    check_config(cfg, split=True)
    cfg.update(DEDUP=False, CHUNK_ROWS=0)
    n = vals.shape[0]
    out = torch.empty(*shape, D, dtype=torch.bfloat16, device=vals.device)
    _run(cfg, vals, scales, D, N_SCALES, n, torch.arange(n, device=vals.device), out)
    return out


def lower_signatures(workload: Any, config: dict[str, Any]) -> list[tuple[Any, dict[str, str], dict[str, Any]]]:
    """The lookup launch ``launch`` does (chunks repeat the same compiled kernel); with
    ``STAGE`` in ``config``, the raw copy ``stage`` launches (a staged prefetch's first half).

    Needs ``TRITON_INTERPRET`` unset (the interpreter wraps the kernel in a non-compilable object).
    """
    raw = bool(config.get("STAGE", False))
    if raw and config["DEDUP"]:
        raise ValueError("a staged lookup copies rows in order: DEDUP must be off")
    out = "*u8" if raw else "*bf16"
    sig = {"codes_ptr": "*u8", "scales_ptr": "*u8", "rows_ptr": "*i64", "perm_ptr": "*i64", "out_ptr": out,
           "sout_ptr": out, "n_rows": "i32", "row_begin": "i32", "table_rows": "i32", "stride_c": "i32", "stride_s": "i32"}
    cx = dict(lookup_constexprs(config), RAW=raw)
    return [(_engram_lookup_kernel, {**sig, **{k: "constexpr" for k in cx}}, cx)]
