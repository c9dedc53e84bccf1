"""Benchmark the mHC kernels on a GPU: tuned (or default) config vs PyTorch eager, the
same eager math in a CUDA graph, and the roofline floor, all measured in ONE run.

    python benchmarks/mhc.py --pack packs/nvidia-h200 [--op seam] [--tokens 1,64] [--dim 5120]
    python benchmarks/mhc.py --op seam --tokens 1024,4096 --dim 5120 --no-baselines \
        --variants '{"xy1": {"XY_GROUP": 1}, "k8": {"SPLIT_K": 8}}'

``--variants`` names extra configs, each a partial config laid over the workload's
default (one outside the space or pruned is skipped); ``name@T`` applies at that T only.
Variants run first, in order, then the tuned entry and the default; each is verified,
then timed, and printed as it finishes.

Every config is verified against the float64 reference before it is timed. The floor is
``cost(workload).bytes`` over the device-to-device copy bandwidth measured in this run
(never below the graph-replay launch floor, also measured here). Raw numbers go to
``--out`` as JSON; a short table is printed last.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))  # benchmarks/_results.py (benchmarks is not a package)

from _results import save_raw  # noqa: E402


def _parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--pack", type=Path, default=None, help="kernel pack folder with tuned configs (defaults if absent)")
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "raw", help="folder for the raw JSON")
    p.add_argument("--op", default="pre,post,seam", help="comma list of ops (pre, post, seam)")
    p.add_argument("--tokens", default=None, help="comma list of T (default: the search-space grid)")
    p.add_argument("--dim", default=None, help="comma list of D (default: the search-space grid)")
    p.add_argument("--reps", type=int, default=100, help="timed repetitions per measurement")
    p.add_argument("--variants", default=None, help="JSON {name: partial config over the default}")
    p.add_argument("--no-baselines", action="store_true", help="skip the eager / graph baselines (faster)")
    return p.parse_args(argv)


def _ceilings(reps: int) -> dict[str, float]:
    """Device-to-device copy bandwidth (read + write bytes / s) and the launch floors."""
    from tuner.roofline import measure_ceilings

    c = measure_ceilings(reps=reps)
    return {"copy_bytes_per_s": c["hbm_bytes_per_s"], "launch_graph_us": c["launch_graph_us"],
            "launch_eager_us": c["empty_launch_us"]}


def _timing(t: Any) -> dict[str, float]:
    return {"median_us": t.median_us, "p20_us": t.p20_us, "p80_us": t.p80_us}


def run(args: argparse.Namespace) -> dict[str, Any]:
    import torch

    from kernel_templates import mhc
    from search_spaces.mhc import SPACE, WORKLOADS, constraints
    from tuner import runtime
    from tuner.runtime.target import Target
    from tuner.spec import workload_dict, workload_key
    from tuner.timing import bench, bench_kernel, gpu_available

    if not gpu_available():
        raise SystemExit("benchmarks/mhc.py needs a CUDA GPU (and TRITON_INTERPRET unset)")
    pack = runtime.load_pack(args.pack) if args.pack else None
    target = Target.of("cuda")
    ops = set(args.op.split(","))
    toks = {int(x) for x in args.tokens.split(",")} if args.tokens else None
    dims = {int(x) for x in args.dim.split(",")} if args.dim else None
    wls = [w for w in WORKLOADS if w.op in ops and (toks is None or w.tokens in toks) and (dims is None or w.dim in dims)]
    variants = json.loads(args.variants) if args.variants else {}
    ceil = _ceilings(args.reps)
    rows = []
    for wl in wls:
        inputs = mhc.make_inputs(wl, "cuda", 0)
        ref = mhc.reference(**inputs)
        default = mhc.default_config(wl, target)
        sel = pack.select("mhc", workload_dict(wl), target) if pack else None
        tuned = sel.config if sel is not None and sel.how != "default" else None
        # Variants first, in the order given (a config that hangs or crashes the context
        # then costs only what comes after it), then the tuned entry and the default.
        configs: dict[str, Any] = {}
        for vname, over in variants.items():
            if "@" in vname and int(vname.rsplit("@", 1)[1]) != wl.tokens:
                continue  # name@T: only at that T
            cfg = dict(default, **over)
            if not SPACE.contains(cfg) or not constraints(cfg, wl, target):
                print(f"{workload_key(wl)} {vname}: {cfg} outside the space or pruned, skipped", flush=True)
                continue
            configs[vname] = cfg
        configs |= ({"tuned": tuned} if tuned else {}) | {"default": default}
        row: dict[str, Any] = {"workload": workload_dict(wl), "key": workload_key(wl),
                               "how": sel.how if sel else "default", "configs": configs}
        nbytes, flops = mhc.cost(wl)
        row["bytes"], row["flops"] = nbytes, flops
        row["floor_us"] = max(nbytes / ceil["copy_bytes_per_s"] * 1e6, ceil["launch_graph_us"])
        for name, cfg in configs.items():
            t0 = time.time()
            try:
                mhc.verify(mhc.launch(config=cfg, **inputs), ref, inputs)
            except AssertionError as e:  # a wrong config is reported, never timed
                row[f"{name}_error"] = str(e)
                print(f"{workload_key(wl)} {name}: FAILED VERIFY {e}", flush=True)
                continue
            row[name] = _timing(bench_kernel(mhc.SPEC, lambda c=cfg, i=inputs: mhc.launch(config=c, **i),
                                             reps=args.reps))
            # one line per config as it finishes: a hang or a crash later keeps what was measured
            print(f"{workload_key(wl)} {name}: {row[name]['median_us']:.2f} us "
                  f"({100 * row['floor_us'] / row[name]['median_us']:.0f}% of floor) {cfg} "
                  f"[{time.time() - t0:.1f} s]", flush=True)
        if not args.no_baselines:
            eager = mhc.baselines["torch_eager"]
            row["torch_eager"] = _timing(bench(lambda i=inputs: eager(**i), reps=args.reps))
            row["torch_graph"] = _timing(bench_kernel(mhc.SPEC, lambda i=inputs: eager(**i), reps=args.reps))
        rows.append(row)
        del inputs, ref
        torch.cuda.empty_cache()
    return {"kernel": "mhc", "created": time.strftime("%Y-%m-%dT%H:%M:%S"), "gpu": runtime.gpu_identity(),
            "pack": str(args.pack) if args.pack else None, "ceilings": ceil, "rows": rows}


def _table(result: dict[str, Any]) -> str:
    head = f"{'workload':<28}{'how':>8}{'kernel us':>11}{'eager us':>10}{'graph us':>10}{'floor us':>10}" \
           f"{'x eager':>9}{'x graph':>9}{'% floor':>9}"
    lines = [head, "-" * len(head)]
    for r in result["rows"]:
        best = r.get("tuned") or r.get("default")
        if best is None:
            lines.append(f"{r['key']:<28}  FAILED VERIFY: {r.get('tuned_error') or r.get('default_error')}")
            continue
        k, f = best["median_us"], r["floor_us"]
        e = r["torch_eager"]["median_us"] if "torch_eager" in r else float("nan")
        g = r["torch_graph"]["median_us"] if "torch_graph" in r else float("nan")
        lines.append(f"{r['key']:<28}{r['how']:>8}{k:>11.2f}{e:>10.1f}{g:>10.1f}{f:>10.2f}"
                     f"{e / k:>9.2f}{g / k:>9.2f}{100 * f / k:>8.0f}%")
        for name in r["configs"]:
            if name not in ("default", "tuned") and name in r:
                v = r[name]["median_us"]
                lines.append(f"  {name:<26}{v:>19.2f}{'':>30}{100 * f / v:>26.0f}%")
    c = result["ceilings"]
    lines.append(f"copy {c['copy_bytes_per_s'] / 1e12:.2f} TB/s; graph launch floor {c['launch_graph_us']:.2f} us; "
                 f"GPU {result['gpu'].get('gpu')}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    args = _parse(argv)
    result = run(args)
    save_raw(args.out, "mhc", result)
    print(_table(result))


if __name__ == "__main__":
    main()
