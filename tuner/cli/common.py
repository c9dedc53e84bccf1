"""Shared CLI pieces: the one-line error, option types, parsing of axis values and budgets."""
from __future__ import annotations

import dataclasses
import re
import typing
from typing import Annotated, Any, Optional

import typer
from rich.console import Console

console = Console()
err_console = Console(stderr=True)


class CliError(Exception):
    """Bad input: printed as one line, exit code 2."""


DbOption = Annotated[Optional[str], typer.Option(
    "--db", help="Results database: a SQLite path or a SQLAlchemy URL (sqlite:///..., postgresql+psycopg://...). "
                 "Default: $TUNER_DB (taken as --db is: no fallback, no folders made), else "
                 "~/.local/share/tuner/results.db, which commands that only read replace with the checkout's shipped "
                 "results.db while it does not exist.")]


def given_path(text: str | None, what: str) -> "Path | None":
    """A path option or argument as given; an empty one (which ``Path`` would read as the
    current folder) is an error. Path options are declared ``str`` so that '' reaches here."""
    from pathlib import Path

    if text is None:
        return None
    if not text.strip():
        raise CliError(f"{what}: empty path")
    return Path(text)


MAX_DURATION_S = 480 * 3600


def parse_duration(text: str, *, wait: bool = True) -> float:
    """'90s', '5m', '4m30s', '1.5h' or plain seconds -> seconds; a ``wait`` (a timeout, a
    budget) at most ``MAX_DURATION_S``."""
    parts = re.findall(r"(\d+(?:\.\d+)?)\s*([smh]?)", text or "")
    if not parts or re.sub(r"[\d.\s smh]", "", text or "") or "".join(a + b for a, b in parts) != re.sub(r"\s", "", text):
        raise CliError(f"bad duration {text!r} (use e.g. 90s, 5m, 4m30s, 1h)")
    if len(parts) > 1 and any(not u for _, u in parts):  # '1h30': 30 s or 30 min? say which
        raise CliError(f"bad duration {text!r} (give each part its unit, e.g. 1h30m)")
    total = sum(float(n) * {"": 1, "s": 1, "m": 60, "h": 3600}[u] for n, u in parts)
    if total <= 0:
        raise CliError(f"bad duration {text!r} (must be positive)")
    if wait and total > MAX_DURATION_S:  # past ~596 h a wait's timeout overflows (milliseconds in 32 bits)
        raise CliError(f"bad duration {text!r} (at most {MAX_DURATION_S // 3600:g}h)")
    return total


_SUFFIX = {"K": 1 << 10, "M": 1 << 20}  # binary, as the grids' sizes: 8M = 8 << 20, 128K = 131072


def parse_count(text: str) -> int:
    """An integer with an optional binary K / M suffix (``8M`` = 8 << 20); ValueError otherwise.
    The ``tune`` axes and the benchmarks' size options both read counts this way."""
    text = text.strip()
    mult = _SUFFIX.get(text[-1:].upper(), 1)
    return int(text[:-1] if mult > 1 else text) * mult


def axis_value(axis: str, typ: type, text: str) -> Any:
    """One value of a workload axis from its text (``32K`` for an int axis), or one CliError line."""
    try:
        v = parse_count(text) if typ is int else typ(text)
    except ValueError:
        raise CliError(f"--{axis.replace('_', '-')}: {text!r} is not a valid {typ.__name__}"
                       + (" (K/M suffixes allowed: 8M = 8 << 20)" if typ is int else "")) from None
    if typ in (int, float) and v <= 0:
        raise CliError(f"--{axis.replace('_', '-')}: {text!r} must be positive")
    return v


def expand_grid(workload_cls: type, base: list[Any], options: dict[str, str | None],
                limits: dict[str, Any] | None = None) -> list[Any]:
    """The workloads to tune: ``base`` with CLI axis options applied.

    ``a,b,c`` sets an axis to those values (each base workload is repeated per value);
    ``lo..hi`` keeps only base workloads whose axis lies in [lo, hi] (none: an error listing
    the grid's values of that axis).
    """
    hints = typing.get_type_hints(workload_cls)
    limits = limits or {}
    grid = list(base)
    for axis, text in options.items():
        if text is None:
            continue
        typ = hints[axis]
        flag = f"--{axis.replace('_', '-')}"
        if ".." in text:
            if typ not in (int, float):
                raise CliError(f"{flag}: ranges only apply to numeric axes")
            lo_s, _, hi_s = text.partition("..")
            lo, hi = axis_value(axis, typ, lo_s), axis_value(axis, typ, hi_s)
            if lo > hi:
                raise CliError(f"{flag}: empty range {text!r}")
            kept = [w for w in grid if lo <= getattr(w, axis) <= hi]
            if grid and not kept:  # a range filters the grid's values; which are they here?
                have = sorted({getattr(w, axis) for w in grid})
                raise CliError(f"{flag}: no workload in {text} (a range keeps the grid's values; {axis} here: "
                               f"{', '.join(map(str, have))}; give a value list a,b,c to tune others)")
            grid = kept
            continue
        values = [axis_value(axis, typ, t.strip()) for t in text.split(",") if t.strip()]
        if not values:
            raise CliError(f"{flag}: no values given")
        allowed = limits.get(axis)
        for v in values:
            if isinstance(allowed, tuple) and len(allowed) == 2 and typ in (int, float) and not allowed[0] <= v <= allowed[1]:
                raise CliError(f"{flag}: {v} is outside {allowed[0]}..{allowed[1]}")
            if isinstance(allowed, (list, frozenset, set)) and v not in allowed:
                raise CliError(f"{flag}: unknown value {v!r} (choose from {', '.join(map(str, sorted(allowed)))})")
        grid = [dataclasses.replace(w, **{axis: v}) for w in grid for v in values]
    seen, out = set(), []
    for w in grid:
        if w not in seen:
            seen.add(w)
            out.append(w)
    if not out:
        raise CliError("no workloads match those options")
    return out


def undecodable(store: Any, e: BaseException) -> CliError:
    """A database row that does not even decode (bad or too deeply nested JSON, date or status text): one line."""
    msg = str(e).splitlines()[0][:200] if str(e) else ""
    return CliError(f"cannot read {store.shown_url}: a row does not decode ({type(e).__name__}: {msg})")
