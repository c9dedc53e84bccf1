"""`tune list` and `tune show <kernel>`: what can be tuned, and what was."""
from __future__ import annotations

import dataclasses
import statistics
from typing import Annotated, Any

import typer
from rich.table import Table
from sqlalchemy import func, select

from tuner import registry
from tuner.cli.common import DbOption, console, undecodable

app = typer.Typer()


@app.command("list")
def list_kernels() -> None:
    """List the kernel families, their workload axes and search-space sizes."""
    table = Table(title="kernels")
    for col in ("command", "workload axes", "parameters", "configs", "default grid"):
        table.add_column(col, overflow="fold")
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
    from tuner.store import open_store

    k = registry.get(kernel)
    store = open_store(db, create=False)
    console.print(f"database: {store.shown_url}{_whence(store, db)}", highlight=False, markup=False, soft_wrap=True)
    try:
        _show(k, store, db, all_)
    except (ValueError, LookupError, TypeError, AttributeError, RecursionError) as e:
        raise undecodable(store, e) from None


def _whence(store: Any, db: str | None) -> str:
    """Where the database read came from, when not from --db."""
    import os

    from tuner.store.db import SHIPPED, user_db

    if db is not None:
        return ""
    if os.environ.get("TUNER_DB"):
        return " ($TUNER_DB)"
    if store.url == f"sqlite:///{SHIPPED}":
        return f" (the checkout's shipped history: {user_db()} does not exist yet)"
    return ""


def _show(k: Any, store: Any, db: str | None, all_: bool) -> None:
    """``tune show``'s tables; a row that does not hold what it should raises (one line above)."""
    from rich.markup import escape

    from tuner.spec import canonical_workload, workload_sort_key
    from tuner.store import Environment, Trial, Winner

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
    cls = k.spec.workload
    axes = [f.name for f in dataclasses.fields(cls)]
    shape_of = {id(w): canonical_workload(cls, w.workload) for w, _ in rows}  # an axis added since: its default
    if not all_:  # per (environment, workload): today's source's winner, else the newest
        best: dict[tuple[int, tuple], tuple] = {}
        for w, env in rows:
            key = (env.id, tuple(str(v) for v in shape_of[id(w)].values()))
            if key not in best or w.source_hash == current or best[key][0].source_hash != current:
                best[key] = (w, env)
        rows = list(best.values())
    rows.sort(key=lambda r: (r[1].id, workload_sort_key(shape_of[id(r[0])]), r[0].source_hash != current, r[0].updated))
    older = sum(w.source_hash != current for w, _ in rows)
    # several environments of one GPU (a driver or package upgrade) are told apart by their id
    envs = {env.id: env for _, env in rows}
    many_gpus = len({e.gpu for e in envs.values()}) > 1
    env_label = {i: e.gpu + (f" #{i}" if len(envs) > 1 and not many_gpus else "") for i, e in envs.items()}
    lead = ["gpu"] if len(envs) > 1 else []
    head = lead + [" ".join(axes), "us", "±", "default", "speedup", "floor"] + (["source"] if all_ else [])
    body, cfgs = [], []
    for w, env in rows:
        spread = (w.p80_us - w.p20_us) / (2 * w.median_us) if w.median_us else 0.0
        floor = 100 * w.floor_us / w.median_us if w.floor_us and w.meaningful else None
        body.append(([env_label[env.id] + ("" if w.meaningful else " (interp)")] if lead else [])
                    + [" ".join(str(shape_of[id(w)].get(a, "?")) for a in axes) + (" *" if w.source_hash != current else ""),
                       f"{w.median_us:.2f}", f"±{100 * spread:.1f}%",
                       f"{w.default_median_us:.2f}" if w.default_median_us else "-",
                       f"{w.default_median_us / w.median_us:.2f}x" if w.default_median_us else "-",
                       "-" if floor is None else "<1%" if floor < 1 else f"{floor:.0f}%"]
                    + ([w.source_hash[:8]] if all_ else []))
        cfgs.append("default" if w.is_default else " ".join(f"{a}={b}" for a, b in w.config.items()))
    # a config reads as one line: in the table where the table then fits, else numbered below it
    widths = [max(len(h), *(len(r[i]) for r in body)) + 3 for i, h in enumerate(head)]
    inline = sum(widths) + max(map(len, cfgs)) + 4 <= console.width
    numbered: dict[str, int] = {}
    if not inline:
        for c in cfgs:
            if c != "default":
                numbered.setdefault(c, len(numbered) + 1)
    single = next(iter(envs.values())).gpu if not lead else None
    table = Table(title=f"{k.name} winners" + (f" on {escape(single)}" if single else ""))
    for i, h in enumerate(head):
        table.add_column(h, overflow="fold", justify="left" if i < len(lead) + 1 or h == "source" else "right")
    table.add_column("config", overflow="fold")
    for cells, c in zip(body, cfgs):
        table.add_row(*map(escape, cells), escape(f"[{numbered[c]}]" if c in numbered else c))
    console.print(table)
    for c, i in numbered.items():
        console.print(f"[{i}] {c}", highlight=False, markup=False)
    if older:
        again = f"tune campaign --kernel {k.cli_name} --only stale" + (f" --db {db}" if db is not None else "")
        console.print(f"* {older} of {len(rows)} tuned on an older template source than today's ({current}): "
                      f"`{escape(again)}` on that GPU re-times each one's winner beside the default, then searches",
                      soft_wrap=True)
    for env_id, env in envs.items():  # what the search bought over the default, per GPU
        gains = sorted(w.default_median_us / w.median_us for w, e in rows
                       if e.id == env_id and w.meaningful and w.default_median_us and w.median_us)
        if gains:
            console.print(f"tuned vs default on {escape(env_label[env_id])}: median {statistics.median(gains):.2f}x, "
                          f"max {gains[-1]:.2f}x over {len(gains)} workloads", highlight=False, soft_wrap=True)
    console.print("trials: " + ", ".join(f"{st.value} {n}" for st, n in counts))
    from tuner import cost

    for gpu, phases in sorted(cost.stored(store, k.name).items()):  # where a trial's seconds went
        console.print(f"trial cost by phase on {escape(gpu)}:", highlight=False)
        for line in cost.lines(cost.summarize(phases)):
            console.print(line, highlight=False, markup=False)

