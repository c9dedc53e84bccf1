"""History queries: one series per (kernel, workload, GPU) across runs and revalidations.

A *point* is what one run measured for one workload: for a tune run the best of its
finalists re-timed interleaved (phase ``final``; the best search trial when the run has
no final phase), for a revalidation the pack entry's winner re-timed. Every point keeps
the software versions of its environment (driver, CUDA, torch, triton, Python) and the
template source hash, so a series runs across software versions on one GPU and a step
can be attributed to what changed under it.
"""
from __future__ import annotations

import datetime as dt
import json
import logging
import math
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from sqlalchemy import select

from tuner.runtime.target import Target, of_fingerprint
from tuner.spec import config_key, workload_sort_key
from tuner.store import Environment, Run, Store, Trial, TrialStatus, Winner
from tuner.store.models import Revalidation

log = logging.getLogger(__name__)

VERSION_KEYS = ("driver", "cuda", "torch", "triton", "python")
"""The software versions a point is labelled with (from the environment fingerprint)."""


def versions_of(fingerprint: dict[str, Any]) -> dict[str, str]:
    """The software versions of an environment fingerprint, in a fixed order."""
    fp = fingerprint if isinstance(fingerprint, dict) else {}
    return {k: str(fp.get(k, "")) for k in VERSION_KEYS}


def timing_method(run: Run) -> int:
    """How a run timed its trials (``tuner.timing.TIMING_METHOD``), as its settings record it;
    2 where they do not (the method of every run before it was recorded); -1 for a value
    that is not a method number (a bad row: its points stand apart, never compared)."""
    value = run.options.get("timing", 2)
    return value if isinstance(value, int) and not isinstance(value, bool) else -1


def versions_label(versions: dict[str, str]) -> str:
    """``torch 2.13.0, triton 3.5.0, cuda 12.8, driver 575.51`` (empty parts left out)."""
    order = ("torch", "triton", "cuda", "driver", "python")
    return ", ".join(f"{k} {versions[k]}" for k in order if versions.get(k))


@dataclass(frozen=True)
class Point:
    """One run's measurement of one workload. Times in microseconds."""

    when: dt.datetime
    run_id: int
    kind: str  # "tune" or "revalidate"
    environment_id: int
    versions: dict[str, str]
    source_hash: str
    git_commit: str
    config: dict[str, Any]
    median_us: float
    p20_us: float
    p80_us: float
    default_us: float | None
    floor_us: float | None
    meaningful: bool
    timing: int = 2
    """How it was timed (``timing_method`` of its run): points timed by different methods
    are not compared."""

    @property
    def spread(self) -> float:
        """Relative half-width of the p20..p80 band around the median."""
        if not self.median_us or self.median_us <= 0:
            return 0.0
        return max(0.0, (self.p80_us - self.p20_us) / (2 * self.median_us))

    @property
    def speedup(self) -> float | None:
        """Default time over this time (>1: the tuned config is faster)."""
        return self.default_us / self.median_us if self.default_us and self.median_us else None

    @property
    def floor_fraction(self) -> float | None:
        """Floor time over this time (1.0 = at the roofline); None without a floor."""
        return self.floor_us / self.median_us if self.floor_us and self.median_us and self.meaningful else None


@dataclass
class Series:
    """The points of one (kernel, workload, GPU), oldest first."""

    kernel: str
    workload_key: str
    workload: dict[str, Any]
    gpu: str
    points: list[Point] = field(default_factory=list)

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.kernel, self.workload_key, self.gpu)


def registry_defaults() -> Callable[[str, dict[str, Any], Any], dict[str, Any] | None]:
    """A resolver of the default config of (kernel, workload dict, target) through the registry.

    Unknown kernels (or a registry that cannot be imported) resolve to None; results are
    cached per workload key.
    """
    cache: dict[tuple[str, str], dict[str, Any] | None] = {}

    def resolve(kernel: str, workload: dict[str, Any], target: Any) -> dict[str, Any] | None:
        key = (kernel, json.dumps(workload, sort_keys=True), target)
        if key not in cache:
            try:
                from tuner import registry
                from tuner.spec import workload_from_dict

                k = registry.kernels().get(kernel)
                cache[key] = k.default_config(workload_from_dict(k.spec.workload, workload), target) if k else None
            except Exception as e:  # noqa: BLE001 - a kernel that cannot say its default has no default line
                log.debug("no default config for %s %s: %s", kernel, workload, e)
                cache[key] = None
        return cache[key]

    return resolve


