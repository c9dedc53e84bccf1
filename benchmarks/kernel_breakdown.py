"""Where one call's time goes (GPU): each launched kernel's device time against the call's
time under CUDA-graph replay. What the kernels do not account for is launch gaps and
dependencies between launches: the part no kernel tuning can take back.

    python3 benchmarks/kernel_breakdown.py sparse_mqa \\
        --workload batch=1,context=8192,next_n=1,profile=dsv32 [--workload ...] \\
        [--pack packs/nvidia-h200] [--config K=V,...] [--inputs K=V,...] [--calls 20] [--out DIR]

Kernel times come from the CUDA profiler (torch.profiler, CUPTI) over ``--calls`` calls,
each after the L2 flush the tuner times with (the flush's own kernels are left out); the
call time is ``tuner.timing.bench_kernel``'s, as the tuner and the benchmarks measure it.

Exit status: 2 for bad input (one line, checked before the GPU); 1 when the launcher refused
some workload's config (each named on stderr; the other workloads' results are saved).
"""
from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any, Callable, Iterable

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))  # benchmarks/_results.py (benchmarks is not a package)

from _results import RAW_OUT, save_raw  # noqa: E402


def parse_kv(text: str) -> dict[str, Any]:
    """``a=1,b=x,c=true`` -> ``{"a": 1, "b": "x", "c": True}`` (ints, floats, booleans, strings)."""
    out: dict[str, Any] = {}
    for part in filter(None, text.split(",")):
        key, sep, val = part.partition("=")
        if not sep or not key:
            raise ValueError(f"expected KEY=VALUE, got {part!r}")
        low = val.lower()
        if low in ("true", "false"):
            out[key] = low == "true"
            continue
        for conv in (int, float):
            try:
                out[key] = conv(val)
                break
            except ValueError:
                pass
        else:
            out[key] = val
    return out


def kernel_times(events: Iterable[tuple[str, float]], calls: int, skip: set[str]) -> list[tuple[str, float, float]]:
    """``(name, device us)`` events of ``calls`` calls -> ``(name, launches a call, us a call)``
    per kernel name, slowest first; names in ``skip`` (the flush's kernels) left out."""
    n: dict[str, int] = defaultdict(int)
    us: dict[str, float] = defaultdict(float)
    for name, t in events:
        if name in skip:
            continue
        n[name] += 1
        us[name] += t
    return sorted(((k, n[k] / calls, us[k] / calls) for k in n), key=lambda r: -r[2])


def launch_sequence(events: Iterable[tuple[str, float]], calls: int, skip: set[str]) -> list[tuple[str, float]]:
    """The launches of one call in order, ``(name, us)`` averaged by position over ``calls``
    calls (kernels of one name, e.g. the passes of a loop, told apart); empty when the
    calls did not launch the same sequence."""
    ev = [(n, t) for n, t in events if n not in skip]
    if not ev or len(ev) % calls:
        return []
    per = len(ev) // calls
    runs = [ev[i * per:(i + 1) * per] for i in range(calls)]
    if any([n for n, _ in r] != [n for n, _ in runs[0]] for r in runs):
        return []
    return [(runs[0][j][0], sum(r[j][1] for r in runs) / calls) for j in range(per)]


def _profile(fn: Callable[[], Any], calls: int, flush: Callable[[], None] | None) -> list[tuple[str, float]]:
    import torch
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            if flush is not None:
                flush()
            fn()
        torch.cuda.synchronize()
    out = []
    for e in prof.events():
        dev = getattr(e, "device_type", None)
        if dev is not None and "CUDA" not in str(dev):
            continue
        t = getattr(e, "device_time", None) or getattr(e, "cuda_time", 0.0)
        if t:
            out.append((e.name, float(t)))
    return out


def _short(name: str, width: int = 60) -> str:
    return name if len(name) <= width else name[: width - 3] + "..."


