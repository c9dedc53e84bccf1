"""Which side of a prefetched Engram lookup slows when it runs beside the layer?

``benchmarks/engram.py`` reads the overlap as one number, hidden = (lookup + layer - both) /
lookup, from graph replays. This probe runs the same three phases eagerly with CUDA events
on both streams, so that in ``both`` the lookup's own span (main stream's fork to the side
stream's end) and the layer's span are measured separately, for a few prefetch grid sizes
(two-CTA clusters):

    python benchmarks/engram_overlap_probe.py --placement host_split --tokens 4096 [--clusters 1,2,3]

``--traffic read,write,stage`` adds cases that run only part of the lookup's traffic, on the same
grid (the prefetch tile's clusters, tile and warps), to tell which part slows the layer: ``read``
reads the table's values as the tile does and keeps only their sums (one tile a program, stored at the end); ``write`` reads the
rows (HBM) and writes 512 B of bf16 a row as the tile does, no table reads; ``stage`` reads the
values and stores them raw (256 B a row) into an HBM buffer, which a dequant kernel then turns
into the lookup's output on the main stream (checked bit for bit against the reference; its time
is printed, and ``hidden+dq`` counts it as exposed).

The layer (``benchmarks/engram.py``'s GEMMs sized to the lookup) replays as one CUDA graph; the
lookup launches eagerly, a few us of host time after the fork: meant for lookups of hundreds
of us and more (T >= 1024), where that is noise. Raw numbers go to
``--out`` as JSON; the table is printed last.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))  # benchmarks/engram.py, _results.py (benchmarks is not a package)

import triton  # noqa: E402
import triton.language as tl  # noqa: E402

from _results import save_raw  # noqa: E402
from kernel_templates.nvfp4 import fp8_ue8m0_tile_to_f32  # noqa: E402


def _parse(argv: list[str] | None) -> argparse.Namespace:
    from engram import _int, _ints, _json_object  # benchmarks/engram.py

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--pack", type=Path, default=None, help="kernel pack folder (the lookup's config; defaults if absent)")
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "raw", help="folder for the raw JSON")
    p.add_argument("--placement", default="host_split", help="host, host_thp or host_split")
    p.add_argument("--tokens", type=_int, default=4096, help="T (24 rows a token)")
    p.add_argument("--table-rows", type=_int, default=8 << 20, help="table rows, K/M suffixes allowed")
    p.add_argument("--clusters", type=_ints, default=[2], help="comma list of prefetch clusters (two CTAs each)")
    p.add_argument("--override", type=_json_object, action="append", default=[],
                   help="JSON object merged into the prefetch config, one case each (e.g. '{\"STREAM\": false}'); "
                        "repeatable; the prefetch config as EngramPrefetcher runs it (PREFETCH_TILE) comes first")
    p.add_argument("--traffic", type=_kinds, default=[],
                   help="comma list of traffic-only cases (read, write, stage) on the first cluster count")
    p.add_argument("--reps", type=int, default=10, help="eager repetitions of each phase")
    args = p.parse_args(argv)
    if any(o.get("STAGE") for o in args.override):
        # the spans end at the side stream's end: a staged prefetch's dequant at wait() would go uncounted
        p.error("--override cannot stage (STAGE): the spans would leave its dequant out; use --traffic stage")
    return args


TRAFFIC_KINDS = ("read", "write", "stage")


def _kinds(text: str) -> list[str]:
    kinds = [k.strip() for k in text.split(",") if k.strip()]
    bad = [k for k in kinds if k not in TRAFFIC_KINDS]
    if bad or not kinds:
        raise argparse.ArgumentTypeError(f"traffic kinds are {', '.join(TRAFFIC_KINDS)}; got {text!r}")
    return kinds


@triton.jit
def _traffic_kernel(codes_ptr, rows_ptr, out_ptr, sink_ptr, n_rows, stride_c,
                    D: tl.constexpr, ROWS: tl.constexpr, VEC: tl.constexpr, KIND: tl.constexpr):
    # KIND 0 read, 1 write, 2 stage (module docstring); the loop is the lookup tile's.
    pid = tl.program_id(0)
    nprog = tl.num_programs(0)
    lane = tl.arange(0, ROWS)
    col = tl.arange(0, D)
    acc = tl.zeros([ROWS, D], dtype=tl.int32)
    for blk in range(pid, tl.cdiv(n_rows, ROWS), nprog):
        j = blk * ROWS + lane
        live = j < n_rows
        r = tl.load(rows_ptr + j, mask=live, other=0)
        dst = out_ptr + j.to(tl.int64)[:, None] * D + col[None, :]
        if KIND == 1:
            x = ((r[:, None] + col[None, :]) & 127).to(tl.float32).to(tl.bfloat16)  # exact in bf16
            tl.store(dst, x, mask=live[:, None], cache_modifier=".cs")
        else:
            base = tl.multiple_of(r * stride_c, VEC)
            vals = tl.load(codes_ptr + base[:, None] + col[None, :], mask=live[:, None], other=0,
                           eviction_policy="evict_first")
            if KIND == 0:
                acc += vals.to(tl.int32)
            else:
                tl.store(dst, vals, mask=live[:, None], cache_modifier=".cs")
    if KIND == 0:  # the tile's sums as they are (a reduction here fails Triton 3.6's CTA planning at NUM_CTAS=2)
        tl.store(sink_ptr + pid * ROWS * D + lane[:, None] * D + col[None, :], acc)


@triton.jit
def _stage_dequant_kernel(stage_ptr, scales_ptr, rows_ptr, out_ptr, n_rows, stride_s,
                          D: tl.constexpr, N_SCALES: tl.constexpr, ROWS: tl.constexpr):
    j = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    live = j < n_rows
    col = tl.arange(0, D)
    r = tl.load(rows_ptr + j, mask=live, other=0)
    vals = tl.load(stage_ptr + j.to(tl.int64)[:, None] * D + col[None, :], mask=live[:, None], other=0)
    sc = tl.load(scales_ptr + r[:, None] * stride_s + tl.arange(0, N_SCALES)[None, :], mask=live[:, None], other=0)
    x = fp8_ue8m0_tile_to_f32(vals.to(tl.float8e4nv, bitcast=True), sc).to(tl.bfloat16)
    tl.store(out_ptr + j.to(tl.int64)[:, None] * D + col[None, :], x, mask=live[:, None])


def traffic_launch(table: Any, rows: Any, kind: str, cfg: dict[str, Any], programs: int) -> tuple[Any, Any]:
    """Run one traffic kind over ``rows`` (any shape) with the tile of ``cfg`` on ``programs``
    programs (clusters of ``NUM_CTAS`` on a GPU that has them). Returns ``(out, sink)``:
    ``out [n, 256]`` bf16 (write) or uint8 (stage: the raw values; read: untouched),
    ``sink [programs, ROWS * 256]`` int32 (read: each program's element-wise sums of its tiles)."""
    import torch

    from kernel_templates.engram import table as ET
    from tuner.runtime.target import Target

    flat = rows.reshape(-1)
    n = flat.numel()
    out = torch.empty(n, ET.D, dtype=torch.bfloat16 if kind == "write" else torch.uint8, device=table.device)
    sink = torch.zeros(programs, cfg["ROWS"] * ET.D, dtype=torch.int32, device=table.device)
    codes, _ = table.kernel_args()
    meta = dict(num_warps=cfg["num_warps"], num_stages=cfg["num_stages"])
    if table.device.type == "cuda" and not Target.of(table.device).interpret and cfg.get("NUM_CTAS", 1) > 1:
        meta["num_ctas"] = cfg["NUM_CTAS"]
    _traffic_kernel[(programs,)](codes, flat, out, sink, n, table.codes.stride(0), D=ET.D, ROWS=cfg["ROWS"],
                                 VEC=cfg["VEC"], KIND=TRAFFIC_KINDS.index(kind), **meta)
    return out, sink


def stage_dequant(table: Any, stage: Any, rows: Any) -> Any:
    """Staged raw values ``[n, 256]`` uint8 (row i of ``stage`` is table row ``rows.flat[i]``)
    -> ``[*rows.shape, 256]`` bf16, the lookup's output; scales are read from the table by row."""
    import torch

    from kernel_templates._host import cdiv
    from kernel_templates.engram import table as ET

    flat = rows.reshape(-1)
    out = torch.empty(*rows.shape, ET.D, dtype=torch.bfloat16, device=table.device)
    if flat.numel():
        block = 64
        _, scales = table.kernel_args()
        _stage_dequant_kernel[(cdiv(flat.numel(), block),)](stage, scales, flat, out, flat.numel(),
                                                               table.scales.stride(0), D=ET.D, N_SCALES=ET.N_SCALES,
                                                               ROWS=block, num_warps=8)
    return out


class _TrafficHandle:
    def __init__(self, out: Any, event: Any, finish: Any = None) -> None:
        self._out, self._event, self._finish = out, event, finish

    def wait(self) -> Any:
        import torch

        torch.cuda.current_stream().wait_event(self._event)
        return self._finish(self._out) if self._finish else self._out


class _Traffic:
    """A stand-in prefetcher (``submit`` / ``stream``, as ``_spans`` uses them) that runs one
    traffic kind on its own stream with the prefetch tile's grid; ``stage``'s ``wait()`` runs
    the dequant on the current stream and returns the lookup's output."""

    def __init__(self, table: Any, kind: str, cfg: dict[str, Any], sms: int) -> None:
        import torch

        self.table, self.kind, self.cfg = table, kind, cfg
        self.programs = max(1, round(cfg["GRID_SM_FRAC"] * sms))
        self.stream = torch.cuda.Stream()

    def submit(self, rows: Any) -> _TrafficHandle:
        import torch

        self.stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.stream):
            out, _ = traffic_launch(self.table, rows, self.kind, self.cfg, self.programs)
            ev = torch.cuda.Event()
            ev.record(self.stream)
        finish = (lambda st: stage_dequant(self.table, st, rows)) if self.kind == "stage" else None
        return _TrafficHandle(out, ev, finish)


