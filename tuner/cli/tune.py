"""`tune <kernel>`: one command per registered family, its workload axes as options."""
from __future__ import annotations

import dataclasses
import inspect
import json
import logging
import sys
import typing
from typing import Annotated, Any, Optional

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table

from tuner.cli.common import CliError, DbOption, console, err_console, expand_grid, parse_duration
from tuner.registry import CONSTRAINTS_REFUSAL, Kernel
from tuner.spec import value_sort_key, workload_key
from tuner.study import SAMPLERS, Settings, Tuner, check_sampler
from tuner.timing import gpu_available


def _common_params() -> list[inspect.Parameter]:
    kw = inspect.Parameter.KEYWORD_ONLY
    P = inspect.Parameter
    return [
        P("trials", kw, default=None, annotation=Annotated[Optional[int], typer.Option(
            "--trials", help="Candidates evaluated per workload in all, counting those the results store already "
            "holds for this source and GPU: running again resumes up to this many (default 16; 4 with --quick). "
            "The summary shows them as total (+new).")]),
        P("budget", kw, default=None, annotation=Annotated[Optional[str], typer.Option(
            "--budget", help="Wall-clock budget for the search, e.g. 90s, 5m, 1h (default: none). The default "
            "config of every workload is measured even past it, so each workload gets an entry.")]),
        P("patience", kw, default=None, annotation=Annotated[Optional[int], typer.Option(
            "--patience", help=f"Stop a workload after this many trials without improvement (default "
            f"{Settings.patience}, {Settings.quick().patience} with --quick).")]),
        P("sampler", kw, default="tpe", annotation=Annotated[str, typer.Option(
            "--sampler", help=f"Search algorithm: {', '.join(SAMPLERS)}.")]),
        P("quick", kw, default=False, annotation=Annotated[bool, typer.Option(
            "--quick", help="A short search (CI, smoke tests); small workloads without a GPU anyway.")]),
        P("retune", kw, default=False, annotation=Annotated[bool, typer.Option(
            "--retune", help="Search again even where this environment already has a winner: the finalists are "
            "re-timed and the search goes on up to --trials in all (raise --trials to search more).")]),
        P("seed", kw, default=0, annotation=Annotated[int, typer.Option("--seed", help="Sampler and input seed.")]),
        P("try_", kw, default=None, annotation=Annotated[Optional[list[str]], typer.Option(
            "--try", help="A JSON object of config keys laid over each workload's best config so far (its "
            "default where it has none) and measured right after the default, even past --trials (repeatable), "
            "e.g. '{\"num_stages\": 3}'; a value outside the space is an error, a try the space refuses for a workload "
            "is skipped with a warning that says why.")]),
        P("timeout", kw, default=None, annotation=Annotated[Optional[str], typer.Option(
            "--timeout", help="Per-trial timeout (default 120s; 600s without a GPU).")]),
        P("db", kw, default=None, annotation=DbOption),
        P("preflight", kw, default=None, annotation=Annotated[Optional[str], typer.Option(
            "--preflight", help="Measure nothing: check, as for the GPU target given (sm_90, sm_100, ...), that the "
            "search space admits each workload's default and each --try laid over its pack entry (--pack; the "
            "default without one), the config a re-tune there lays it over. A table; exit 1 when any is refused. "
            "For checking a device script's tries on a machine without that GPU.")]),
        P("pack", kw, default=None, annotation=Annotated[Optional[str], typer.Option(
            "--pack", help="With --preflight: the pack whose entries the tries are laid over.")]),
    ]


def _axis_params(kernel: Kernel) -> list[inspect.Parameter]:
    params = []
    hints = typing.get_type_hints(kernel.spec.workload)
    for f in dataclasses.fields(kernel.spec.workload):
        def shown(grid: tuple[Any, ...]) -> str:
            values = sorted({getattr(w, f.name) for w in grid}, key=value_sort_key)
            return ", ".join(map(str, values[:8])) + (" ..." if len(values) > 8 else "")

        kind = {int: "values a,b,c (K/M suffixes: 8M = 8 << 20), or lo..hi: only the grid's values in that range",
                float: "values a,b,c, or lo..hi: only the grid's values in that range"}.get(hints[f.name], "values a,b,c")
        params.append(inspect.Parameter(
            f.name, inspect.Parameter.KEYWORD_ONLY, default=None,
            annotation=Annotated[Optional[str], typer.Option(
                f"--{f.name.replace('_', '-')}", help=f"{f.name}: {kind} (GPU grid: {shown(kernel.workloads)}; "
                f"without a GPU: {shown(kernel.small_workloads)}).")]))
    return params


