"""Which side of a prefetched Engram lookup slows when it runs beside the layer?

``benchmarks/engram.py`` reads the overlap as one number, hidden = (lookup + layer - both) /
lookup, from graph replays. This probe runs the same three phases eagerly with CUDA events
on both streams, so that in ``both`` the lookup's own span (main stream's fork to the side
stream's end) and the layer's span are measured separately, for a few prefetch grid sizes
(two-CTA clusters):

    python benchmarks/engram_overlap_probe.py --placement host_split --tokens 4096 [--clusters 1,2,3]

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

from _results import save_raw  # noqa: E402


def _parse(argv: list[str] | None) -> argparse.Namespace:
    from engram import _int, _ints, _json_object  # benchmarks/engram.py

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--pack", type=Path, default=None, help="kernel pack folder (the lookup's config; defaults if absent)")
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results", help="folder for the raw JSON")
    p.add_argument("--placement", default="host_split", help="host, host_thp or host_split")
    p.add_argument("--tokens", type=_int, default=4096, help="T (24 rows a token)")
    p.add_argument("--table-rows", type=_int, default=8 << 20, help="table rows, K/M suffixes allowed")
    p.add_argument("--clusters", type=_ints, default=[2], help="comma list of prefetch clusters (two CTAs each)")
    p.add_argument("--override", type=_json_object, action="append", default=[],
                   help="JSON object merged into the prefetch config, one case each (e.g. '{\"STREAM\": false}'); "
                        "repeatable; the prefetch config as EngramPrefetcher runs it (PREFETCH_TILE) comes first")
    p.add_argument("--reps", type=int, default=10, help="eager repetitions of each phase")
    return p.parse_args(argv)


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
    from tuner import runtime
    from tuner.spec import workload_dict
    from tuner.timing import gpu_available

    if not gpu_available():
        print("engram_overlap_probe.py needs a CUDA GPU (and TRITON_INTERPRET unset)", file=sys.stderr)
        raise SystemExit(2)
    pack = runtime.load_pack(args.pack) if args.pack else None
    params = E.make_params(args.table_rows, seed=0, device="cuda")
    out: dict[str, Any] = {"placement": args.placement, "tokens": args.tokens, "table_rows": args.table_rows,
                           "cases": []}
    with E.EngramTable(args.table_rows, args.placement, "cuda").fill_random_(seed=0) as table:
        wl = E.Workload(args.tokens, table.placement, args.table_rows)
        sel = pack.select("engram", workload_dict(wl)) if pack else None
        base = sel.config if sel is not None else E.default_config(wl)
        _, rows = zipf_rows(params, args.tokens)
        ref = E.reference(table, rows)
        sms = torch.cuda.get_device_properties(0).multi_processor_count
        for c, over in ((c, o) for c in args.clusters for o in [{}, *args.override]):
            cfg = dict(E.prefetch_config(base, table.placement, clusters=c, sms=sms), **over)
            pf = E.EngramPrefetcher(table, config=cfg)
            E.verify(pf.submit(rows).wait(), ref, {})
            alone = _spans(pf, rows, None, "lookup", args.reps)
            shape, gemms = _equal_layer(alone["lookup_us"], args.reps)
            layer = _graphed(gemms)
            case = {"clusters": c, "override": over, "gemms": shape[0], "fill_cols": shape[1], "config": cfg,
                    "alone": {**alone, **_spans(pf, rows, layer, "layer", args.reps)},
                    "both": _spans(pf, rows, layer, "both", args.reps)}
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
        lines.append(f"{c['clusters']:>8} {a['lookup_us']:>9.1f} {a['layer_us']:>9.1f} {b['lookup_us']:>12.1f} "
                     f"{b['layer_us']:>11.1f} {100 * (b['lookup_us'] / a['lookup_us'] - 1):>8.1f}% "
                     f"{100 * (b['layer_us'] / a['layer_us'] - 1):>7.1f}% {100 * hidden:>6.1f}% "
                     f"{json.dumps(c.get('override') or {})}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    result = {"benchmark": "engram_overlap_probe", "created": time.strftime("%Y-%m-%dT%H:%M:%S"), **run(args)}
    save_raw(args.out, "engram_overlap_probe", result)
    print(_table(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