def _spans(pf: Any, rows: Any, layer: Any, mode: str, reps: int) -> dict[str, float]:
    """Median spans (us) from the main stream's fork event: ``lookup`` to the side stream's
    end, ``layer`` to the main stream's end (the phase's work only)."""
    import torch

    main = torch.cuda.current_stream()
    lk, ly = [], []
    for i in range(reps + 2):
        e0, e_side, e_main = (torch.cuda.Event(enable_timing=True) for _ in range(3))
        torch.cuda.synchronize()
        e0.record(main)
        if mode in ("lookup", "both"):
            h = pf.submit(rows)
            e_side.record(pf.stream)
        if mode in ("layer", "both"):
            layer()
        e_main.record(main)
        if mode in ("lookup", "both"):
            h.wait()
        torch.cuda.synchronize()
        if i >= 2:  # two warm-up rounds
            if mode != "layer":
                lk.append(e0.elapsed_time(e_side) * 1e3)
            if mode != "lookup":
                ly.append(e0.elapsed_time(e_main) * 1e3)
    return {k: statistics.median(v) for k, v in (("lookup_us", lk), ("layer_us", ly)) if v}


def _graphed(fn: Any) -> Any:
    """``fn`` captured once in a CUDA graph; the returned closure replays it on the current
    stream (an eager chain of hundreds of GEMMs would be bound by host launch time)."""
    import torch

    fn()
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn()
    return g.replay


