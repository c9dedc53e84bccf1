"""Benchmark: fused MoE routing vs PyTorch eager, the same under a CUDA graph, and the launch floor.

    python benchmarks/moe_routing.py [--pack packs/nvidia-h200] [--out benchmarks/results]
    python benchmarks/moe_routing.py --select-only      # Pack.select cost per call (CPU is fine)

Every config is verified against the reference before it is timed. The step is
launch-bound, so the kernel and the eager op sequence are both timed under CUDA-graph
replay, next to an empty Triton launch replayed the same way (the floor). Raw numbers go
to ``--out`` as JSON; a short table is printed last.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))  # benchmarks/_results.py (benchmarks is not a package)

from _results import save_raw  # noqa: E402

PROFILES = ("dsv3", "dsv41-flash")
TOKENS = (1, 16, 64, 256, 1024, 4096)


def _parse(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pack", type=Path, help="kernel pack folder (tuned configs); default configs without it")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "raw", help="folder for the raw JSON")
    ap.add_argument("--profiles", nargs="+", default=list(PROFILES), help="routing profiles to time")
    ap.add_argument("--tokens", nargs="+", type=int, default=list(TOKENS), help="token counts to time")
    ap.add_argument("--select-only", action="store_true", help="only the Pack.select micro-benchmark (runs on CPU)")
    ap.add_argument("--select-calls", type=int, default=100_000, help="calls timed in the select micro-benchmark")
    return ap.parse_args(argv)


def _temp_pack(root: Path) -> Path:
    """A minimal valid pack (schema 1) with moe_routing entries, for timing select() without one."""
    from kernel_templates.moe_routing import Workload, default_config
    from tuner.runtime import MANIFEST_SEAL, PACK_SCHEMA, gpu_identity, manifest_digest
    from tuner.runtime.target import Target

    entries = [{"workload": {"tokens": t, "profile": p}, "config": default_config(Workload(t, p), Target.named("sm_90"))}
               for p in PROFILES for t in TOKENS]
    table = {"categorical_axes": ["profile"], "numeric_axes": ["tokens"], "entries": entries}
    data = json.dumps(table).encode()
    (root / "moe_routing.json").write_bytes(data)
    manifest = {"schema": PACK_SCHEMA, "name": "bench-select", "fingerprint": dict(gpu_identity()),
                "files": {"moe_routing.json": hashlib.sha256(data).hexdigest()},
                "kernels": {"moe_routing": {"file": "moe_routing.json"}}}
    (root / "manifest.json").write_text(json.dumps(manifest))
    (root / MANIFEST_SEAL).write_text(manifest_digest(manifest) + "\n")
    return root


def bench_select(pack_path: Path | None, calls: int) -> dict[str, Any]:
    """Microseconds per cached ``Pack.select`` call (and per ``runtime.select`` through an active pack)."""
    from tuner import runtime

    with tempfile.TemporaryDirectory() as tmp:
        pack = runtime.load_pack(pack_path if pack_path else _temp_pack(Path(tmp)))
        wl = {"tokens": 64, "profile": "dsv3"}
        sel = pack.select("moe_routing", wl)  # first call fills the cache
        t0 = time.perf_counter()
        for _ in range(calls):
            pack.select("moe_routing", wl)
        per_pack = (time.perf_counter() - t0) / calls * 1e6
        runtime.use_pack(pack)
        try:
            t0 = time.perf_counter()
            for _ in range(calls):
                runtime.select("moe_routing", wl)
            per_runtime = (time.perf_counter() - t0) / calls * 1e6
        finally:
            runtime.use_pack(None)
    return {"calls": calls, "pack_select_us": per_pack, "runtime_select_us": per_runtime, "how": sel.how}


def bench_kernels(args: argparse.Namespace) -> dict[str, Any]:
    """Kernel (graph replay and plain launches), eager, eager in a graph and the floor, per shape."""
    import torch

    from kernel_templates import moe_routing as mr
    from tuner import runtime, timing
    from tuner.runtime.env import gpu_identity
    from tuner.runtime.target import Target

    if not timing.gpu_available():
        raise SystemExit("the kernel benchmark needs a CUDA GPU (use --select-only on the CPU)")
    pack = runtime.load_pack(args.pack) if args.pack else None
    floor_graph = timing.empty_launch_floor(graph=True)
    floor_plain = timing.empty_launch_floor(graph=False)
    rows = []
    for profile in args.profiles:
        for tokens in args.tokens:
            wl = mr.Workload(tokens, profile)
            wd = {"tokens": tokens, "profile": profile}
            sel = pack.select("moe_routing", wd) if pack else None
            cfg = sel.config if sel and sel.how != "default" else mr.default_config(wl, Target.of("cuda"))
            inputs = mr.make_inputs(wl, "cuda", seed=0)
            mr.verify(mr.launch(config=cfg, **inputs), mr.reference(**inputs), inputs)
            eager = mr.baselines["torch_eager"]
            mr.verify(eager(**inputs), mr.reference(**inputs), inputs)
            k_graph = timing.bench_kernel(mr.SPEC, lambda: mr.launch(config=cfg, **inputs))
            k_plain = timing.bench(lambda: mr.launch(config=cfg, **inputs), flush_l2=False)
            e_graph = timing.bench_kernel(mr.SPEC, lambda: eager(**inputs))
            e_plain = timing.bench(lambda: eager(**inputs), flush_l2=False)
            torch.cuda.synchronize()
            rows.append({"tokens": tokens, "profile": profile, "config": cfg, "how": sel.how if sel else "default",
                         "kernel_graph": k_graph.__dict__, "kernel_eager": k_plain.__dict__,
                         "torch_eager_graph": e_graph.__dict__, "torch_eager": e_plain.__dict__,
                         "floor_graph": floor_graph.__dict__})
    return {"gpu": gpu_identity(), "floor_graph": floor_graph.__dict__, "floor_plain": floor_plain.__dict__,
            "rows": rows}


def _table(result: dict[str, Any]) -> str:
    head = f"{'T':>6} {'profile':<12} {'kernel us':>10} {'graph-base us':>14} {'eager us':>9} {'floor us':>9} " \
           f"{'speedup':>8} {'kern/floor':>10}"
    lines = [head]
    for r in result["rows"]:
        k = r["kernel_graph"]["median_us"]
        g = r["torch_eager_graph"]["median_us"]
        f = r["floor_graph"]["median_us"]
        lines.append(f"{r['tokens']:>6} {r['profile']:<12} {k:>10.2f} {g:>14.2f} {r['torch_eager']['median_us']:>9.1f} "
                     f"{f:>9.2f} {g / k:>7.2f}x {k / f:>9.2f}x")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    result: dict[str, Any] = {"benchmark": "moe_routing", "created": time.strftime("%Y-%m-%dT%H:%M:%S"),
                              "pack": str(args.pack) if args.pack else None}
    result["select"] = bench_select(args.pack, args.select_calls)
    if not args.select_only:
        result.update(bench_kernels(args))
    save_raw(args.out, "moe_routing", result)
    s = result["select"]
    print(f"Pack.select (cached): {s['pack_select_us']:.3f} us/call; runtime.select: {s['runtime_select_us']:.3f} "
          f"us/call ({s['calls']} calls)")
    if "rows" in result:
        print(_table(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
