"""The terminal side of a campaign over several workers: starting and watching the worker
processes, the status of a campaign, the closing summary."""
from __future__ import annotations

import signal
import time
from typing import Any

import typer
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table

from tuner import cost
from tuner.cli.common import CliError, console, err_console, undecodable


def parse_workers(text: str) -> int | None:
    """``--workers``: a count, or ``all`` (None: one per GPU given)."""
    if text.strip().lower() == "all":
        return None
    try:
        n = int(text)
    except ValueError:
        raise CliError(f"--workers: {text!r} is not a number of workers (or 'all': one per GPU)") from None
    if n < 1:
        raise CliError(f"--workers: {text!r} must be at least 1")
    return n


def devices_or_exit(n: int | None) -> list[str]:
    from tuner import scaleout

    try:
        return scaleout.devices(n)
    except ValueError as e:
        raise CliError(str(e)) from None


def where(devs: list[str]) -> str:
    """The workers' GPUs in words."""
    n = len(devs)
    if not any(devs):
        return f"{n} worker{'s' if n > 1 else ''} on the interpreter (no GPU: small grids)"
    return f"{n} worker{'s' if n > 1 else ''} on GPU{'s' if n > 1 else ''} {', '.join(devs)}"


def _age(s: float) -> str:
    return f"{s:.0f} s ago" if s < 120 else f"{s / 60:.0f} min ago" if s < 7200 else f"{s / 3600:.1f} h ago"


def done_line(i: int, total: int, d: Any) -> str:
    o = d.outcome
    text = o.get("skipped") or (f"{o.get('evaluated')} trials (+{o.get('new')}), best "
                                + (f"{o['winner_us']:.2f} us" if o.get("winner_us") else "-")
                                + (f", default {o['default_us']:.2f} us" if o.get("default_us") else ""))
    again = f", attempt {d.attempts}: the first was given back or its worker lost" if d.attempts > 1 else ""
    num = lambda v: float(v) if isinstance(v, (int, float)) else 0.0  # noqa: E731 - a row may lack them
    ph = o.get("phases") if isinstance(o.get("phases"), dict) else {}
    spent = "" if o.get("skipped") or num(o.get("seconds")) <= 0 else \
        "; " + cost.split_line(num(o["seconds"]), {p: num(v) for p, v in ph.items()}, num(o.get("final_s")))
    return f"[{i}/{total}] {d.kernel} {d.workload_key}: {text}{spent} ({d.worker}{again})"


def summary(outcomes: list[tuple[str, Any]], title: str) -> Table:
    """Per family: workloads, tuned, kept default, without an entry (nothing measured: skipped,
    or every config refused), median speedup (``outcomes``: (family, Outcome) pairs)."""
    table = Table(title=title)
    for col in ("family", "workloads", "tuned", "kept default", "no entry", "median speedup"):
        table.add_column(col)
    by: dict[str, list[Any]] = {}
    for name, o in outcomes:
        by.setdefault(name, []).append(o)
    for name, outs in by.items():
        sp = sorted(o.default_us / o.winner_us for o in outs if o.default_us and o.winner_us)
        won = [o for o in outs if o.winner_us]
        table.add_row(name, str(len(outs)), str(sum(not o.is_default for o in won)),
                      str(sum(o.is_default for o in won)), str(len(outs) - len(won)),
                      f"{sp[len(sp) // 2]:.2f}x" if sp else "-")
    return table


def print_status(store: Any, campaign_id: int | None = None) -> None:
    """``tune campaign --status``: the campaign's workers and, per GPU and family, done /
    claimed / left."""
    from tuner import scaleout

    try:
        _print_status(store, scaleout.view(store, campaign_id))
    except (TypeError, ValueError, KeyError, AttributeError, LookupError) as e:  # another tool's row
        raise undecodable(store, e) from None