def run(args: argparse.Namespace) -> dict[str, Any]:
    import torch

    from engram import _equal_layer, zipf_rows  # benchmarks/engram.py
    from kernel_templates import engram as E
    from kernel_templates.engram import hashing as EH, prefetch as EP
    from tuner import runtime
    from tuner.runtime.target import Target
    from tuner.spec import workload_dict
    from tuner.timing import bench, gpu_available

    if not gpu_available():
        print("engram_overlap_probe.py needs a CUDA GPU (and TRITON_INTERPRET unset)", file=sys.stderr)
        raise SystemExit(2)
    pack = runtime.load_pack(args.pack) if args.pack else None
    params = EH.make_params(args.table_rows, seed=0, device="cuda")
    out: dict[str, Any] = {"placement": args.placement, "tokens": args.tokens, "table_rows": args.table_rows,
                           "cases": []}
    with E.EngramTable(args.table_rows, args.placement, "cuda").fill_random_(seed=0) as table:
        wl = E.Workload(args.tokens, table.placement, args.table_rows)
        sel = pack.select("engram", workload_dict(wl)) if pack else None
        target = Target.of(table.device)
        base = sel.config if sel is not None else E.default_config(wl, target)
        _, rows = zipf_rows(params, args.tokens)
        ref = E.reference(table, rows)
        for c, over in ((c, o) for c in args.clusters for o in [{}, *args.override]):
            cfg = dict(EP.prefetch_config(base, table.placement, clusters=c, target=target), **over)  # the tile, unstaged
            pf = EP.EngramPrefetcher(table, config=cfg)
            E.verify(pf.submit(rows).wait(), ref, {})
            alone = _spans(pf, rows, None, "lookup", args.reps)
            shape, gemms = _equal_layer(alone["lookup_us"], args.reps)
            layer = _graphed(gemms)
            case = {"clusters": c, "override": over, "gemms": shape[0], "fill_cols": shape[1], "config": cfg,
                    "alone": {**alone, **_spans(pf, rows, layer, "layer", args.reps)},
                    "both": _spans(pf, rows, layer, "both", args.reps)}
            out["cases"].append(case)
        cfg = EP.prefetch_config(base, table.placement, clusters=args.clusters[0], target=target)
        for kind in args.traffic:
            tr = _Traffic(table, kind, cfg, target.sms)
            case = {"clusters": args.clusters[0], "traffic": kind, "config": cfg}
            if kind == "stage":
                E.verify(tr.submit(rows).wait(), ref, {})  # the staged design returns the lookup's output
                st = tr.submit(rows)._out
                torch.cuda.synchronize()
                case["dequant_us"] = bench(lambda: stage_dequant(table, st, rows), graph=True, flush_l2=False,
                                           reps=args.reps).median_us
            alone = _spans(tr, rows, None, "lookup", args.reps)
            shape, gemms = _equal_layer(alone["lookup_us"], args.reps)
            layer = _graphed(gemms)
            case.update(gemms=shape[0], fill_cols=shape[1], alone={**alone, **_spans(tr, rows, layer, "layer", args.reps)},
                        both=_spans(tr, rows, layer, "both", args.reps))
            out["cases"].append(case)
    return out


