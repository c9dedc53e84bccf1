"""Peers on the same GPU: each family's kernel against the production kernels serving engines run
(DeepSeek's DeepGEMM, FlashMLA and TileKernels), at the same shapes, in one process on one GPU.

    python3 benchmarks/peers.py [--family sparse_mqa,attention,mhc,engram,moe_routing] [--quick]
        [--pack packs/nvidia-h200] [--only batch=1,32] [--rounds 5] [--reps 50] [--budget 9m]
        [--no-breakdown] [--out DIR]

Per family and shape: ours with the pack's config (``tuner.runtime``; the default without
``--pack``) and every peer on the same inputs, converted to the peer's layout where it has
its own (``peers_layouts``: our FP8 keys to DeepGEMM's fused paged cache, our latents to
FlashMLA's V4 or dense FP8 formats, our token stream to TileKernels' n-gram ids). Each
candidate is first checked against our reference with the family's own ``verify`` (one that
disagrees is reported and never timed), then all are timed the same way, in ``--rounds``
interleaved rounds: CUDA-graph replay where our kernel is launch-bound, the L2 flushed where
its inputs come from HBM (``tuner.timing``). Where ours is slower, both sides' launches are
profiled (CUPTI; ``--no-breakdown`` skips it) and the closing note says where the time goes.

    sparse_mqa   DeepGEMM fp8_paged_mqa_logits (+ torch.topk)       vs  our scoring / scoring + top-k
    attention    FlashMLA dense FP8 / dense bf16 / sparse V4 decode vs  ours nvfp4 / fp8 / bf16
    mhc          TileKernels pre (fused, 4 kernels), DeepGEMM tf32_hc_prenorm_gemm + fused rest,
                 TileKernels post                                   vs  mhc_pre / mhc_post / mhc_seam
    engram       TileKernels engram_hash                            vs  engram_hash
    moe_routing  TileKernels top2_sum_gate / topk_gate              vs  moe_routing / its top-k part

A peer that does not load is reported with its exact error (every row it would have had says
so). One table per family (peer, shape, peer us, ours, ours us, ratio = peer / ours: above 1
ours is faster, each side's agreement), the GPU named; the JSON (``--out``) is written after
every shape. Install the peers with ``pip install -e '.[peers]'`` (on a machine without network,
``benchmarks/peers_device.sh``). Exit status 2: bad input, no GPU, or no peer loads.
"""
from __future__ import annotations

import argparse
import logging
import re
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))  # the sibling modules (benchmarks is not a package)

from _results import RAW_OUT, raw_path, write_raw  # noqa: E402
from peers_core import FAMILIES, closing_note, load_peer, probe_import, report, select, shapes, table  # noqa: E402

log = logging.getLogger("bench.peers")