def load_history(store: Store, *, kernels: Iterable[str] | None = None,
                 default_of: Callable[[str, dict[str, Any], Any], dict[str, Any] | None] | None = None,
                 unreadable: list[str] | None = None) -> list[Series]:
    """Every series in the store (optionally only ``kernels``), sorted by kernel, workload, GPU.

    ``default_of(kernel, workload, target)`` names the default config so a tune run's point can
    carry the default's time; by default the registry is asked. A point whose rows do not hold
    what they should (hand-edited, another tool's) is left out and described in ``unreadable``.
    """
    unreadable = [] if unreadable is None else unreadable
    default_of = default_of or registry_defaults()
    only = set(kernels) if kernels else None
    with store.session() as s:
        envs = {e.id: e for e in s.scalars(select(Environment))}
        runs = {r.id: r for r in s.scalars(select(Run))}
        trials = s.scalars(select(Trial).where(Trial.status == TrialStatus.ok, Trial.median_us.is_not(None))
                           .order_by(Trial.id)).all()
        revals = s.scalars(select(Revalidation).order_by(Revalidation.id)).all()
        winners = s.scalars(select(Winner)).all()
    # The winner rows remember the default's time of the run that wrote them.
    winner_default = {(w.run_id, w.kernel, w.workload_key): w for w in winners}

    grouped: dict[tuple[int, str, str], list[Trial]] = {}
    for t in trials:
        if only is None or t.kernel in only:
            grouped.setdefault((t.run_id, t.kernel, t.workload_key), []).append(t)

    series: dict[tuple[str, str, str], Series] = {}

    def target_of(run: Run) -> Target:  # defaults are planned for the GPU that ran them
        fp = envs[run.environment_id].fingerprint
        return of_fingerprint(fp if isinstance(fp, dict) else {})

    def add(kernel: str, wkey: str, workload: dict[str, Any], run: Run, point_args: dict[str, Any]) -> None:
        env = envs[run.environment_id]
        key = (kernel, wkey, env.gpu)
        point = Point(
            when=run.started, run_id=run.id, kind=run.kind, environment_id=env.id,
            versions=versions_of(env.fingerprint or {}), source_hash=run.source_hash,
            git_commit=run.git_commit or "", timing=timing_method(run), **point_args)
        check_times(point, ("median_us", "p20_us", "p80_us", "default_us", "floor_us"))
        point.speedup, point.floor_fraction, point.spread, point.when < dt.datetime.max  # noqa: B018 - bad values fail here, not in the page
        if not isinstance(workload, dict) or not isinstance(point.config, dict):
            raise TypeError("its workload or config is not a JSON object")
        if key not in series:
            series[key] = Series(kernel, wkey, dict(workload), env.gpu)
        series[key].points.append(point)

    for (run_id, kernel, wkey), rows in grouped.items():
        run = runs.get(run_id)
        if run is None or run.kind != "tune":
            continue
        try:
            _tune_point(kernel, wkey, rows, run, add, default_of, target_of, winner_default)
        except (TypeError, ValueError, KeyError, AttributeError) as e:
            unreadable.append(f"run {run_id} {kernel} {wkey}: {type(e).__name__}: {e}"[:300])
    by_reval: dict[tuple[int, str], list[Revalidation]] = {}
    for r in revals:
        if only is None or r.kernel in only:
            by_reval.setdefault((r.run_id, r.workload_key), []).append(r)
    for (run_id, wkey), rows in by_reval.items():
        run = runs.get(run_id)
        try:
            _revalidation_point(wkey, rows, run, add, default_of, target_of)
        except (TypeError, ValueError, KeyError, AttributeError) as e:
            unreadable.append(f"revalidation run {run_id} {wkey}: {type(e).__name__}: {e}"[:300])
    out = sorted(series.values(), key=lambda x: (x.kernel, workload_sort_key(x.workload), x.gpu))
    for sr in out:
        sr.points.sort(key=lambda p: (p.when, p.run_id))
    return out


def _tune_point(kernel, wkey, rows, run, add, default_of, target_of, winner_default) -> None:
    """The point of one tune run's workload: its best final (else search) time and its default's."""
    final = [t for t in rows if t.phase == "final"] or [t for t in rows if t.phase == "search"]
    if not final:
        return
    best = min(final, key=lambda t: t.median_us)
    dcfg = default_of(kernel, best.workload, target_of(run))
    default_us = None
    if dcfg is not None:
        dk = config_key(dcfg)
        same = [t for t in final if t.config_key == dk] or [t for t in rows if t.config_key == dk]
        default_us = same[-1].median_us if same else None
    if default_us is None:
        w = winner_default.get((run.id, kernel, wkey))
        if w is not None:
            default_us = w.median_us if w.is_default else w.default_median_us
    add(kernel, wkey, best.workload, run, dict(
        config=best.config, median_us=best.median_us, p20_us=best.p20_us or best.median_us,
        p80_us=best.p80_us or best.median_us, default_us=default_us, floor_us=best.floor_us,
        meaningful=best.meaningful))


