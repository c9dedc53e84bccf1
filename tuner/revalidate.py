"""`tune revalidate`: re-time a pack's winners on the current environment, in minutes.

Per entry the winner, the default and the runners-up stored in the database (the other
finalists of the run that crowned the winner) are verified and re-timed interleaved in
the isolated worker, and recorded as one revalidation run per kernel
(``Run.kind == "revalidate"``, rows in ``tuner_revalidations``). An entry is *stale* when
its winner no longer wins (another of its configs now beats it by more than the noise)
or got slower than what the entry recorded beyond the noise (its p20..p80 band lies
wholly above the stored one, on the same GPU); *broken* when the winner no longer
compiles or verifies. Times measured through the interpreter check correctness only.
"""
from __future__ import annotations

import logging
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from sqlalchemy import select

from tuner import registry, roofline
from tuner.device import git_commit
from tuner.runtime.target import Target
from tuner.spec import TrialResult, canonical_workload, config_key, input_seed, workload_from_dict
from tuner.store import Environment, Run, Store, Trial, TrialStatus, Winner
from tuner.store.models import Revalidation, utcnow
from tuner.study import ensure_environment
from tuner.worker import Worker

log = logging.getLogger(__name__)


class RevalidateError(Exception):
    """Nothing to revalidate (no pack entries, no winners for this GPU)."""


@dataclass(frozen=True)
class PackEntry:
    """One entry to re-check: what it claimed when tuned, and where."""

    kernel: str
    workload: dict[str, Any]
    workload_key: str
    config: dict[str, Any]
    median_us: float | None
    p20_us: float | None
    p80_us: float | None
    default_median_us: float | None
    noise: float
    source_hash: str
    gpu: str
    meaningful: bool
    winner_id: int | None = None


@dataclass
class Timed:
    """One config of an entry as re-timed now."""

    role: str
    config: dict[str, Any]
    result: TrialResult
    noise: float = 0.0


@dataclass
class EntryResult:
    """The verdict on one entry: ``ok``, ``stale``, ``broken`` or ``unchecked``."""

    entry: PackEntry
    verdict: str
    reason: str
    timed: list[Timed] = field(default_factory=list)

    def time_of(self, role: str) -> float | None:
        t = next((t for t in self.timed if t.role == role and t.result.status == "ok"), None)
        return t.result.median_us if t else None


@dataclass
class RevalidationReport:
    """What `tune revalidate` did: the runs it recorded and one verdict per entry."""

    run_ids: list[int]
    results: list[EntryResult]
    skipped: list[str]
    gpu: str

    @property
    def stale(self) -> list[EntryResult]:
        return [r for r in self.results if r.verdict in ("stale", "broken")]


def _workload_key(workload: dict[str, Any]) -> str:
    return ",".join(f"{k}={v}" for k, v in workload.items())


def entries_from_pack(path: Path) -> list[PackEntry]:
    """The entries of a pack folder (checksums verified; raises ``PackError``)."""
    from tuner.runtime import load_pack

    pack = load_pack(path, allow_other_gpu=True, quiet=True)  # re-times its configs: no select() here
    gpu = str((pack.manifest.get("fingerprint") or {}).get("gpu", ""))
    meaningful = bool(pack.manifest.get("meaningful", True))
    out = []
    for kname, table in sorted(pack.tables.items()):
        k = registry.kernels().get(kname)
        for e in table.entries:
            w = canonical_workload(k.spec.workload, e["workload"]) if k else dict(e["workload"])
            out.append(PackEntry(kname, w, _workload_key(w), dict(e["config"]), e.get("median_us"), e.get("p20_us"),
                                 e.get("p80_us"), e.get("default_median_us"), float(e.get("noise") or 0.0),
                                 str(e.get("source_hash", "")), gpu, meaningful))
    return out


def entries_from_store(store: Store, gpu: str) -> list[PackEntry]:
    """The newest winner per (kernel, workload) among the environments of ``gpu``."""
    with store.session() as s:
        rows = s.scalars(select(Winner).join(Environment, Winner.environment_id == Environment.id)
                         .where(Environment.gpu == gpu).order_by(Winner.updated, Winner.id)).all()
    newest: dict[tuple[str, str], Winner] = {}
    for w in rows:
        newest[(w.kernel, w.workload_key)] = w
    return [PackEntry(w.kernel, dict(w.workload), w.workload_key, dict(w.config), w.median_us, w.p20_us, w.p80_us,
                      w.default_median_us, w.noise, w.source_hash, gpu, w.meaningful, w.id)
            for _, w in sorted(newest.items())]


