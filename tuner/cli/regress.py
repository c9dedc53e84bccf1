"""`tune revalidate`, `tune regressions` and `tune dashboard`: regression tracking."""
from __future__ import annotations

import dataclasses
import datetime as dt
import re
import typing
from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from rich.markup import escape
from rich.table import Table

from tuner.cli.common import CliError, DbOption, console, given_path, parse_duration, undecodable

app = typer.Typer()

PackOption = Annotated[Optional[str], typer.Option("--pack", help="Kernel pack folder (default: the database's winners).")]


def parse_threshold(text: str) -> float:
    """'5%' or '5' -> 0.05 (always percent)."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*%?\s*", text or "")
    if not m or not 0 <= float(m.group(1)) < 1000:
        raise CliError(f"--threshold: bad value {text!r} (use a percentage, e.g. 5%)")
    return float(m.group(1)) / 100


def parse_since(text: str, now: dt.datetime | None = None) -> dt.datetime:
    """An ISO date or date-time (UTC), or an age such as 7d, 12h, 90m."""
    now = now or dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)
    bad = CliError(f"--since: bad date {text!r} (use e.g. 2026-12-01, 2026-12-01T08:00 or 7d)")
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*d\s*", text or "")
    try:
        if m:
            return now - dt.timedelta(days=float(m.group(1)))
        when = dt.datetime.fromisoformat(text.strip())
    except OverflowError:  # an age beyond the calendar
        raise bad from None
    except ValueError:
        try:
            return now - dt.timedelta(seconds=parse_duration(text, wait=False))
        except (CliError, OverflowError):
            raise bad from None
    if when.tzinfo is not None:
        when = when.astimezone(dt.timezone.utc).replace(tzinfo=None)
    return when


def _axis_values(text: str) -> dict[str, str]:
    """``tokens=256,placement=hbm`` -> {axis: value text} (one-line error otherwise)."""
    out = {}
    for part in text.split(","):
        axis, eq, value = part.partition("=")
        if not eq or not axis.strip() or not value.strip():
            raise CliError(f"--workload: {text!r} is not axis=value[,axis=value...]")
        out[axis.strip()] = value.strip()
    return out


def _matches(kernel: str, workload: dict[str, Any], want: dict[str, str]) -> bool:
    """``workload`` (of ``kernel``) has every ``axis=value`` of ``want``, values read as the
    axis' type (``table_rows=8M`` is 8388608); an axis the kernel lacks matches nothing."""
    from tuner import registry
    from tuner.cli.common import axis_value

    k = registry.kernels().get(kernel)
    hints = typing.get_type_hints(k.spec.workload) if k else {}
    for axis, text in want.items():
        if axis not in workload:
            return False
        try:  # read as `tune <kernel> --<axis>` reads it
            value = axis_value(axis, hints.get(axis, str), text)
        except CliError:
            return False
        if workload[axis] != value and str(workload[axis]) != text:
            return False
    return True


def _check_value(families: list[Any], axis: str, text: str) -> None:
    """``axis=text`` of ``--workload`` reads as a value of that axis in some family that has it
    (as ``tune <kernel> --<axis>`` reads it); a one-line error otherwise."""
    from tuner.cli.common import axis_value

    errors = []
    for k in families:
        hints = typing.get_type_hints(k.spec.workload)
        if axis in hints:
            try:
                axis_value(axis, hints[axis], text)
                return
            except CliError as e:
                errors.append(str(e))
    if errors:
        raise CliError(f"--workload: {axis}={text}: {errors[0].split(': ', 1)[-1]}")