def _limits(kernel: Kernel) -> dict[str, Any]:
    limits = dict(getattr(kernel.space_module, "LIMITS", {}))
    hints = typing.get_type_hints(kernel.spec.workload)
    for f in dataclasses.fields(kernel.spec.workload):
        if f.name not in limits and hints[f.name] is str:
            limits[f.name] = frozenset(getattr(w, f.name) for w in kernel.workloads + kernel.small_workloads)
    return limits


def _tries(specs: list[str] | None, kernel: Kernel) -> tuple[tuple[tuple[str, Any], ...], ...]:
    """``--try`` values: JSON objects of known config keys (one-line errors otherwise)."""
    out = []
    for spec in specs or ():
        try:
            over = json.loads(spec)
        except json.JSONDecodeError as e:
            raise CliError(f"--try: not JSON ({e.msg}): {spec!r}") from None
        if not isinstance(over, dict) or not over:
            raise CliError(f"--try: want a JSON object of config keys, got {spec!r}")
        unknown = sorted(set(over) - set(kernel.space))
        if unknown:
            raise CliError(f"--try: {', '.join(unknown)} not in {kernel.name}'s search space "
                           f"(keys: {', '.join(kernel.space)})")
        for k, v in over.items():  # a float parameter's values as floats: 2 is the config 2.0 is
            if isinstance(v, int) and not isinstance(v, bool) and any(isinstance(c, float) for c in kernel.space[k].values()):
                over[k] = float(v)
        bad = [k for k, v in over.items() if not kernel.space.legal(k, v)]
        if bad:  # a try outside the space is an error, never skipped in silence
            values = kernel.space[bad[0]].values()
            typed = " (of another type)" if over[bad[0]] in values else ""  # 2.0 for 2, 0 for False
            raise CliError(f"--try: {', '.join(f'{k}={over[k]!r}' for k in bad)} not a value{typed} of "
                           f"{kernel.name}'s search space ({bad[0]}: {', '.join(map(repr, values))})")
        out.append(tuple(sorted(over.items())))
    return tuple(out)


def run_preflight(kernel: Kernel, axes: dict[str, str | None], tries: tuple[tuple[tuple[str, Any], ...], ...],
              target: str, pack: str | None) -> int:
    """``--preflight``: each workload's default and tries as the study on ``target`` would take
    them (``Kernel.refusal`` for that ``Target``), over the pack's entry where it has one (a
    re-tune after a source change lays tries over the fastest earlier config, which the pack
    holds); 1 when any is refused. Needs no GPU and touches no database."""
    from tuner import runtime
    from tuner.runtime.target import NAMED, Target
    from tuner.spec import workload_dict

    if target not in NAMED or target == "interpreter":
        raise CliError(f"--preflight: unknown target {target!r} (choose from "
                       f"{', '.join(n for n in NAMED if n != 'interpreter')})")
    tgt = Target.named(target)
    quiet = logging.getLogger("tuner.runtime")
    level = quiet.level
    quiet.setLevel(logging.ERROR)  # "made on another GPU" is the point here, not news
    try:
        table_of = runtime.load_pack(pack) if pack else None
    except runtime.PackError as e:
        raise CliError(f"--pack: {e}") from None
    finally:
        quiet.setLevel(level)
    workloads = expand_grid(kernel.spec.workload, list(kernel.workloads), axes, _limits(kernel))
    table = Table(title=f"{kernel.name} preflight for {target}: what a tune there would measure")
    for col in ("workload", "config", "laid over", "verdict"):
        table.add_column(col)
    refused = 0
    for w in workloads:
        default = kernel.default_config(w, tgt)
        base, how = default, "default"
        entry = table_of.entry(kernel.name, workload_dict(w)) if table_of is not None else None
        if entry is not None:
            base, how = {n: v for n, v in entry["config"].items() if n in kernel.space}, "pack entry"
        for label, cfg, over in [("default", default, "-"), *[
                (json.dumps(dict(t)), dict(base, **dict(t)), how) for t in tries]]:
            why = kernel.refusal(cfg, w, tgt)  # (not feasible(): memory is the target machine's, unknown here)
            refused += why is not None
            table.add_row(workload_key(w), label, over, f"[red]{why}[/red]" if why else "[green]measured[/green]")
    console.print(table)
    console.print(f"{refused} refused" if refused else "all measured")
    return 1 if refused else 0