def parse_budget(text: str) -> float:
    """``90s`` / ``9m`` / ``1h`` / ``120`` -> seconds (> 0)."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smh]?)\s*", text)
    if not m or float(m.group(1)) <= 0:
        raise ValueError(f"--budget: want a positive duration like 90s, 9m or 1h, got {text!r}")
    return float(m.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600}[m.group(2)]


def parse_only(text: str) -> dict[str, set[str]]:
    """``batch=1,32;context=8K`` -> ``{"batch": {"1", "32"}, "context": {"8K"}}`` (axes ``;``-separated)."""
    out: dict[str, set[str]] = {}
    for part in filter(None, (p.strip() for p in text.split(";"))):
        axis, sep, values = part.partition("=")
        vals = {v.strip() for v in values.split(",") if v.strip()}
        if not sep or not axis.strip() or not vals:
            raise ValueError(f"--only: want AXIS=V[,V...][;AXIS=...], got {part!r}")
        out[axis.strip()] = vals
    return out


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--family", default=",".join(FAMILIES),
                    help=f"comma-separated families (default all: {', '.join(FAMILIES)})")
    ap.add_argument("--quick", action="store_true", help="a corner of each family's grid (a first run)")
    ap.add_argument("--pack", type=Path, default=None, help="kernel pack whose configs ours runs with (default configs without)")
    ap.add_argument("--only", default="", metavar="AXIS=V,..;..",
                    help="keep the shapes whose axes hold these values, e.g. 'batch=1,32;context=8K'")
    ap.add_argument("--rounds", type=int, default=5, help="interleaved timing rounds (default 5)")
    ap.add_argument("--reps", type=int, default=50, help="repetitions a candidate and round (default 50)")
    ap.add_argument("--budget", default=None, help="stop starting shapes after this long, e.g. 9m (the JSON keeps what ran)")
    ap.add_argument("--no-breakdown", action="store_true", help="do not profile the launches where ours is slower")
    ap.add_argument("--out", type=Path, default=RAW_OUT, help="folder for the raw JSON (default benchmarks/results/raw)")
    args = ap.parse_args(argv)
    fams = [f.strip() for f in args.family.split(",") if f.strip()]
    bad = [f for f in fams if f not in FAMILIES]
    if bad or not fams:
        ap.error(f"--family: unknown {', '.join(bad) or '(none given)'} (known: {', '.join(FAMILIES)})")
    args.families = fams
    if args.rounds < 1 or args.reps < 1:
        ap.error("--rounds and --reps must be >= 1")
    try:
        args.budget_s = parse_budget(args.budget) if args.budget else None
        args.filters = parse_only(args.only)
    except ValueError as e:
        ap.error(str(e))
    if args.pack is not None and not (args.pack / "manifest.json").is_file():
        ap.error(f"--pack: {args.pack} is not a kernel pack (no manifest.json)")
    return args


def plan(args: argparse.Namespace) -> dict[str, list[dict[str, Any]]]:
    """The shapes to run, per family (``--quick``, ``--only``)."""
    return {f: select(shapes(f, args.quick), args.filters) for f in args.families}


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    todo = plan(args)
    if not any(todo.values()):
        print("peers: --only leaves no shape to run", file=sys.stderr)
        return 2
    import torch

    if not torch.cuda.is_available():
        print("peers: no CUDA GPU: this benchmark runs our kernels and the peers' on one", file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    from peers_runs import MODULES, RUNNERS, Ctx

    from tuner import runtime
    from tuner.runtime.env import gpu_identity

    if args.pack is not None:
        runtime.use_pack(args.pack)
    needed = sorted({m for f in args.families for m in MODULES[f]})
    peers, errors = {}, {}
    for m in needed:
        peers[m], errors[m] = load_peer(m, probe=probe_import)
        log.info("peer %s: %s", m, "loaded" if errors[m] is None else f"NOT LOADED: {errors[m]}")
    gpu = gpu_identity()
    name = gpu.get("gpu", torch.cuda.get_device_name())
    path = raw_path(args.out, "peers")
    meta = {"pack": str(args.pack) if args.pack else None, "rounds": args.rounds, "reps": args.reps,
            "command": "python3 benchmarks/peers.py " + " ".join(argv if argv is not None else sys.argv[1:])}
    results: dict[str, dict[str, Any]] = {f: {"shapes": [], "rows": []} for f in args.families}

    def save() -> None:
        write_raw(path, report(gpu, errors, results, **meta))

    if all(e is not None for e in errors.values()):
        save()
        print("peers: no peer package loads (" + "; ".join(f"{m}: {e}" for m, e in errors.items())
              + "); install them: pip install -e '.[peers]' or benchmarks/peers_device.sh", file=sys.stderr)
        return 2
    ctx = Ctx(peers=peers, errors=errors, rounds=args.rounds, reps=args.reps, breakdown=not args.no_breakdown)
    t0 = time.perf_counter()
    for fam in args.families:
        for shape in todo[fam]:
            if args.budget_s and time.perf_counter() - t0 > args.budget_s:
                results[fam].setdefault("not_run", []).append(shape)
                continue
            t1 = time.perf_counter()
            try:
                res = RUNNERS[fam](shape, ctx)
            except torch.cuda.OutOfMemoryError as e:
                res = {"shape": shape, "error": f"out of memory: {str(e).splitlines()[0]}", "rows": []}
            except Exception as e:  # noqa: BLE001 - one shape's failure (ours or a peer's) must not lose the others
                res = {"shape": shape, "error": f"{type(e).__name__}: {e}".splitlines()[0], "rows": []}
            torch.cuda.empty_cache()
            results[fam]["shapes"].append({k: v for k, v in res.items() if k != "rows"})
            results[fam]["rows"] += res["rows"]
            short = "; ".join(f"{r['peer']} vs {r['ours']} {r['ratio']:.2f}x" for r in res["rows"] if r["ratio"])
            log.info("%s %s: %s (%.0f s)", fam, shape, res.get("error") or res.get("skipped") or short or "no ratio",
                     time.perf_counter() - t1)
            save()
    save()
    print(f"raw results: {path}")
    for fam in args.families:
        print()
        print("\n".join(table(fam, results[fam]["rows"], name)))
        for s in results[fam]["shapes"]:
            if "error" in s or "skipped" in s:
                print(f"  {s['shape']}: {s.get('error') or 'skipped: ' + s['skipped']}")
        if results[fam].get("not_run"):
            print(f"  {len(results[fam]['not_run'])} shape(s) not run: --budget spent")
    rows = [r for f in results.values() for r in f["rows"]]
    reasons = {(r["family"], r["shape_key"], r["ours"]): r["reason"] for r in rows if "reason" in r}
    print()
    print("\n".join(closing_note(rows, reasons)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