@app.command("revalidate")
def revalidate_cmd(pack: PackOption = None, db: DbOption = None,
                   rounds: Annotated[int, typer.Option("--rounds", help="Interleaved re-timing rounds.")] = 3,
                   runners_up: Annotated[int, typer.Option("--runners-up", help="Stored runners-up re-timed per entry.")] = 2,
                   timeout: Annotated[Optional[str], typer.Option("--timeout", help="Per-config timeout (default 120s; 600s without a GPU).")] = None,
                   kernel: Annotated[Optional[list[str]], typer.Option("--kernel", help="Only these kernels' entries (repeatable).")] = None,
                   workload: Annotated[Optional[list[str]], typer.Option(
                       "--workload", help="Only entries whose workload has these axis values, e.g. tokens=256 or "
                       "tokens=256,placement=hbm (repeatable: any of them).")] = None) -> None:
    """Re-time a pack's winners, defaults and stored runners-up here; report stale entries.

    Each entry's times join its tune history (`tune regressions` and the dashboard), so a
    step seen once can be confirmed or cleared."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from tuner import registry
    from tuner.revalidate import RevalidateError, entries_from_pack, entries_from_store, revalidate
    from tuner.runtime import gpu_identity
    from tuner.runtime.env import INTERPRETER_GPU
    from tuner.store import open_store
    from tuner.timing import gpu_available

    # every option checked before the database or the pack is looked at
    if rounds < 1:
        raise CliError(f"--rounds: {rounds} (at least 1 re-timing round)")
    if runners_up < 0:
        raise CliError("--runners-up must not be negative")
    pack = given_path(pack, "--pack")
    try:
        timeout_s = parse_duration(timeout) if timeout is not None else (120.0 if gpu_available() else 600.0)
    except CliError as e:
        raise CliError(f"--timeout: {e}") from None
    names = {registry.get(k).name for k in kernel} if kernel else None  # a misspelt name is an error
    wanted = [_axis_values(w) for w in workload or ()]
    families = [k for k in registry.kernels().values() if names is None or k.name in names]
    known = {f.name for k in families for f in dataclasses.fields(k.spec.workload)}
    for w in wanted:
        if set(w) - known:
            raise CliError(f"--workload: no axis {', '.join(sorted(set(w) - known))} (axes: {', '.join(sorted(known))})")
        for axis, text in w.items():
            _check_value(families, axis, text)
    store = open_store(db, create=pack is not None)  # re-times of a pack go to the user's database by default
    gpu = gpu_identity()["gpu"]
    entries = entries_from_pack(pack) if pack is not None else entries_from_store(store, gpu)
    entries = [e for e in entries if names is None or e.kernel in names]
    if wanted:
        entries = [e for e in entries if any(_matches(e.kernel, e.workload, w) for w in wanted)]
    if not entries and (kernel or workload):
        raise CliError("nothing to revalidate: no entry matches --kernel / --workload")
    if not entries:
        raise CliError(f"nothing to revalidate: {'the pack has no entries' if pack else f'no winners for {gpu} in {store.shown_url}'}"
                       + ("" if pack else "; pass --pack PATH"))
    made_on = sorted({e.gpu for e in entries if e.gpu != INTERPRETER_GPU})
    if not gpu_available() and made_on:
        # their workloads are GPU-sized: through the interpreter an entry takes minutes (hours in all)
        raise CliError(f"no GPU here: these are {', '.join(made_on)} entries, whose full-size workloads the "
                       "interpreter would take hours over; run it on that GPU (`tune verify-pack` checks a pack's "
                       "configs against their search spaces without one)")
    if not gpu_available():
        console.print("[yellow]No GPU: configs are verified through the Triton interpreter; times are not meaningful, "
                      "so only broken entries can be found.[/yellow]")
    with Progress(TextColumn("[bold]revalidate"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  TextColumn("{task.fields[status]}"), console=console) as progress:
        task = progress.add_task("revalidate", total=len(entries), status="")

        def on_event(kind: str, info: dict[str, Any]) -> None:
            r = info["result"]
            progress.update(task, advance=1, status=f"{r.entry.kernel} {r.entry.workload_key}: {r.verdict}")

        try:
            report = revalidate(store, entries, rounds=rounds, n_runners_up=runners_up, timeout_s=timeout_s,
                                pack=str(pack) if pack else None, on_event=on_event)
        except RevalidateError as e:
            raise CliError(str(e)) from None
    table = Table(title=f"revalidation on {report.gpu}: {len(report.results)} entries, {len(report.stale)} stale")
    for col in ("kernel", "workload", "verdict", "winner us now", "tuned us", "default us now"):
        table.add_column(col, overflow="fold")
    colors = {"ok": "green", "stale": "red", "broken": "magenta", "unchecked": "yellow"}
    for r in report.results:
        now, d = r.time_of("winner"), r.time_of("default")
        table.add_row(r.entry.kernel, r.entry.workload_key, f"[{colors[r.verdict]}]{r.verdict}[/]",
                      f"{now:.2f}" if now else "-", f"{r.entry.median_us:.2f}" if r.entry.median_us else "-",
                      f"{d:.2f}" if d else "-")
    console.print(table)
    # reasons as lines (a table column wraps them to pieces); the interpreter note once
    for r in report.results:
        if r.verdict in ("stale", "broken") or (r.reason and r.verdict == "ok"):
            console.print(f"[{colors[r.verdict]}]{r.verdict}[/]: {r.entry.kernel} {r.entry.workload_key}: {r.reason}",
                          highlight=False, soft_wrap=True)
    if any(r.verdict == "unchecked" for r in report.results):
        console.print("[yellow]unchecked[/yellow]: interpreter times are not meaningful; the configs were verified "
                      "for correctness only", highlight=False)
    for s in report.skipped:
        console.print(f"[yellow]skipped:[/yellow] {s}")
    console.print(f"recorded as revalidation run{'s' if len(report.run_ids) != 1 else ''} "
                  f"{', '.join(map(str, report.run_ids))}"
                  + ("; retune the stale entries with `tune <kernel> --retune`" if report.stale else ""))


@app.command("regressions")
def regressions_cmd(db: DbOption = None,
                    since: Annotated[Optional[str], typer.Option("--since", help="Only steps from this date on: 2026-12-01, or an age like 7d.")] = None,
                    threshold: Annotated[str, typer.Option("--threshold", help="Smallest slowdown reported, in percent.")] = "5%",
                    min_points: Annotated[int, typer.Option("--min-points", help="Points at the new level that confirm a step.")] = 2,
                    kernel: Annotated[Optional[list[str]], typer.Option("--kernel", help="Only these kernels.")] = None) -> None:
    """List regressions beyond the noise band; exit 1 when there are any (for CI gating)."""
    from tuner.dashboard.detect import detect, regressions
    from tuner import registry
    from tuner.dashboard.history import load_history
    from tuner.store import open_store

    thr = parse_threshold(threshold)
    when = parse_since(since) if since is not None else None
    if min_points < 1:
        raise CliError("--min-points must be at least 1")
    names = [registry.get(k).name for k in kernel] if kernel else None  # a misspelt name is no pass
    store = open_store(db, create=False)
    unreadable: list[str] = []
    try:
        history = load_history(store, kernels=names, unreadable=unreadable)
    except (ValueError, LookupError, TypeError, RecursionError) as e:
        raise undecodable(store, e) from None
    for u in unreadable:
        console.print(f"[yellow]unreadable, left out:[/yellow] {escape(u)}", highlight=False, soft_wrap=True)
    changes = detect(history, threshold=thr, min_points=min_points, since=when)
    regs = regressions(changes)
    unconfirmed = [c for c in changes if c.is_regression and not c.confirmed]
    n_meaningful = sum(1 for s in history for p in s.points if p.meaningful)
    scope = f"{len(history)} series, {n_meaningful} GPU measurements" + (f", since {when:%Y-%m-%d %H:%M}" if when else "")
    if regs:
        # one line per regression: CI logs are read line by line, a table wraps at 80 columns
        console.print(f"[red]{len(regs)} regression{'s' if len(regs) != 1 else ''}[/red] beyond the noise ({scope}):",
                      highlight=False)
        for c in sorted(regs, key=lambda c: -c.change):
            console.print(f"  [red]{100 * c.change:+.1f}%[/red] {c.kernel} {c.workload_key} on {c.gpu}: "
                          f"{c.before_us:.2f} -> {c.after_us:.2f} us from {c.when:%Y-%m-%d} "
                          f"(p={c.p_value:.0e}, band +-{100 * c.band:.1f}%); changed: {c.cause}",
                          highlight=False, soft_wrap=True, markup=True)
    else:
        console.print(f"[green]no regressions[/green] beyond the noise and {100 * thr:g}% ({scope})")
    for c in unconfirmed:
        console.print(f"[yellow]unconfirmed:[/yellow] {c.kernel} {c.workload_key} on {c.gpu} "
                      f"{100 * c.change:+.1f}% in the newest point only ({c.cause}); "
                      f"`tune revalidate --kernel {c.kernel.replace('_', '-')} --workload {c.workload_key}` on that GPU "
                      "confirms or clears it", highlight=False, soft_wrap=True)
    if regs:
        raise typer.Exit(1)


@app.command("dashboard")
def dashboard_cmd(out_: Annotated[Optional[str], typer.Option("--out", help="HTML file to write (default report.html).")] = None,
                  db: DbOption = None, pack: PackOption = None,
                  serve: Annotated[bool, typer.Option("--serve", help="Serve the page on 127.0.0.1 instead, re-read per request.")] = False,
                  port: Annotated[int, typer.Option("--port", help="Port for --serve (0: any free port).")] = 8765,
                  threshold: Annotated[str, typer.Option("--threshold", help="Smallest change marked, in percent.")] = "5%",
                  refresh: Annotated[int, typer.Option("--refresh", help="With --serve: seconds between page reloads (0: never).")] = 60) -> None:
    """Write the regression dashboard as one self-contained HTML file, or serve it locally."""
    from tuner.dashboard.report import write_report
    from tuner.runtime import PackError
    from tuner.store import open_store

    thr = parse_threshold(threshold)
    out, pack = given_path(out_, "--out"), given_path(pack, "--pack")
    if out is not None and not out.parent.is_dir():  # (a folder is not made for it: a typo would go unseen)
        raise CliError(f"--out: no folder {out.parent} for the report (create it, or give another path)")
    if serve and out is not None:
        raise CliError("give either --out or --serve, not both")
    if not 0 <= port < 65536:
        raise CliError(f"--port: {port} is not a port")
    if refresh < 0:
        raise CliError(f"--refresh: {refresh} seconds (0: never; more: seconds between reloads)")
    store = open_store(db, create=False)
    if pack is not None:
        from tuner.runtime import load_pack

        try:
            load_pack(pack, allow_other_gpu=True, quiet=True)
        except PackError as e:
            raise CliError(str(e)) from None
    if serve:
        from tuner.dashboard.server import make_server

        try:
            httpd = make_server(store, port, pack=pack, threshold=thr, refresh_s=refresh)
        except OSError as e:
            raise CliError(f"cannot listen on 127.0.0.1:{port}: {e.strerror or e}") from None
        host, bound = httpd.server_address[:2]
        console.print(f"serving the dashboard of {store.shown_url} at http://{host}:{bound}/ (Ctrl-C to stop)")
        try:
            httpd.serve_forever()
        except KeyboardInterrupt:
            pass
        finally:
            httpd.server_close()
        return
    out = out or Path("report.html")
    try:
        path = write_report(store, out, pack=pack, threshold=thr)
    except OSError as e:  # the report file given cannot be written
        raise CliError(f"cannot write the report to {out}: {e.strerror or e}") from None
    except (ValueError, LookupError, TypeError, RecursionError) as e:
        raise undecodable(store, e) from None
    console.print(f"wrote {path} ({path.stat().st_size / 1024:.0f} KiB): open it in a browser, it works offline")
