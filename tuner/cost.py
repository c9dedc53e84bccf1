"""What a trial costs, by phase: recorded with every search trial, summarized per GPU.

Each search trial's Optuna record carries the user attribute ``phases``: seconds per phase
and two counts, ``compiled`` and ``cached`` (the kernels its first launch compiled, and
those Triton loaded from its cache, where the Triton at hand tells). Phases:

- ``compile``: the candidate's first launch in the worker (Triton compiles it, or loads it
  from its cache, then it runs once), plus any wait for the compile-ahead pool
  (``tuner.precompile``) still compiling it;
- ``inputs``: building the workload's inputs (once per workload and input seed in a worker
  process; 0 for the trials that find them built);
- ``reference``: the reference outputs (likewise once) and the check of the candidate's;
- ``timing``: the timed replays;
- ``overhead``: the worker process's share: its start (spawn, imports, CUDA context) on the
  trial that started it, the messages, the scratch fill before each launch;
- ``study``: the search driver: the sampler's suggestions (pruned and duplicate ones
  included) and the database writes of the trial before (both charged to the next measured
  trial; a workload's last trial's writes to the workload's total only).
"""
from __future__ import annotations

import json
import statistics
from typing import Any, Iterable, Mapping

PHASES = ("compile", "inputs", "reference", "timing", "overhead", "study")
ATTR = "phases"
"""The Optuna trial user attribute holding a trial's phases."""


def _p90(values: list[float]) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, round(0.9 * (len(s) - 1)))]


def summarize(rows: Iterable[Mapping[str, float]]) -> dict[str, Any]:
    """Median and p90 seconds per phase and of the whole trial over ``rows`` (one dict of phase
    seconds per trial; a phase a row lacks counts 0), each phase's share of the summed time, and
    the kernels compiled and loaded from cache: ``{"trials": n, "phases": {phase: {"median",
    "p90", "share"}}, "total": {"median", "p90", "sum"}, "compiled": n, "cached": n}``."""
    rows = [r for r in rows if isinstance(r, Mapping)]
    out: dict[str, Any] = {"trials": len(rows), "phases": {}, "total": None,
                           "compiled": sum(int(r.get("compiled", 0) or 0) for r in rows),
                           "cached": sum(int(r.get("cached", 0) or 0) for r in rows)}
    if not rows:
        return out
    totals = [sum(float(r.get(p, 0.0) or 0.0) for p in PHASES) for r in rows]
    whole = sum(totals) or 1.0
    for p in PHASES:
        v = [float(r.get(p, 0.0) or 0.0) for r in rows]
        out["phases"][p] = {"median": statistics.median(v), "p90": _p90(v), "share": sum(v) / whole}
    out["total"] = {"median": statistics.median(totals), "p90": _p90(totals), "sum": sum(totals)}
    return out


def lines(summary: Mapping[str, Any]) -> list[str]:
    """A summary as text: one line per phase (median, p90, share), then the trial's."""
    if not summary.get("trials"):
        return []
    out = [f"{'phase':10} {'median s':>9} {'p90 s':>9} {'share':>6}"]
    for p, v in summary["phases"].items():
        out.append(f"{p:10} {v['median']:9.3f} {v['p90']:9.3f} {100 * v['share']:5.0f}%")
    t = summary["total"]
    out.append(f"{'trial':10} {t['median']:9.3f} {t['p90']:9.3f}   100%")
    out.append(f"{summary['trials']} trials, {t['sum']:.0f} s; kernels compiled {summary['compiled']}, "
               f"loaded from the cache {summary['cached']}")
    return out


def split_line(seconds: float, spent: Mapping[str, float], final_s: float = 0.0) -> str:
    """One workload's wall seconds and where they went: its trials' phases, the finalists'
    re-timing, and the rest (the study's setup, the winner's record), e.g. ``26.1 s: compile
    10.2, inputs 2.0, ... final 4.5, other 0.8``."""
    parts = [(p, spent.get(p, 0.0)) for p in PHASES if spent.get(p, 0.0) >= 0.05]
    if final_s >= 0.05:
        parts.append(("final", final_s))
    other = seconds - sum(spent.get(p, 0.0) for p in PHASES) - final_s
    if other >= 0.05:
        parts.append(("other", other))
    return f"{seconds:.1f} s" + (": " + ", ".join(f"{p} {v:.1f}" for p, v in parts) if parts else "")


def family_lines(outcomes: Iterable[tuple[str, Any]]) -> list[str]:
    """Per family, from ``(family, Outcome)`` pairs: the workloads tuned (not skipped), their
    wall minutes in all, the median seconds a workload, the finalists' re-timing's share and
    how many entries were predicted."""
    by: dict[str, list[Any]] = {}
    for name, o in outcomes:
        if not getattr(o, "skipped", None) and getattr(o, "seconds", 0.0):
            by.setdefault(name, []).append(o)
    out = []
    for name, outs in by.items():
        wall = sum(o.seconds for o in outs)
        final = sum(o.final_s for o in outs)
        guessed = sum(o.obtained == "predicted" for o in outs)
        out.append(f"{name}: {len(outs)} workloads, {wall / 60:.1f} min (median "
                   f"{statistics.median(o.seconds for o in outs):.1f} s; finalists {100 * final / (wall or 1):.0f}%"
                   + (f"; {guessed} predicted" if guessed else "") + ")")
    return out


def stored(store: Any, kernel: str | None = None) -> dict[str, list[dict[str, float]]]:
    """The phases of the search trials recorded in ``store`` (of ``kernel``, else all), per GPU
    (the environment's ``gpu``): read from Optuna's tables, which share the database. Empty where
    Optuna's tables do not exist yet."""
    from sqlalchemy import inspect, select, text

    from tuner.store import Environment

    if not inspect(store.engine).has_table("trial_user_attributes"):
        return {}
    q = text("SELECT s.study_name, a.value_json FROM trial_user_attributes a "
             "JOIN trials t ON t.trial_id = a.trial_id JOIN studies s ON s.study_id = t.study_id "
             "WHERE a.key = :key" + (" AND s.study_name LIKE :prefix" if kernel else ""))
    params = {"key": ATTR, **({"prefix": f"{kernel}|%"} if kernel else {})}
    with store.session() as s:
        rows = s.execute(q, params).all()
        gpus = dict(s.execute(select(Environment.fingerprint_hash, Environment.gpu)).all())
    out: dict[str, list[dict[str, float]]] = {}
    for name, value in rows:
        parts = str(name).split("|")  # kernel|workload|environment|source (tuner.study)
        try:
            phases = json.loads(value)
        except ValueError:
            continue
        if len(parts) == 4 and isinstance(phases, dict):
            out.setdefault(gpus.get(parts[2], parts[2]), []).append(phases)
    return out
