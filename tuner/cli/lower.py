"""`tune lower`: compile a template for a GPU target without that GPU; report what it emitted."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from typing import Annotated, Any, Optional

import typer
from rich.table import Table

from tuner.cli.common import CliError, console, given_path

app = typer.Typer()

TARGETS = ("sm_90", "sm_90a", "sm_100", "sm_100a", "sm_120")
"""The GPU targets ``lower`` compiles for (``tuner.runtime.target.NAMED``)."""

# Instruction classes worth knowing about, as they appear in PTX.
CLASSES = {
    "wgmma": r"\bwgmma\.mma_async",
    "tcgen05.mma": r"\btcgen05\.mma",
    "block_scale": r"block_scale",
    "tma": r"cp\.async\.bulk\.tensor",
    "bulk_copy": r"cp\.async\.bulk\.(?!tensor)",
    "cp.async": r"cp\.async\.(?:ca|cg)\.",
    "mma.sync": r"\bmma\.sync",
    "ldmatrix": r"\bldmatrix",
    "ld.global.v4": r"ld\.global(?:\.\w+)*\.v4",
    "ld.global.v2": r"ld\.global(?:\.\w+)*\.v2",
    "st.global.v4": r"st\.global(?:\.\w+)*\.v4",
    "atomics": r"\b(?:atom|red)\.",
}


def lower_one(fn, signature: dict[str, str], constexprs: dict[str, Any], arch: int, num_warps: int,
              num_stages: int) -> dict[str, Any]:
    """Compile one kernel for ``arch``; count instruction classes in its PTX. A signature
    from ``tuner.lowering.signature`` brings the JIT's specialization of the launch values
    and the launch's own options (they win over ``num_warps`` / ``num_stages``); a bare one
    is compiled with every pointer 16-byte aligned."""
    import triton
    from triton.backends.compiler import GPUTarget

    from tuner.lowering import pointer_alignment

    is_gluon = getattr(fn, "is_gluon", lambda: False)()
    if is_gluon:  # a Gluon kernel (explicit layouts): its own front end
        from triton.experimental.gluon._runtime import GluonASTSource as Source
    else:
        Source = triton.compiler.ASTSource
    attrs = getattr(signature, "attrs", None)
    src = Source(fn=fn, signature=dict(signature), constexprs=constexprs,
                 attrs=pointer_alignment(fn, signature) if attrs is None else attrs)
    options = {"num_warps": num_warps, "num_stages": num_stages, **getattr(signature, "options", {})}
    c = triton.compile(src, target=GPUTarget("cuda", arch, 32), options=options)
    ptx = c.asm["ptx"]
    found = {name: len(re.findall(rx, ptx)) for name, rx in CLASSES.items()}
    return {"classes": {k: v for k, v in found.items() if v}, "shared": getattr(c.metadata, "shared", None)}


def lower_kernel(kernel, target, configs: list[tuple[Any, dict]],
                 on_compiled: Any = None) -> list[dict[str, Any]]:
    """Compile each distinct (kernel function, signature, constexprs) of the given configs;
    ``on_compiled(n_done, n_configs_done, n_configs, function)`` after each compile."""
    fn_sigs = getattr(kernel.template, "lower_signatures", None)
    if fn_sigs is None:
        raise CliError(f"{kernel.name} has no lower_signatures(); it cannot be compiled ahead of time")
    done: dict[str, dict[str, Any]] = {}
    for i, (workload, cfg) in enumerate(configs):
        for fn, sig, cx in fn_sigs(workload, cfg, target):
            key = json.dumps([fn.__name__, sig, {k: repr(v) for k, v in cx.items()}, cfg.get("num_warps", 4),
                              cfg.get("num_stages", 3), repr(sorted(getattr(sig, "attrs", {}).items())),
                              getattr(sig, "options", {})], sort_keys=True)
            if key in done:
                continue
            r = lower_one(fn, sig, cx, target.cc, cfg["num_warps"], cfg["num_stages"])
            done[key] = {"function": fn.__name__, "config": cfg, **r}
            if on_compiled is not None:
                on_compiled(len(done), i, len(configs), fn.__name__)
    return list(done.values())


@app.command("lower")
def lower(kernel: Annotated[str, typer.Argument(help="Kernel name.")],
          target: Annotated[str, typer.Option(
              "--target", help=f"GPU target: {', '.join(TARGETS)} (sm_90*: Hopper, sm_100*: Blackwell "
              "datacenter, sm_120: Blackwell consumer).")] = "sm_90",
          pack_: Annotated[Optional[str], typer.Option("--pack", help="Also compile this pack's configs.")] = None) -> None:
    """Compile the template (default configs of its grid, plus a pack's) for a GPU target, no GPU needed.

    Configs are planned as on that target (its defaults; Gluon kernels where it runs them),
    and each launch compiled as the JIT would specialize it there."""
    from tuner import registry
    from tuner.runtime.target import Target
    from tuner.spec import workload_from_dict

    pack = given_path(pack_, "--pack")
    if target not in TARGETS:
        raise CliError(f"--target: unknown {target!r} (choose from {', '.join(TARGETS)})")
    tgt = Target.named(target)
    if os.environ.get("TRITON_INTERPRET", "0") not in ("", "0"):
        # The interpreter patches triton.language in this process; compile in a clean one.
        env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
        cmd = [sys.executable, "-m", "tuner.cli.main", "lower", kernel, "--target", target]
        r = subprocess.run(cmd + (["--pack", str(pack)] if pack else []), env=env, stderr=subprocess.PIPE, text=True)
        if r.returncode:
            raise CliError((r.stderr.strip().splitlines() or ["lowering failed"])[-1].removeprefix("error: "))
        return
    k = registry.get(kernel)
    configs = [(w, k.spec.default_config(w, tgt)) for w in k.workloads]  # planned as the target GPU would
    if pack is not None:
        from tuner.runtime import PackError, load_pack

        try:
            p = load_pack(pack, quiet=True)  # its configs compiled for --target, whatever runs here
        except PackError as e:
            raise CliError(str(e)) from None
        table = p.tables.get(k.name)
        for e in table.entries if table else []:
            configs.append((workload_from_dict(k.spec.workload, e["workload"]), e["config"]))
    t0 = time.monotonic()

    def said(n: int, i: int, total: int, fn: str) -> None:
        console.print(f"compiled {n}: {fn} (config {i + 1}/{total}, {time.monotonic() - t0:.0f} s)",
                      highlight=False, soft_wrap=True)

    console.print(f"compiling {k.name} for {target}: {len(configs)} configs", highlight=False)
    results = lower_kernel(k, tgt, configs, said)
    table = Table(title=f"{k.name} lowered for {target}: {len(results)} distinct kernels")
    for col in ("function", "config", "shared B", "instruction classes"):
        table.add_column(col)
    for r in results:
        table.add_row(r["function"], " ".join(f"{a}={b}" for a, b in r["config"].items()), str(r["shared"]),
                      ", ".join(f"{c} x{n}" for c, n in r["classes"].items()) or "plain loads/stores, FMA")
    console.print(table)