def _revalidation_point(wkey, rows, run, add, default_of, target_of) -> None:
    """The point of one revalidation of a pack entry: its winner's re-timed time and its default's."""
    win = next((r for r in rows if r.role == "winner"), None)
    if run is None or win is None or win.status != TrialStatus.ok or win.median_us is None:
        return
    dflt = next((r for r in rows if r.role == "default" and r.status == TrialStatus.ok), None)
    default_us = dflt.median_us if dflt else (win.median_us if win.config == default_of(win.kernel, win.workload,
                                                                                          target_of(run))
                                               else None)
    add(win.kernel, wkey, win.workload, run, dict(
        config=win.config, median_us=win.median_us, p20_us=win.p20_us or win.median_us,
        p80_us=win.p80_us or win.median_us, default_us=default_us, floor_us=win.floor_us,
        meaningful=win.meaningful))


class Ratios:
    """Mixin: speedup over the default and fraction of the roofline floor, for entries
    with ``is_default``, ``median_us``, ``default_us``, ``floor_us`` and ``meaningful``."""

    @property
    def speedup(self) -> float | None:
        if self.is_default:
            return 1.0
        return self.default_us / self.median_us if self.default_us and self.median_us else None

    @property
    def floor_fraction(self) -> float | None:
        return self.floor_us / self.median_us if self.floor_us and self.median_us and self.meaningful else None


@dataclass(frozen=True)
class Entry(Ratios):
    """The current tuned entry of one (kernel, workload, GPU): the newest winner row."""

    kernel: str
    workload_key: str
    workload: dict[str, Any]
    gpu: str
    config: dict[str, Any]
    is_default: bool
    median_us: float
    p20_us: float
    p80_us: float
    default_us: float | None
    floor_us: float | None
    noise: float
    meaningful: bool
    source_hash: str
    updated: dt.datetime


def check_times(row: Any, names: Iterable[str]) -> None:
    """Raise ValueError where one of ``row``'s times (microseconds) or noise fractions is no
    finite number >= 0 (a hand edit, another tool's row): such a row is shown as unreadable."""
    for name in names:
        v = getattr(row, name)
        if v is None and name != "median_us":  # a missing time (no default, no floor) is fine
            continue
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
            raise ValueError(f"{name} is {v!r}, not a finite number >= 0")


ENTRY_NUMBERS = ("median_us", "p20_us", "p80_us", "default_us", "floor_us", "noise")


def current_entries(store: Store, unreadable: list[str] | None = None) -> list[Entry]:
    """The newest winner per (kernel, workload, GPU) across that GPU's environments (a row
    that does not hold what it should is described in ``unreadable`` instead)."""
    with store.session() as s:
        rows = s.execute(select(Winner, Environment.gpu).join(Environment, Winner.environment_id == Environment.id)
                         .order_by(Winner.updated, Winner.id)).all()
    newest: dict[tuple[str, str, str], Entry] = {}
    for w, gpu in rows:
        try:
            if not isinstance(w.workload, dict) or not isinstance(w.config, dict):
                raise TypeError("its workload or config is not a JSON object")
            e = Entry(w.kernel, w.workload_key, dict(w.workload), gpu, dict(w.config), w.is_default, w.median_us,
                      w.p20_us, w.p80_us, w.default_median_us, w.floor_us, w.noise, w.meaningful, w.source_hash,
                      w.updated)
            check_times(e, ENTRY_NUMBERS)
            e.speedup, e.floor_fraction, workload_sort_key(e.workload)  # noqa: B018 - fail here, not in the page
        except (TypeError, ValueError, KeyError, AttributeError) as ex:
            if unreadable is not None:
                unreadable.append(f"winner {w.id} {w.kernel} {w.workload_key}: {type(ex).__name__}: {ex}"[:300])
            continue
        newest[(w.kernel, w.workload_key, gpu)] = e
    return sorted(newest.values(), key=lambda e: (e.kernel, e.gpu, workload_sort_key(e.workload)))


@dataclass(frozen=True)
class Verdict:
    """The verdict on one pack entry in the newest revalidation run of its kernel and GPU."""

    kernel: str
    workload_key: str
    run_id: int
    when: dt.datetime
    gpu: str
    verdict: str
    reason: str


def latest_revalidations(store: Store) -> list[Verdict]:
    """Verdicts of the newest revalidation run per (kernel, GPU), every entry (ok ones too)."""
    with store.session() as s:
        runs = s.execute(select(Run, Environment.gpu).join(Environment, Run.environment_id == Environment.id)
                         .where(Run.kind == "revalidate").order_by(Run.started, Run.id)).all()
        newest: dict[tuple[str, str], tuple[Run, str]] = {}
        for r, gpu in runs:
            newest[(r.kernel, gpu)] = (r, gpu)
        out: list[Verdict] = []
        for r, gpu in newest.values():
            rows = s.scalars(select(Revalidation).where(Revalidation.run_id == r.id, Revalidation.role == "winner")
                             .order_by(Revalidation.id)).all()
            out += [Verdict(x.kernel, x.workload_key, r.id, r.started, gpu, x.verdict or "unchecked", x.reason or "")
                    for x in rows]
    return out

