"""`tune campaign`: every family's default grid on the GPU at hand, under one budget."""
from __future__ import annotations

from typing import Annotated, Any, Optional

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table

from tuner import registry
from tuner.cli.common import CliError, DbOption, console, err_console, parse_duration

app = typer.Typer()


@app.command("campaign")
def campaign(kernel: Annotated[Optional[list[str]], typer.Option(
                 "--kernel", help="Only these families (repeatable; default: all).")] = None,
             only: Annotated[str, typer.Option(
                 "--only", help="Which entries: missing (no winner on this GPU), stale (a winner only under an "
                 "earlier template source), current (search further); comma-separated.")] = "missing,stale,current",
             budget: Annotated[Optional[str], typer.Option(
                 "--budget", help="Wall-clock budget of the whole campaign, e.g. 45m (default: none).")] = None,
             trials: Annotated[int, typer.Option("--trials", help="Trials per workload (new ones, for current entries).")] = 16,
             patience: Annotated[int, typer.Option("--patience", help="Stop a workload after this many trials "
                                                   "without improvement.")] = 8,
             limit: Annotated[Optional[int], typer.Option("--limit", help="At most this many workloads.")] = None,
             dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the plan and tune nothing.")] = False,
             db: DbOption = None) -> None:
    """Tune the default grids of all families (or --kernel) on this GPU, resuming where the last run stopped.

    Missing entries first, then stale ones, then current ones with the fewest trials and the
    largest gap to the floor. Every trial is committed as it finishes: a killed campaign loses
    nothing and the same command goes on. Without a GPU the small interpreter grids run."""
    from tuner import campaign as camp
    from tuner.store import open_store
    from tuner.study import Settings
    from tuner.timing import gpu_available

    states = [s.strip() for s in only.split(",") if s.strip()]
    if not states or set(states) - set(camp.STATES):
        raise CliError(f"--only: {only!r} (choose from {', '.join(camp.STATES)}, comma-separated)")
    if trials < 1 or patience < 1:
        raise CliError("--trials and --patience must be at least 1")
    if limit is not None and limit < 1:
        raise CliError("--limit must be at least 1")
    budget_s = parse_duration(budget) if budget is not None else None
    ks = [registry.get(k) for k in kernel] if kernel else list(registry.kernels().values())
    gpu = gpu_available()
    store = open_store(db)
    items = camp.plan(store, [(k, list(k.workloads if gpu else k.small_workloads)) for k in ks], states)[:limit]
    counts = {s: sum(it.state == s for it in items) for s in camp.STATES}
    console.print(f"campaign on {'this GPU' if gpu else 'the interpreter (no GPU: small grids)'}: {len(items)} "
                  f"workloads ({', '.join(f'{n} {s}' for s, n in counts.items() if n)}) of "
                  f"{', '.join(k.name for k in ks)}; results in {store.shown_url}", highlight=False, soft_wrap=True)
    if dry_run or not items:
        for it in items:
            console.print(f"  {it.state:8} {it.kernel.name} {it.key}", highlight=False, soft_wrap=True)
        return
    settings = Settings(n_trials=trials, patience=patience, trial_timeout_s=120.0 if gpu else 600.0)
    tty = console.is_terminal
    done: list[Any] = []
    with Progress(TextColumn("[bold]campaign"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  TimeRemainingColumn(), TextColumn("{task.fields[status]}"), console=console,
                  disable=not tty) as progress:
        task = progress.add_task("campaign", total=len(items), status="")

        def hear(kind: str, info: dict[str, Any]) -> None:
            if kind == "workload_done":
                o = info["outcome"]
                done.append(o)
                progress.update(task, advance=1, status=o.workload_key)
                if not tty:
                    console.print(f"[{len(done)}/{len(items)}] {items[len(done) - 1].kernel.name} {o.workload_key}: "
                                  + (o.skipped or f"{o.evaluated} trials (+{o.new}), best "
                                     + (f"{o.winner_us:.2f} us" if o.winner_us else "-")
                                     + (f", default {o.default_us:.2f} us" if o.default_us else "")),
                                  highlight=False, soft_wrap=True, markup=False)
            elif kind == "budget_spent":
                console.print(f"budget spent: {info['left']} workloads left for the next run", highlight=False)

        try:
            camp.run(store, items, settings, budget_s=budget_s, on_event=hear)
        except KeyboardInterrupt:
            progress.stop()
            err_console.print(f"interrupted after {len(done)} workloads: every finished trial is kept in "
                              f"{store.shown_url}; run the same command to go on", highlight=False, markup=False)
            raise typer.Exit(130) from None
    table = Table(title=f"campaign: {len(done)} of {len(items)} workloads")
    for col in ("family", "workloads", "tuned", "kept default", "median speedup"):
        table.add_column(col)
    by: dict[str, list[Any]] = {}
    for it, o in zip(items, done):
        by.setdefault(it.kernel.name, []).append(o)
    for name, outs in by.items():
        sp = sorted(o.default_us / o.winner_us for o in outs if o.default_us and o.winner_us)
        table.add_row(name, str(len(outs)), str(sum(not o.is_default for o in outs)),
                      str(sum(o.is_default for o in outs)), f"{sp[len(sp) // 2]:.2f}x" if sp else "-")
    console.print(table)
    dbarg = "" if db is None else f" --db {db}"
    console.print(f"Next: `tune export --out packs/<gpu>{dbarg}` writes the pack.", highlight=False)