def runners_up(store: Store, entry: PackEntry, exclude: set[str], limit: int = 2) -> list[dict[str, Any]]:
    """The best other finalists of the run that crowned ``entry`` (its search trials if none)."""
    with store.session() as s:
        q = select(Winner).join(Environment, Winner.environment_id == Environment.id).where(
            Winner.kernel == entry.kernel, Winner.workload_key == entry.workload_key,
            Winner.source_hash == entry.source_hash)
        if entry.winner_id is not None:
            q = select(Winner).where(Winner.id == entry.winner_id)
        elif entry.gpu:
            q = q.where(Environment.gpu == entry.gpu)
        w = s.scalars(q.order_by(Winner.updated.desc())).first()
        run_id = w.run_id if w else s.scalar(
            select(Trial.run_id).where(Trial.kernel == entry.kernel, Trial.workload_key == entry.workload_key,
                                       Trial.phase == "final").order_by(Trial.id.desc()))
        if run_id is None:
            return []
        trials = s.scalars(select(Trial).where(
            Trial.run_id == run_id, Trial.kernel == entry.kernel, Trial.workload_key == entry.workload_key,
            Trial.status == TrialStatus.ok, Trial.median_us.is_not(None))).all()
    out, seen = [], set(exclude)
    for phase in ("final", "search"):
        for t in sorted((t for t in trials if t.phase == phase), key=lambda t: t.median_us):
            if t.config_key not in seen and config_key(t.config) not in seen and len(out) < limit:
                seen.add(config_key(t.config))
                out.append(dict(t.config))
    return out


def _half(r: TrialResult) -> float:
    if not r.median_us or r.p20_us is None or r.p80_us is None:
        return 0.0
    return max(0.0, (r.p80_us - r.p20_us) / (2 * r.median_us))


def judge(entry: PackEntry, timed: list[Timed], gpu: str) -> tuple[str, str]:
    """(verdict, reason) of one entry from its configs re-timed now."""
    win = timed[0]
    if win.result.status != "ok":
        return "broken", f"the winner now fails: {win.result.status}" + (f" ({win.result.error})" if win.result.error else "")
    if not win.result.meaningful:
        return "unchecked", "interpreter: correctness checked, times not meaningful"
    w_us = win.result.median_us or 0.0
    reasons = []
    others = [t for t in timed[1:] if t.result.status == "ok" and t.result.median_us]
    if others:
        best = min(others, key=lambda t: t.result.median_us)
        nz = max(win.noise, best.noise, entry.noise)
        if best.result.median_us < w_us * (1 - nz):
            reasons.append(f"no longer wins: the {best.role.replace('_', '-')} is now "
                           f"{100 * (w_us / best.result.median_us - 1):.0f}% faster (noise {100 * nz:.1f}%)")
    if entry.median_us and entry.meaningful and entry.gpu == gpu:
        stored_p80 = entry.p80_us or entry.median_us
        ratio = w_us / entry.median_us
        if (win.result.p20_us or w_us) > stored_p80 and ratio - 1 > max(entry.noise, _half(win.result)):
            reasons.append(f"{100 * (ratio - 1):.0f}% slower than tuned ({entry.median_us:.2f} -> {w_us:.2f} us, "
                           f"beyond the p20..p80 band)")
    if entry.gpu and entry.gpu != gpu:
        note = f"tuned on {entry.gpu}: compared with its own configs only"
        return ("stale", "; ".join(reasons + [note])) if reasons else ("ok", note)
    return ("stale", "; ".join(reasons)) if reasons else ("ok", "")


