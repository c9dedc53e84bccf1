"""`tune list` and `tune show <kernel>`: what can be tuned, and what was."""
from __future__ import annotations

import dataclasses
from typing import Annotated

import typer
from rich.table import Table
from sqlalchemy import func, select

from tuner import registry
from tuner.cli.common import DbOption, console

app = typer.Typer()


@app.command("list")
def list_kernels() -> None:
    """List the kernel families, their workload axes and search-space sizes."""
    table = Table(title="kernels")
    for col in ("command", "workload axes", "parameters", "configs", "default grid"):
        table.add_column(col)
    for k in registry.kernels().values():
        table.add_row(f"tune {k.cli_name}", ", ".join(f.name for f in dataclasses.fields(k.spec.workload)),
                      ", ".join(k.space), str(k.space.size()), f"{len(k.workloads)} workloads")
    console.print(table)


@app.command("show")
def show(kernel: Annotated[str, typer.Argument(help="Kernel name, e.g. moe_routing or moe-routing.")],
         db: DbOption = None) -> None:
    """Show the winners of a kernel per environment and workload, and its trial counts."""
    from tuner.store import Environment, Trial, Winner, open_store

    k = registry.get(kernel)
    store = open_store(db, create=False)
    with store.session() as s:
        rows = s.execute(select(Winner, Environment).join(Environment, Winner.environment_id == Environment.id)
                         .where(Winner.kernel == k.name).order_by(Environment.id, Winner.workload_key)).all()
        counts = s.execute(select(Trial.status, func.count()).where(Trial.kernel == k.name, Trial.phase == "search")
                           .group_by(Trial.status)).all()
    if not rows:
        console.print(f"{k.name}: nothing tuned in {store.shown_url} yet (run `tune {k.cli_name}`)")
        return
    table = Table(title=f"{k.name} winners")
    for col in ("gpu", "workload", "median us", "p20-p80", "default us", "speedup", "floor %", "config"):
        table.add_column(col)
    for w, env in rows:
        sp = f"{w.default_median_us / w.median_us:.2f}x" if w.default_median_us else "-"
        fl = f"{100 * w.floor_us / w.median_us:.0f}%" if w.floor_us and w.meaningful else "-"
        cfg = "default" if w.is_default else " ".join(f"{a}={b}" for a, b in w.config.items())
        table.add_row(env.gpu + ("" if w.meaningful else " (interp)"), w.workload_key, f"{w.median_us:.2f}",
                      f"{w.p20_us:.2f}-{w.p80_us:.2f}", f"{w.default_median_us:.2f}" if w.default_median_us else "-",
                      sp, fl, cfg)
    console.print(table)
    console.print("trials: " + ", ".join(f"{st.value} {n}" for st, n in counts))
