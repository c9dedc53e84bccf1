"""Compare a handful of configs of one kernel on one workload, interleaved (GPU).

    python3 benchmarks/config_sweep.py sparse_mqa \
        --workload batch=32,context=131072,next_n=1,profile=dsv32 [--pack packs/nvidia-h200] \
        --config LAUNCH_PDL=true --config LAUNCH_PDL=true,TOPK_SPLITS=128 [--rounds 5] [--out DIR]

The tuner's search times each trial once, so two configs a few percent apart can swap
places between runs (the spread of one config's time across a process can be 5-10% at
~200 us). Here every config is first checked against the reference (a mismatch is reported
and never timed), then all are timed in ``--rounds`` interleaved rounds, both in the tuner's
worker process (``tuner.worker.Worker``: ``evaluate`` as a trial is checked, ``retime`` as
finalists are re-timed, each round ``tuner.timing.bench_kernel``: CUDA-graph replay
where the kernel is launch-bound, the L2 flushed where it is cold), and the table gives
each config's median over the rounds and its range. The first row is the base config: the pack's selection for
the workload (``--pack``) or the template's default; each ``--config`` lays its keys over
that base. Raw results go to ``--out`` as JSON.
"""
from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: the repository root for tuner / kernel_templates
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))  # benchmarks/_results.py (benchmarks is not a package)
from _results import RAW_OUT, save_raw  # noqa: E402
from kernel_breakdown import parse_kv, resolve_config  # noqa: E402


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("kernel", help="registry name, e.g. sparse_mqa")
    ap.add_argument("--workload", required=True, metavar="K=V,...", help="the workload, its axes as in `tune show`")
    ap.add_argument("--pack", help="pack whose selected config is the base (the default config if absent)")
    ap.add_argument("--config", action="append", default=[], metavar="K=V,...",
                    help="overrides laid over the base config (repeatable: one compared config each)")
    ap.add_argument("--rounds", type=int, default=5, help="interleaved timing rounds (default 5)")
    ap.add_argument("--out", type=Path, default=RAW_OUT, help="folder for the raw JSON")
    args = ap.parse_args(argv)
    if args.rounds < 1:
        ap.error("--rounds must be >= 1")
    for text in [args.workload] + args.config:
        try:
            parse_kv(text)
        except ValueError as e:
            ap.error(str(e))
    if not parse_kv(args.workload):
        ap.error("--workload: give the workload's axes, e.g. batch=32,context=131072")
    return args


def summarize(times: list[float]) -> dict[str, float]:
    """One config's round medians -> median, min, max (us)."""
    return {"median_us": statistics.median(times), "min_us": min(times), "max_us": max(times)}


def table(rows: list[dict[str, Any]]) -> list[str]:
    """Rows of ``{"label", "status", "median_us", "min_us", "max_us"}`` -> printable lines, each
    config's median against the base's (the first row)."""
    base = rows[0].get("median_us") if rows else None
    width = max([len(r["label"]) for r in rows] + [6])
    lines = [f"{'config':{width}}  {'median us':>10} {'range us':>17} {'x base':>7}"]
    for r in rows:
        if r["status"] != "ok":
            lines.append(f"{r['label']:{width}}  {r['status']}: {r.get('error', '')[:100]}")
            continue
        rel = f"{base / r['median_us']:.3f}" if base else "-"
        rng = f"{r['min_us']:.1f}-{r['max_us']:.1f}"
        lines.append(f"{r['label']:{width}}  {r['median_us']:10.1f} {rng:>17} {rel:>7}")
    return lines


def resolve(args: argparse.Namespace) -> tuple[Any, Any, list[tuple[str, dict[str, Any]]]]:
    """The kernel's spec, the workload and the ``(label, config)`` list (base first); a
    ValueError with a one-line message for an unknown kernel, a bad workload or pack, or a
    ``--config`` key the kernel does not have (``kernel_breakdown.resolve_config``)."""
    overrides = [parse_kv(text) for text in args.config]
    spec, w, base, how = resolve_config(args.kernel, parse_kv(args.workload), args.pack, overrides)
    return spec, w, [(f"base ({how})", dict(base))] + [(t, dict(base, **o)) for t, o in zip(args.config, overrides)]


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    import torch

    try:
        spec, w, configs = resolve(args)
    except ValueError as e:
        print(f"config_sweep: {e}", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("config_sweep needs a GPU", file=sys.stderr)
        return 2
    from tuner.spec import workload_dict
    from tuner.worker import Worker

    wd = workload_dict(w)
    rows: list[dict[str, Any]] = []
    with Worker() as worker:  # the tuner's own isolated process: verify as a trial is verified
        for label, cfg in configs:
            r = worker.evaluate(spec.name, wd, cfg, 0)
            rows.append({"label": label, "config": cfg, "status": r.status, "rounds_us": []})
            if r.status != "ok":
                rows[-1]["error"] = (r.error or r.status).splitlines()[0]
        ok = [r for r in rows if r["status"] == "ok"]
        times = worker.retime(spec.name, wd, [r["config"] for r in ok], args.rounds, 0) if ok else []
        if times is None:  # one config broke the worker while timed: time each alone, keeping the others
            times = [(worker.retime(spec.name, wd, [r["config"]], args.rounds, 0) or [None])[0] for r in ok]
    for r, t in zip(ok, times):
        if t is None:
            r.update(status="error", error="the worker crashed or timed out while timing it")
        else:
            r["rounds_us"] = [median for median, _p20, _p80 in t]
            r.update(summarize(r["rounds_us"]))
    ok = [r for r in ok if r["status"] == "ok"]
    print(f"{spec.name} {args.workload}: {len(ok)} of {len(rows)} configs verified and timed, {args.rounds} interleaved rounds")
    print("\n".join(table(rows)))
    from tuner.registry import get
    from tuner.runtime.target import Target
    kernel, target = get(spec.name), Target.of(torch.device("cuda"))
    for r in rows:  # a config the study would not measure cannot become a pack entry: say so under the table
        why = kernel.refusal(r["config"], w, target)
        if why:
            r["tuner_refuses"] = why
            print(f"  {r['label']}: the tuner would not pick it: {why}")
    save_raw(args.out, f"config_sweep-{spec.name}",
             {"kernel": spec.name, "workload": workload_dict(w), "gpu": torch.cuda.get_device_name(),
              "rounds": args.rounds, "results": rows})
    return 0


if __name__ == "__main__":
    sys.exit(main())