def revalidate(store: Store, entries: list[PackEntry], *, rounds: int = 3, n_runners_up: int = 2,
               timeout_s: float = 120.0, pack: str | None = None,
               on_event: Callable[[str, dict[str, Any]], None] | None = None) -> RevalidationReport:
    """Re-time ``entries`` here and record one revalidation run per kernel."""
    from tuner.timing import TIMING_METHOD

    on_event = on_event or (lambda kind, info: None)
    env = ensure_environment(store)
    known = registry.kernels()
    skipped: list[str] = []
    by_kernel: dict[str, list[PackEntry]] = {}
    for e in entries:
        if e.kernel not in known:
            skipped.append(f"{e.kernel}: unknown kernel (not in this checkout)")
            continue
        by_kernel.setdefault(e.kernel, []).append(e)
    results: list[EntryResult] = []
    run_ids: list[int] = []
    with Worker(timeout_s=timeout_s) as worker:
        for kname, kentries in by_kernel.items():
            k = known[kname]
            with store.session() as s:
                run = Run(kind="revalidate", kernel=kname, environment_id=env.id, source_hash=k.source_hash,
                          git_commit=git_commit(), settings={"pack": pack, "rounds": rounds,
                                                             "entries": len(kentries), "timing": TIMING_METHOD})
                s.add(run)
                s.commit()
            run_ids.append(run.id)
            status = "interrupted"
            try:
                for e in kentries:
                    r = _one(store, worker, k, e, run.id, env, rounds, n_runners_up, skipped)
                    if r is not None:
                        results.append(r)
                        on_event("entry", {"result": r})
                status = "done"
            finally:
                with store.session() as s:
                    row = s.get(Run, run.id)
                    row.status, row.finished = status, utcnow()
                    s.commit()
    return RevalidationReport(run_ids, results, skipped, env.gpu)


def _one(store: Store, worker: Worker, k, e: PackEntry, run_id: int, env: Environment, rounds: int,
         n_runners_up: int, skipped: list[str]) -> EntryResult | None:
    try:
        w = workload_from_dict(k.spec.workload, e.workload)
    except (KeyError, TypeError, ValueError) as ex:
        skipped.append(f"{e.kernel} {e.workload_key}: bad workload ({ex})")
        return None
    default = k.default_config(w, Target.of())
    configs = [("winner", e.config)]
    if config_key(default) != config_key(e.config):
        configs.append(("default", default))
    configs += [("runner_up", c) for c in runners_up(store, e, {config_key(e.config), config_key(default)}, n_runners_up)]
    seed = input_seed(e.workload_key)
    timed = [Timed(role, cfg, worker.evaluate(k.name, e.workload, cfg, seed)) for role, cfg in configs]
    ok = [t for t in timed if t.result.status == "ok"]
    if len(ok) > 1 and rounds > 0:
        per_round = worker.retime(k.name, e.workload, [t.config for t in ok], rounds, seed)
        if per_round is not None:
            for t, rs in zip(ok, per_round):
                med, p20, p80 = (statistics.median(x[j] for x in rs) for j in range(3))
                meds = [x[0] for x in rs]
                spread = (max(meds) - min(meds)) / (2 * med) if len(meds) > 1 and med else 0.0
                t.result = TrialResult("ok", med, p20, p80, None, t.result.meaningful)
                t.noise = max(_half(t.result), spread)
    for t in ok:
        t.noise = t.noise or _half(t.result)
    verdict, reason = judge(e, timed, env.gpu)
    if e.source_hash and e.source_hash != k.source_hash:
        reason = "; ".join(x for x in (reason, "template changed since tuning: timed the current source") if x)
    cost = k.spec.cost(w)
    floor = roofline.floor_us(cost[0], cost[1], env.gpu)
    with store.session() as s:
        for t in timed:
            is_win = t.role == "winner"
            s.add(Revalidation(
                run_id=run_id, kernel=k.name, workload_key=e.workload_key, workload=e.workload, role=t.role,
                config=t.config, config_key=config_key(t.config), status=TrialStatus(t.result.status),
                median_us=t.result.median_us, p20_us=t.result.p20_us, p80_us=t.result.p80_us, floor_us=floor,
                meaningful=t.result.meaningful, error=t.result.error,
                stored_median_us=e.median_us if is_win else (e.default_median_us if t.role == "default" else None),
                stored_noise=e.noise if is_win else None, stored_source_hash=e.source_hash or None,
                stored_gpu=e.gpu or None, winner_id=e.winner_id if is_win else None,
                verdict=verdict if is_win else None, reason=reason if is_win else None))
        s.commit()  # per entry: an interrupted revalidation keeps what it measured
    return EntryResult(e, verdict, reason, timed)