def _some(keys: list[str]) -> str:
    """Up to two workload keys, then how many more."""
    return "; ".join(keys[:2]) + (f" and {len(keys) - 2} more" if len(keys) > 2 else "")


def _refuse_unrunnable(kernel: Kernel, workloads: list[Any]) -> None:
    """A workload whose own default config the space's constraints refuse here (the target a
    study would tune for) is no workload the template runs: one line, before any tuning."""
    from tuner.runtime.target import Target

    target = Target.of()
    refused: list[tuple[str, str]] = []
    for w in workloads:
        why = kernel.refusal(kernel.default_config(w, target), w, target)
        if why == CONSTRAINTS_REFUSAL:  # (a default outside the space is the template's bug: the study
            refused.append((workload_key(w), why))  # warns and tunes on)
    if refused:
        raise CliError(f"{kernel.name} {_some([k for k, _ in refused])}: its default config is {refused[0][1]}"
                       + f" on {'the interpreter' if target.interpret else target.name}: the template does not "
                       "run it, nothing would be measured (choose other axis values)")


def run_tune(kernel: Kernel, axes: dict[str, str | None], *, trials, budget, patience, sampler, quick, retune,
             seed, timeout, db, try_=None, preflight=None, pack=None) -> None:
    from tuner.store import open_store

    if pack is not None and preflight is None:
        raise CliError("--pack applies to --preflight only")
    if preflight is not None:
        raise typer.Exit(run_preflight(kernel, axes, _tries(try_, kernel), preflight, pack))
    try:
        check_sampler(sampler)
    except ValueError as e:
        raise CliError(f"--sampler: {e}") from None
    tries = _tries(try_, kernel)
    if trials is not None and trials < 1:
        raise CliError("--trials must be at least 1")
    if patience is not None and patience < 1:
        raise CliError("--patience must be at least 1")
    if not 0 <= seed < 2**32:
        raise CliError(f"--seed: {seed} is not in [0, 2**32)")
    gpu = gpu_available()
    base = list(kernel.workloads if gpu else kernel.small_workloads)
    workloads = expand_grid(kernel.spec.workload, base, axes, _limits(kernel))
    over: dict[str, Any] = {"sampler": sampler, "seed": seed, "retune": retune, "tries": tries,
                            "trial_timeout_s": parse_duration(timeout) if timeout is not None else (120.0 if gpu else 600.0)}
    if trials is not None:
        over["n_trials"] = trials
    if patience is not None:
        over["patience"] = patience
    if budget is not None:
        over["budget_s"] = parse_duration(budget)
    settings = Settings.quick(**over) if quick else Settings(**over)
    _refuse_unrunnable(kernel, workloads)
    store = open_store(db)
    again = "tune " + " ".join(sys.argv[1:]) if sys.argv[1:2] == [kernel.cli_name] else f"tune {kernel.cli_name} ..."
    if not gpu:
        large = [workload_key(w) for w in workloads if w not in kernel.small_workloads]
        console.print("[yellow]No GPU: running through the Triton interpreter"
                      + ("" if large else " on small workloads") + "; times are not meaningful.[/yellow]")
        if large:  # one line: which, and what it costs
            console.print(f"[yellow]{_some(large)} {'is' if len(large) == 1 else 'are'} large for the interpreter "
                          f"(not {'its' if len(large) == 1 else 'among its'} small workloads): "
                          "this may take minutes.[/yellow]", highlight=False, soft_wrap=True)
    total = len(workloads) * settings.n_trials
    tty = console.is_terminal
    with Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  TimeRemainingColumn(), TextColumn("{task.fields[status]}"), console=console, transient=False,
                  disable=not tty) as progress:
        task = progress.add_task(kernel.cli_name, total=total, status="")
        base = [0]  # the bar's position where the current workload's share starts

        def on_event(kind: str, info: dict[str, Any]) -> None:
            n = settings.n_trials
            if kind == "workload_start":  # a resumed study's earlier trials count from the start
                progress.update(task, completed=base[0] + min(n, info["evaluated"]))
            elif kind == "trial":
                r = info["result"]
                best = info["best"]
                done = min(base[0] + n, progress.tasks[task].completed + 1)  # tries past --trials: not past its share
                progress.update(task, completed=done, status=f"{info['workload']}  last {r.status}"
                                + (f"  best {best:.2f} us" if best != float("inf") else ""))
            elif kind == "workload_done":
                # a workload that stopped early (patience, budget) or was tuned already frees its share
                base[0] += n
                progress.update(task, completed=min(total, base[0]))
                if not tty:  # a log: one line a workload
                    o = info["outcome"]
                    done_n[0] += 1
                    console.print(f"[{done_n[0]}/{len(workloads)}] {kernel.name} {o.workload_key}: "
                                  + (o.skipped or f"{o.evaluated} trials (+{o.new}), best "
                                     + (f"{o.winner_us:.2f} us" if o.winner_us else "-")
                                     + (f", default {o.default_us:.2f} us" if o.default_us else "")),
                                  highlight=False, soft_wrap=True)

        done_n = [0]
        try:
            outcomes = Tuner(store, kernel, settings, on_event).run(workloads)
        except KeyboardInterrupt:
            progress.stop()
            err_console.print(f"interrupted: every finished trial is kept in {store.shown_url}; "
                              f"run `{again}` to resume", highlight=False, soft_wrap=True, markup=False)
            raise typer.Exit(130) from None
    table = Table(title=f"{kernel.name}: {len(outcomes)} workloads"
                  + ("" if gpu else " (interpreter: times not meaningful)"))
    for col in ("workload", "trials (new)", "statuses", "winner us", "default us", "speedup", "winner"):
        table.add_column(col, overflow="fold")
    for o in outcomes:
        sp = f"{o.default_us / o.winner_us:.2f}x" if o.default_us and o.winner_us else "-"
        table.add_row(o.workload_key, f"{o.evaluated} (+{o.new})", " ".join(f"{k}:{v}" for k, v in sorted(o.statuses.items())),
                      f"{o.winner_us:.2f}" if o.winner_us else "-", f"{o.default_us:.2f}" if o.default_us else "-",
                      sp, o.skipped or ("-" if o.winner_us is None else "default" if o.is_default else "tuned"))
    console.print(table)
    dbarg = "" if db is None else f" --db {db}"
    console.print(f"Results: {store.shown_url}\nNext: `tune show {kernel.cli_name}{dbarg}` lists the winners, "
                  f"`tune export --out packs/mine{dbarg}` writes a pack, `tune dashboard{dbarg}` the history.",
                  highlight=False, soft_wrap=True)


def register(app: typer.Typer, kernel: Kernel) -> None:
    """Add `tune <kernel-cli-name>` to ``app``."""
    axis_names = [f.name for f in dataclasses.fields(kernel.spec.workload)]

    def command(**kw: Any) -> None:
        axes = {a: kw.pop(a) for a in axis_names}
        run_tune(kernel, axes, **kw)

    params = _axis_params(kernel) + _common_params()
    command.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    command.__annotations__ = {p.name: p.annotation for p in params}
    doc = (kernel.spec.description or kernel.template.__doc__ or "").strip().splitlines()
    app.command(kernel.cli_name, help=f"Tune {kernel.name}: {doc[0] if doc else ''}\n\n"
                "Without options: the default workload grid (small interpreter workloads without a GPU). "
                "Every trial is committed as it finishes; running again resumes.")(command)
