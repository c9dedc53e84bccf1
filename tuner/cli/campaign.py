"""`tune campaign`: every family's default grid on the GPU at hand, under one budget."""
from __future__ import annotations

from typing import Annotated, Any, Optional

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from tuner import registry
from tuner.cli import scaleout as scaleout_cli
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
             trials: Annotated[Optional[int], typer.Option(
                 "--trials", help="Trials per workload (new ones, for current entries; default 16, 4 with "
                 "--quick).")] = None,
             patience: Annotated[Optional[int], typer.Option(
                 "--patience", help="Stop a workload after this many trials without improvement (default 8, 3 "
                 "with --quick).")] = None,
             quick: Annotated[bool, typer.Option(
                 "--quick", help="A short search (CI, smoke tests): as `tune <family> --quick`, 2 finalists "
                 "re-timed in 1 round, and --trials / --patience default to 4 / 3.")] = False,
             limit: Annotated[Optional[int], typer.Option("--limit", help="At most this many workloads.")] = None,
             dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the plan and tune nothing.")] = False,
             workers: Annotated[Optional[str], typer.Option(
                 "--workers", help="Worker processes, one per GPU: N, or 'all' (each GPU of CUDA_VISIBLE_DEVICES, "
                 "else every visible one; through the interpreter N processes). They take workloads through the "
                 "database; other hosts join with `tune worker --db URL` (PostgreSQL).")] = None,
             lease: Annotated[str, typer.Option(
                 "--lease", help="With --workers: how long a workload stays a worker's after its last heartbeat; "
                 "a killed worker's workload is taken over once it runs out.")] = "60s",
             status: Annotated[bool, typer.Option(
                 "--status", help="Print the newest campaign's workers (host, GPU, workload, last heartbeat) and "
                 "per family done / claimed / left; tune nothing.")] = False,
             cache: Annotated[Optional[str], typer.Option(
                 "--cache", help="Triton's compile cache for the campaign, kept across its runs (default: "
                 "<database>.triton-cache beside a SQLite file, else Triton's own).")] = None,
             ahead: Annotated[Optional[int], typer.Option(
                 "--ahead", help="Candidates compiled ahead, in as many processes, while the GPU times one "
                 "(default: half the CPU cores, at most 8; 0 without a GPU: nothing compiles there).")] = None,
             predict: Annotated[bool, typer.Option(
                 "--predict/--no-predict", help="Where a workload's two nearest tuned neighbours have one winner, "
                 "measure it and the default only (pack entries say 'predicted'; later runs search them first).")] = True,
             db: DbOption = None) -> None:
    """Tune the default grids of all families (or --kernel) on this GPU, resuming where the last run stopped.

    Missing entries first, then stale ones, then current ones with the fewest trials and the
    largest gap to the floor. Every trial is committed as it finishes: a killed campaign loses
    nothing and the same command goes on. Without a GPU the small interpreter grids run.
    With --workers the workloads are spread over one worker process per GPU, all sharing the
    database (docs/scale-out.md)."""
    from tuner import campaign as camp
    from tuner.store import open_store
    from tuner.study import Settings
    from tuner.timing import gpu_available

    short = Settings.quick() if quick else Settings()
    trials = short.n_trials if trials is None else trials
    patience = short.patience if patience is None else patience
    states = [s.strip() for s in only.split(",") if s.strip()]
    if not states or set(states) - set(camp.STATES):
        raise CliError(f"--only: {only!r} (choose from {', '.join(camp.STATES)}, comma-separated)")
    if trials < 1 or patience < 1:
        raise CliError("--trials and --patience must be at least 1")
    if limit is not None and limit < 1:
        raise CliError("--limit must be at least 1")
    if ahead is not None and ahead < 0:
        raise CliError("--ahead must be at least 0")
    budget_s = parse_duration(budget) if budget is not None else None
    lease_s = parse_duration(lease)
    n_workers = scaleout_cli.parse_workers(workers) if workers is not None else None
    ks = [registry.get(k) for k in kernel] if kernel else list(registry.kernels().values())
    gpu = gpu_available()
    if status:
        return scaleout_cli.print_status(open_store(db, create=False))
    if workers is not None and not dry_run:
        devs = scaleout_cli.devices_or_exit(n_workers)
        return _with_workers(ks, states, trials, patience, limit, budget_s, lease_s, devs, db,
                             {"cache": cache, "ahead": ahead, "predict": predict,
                              "finalists": short.finalists, "rounds": short.rounds})
    store = _plan_store(db) if dry_run else open_store(db)
    items = camp.plan(store, [(k, list(k.workloads if gpu else k.small_workloads)) for k in ks], states)[:limit]
    counts = {s: sum(it.state == s for it in items) for s in camp.STATES}
    console.print(f"campaign on {'this GPU' if gpu else 'the interpreter (no GPU: small grids)'}: {len(items)} "
                  f"workloads ({', '.join(f'{n} {s}' for s, n in counts.items() if n)}) of "
                  f"{', '.join(k.name for k in ks)}; results in {store.shown_url}", highlight=False, soft_wrap=True)
    if dry_run or not items:
        for it in items:
            console.print(f"  {it.state:8} {it.kernel.name} {it.key}", highlight=False, soft_wrap=True)
        return
    from tuner import cost, precompile

    settings = Settings(n_trials=trials, patience=patience, trial_timeout_s=120.0 if gpu else 600.0,
                        ahead=(precompile.default_processes() if gpu else 0) if ahead is None else ahead,
                        cache_dir=cache or precompile.default_cache(store.url), predict=2 if predict else 0,
                        finalists=short.finalists, rounds=short.rounds)
    tty = console.is_terminal
    done: list[Any] = []
    phases: list[dict[str, float]] = []
    with Progress(TextColumn("[bold]campaign"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  TimeRemainingColumn(), TextColumn("{task.fields[status]}"), console=console,
                  disable=not tty) as progress:
        task = progress.add_task("campaign", total=len(items), status="")

        def hear(kind: str, info: dict[str, Any]) -> None:
            if kind == "trial":
                phases.append(info.get("phases") or {})
            elif kind == "workload_done":
                o = info["outcome"]
                done.append(o)
                progress.update(task, advance=1, status=o.workload_key)
                if not tty:
                    console.print(f"[{len(done)}/{len(items)}] {items[len(done) - 1].kernel.name} {o.workload_key}: "
                                  + (o.skipped or f"{o.evaluated} trials (+{o.new}), best "
                                     + (f"{o.winner_us:.2f} us" if o.winner_us else "-")
                                     + (f", default {o.default_us:.2f} us" if o.default_us else "")
                                     + (" (predicted)" if o.obtained == "predicted" else "")
                                     + (f"; {cost.split_line(o.seconds, o.phases, o.final_s)}" if o.seconds else "")),
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
    console.print(scaleout_cli.summary([(it.kernel.name, o) for it, o in zip(items, done)],
                                       f"campaign: {len(done)} of {len(items)} workloads"))
    for line in [*cost.family_lines((it.kernel.name, o) for it, o in zip(items, done)),
                 *(["trial cost by phase:", *cost.lines(cost.summarize(phases))] if phases else [])]:
        console.print(line, highlight=False, markup=False)
    dbarg = "" if db is None else f" --db {db}"
    console.print(f"Next: `tune export --out packs/<gpu>{dbarg}` writes the pack.", highlight=False)


def _plan_store(db: str | None) -> Any:
    """The database a run would write, opened only to read where it exists (it may be read-only)."""
    from pathlib import Path

    from tuner.store import open_store
    from tuner.store.db import default_db, normalize_url

    url = normalize_url(db if db is not None else default_db(write=True))
    exists = not url.startswith("sqlite:///") or Path(url.removeprefix("sqlite:///")).is_file()
    return open_store(url, create=not exists)


def _with_workers(ks: list[Any], states: list[str], trials: int, patience: int, limit: int | None,
                  budget_s: float | None, lease_s: float, devs: list[str], db: str | None,
                  cost: dict[str, Any]) -> None:
    """A new campaign in the database, planned for this GPU, worked on by one process per GPU."""
    from tuner import precompile, scaleout
    from tuner.store import open_store
    from tuner.study import ensure_environment
    from tuner.timing import gpu_available

    store = open_store(db)
    coord = scaleout.Coordinator(store)
    ahead = cost["ahead"] if cost["ahead"] is not None else \
        max(1, precompile.default_processes() // len(devs)) if gpu_available() else 0  # the host's cores shared
    tuner = {"cache_dir": cost["cache"] or precompile.default_cache(store.url), "ahead": ahead,
             "predict": 2 if cost["predict"] else 0, "finalists": cost["finalists"], "rounds": cost["rounds"]}
    try:
        c = coord.create([k.name for k in ks], states, {"n_trials": trials, "patience": patience, "limit": limit,
                                                        "tuner": tuner, "workers": len(devs)},
                         lease_s=lease_s, budget_s=budget_s)
    except scaleout.ScaleoutError as e:
        raise CliError(str(e)) from None
    n = coord.plan(c, ensure_environment(store), scaleout.grids_of(c, gpu_available()))
    v = scaleout.view(store, c.id)
    planned = ", ".join(f"{v.planned[s]} {s}" for s in states if v.planned.get(s))
    dbarg = "" if db is None else f" --db {db}"
    console.print(f"campaign {c.id} on {scaleout_cli.where(devs)}: {n} workloads ({planned or 'none'}) of "
                  f"{', '.join(k.name for k in ks)}; results in {store.shown_url}; another host joins with "
                  f"`tune worker{dbarg}`", highlight=False, soft_wrap=True, markup=False)
    if not n:
        coord.settle(c)
    rc = scaleout_cli.watch(store, c.id, devs, db) if n else 0
    if rc:
        raise typer.Exit(rc)


@app.command("worker")
def worker(workers: Annotated[str, typer.Option(
               "--workers", help="Worker processes on this host, one per GPU: N, or 'all' (each GPU of "
               "CUDA_VISIBLE_DEVICES, else every visible one; one through the interpreter).")] = "all",
           campaign_id: Annotated[Optional[int], typer.Option(
               "--campaign", help="The campaign to join (default: the newest).")] = None,
           db: DbOption = None) -> None:
    """Join a campaign started elsewhere (`tune campaign --workers N`) with this host's GPUs.

    The workers take the campaign's workloads for this host's GPU through the database (a
    GPU the campaign has not seen yet gets its own plan), renew their claims while they live,
    and end when nothing is left. Several hosts need PostgreSQL (--db postgresql://...); a
    SQLite file serves one host only. Ctrl-C gives the workloads back at once."""
    from tuner import scaleout
    from tuner.store import open_store
    from tuner.study import ensure_environment
    from tuner.timing import gpu_available

    devs = scaleout_cli.devices_or_exit(scaleout_cli.parse_workers(workers))
    store = open_store(db)
    coord = scaleout.Coordinator(store)
    try:
        c = coord.campaign(campaign_id)
        coord.check_host(c)
    except scaleout.ScaleoutError as e:
        raise CliError(str(e)) from None
    env = ensure_environment(store)
    n = coord.plan(c, env, scaleout.grids_of(c, gpu_available()))
    v = scaleout.view(store, c.id)
    left = sum(f.left + f.claimed for f in v.families)
    pending, held, _, budget_left = coord.outstanding(c, env)
    if not pending + held or (budget_left is not None and budget_left <= 0):
        why = "its budget is spent" if pending + held else f"nothing is left for {env.gpu}"
        console.print(f"campaign {c.id}: {why} ({left} workloads left in all); `tune campaign --workers N` "
                      "plans a new one", highlight=False, soft_wrap=True, markup=False)
        return
    console.print(f"joining campaign {c.id} (started {v.created:%Y-%m-%d %H:%M} UTC on {v.host}) with "
                  f"{scaleout_cli.where(devs)}: {n} workloads planned for this GPU; {left} workloads left in all; "
                  f"results in {store.shown_url}", highlight=False, soft_wrap=True, markup=False)
    rc = scaleout_cli.watch(store, c.id, devs, db)
    if rc:
        raise typer.Exit(rc)
