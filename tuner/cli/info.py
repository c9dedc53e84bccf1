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
         db: DbOption = None,
         all_: Annotated[bool, typer.Option("--all", help="Also the winners tuned on older template sources.")] = False
         ) -> None:
    """Show the winners of a kernel per environment and workload, and its trial counts.

    One row a workload: its winner under today's template source, else (marked *) the
    newest under an earlier one; --all lists every source's."""
    from rich.markup import escape

    from tuner.store import Environment, Trial, Winner, open_store

    k = registry.get(kernel)
    store = open_store(db, create=False)
    with store.session() as s:
        rows = s.execute(select(Winner, Environment).join(Environment, Winner.environment_id == Environment.id)
                         .where(Winner.kernel == k.name).order_by(Winner.updated, Winner.id)).all()
        counts = s.execute(select(Trial.status, func.count()).where(Trial.kernel == k.name, Trial.phase == "search")
                           .group_by(Trial.status)).all()
    if not rows:
        again = f"tune {k.cli_name}" + (f" --db {db}" if db is not None else "")
        console.print(f"{k.name}: nothing tuned in {escape(store.shown_url)} yet (run `{escape(again)}`)")
        return
    current = k.source_hash
    if not all_:  # per (environment, workload): today's source's winner, else the newest
        best: dict[tuple[int, str], tuple] = {}
        for w, env in rows:
            key = (env.id, w.workload_key)
            if key not in best or w.source_hash == current or best[key][0].source_hash != current:
                best[key] = (w, env)
        rows = list(best.values())
    rows.sort(key=lambda r: (r[1].id, _sort_key(r[0].workload), r[0].source_hash != current, r[0].updated))
    older = sum(w.source_hash != current for w, _ in rows)
    gpus = sorted({env.gpu + ("" if w.meaningful else " (interp)") for w, env in rows})
    table = Table(title=f"{k.name} winners" + (f" on {escape(gpus[0])}" if len(gpus) == 1 else ""))
    if len(gpus) > 1:
        table.add_column("gpu", overflow="fold")
    axes = [f.name for f in dataclasses.fields(k.spec.workload)]
    table.add_column(" ".join(axes), overflow="fold", min_width=min(20, 6 * len(axes)))
    for col in ("us", "±", "default", "speedup", "floor"):
        table.add_column(col, justify="right")
    # a config reads as one line: in the table where it fits, else numbered below it
    configs = [" ".join(f"{a}={b}" for a, b in w.config.items()) for w, _ in rows if not w.is_default]
    inline = console.width >= 100 + max(map(len, configs), default=0)
    table.add_column("config", overflow="fold")
    below: list[str] = []
    for w, env in rows:
        sp = f"{w.default_median_us / w.median_us:.2f}x" if w.default_median_us else "-"
        fl = f"{100 * w.floor_us / w.median_us:.0f}%" if w.floor_us and w.meaningful else "-"
        cfg = "default" if w.is_default else " ".join(f"{a}={b}" for a, b in w.config.items())
        if not inline and not w.is_default:
            below.append(cfg)
            cfg = f"[{len(below)}]"
        shape = " ".join(str(w.workload.get(a, "?")) for a in axes)
        spread = (w.p80_us - w.p20_us) / (2 * w.median_us) if w.median_us else 0.0
        cells = [escape(shape) + (" *" if w.source_hash != current else ""), f"{w.median_us:.2f}",
                 f"±{100 * spread:.1f}%", f"{w.default_median_us:.2f}" if w.default_median_us else "-",
                 sp, fl, escape(cfg)]
        table.add_row(*([escape(env.gpu + ("" if w.meaningful else " (interp)"))] if len(gpus) > 1 else []), *cells)
    console.print(table)
    for i, cfg in enumerate(below, 1):
        console.print(f"[{i}] {escape(cfg)}", highlight=False, markup=False)
    if older:
        console.print(f"* {older} of {len(rows)} tuned on an older template source than today's ({current}); "
                      f"`tune {k.cli_name} --retune` re-tunes them")
    console.print("trials: " + ", ".join(f"{st.value} {n}" for st, n in counts))


def _sort_key(workload: dict) -> tuple:
    """Numbers numerically, strings as strings, in axis order."""
    return tuple((1, 0.0, v) if isinstance(v, str) else (0, float(v), "") for v in workload.values())