def _table(result: dict[str, Any]) -> str:
    lines = [f"{result['placement']} T={result['tokens']}: spans from the fork, us (eager, median)",
             f"{'clusters':>8} {'lookup':>9} {'layer':>9} {'lookup|both':>12} {'layer|both':>11} {'lookup +%':>9} "
             f"{'layer +%':>8} {'hidden':>7} override"]
    for c in result["cases"]:
        a, b = c["alone"], c["both"]
        both = max(b["lookup_us"], b["layer_us"])
        hidden = (a["lookup_us"] + a["layer_us"] - both) / a["lookup_us"]
        what = f"traffic {c['traffic']}" if c.get("traffic") else json.dumps(c.get("override") or {})
        if "dequant_us" in c:  # stage: the dequant runs after the layer on the main stream, all of it exposed
            dq = c["dequant_us"]
            exposed = both - a["layer_us"] + dq
            what += f" (dequant {dq:.1f} us; hidden+dq {100 * (1 - exposed / (a['lookup_us'] + dq)):.1f}%)"
        lines.append(f"{c['clusters']:>8} {a['lookup_us']:>9.1f} {a['layer_us']:>9.1f} {b['lookup_us']:>12.1f} "
                     f"{b['layer_us']:>11.1f} {100 * (b['lookup_us'] / a['lookup_us'] - 1):>8.1f}% "
                     f"{100 * (b['layer_us'] / a['layer_us'] - 1):>7.1f}% {100 * hidden:>6.1f}% {what}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    result = {"benchmark": "engram_overlap_probe", "created": time.strftime("%Y-%m-%dT%H:%M:%S"), **run(args)}
    save_raw(args.out, "engram_overlap_probe", result)
    print(_table(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
