"""Benchmark: what a serving engine pays per kernel call through the runtime, in one run.

    python benchmarks/op_overhead.py [--pack packs] [--out benchmarks/results/raw] [--threads 8]

Per shape (MoE routing, dsv4-flash, 1 and 64 tokens): the host time of one call of the plain
function, of the ``torch.ops.tuner`` op, and a CUDA-graph replay of the op (a decode step replays
graphs), each averaged over back-to-back calls; then the cached selection alone (``runtime.select``)
on one thread and on ``--threads`` threads at once. On a CPU only the selection is timed. Raw
numbers go to ``--out`` as JSON; a table is printed last.
"""
from __future__ import annotations

import argparse
import sys
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from _results import RAW_OUT, save_raw  # noqa: E402


def _parse(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pack", type=Path, help="a pack or a folder of packs (default: none, the defaults)")
    ap.add_argument("--out", type=Path, default=RAW_OUT, help="folder for the raw JSON")
    ap.add_argument("--tokens", nargs="+", type=int, default=[1, 64], help="token counts (dsv4-flash routing)")
    ap.add_argument("--calls", type=int, default=2000, help="calls averaged per measurement")
    ap.add_argument("--threads", type=int, default=8, help="threads selecting at once")
    return ap.parse_args(argv)


def _per_call_us(fn, calls: int, sync) -> float:
    for _ in range(20):
        fn()
    sync()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    sync()
    return (time.perf_counter() - t0) / calls * 1e6


def _select_us(calls: int, threads: int) -> dict[str, float]:
    from tuner import runtime
    from tuner.runtime.target import Target

    target, shapes = Target.of(), [{"tokens": t, "profile": "dsv4-flash"} for t in (1, 3, 64, 200, 4096)]
    one = _per_call_us(lambda: [runtime.select("moe_routing", w, target) for w in shapes], calls, lambda: None)
    barrier, spans = threading.Barrier(threads), []

    def run() -> None:
        barrier.wait()
        t0 = time.perf_counter()
        for _ in range(calls):
            for w in shapes:
                runtime.select("moe_routing", w, target)
        spans.append(time.perf_counter() - t0)

    ts = [threading.Thread(target=run) for _ in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    n = calls * len(shapes)
    return {"select_us": one / len(shapes), "select_us_threads": max(spans) / n * 1e6,
            "select_calls_per_s_threads": threads * n / max(spans)}


def _gpu_rows(tokens: list[int], calls: int) -> list[dict[str, Any]]:
    import torch

    import kernel_templates.moe_routing as MR

    ops, rows = torch.ops.tuner, []
    for T in tokens:
        x = MR.make_inputs(MR.Workload(T, "dsv4-flash"), "cuda", 0)
        kw = {"top_k": x["top_k"], "scoring": x["scoring"], "routed_scaling_factor": x["routed_scaling_factor"]}
        def plain(x=x, kw=kw):
            return MR.moe_routing(x["logits"], x["bias"], **kw)

        def op(x=x, kw=kw):
            return ops.moe_routing(x["logits"], x["bias"], **kw)

        MR.verify(MR.MoeRouting(*op()), MR.reference(**x), x)
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            op()
        torch.cuda.current_stream().wait_stream(side)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            op()
        sync = torch.cuda.synchronize
        rows.append({"tokens": T, "plain_us": _per_call_us(plain, calls, sync), "op_us": _per_call_us(op, calls, sync),
                     "graph_replay_us": _per_call_us(g.replay, calls, sync)})
    return rows


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    import torch

    import kernel_templates.moe_routing  # noqa: F401  (registers the op and its defaults)
    from tuner import runtime

    if args.pack:
        runtime.use_pack(args.pack)
    gpu = torch.cuda.is_available()
    result: dict[str, Any] = {"gpu": torch.cuda.get_device_name() if gpu else "cpu", "pack": runtime.stats()["pack"],
                              "chosen": runtime.stats()["chosen"],
                              "rows": _gpu_rows(args.tokens, args.calls) if gpu else []}
    result.update(_select_us(args.calls, args.threads), threads=args.threads)
    save_raw(args.out, "op_overhead", result)
    print(f"{result['gpu']}, pack {result['pack']}: {result['chosen']}")
    print(f"runtime.select (cached): {result['select_us']:.2f} us/call on one thread; {args.threads} threads at once: "
          f"{result['select_calls_per_s_threads'] / 1e6:.2f} M calls/s in all")
    if result["rows"]:
        print(f"{'tokens':>6} {'plain us':>9} {'op us':>7} {'graph us':>9}")
        for r in result["rows"]:
            print(f"{r['tokens']:>6} {r['plain_us']:>9.1f} {r['op_us']:>7.1f} {r['graph_replay_us']:>9.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