def _print_status(store: Any, v: Any) -> None:
    """``print_status`` of the campaign view ``v`` (None: there is none)."""
    if v is None:
        console.print(f"no campaign in {escape(store.shown_url)}: `tune campaign --workers N` starts one",
                      highlight=False)
        return
    s = v.settings
    budget = "" if v.budget_left_s is None else (
        f"; budget left {v.budget_left_s / 60:.0f} min" if v.budget_left_s > 0 else "; budget spent")
    console.print(f"campaign {v.id}: {v.status}, started {v.created:%Y-%m-%d %H:%M} UTC on {escape(v.host)}; "
                  f"{', '.join(v.kernels)}; {', '.join(v.states)}; {s.get('n_trials')} trials, patience "
                  f"{s.get('patience')}; lease {v.lease_s:g} s{budget}; {escape(store.shown_url)}",
                  highlight=False, soft_wrap=True)
    workers = Table(title="workers")
    for col in ("worker", "host", "GPU", "pid", "state", "workload", "last heartbeat"):
        workers.add_column(col, overflow="fold")
    for w in v.workers:
        state = "silent (lease run out)" if w.silent else w.status
        workers.add_row(str(w.id), escape(w.host), escape(w.gpu + (f" (#{w.device})" if w.device else "")),
                        str(w.pid), state, escape(w.workload or "-"),
                        _age(w.heartbeat_s) if w.status == "running" else "-")
    if v.workers:
        console.print(workers)
    families = Table(title="workloads")
    for col in ("GPU", "family", "done", "claimed", "left"):
        families.add_column(col)
    for f in v.families:
        families.add_row(escape(f.gpu), f.kernel, str(f.done), str(f.claimed), str(f.left))
    if len(v.families) > 1:
        families.add_row("", "all", *(str(sum(getattr(f, a) for f in v.families)) for a in ("done", "claimed", "left")))
    console.print(families)


def watch(store: Any, campaign_id: int, devs: list[str], db: str | None) -> int:
    """Start the workers, show their progress from the database until every one has ended,
    print the summary; the exit code (130 when interrupted, 1 when a worker failed)."""
    from tuner import scaleout

    v = scaleout.view(store, campaign_id)
    seen = {d.claim_id for d in v.done} if v else set()
    store.engine.dispose()  # nothing of this process's connections reaches the workers
    procs = scaleout.launch(store.url, campaign_id, devs)
    before = signal.signal(signal.SIGTERM, scaleout.on_sigterm)  # a scheduler's SIGTERM: as Ctrl-C
    try:
        return _watch(store, campaign_id, devs, db, procs, seen)
    finally:
        signal.signal(signal.SIGTERM, before)


def _watch(store: Any, campaign_id: int, devs: list[str], db: str | None, procs: list[Any], seen: set[int]) -> int:
    from tuner import scaleout
    from tuner.study import Outcome

    tty = console.is_terminal
    with Progress(TextColumn("[bold]campaign"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  TimeRemainingColumn(), TextColumn("{task.fields[status]}"), console=console,
                  disable=not tty) as progress:
        task = progress.add_task("campaign", total=None, status="")
        try:
            while True:
                running = any(p.is_alive() for p in procs)
                v = scaleout.view(store, campaign_id)
                total = sum(f.done + f.claimed + f.left for f in v.families)
                for d in v.done:
                    if d.claim_id not in seen:
                        seen.add(d.claim_id)
                        if not tty:
                            console.print(done_line(len(seen), total, d), highlight=False, soft_wrap=True,
                                          markup=False)
                busy = sum(1 for w in v.workers if w.workload)
                progress.update(task, total=total, completed=len(v.done), status=f"{busy} busy")
                if not running:
                    break
                time.sleep(1.0)
        except KeyboardInterrupt:
            progress.stop()
            scaleout.stop(procs)
            dbarg = "" if db is None else f" --db {db}"
            err_console.print(f"interrupted: the workers gave their workloads back and every finished trial is kept "
                              f"in {store.shown_url}; `tune worker{dbarg}` goes on with campaign {campaign_id}",
                              highlight=False, markup=False, soft_wrap=True)
            raise typer.Exit(130) from None
    failed = [(i, p.exitcode) for i, p in enumerate(procs) if p.exitcode not in (0, 130)]
    for i, code in failed:
        if code is not None and code < 0:
            try:
                how = f"was killed by {signal.Signals(-code).name}"
            except ValueError:
                how = f"was killed by signal {-code}"
            then = "a live worker (or the next `tune worker`) takes over what it held once the lease runs out"
        else:
            how, then = f"ended with exit code {code} (its message is above)", "its workloads were given back"
        err_console.print(f"worker {i} ({where([devs[i]])}) {how}; {then}", highlight=False, markup=False,
                          soft_wrap=True)
    left = sum(f.left + f.claimed for f in v.families)
    if left and v.budget_left_s is not None and v.budget_left_s <= 0:
        console.print(f"budget spent: {left} workloads left for the next run", highlight=False)
    outs = [(d.kernel, Outcome(**{k: d.outcome.get(k) for k in ("workload_key", "evaluated", "winner_us",
                                                                "default_us", "is_default", "skipped")}))
            for d in v.done if not d.outcome.get("skipped")]
    console.print(summary(outs, f"campaign {campaign_id}: {len(v.done)} of {total} workloads"))
    dbarg = "" if db is None else f" --db {db}"
    console.print(f"Next: `tune export --out packs/<gpu>{dbarg}` writes the pack.", highlight=False)
    if any(code == 2 for _, code in failed):
        return 2
    return 1 if failed else 0