def resolve_config(kernel_name: str, workload: dict[str, Any], pack: Any = None,
                   overrides: Iterable[dict[str, Any]] = ()) -> tuple[Any, Any, dict[str, Any], str]:
    """(spec, workload, base config, how) for one workload on the GPU at hand (the interpreter
    without one): the pack's selection (``pack`` a path, loaded once) or the template's default. A ValueError with a one-line message for an
    unknown kernel, a bad workload or pack, or a key of any of ``overrides`` the kernel does
    not have (a typo would time the base config under another name)."""
    from tuner import runtime
    from tuner.registry import get
    from tuner.runtime.target import Target
    from tuner.spec import workload_dict

    target = Target.of()
    try:
        kernel = get(kernel_name)
        spec = kernel.spec
        w = spec.workload(**workload)
        cfg, how = spec.default_config(w, target), "default"
        if pack is not None:  # every axis, defaults included
            sel = runtime.load_pack(pack).select(spec.name, workload_dict(w), target)
            if sel.how != "default":
                cfg, how = dict(sel.config), sel.how
    except (KeyError, TypeError, ValueError, runtime.PackError) as e:
        raise ValueError(e.args[0] if isinstance(e, KeyError) and e.args else str(e)) from None
    unknown = sorted({k for over in overrides for k in over} - set(kernel.space) - set(cfg))
    if unknown:
        raise ValueError(f"--config: {', '.join(unknown)}: not a config key of {spec.name}")
    return spec, w, cfg, how


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("kernel", help="registry name, e.g. sparse_mqa")
    ap.add_argument("--workload", action="append", required=True, metavar="K=V,...",
                    help="one workload (repeatable), its axes as in `tune show`")
    ap.add_argument("--pack", type=Path, default=None, help="pack whose selected config is used (default config if absent)")
    ap.add_argument("--config", default="", metavar="K=V,...", help="overrides applied on top of the config")
    ap.add_argument("--inputs", default="", metavar="K=V,...",
                    help="overrides of make_inputs' scalar arguments, e.g. top_k=0,return_logits=true")
    ap.add_argument("--calls", type=int, default=20, help="profiled calls per workload")
    ap.add_argument("--out", type=Path, default=RAW_OUT, help="folder for the raw JSON")
    args = ap.parse_args(argv)
    try:  # bad input: one line and exit 2, before the GPU is touched
        over, extra = parse_kv(args.config), parse_kv(args.inputs)
        plans = []
        for text in args.workload:  # every workload is of the one kernel: one spec
            wd = parse_kv(text)
            spec, w, base, how = resolve_config(args.kernel, wd, args.pack, [over])
            plans.append((text, wd, w, dict(base, **over), how))
    except ValueError as e:
        print(f"kernel_breakdown: {e}", file=sys.stderr)
        return 2

    import torch

    from tuner import timing

    if not torch.cuda.is_available():
        print("kernel_breakdown needs a GPU", file=sys.stderr)
        return 2
    flush = timing._flush_l2 if spec.cold_l2 else None
    # the flush's own kernels, told apart by name; none to leave out where no flush runs
    flush_names = {n for n, _ in _profile(lambda: None, 3, timing._flush_l2)} if flush else set()
    results, refused = [], 0
    for text, wd, w, cfg, how in plans:
        inputs = dict(spec.make_inputs(w, "cuda", 0), **extra)

        def fn(cfg=cfg, inputs=inputs):
            return spec.launch(config=cfg, **inputs)

        try:
            fn()
        except ValueError as e:  # the launcher refuses the config (e.g. a tile it cannot run): the next workload
            print(f"kernel_breakdown: {text}: refused: {str(e).splitlines()[0]}", file=sys.stderr)
            refused += 1
            continue
        torch.cuda.synchronize()
        call = timing.bench_kernel(spec, fn)
        events = _profile(fn, args.calls, flush)
        rows = kernel_times(events, args.calls, flush_names)
        seq = launch_sequence(events, args.calls, flush_names)
        busy = sum(r[2] for r in rows)
        results.append({"workload": wd, "how": how, "config": cfg, "call_us": call.median_us,
                        "graph": spec.launch_bound, "kernels_us": busy,
                        "kernels": [{"name": n, "per_call": c, "us": u} for n, c, u in rows],
                        "sequence": [{"name": n, "us": u} for n, u in seq]})
        print(f"\n{spec.name} {text} ({how}): call {call.median_us:.1f} us "
              f"({'graph replay' if spec.launch_bound else 'events'}), kernels {busy:.1f} us, "
              f"not in kernels {call.median_us - busy:.1f} us", flush=True)
        for n, c, u in rows:
            print(f"  {u:9.2f} us  x{c:4.1f}  {_short(n)}")
        if len(seq) > len(rows):
            print("  in order: " + ", ".join(f"{_short(n, 24)} {u:.1f}" for n, u in seq))
        del inputs
        torch.cuda.empty_cache()
    if results:
        save_raw(args.out, f"kernel_breakdown-{spec.name}",
                 {"kernel": spec.name, "gpu": torch.cuda.get_device_name(), "results": results})
    return 1 if refused else 0  # 1: some workload's config was refused (the others' results are saved)


if __name__ == "__main__":
    sys.exit(main())
