"""The search driver: one Optuna study per (kernel, workload, environment, source).

Per workload: seed the study with the default config, the fastest configs this workload
measured under earlier sources of the template, and the winners of tuned neighbours, ask
the sampler, prune by constraints before compiling, evaluate in the
isolated worker, record every trial as it finishes, stop on trials / budget / patience,
then re-time the finalists interleaved and admit a winner only if it beats the default
by more than the measured noise. A killed run resumes from what it recorded.
"""
from __future__ import annotations

import json
import logging
import math
import os
import socket
import statistics
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError

from tuner import roofline
from tuner.device import fingerprint, fingerprint_hash, git_commit
from tuner.registry import Kernel
from tuner.runtime.env import INTERPRETER_GPU
from tuner.runtime.target import Target
from tuner.spec import TrialResult, config_key, input_seed, log2_distance, numeric_axes, workload_dict, workload_key
from tuner.store import Environment, Run, Store, Trial, TrialStatus, Winner
from tuner.store.models import utcnow
from tuner.worker import Worker

log = logging.getLogger(__name__)

SAMPLERS = ("tpe", "random", "gp", "cmaes", "grid")


@dataclass(frozen=True)
class Settings:
    """How hard to search. Defaults suit a GPU; ``quick()`` suits CI and the interpreter."""

    n_trials: int = 16
    patience: int = 8
    budget_s: float | None = None
    sampler: str = "tpe"
    finalists: int = 3
    rounds: int = 3
    trial_timeout_s: float = 120.0
    seed: int = 0
    retune: bool = False
    extend: bool = False
    """``n_trials`` counts this run's new trials, not the workload's whole history (a campaign's
    further search of entries that are current)."""
    tries: tuple[tuple[tuple[str, Any], ...], ...] = ()
    """Partial configs, each laid over a workload's best config so far (its default where it
    has none) and measured right after the default (``tune --try``), even past ``n_trials``:
    a config seen elsewhere (a benchmark variant) gets a fresh trial."""

    @classmethod
    def quick(cls, **kw: Any) -> "Settings":
        return cls(**{"n_trials": 4, "patience": 3, "finalists": 2, "rounds": 1, **kw})


@dataclass
class Outcome:
    """What tuning one workload produced."""

    workload_key: str
    evaluated: int  # trials measured for this workload, source and environment, earlier runs included
    statuses: dict[str, int] = field(default_factory=dict)
    winner: dict[str, Any] | None = None
    winner_us: float | None = None
    default_us: float | None = None
    is_default: bool = True
    skipped: str | None = None
    new: int = 0  # of ``evaluated``, those measured in this run


def _alive(pid: Any) -> bool:
    if not isinstance(pid, int):
        return True  # unknown: leave it alone
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


_SAMPLER_NEEDS = {"gp": "scipy", "cmaes": "cmaes"}


def check_sampler(name: str) -> None:
    """Raise ValueError (one line) for an unknown sampler or one whose package is missing."""
    import importlib.util

    if name not in SAMPLERS:
        raise ValueError(f"unknown sampler {name!r} (choose from {', '.join(SAMPLERS)})")
    need = _SAMPLER_NEEDS.get(name)
    if need and importlib.util.find_spec(need) is None:
        raise ValueError(f"sampler {name!r} needs the {need!r} package (pip install 'tuner[{name}]')")


def make_sampler(name: str, kernel: Kernel, seed: int):
    import optuna

    if name == "tpe":
        return optuna.samplers.TPESampler(seed=seed, n_startup_trials=4, multivariate=True)
    if name == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    if name == "grid":
        return optuna.samplers.GridSampler({n: list(p.values()) for n, p in kernel.space.items()}, seed=seed)
    if name == "gp":
        return optuna.samplers.GPSampler(seed=seed)
    if name == "cmaes":
        return optuna.samplers.CmaEsSampler(seed=seed, warn_independent_sampling=False)
    raise ValueError(f"unknown sampler {name!r} (choose from {', '.join(SAMPLERS)})")


def ensure_environment(store: Store) -> Environment:
    """This machine's environment row, inserted on first use (another process inserting the
    same row at the same time wins the race: its row is read back)."""
    fp = fingerprint()
    h = fingerprint_hash(fp)
    for _ in range(3):
        with store.session() as s:
            env = s.scalar(select(Environment).where(Environment.fingerprint_hash == h))
            if env is not None:
                return env
            env = Environment(fingerprint_hash=h, gpu=fp["gpu"], cc=fp["cc"], fingerprint=fp)
            s.add(env)
            try:
                s.commit()
                return env
            except IntegrityError:
                s.rollback()
    raise RuntimeError(f"cannot record the environment {h} in {store.shown_url}")


OWNER = "tuner_run"
"""The Optuna trial user attribute naming the run (``tuner_runs.id``) that asked for the trial."""


def _tell(study, trial, value: float | None = None, state=None) -> None:
    """``study.tell`` that survives a trial finished meanwhile by another process."""
    try:
        study.tell(trial, value, state=state) if state is not None else study.tell(trial, value)
    except (ValueError, RuntimeError) as e:
        log.warning("trial %d of %s was finished elsewhere: %s", trial.number, study.study_name, e)


class Tuner:
    """Tunes the workloads of one kernel into the store, through one worker process."""

    def __init__(self, store: Store, kernel: Kernel, settings: Settings,
                 on_event: Callable[[str, dict[str, Any]], None] | None = None) -> None:
        self.store, self.kernel, self.settings = store, kernel, settings
        self.target = Target.of()  # the GPU the worker runs on (or the interpreter)
        self.on_event = on_event or (lambda kind, info: None)
        self.env = ensure_environment(store)
        self.meaningful = self.env.gpu != INTERPRETER_GPU

    def run(self, workloads: list[Any]) -> list[Outcome]:
        """Tune every workload in turn; the run row records how it ended."""
        import optuna

        from tuner.timing import TIMING_METHOD

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        s = self.settings
        self._close_dead_runs()
        with self.store.session() as sess:
            run = Run(kind="tune", kernel=self.kernel.name, environment_id=self.env.id,
                      source_hash=self.kernel.source_hash, git_commit=git_commit(),
                      settings={**s.__dict__, "workloads": [workload_key(w) for w in workloads],
                                "host": socket.gethostname(), "pid": os.getpid(), "timing": TIMING_METHOD})
            sess.add(run)
            sess.commit()
        self.run_id = run.id
        deadline = time.monotonic() + s.budget_s if s.budget_s else math.inf
        storage = self.store.optuna_storage()
        outcomes: list[Outcome] = []
        status = "interrupted"
        try:
            with Worker(timeout_s=s.trial_timeout_s) as worker:
                for i, w in enumerate(workloads):
                    share = (deadline - time.monotonic()) / (len(workloads) - i) if deadline != math.inf else math.inf
                    outcomes.append(self._tune_one(w, worker, storage, time.monotonic() + share))
                    self.on_event("workload_done", {"outcome": outcomes[-1]})
            status = "done"
        finally:
            with self.store.session() as sess:
                r = sess.get(Run, self.run_id)
                r.status, r.finished = status, utcnow()
                sess.commit()
        return outcomes

    def _live_runs(self) -> set[int]:
        with self.store.session() as sess:
            return set(sess.scalars(select(Run.id).where(Run.status == "running")).all())

    def _fail_stale_trials(self, study, storage) -> None:
        """Trials left running by a run that is gone (killed) are failed; those of runs still
        going (another process tuning the same study) are theirs to finish."""
        from optuna.trial import TrialState

        live = self._live_runs()
        now = time.time()
        for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
            owner = t.user_attrs.get(OWNER)
            if owner in live:
                continue
            if owner is None and t.datetime_start and now - t.datetime_start.timestamp() < 60:
                continue  # just asked by a run that has yet to name itself its owner
            try:
                storage.set_trial_state_values(t._trial_id, TrialState.FAIL)
            except (RuntimeError, ValueError):  # finished meanwhile by its owner
                pass

    def _measured(self, wkey: str, ck: str) -> Trial | None:
        """A search trial of this config recorded (by any run) since this workload's history was read."""
        with self.store.session() as sess:
            return sess.scalars(
                select(Trial).join(Run, Trial.run_id == Run.id).where(
                    Trial.kernel == self.kernel.name, Trial.workload_key == wkey, Trial.config_key == ck,
                    Trial.phase == "search", Trial.status != TrialStatus.pruned,
                    Run.environment_id == self.env.id, Run.source_hash == self.kernel.source_hash)).first()

    @staticmethod
    def _enqueue(study, cfg: dict[str, Any]) -> None:
        """Enqueue ``cfg`` unless the study holds it already (waiting or finished); a trial of it
        failed because its run was killed does not count: the config was never measured, so it
        runs again (a resumed workload measures its default). One running in another run is
        measured here too unless that run records it first (``_measured``): both compare with it."""
        from optuna.trial import TrialState

        key = config_key(cfg)
        for t in study.get_trials(deepcopy=False, states=(TrialState.WAITING, TrialState.COMPLETE,
                                                          TrialState.PRUNED)):
            if config_key(t.system_attrs.get("fixed_params") or t.params) == key:
                return
        study.enqueue_trial(cfg)

    def _close_dead_runs(self) -> None:
        """Runs of this host still marked running whose process is gone were killed."""
        with self.store.session() as sess:
            for r in sess.scalars(select(Run).where(Run.status == "running")).all():
                if r.settings.get("host") == socket.gethostname() and not _alive(r.settings.get("pid")):
                    r.status = "interrupted"
            sess.commit()

    # -- one workload -------------------------------------------------------------
    def _history(self, wkey: str) -> dict[str, Trial]:
        """Search trials already recorded for this workload in this environment and source."""
        with self.store.session() as sess:
            rows = sess.scalars(
                select(Trial).join(Run, Trial.run_id == Run.id).where(
                    Trial.kernel == self.kernel.name, Trial.workload_key == wkey, Trial.phase == "search",
                    Run.environment_id == self.env.id, Run.source_hash == self.kernel.source_hash)).all()
        return {t.config_key: t for t in rows}

    def _record(self, wkey: str, wd: dict, cfg: dict, res: TrialResult, floor: float | None,
                phase: str = "search", number: int | None = None) -> Trial:
        row = Trial(run_id=self.run_id, kernel=self.kernel.name, workload_key=wkey, workload=wd, config=cfg,
                    config_key=config_key(cfg), phase=phase, status=TrialStatus(res.status),
                    median_us=res.median_us, p20_us=res.p20_us, p80_us=res.p80_us, floor_us=floor,
                    meaningful=res.meaningful, error=res.error, optuna_number=number)
        with self.store.session() as sess:  # committed as it finishes: nothing measured is lost
            sess.add(row)
            sess.commit()
        return row

    def _neighbours(self, workload: Any, limit: int = 2) -> list[dict[str, Any]]:
        """Configs of tuned workloads nearest in log space with the same categorical axes."""
        wd = workload_dict(workload)
        num = numeric_axes(type(workload))
        with self.store.session() as sess:
            rows = sess.scalars(select(Winner).where(Winner.kernel == self.kernel.name,
                                                     Winner.environment_id == self.env.id)).all()
        scored = []
        for r in rows:
            if r.workload_key == workload_key(workload):
                continue
            if any(str(r.workload.get(a)) != str(v) for a, v in wd.items() if a not in num):
                continue
            d = log2_distance(r.workload, wd, num)
            scored.append((d, r.config))
        return [c for _, c in sorted(scored, key=lambda x: x[0])[:limit]]

    @staticmethod
    def _try_base(seen: dict[str, Any], earlier: list[dict[str, Any]], default: dict[str, Any]) -> dict[str, Any]:
        """What a ``--try`` is laid over: the workload's fastest config under this source, else
        under an earlier one (what the pack holds after a source change), else its default (a
        re-tune's tries would be laid over the default, not the entry they mean to vary)."""
        ok = [t for t in seen.values() if t.status == TrialStatus.ok and t.median_us is not None]
        if ok:
            return dict(min(ok, key=lambda t: t.median_us).config)
        return dict(earlier[0]) if earlier else default

    def _carried(self, config: dict[str, Any], workload: Any) -> dict[str, Any] | None:
        """A config stored under an earlier source as today's space runs it: knobs the space no
        longer has dropped, then canonical; None when it is not a config of today's space."""
        cfg = self.kernel.canonical({n: v for n, v in config.items() if n in self.kernel.space}, workload,
                                    self.target)
        return cfg if self.kernel.admits(cfg, workload, self.target) else None

    def _earlier_bests(self, wkey: str, wkey_workload: Any, limit: int = 2) -> list[dict[str, Any]]:
        """The fastest distinct configs this workload measured here under earlier sources of the
        template: a re-tune after a change re-times them first, so a short search cannot lose
        an old winner it never revisits (MoE routing dsv3 T=16's 6.9 us two-launch config was lost so once)."""
        with self.store.session() as sess:
            rows = sess.scalars(
                select(Trial).join(Run, Trial.run_id == Run.id).where(
                    Trial.kernel == self.kernel.name, Trial.workload_key == wkey, Trial.status == TrialStatus.ok,
                    Trial.median_us.is_not(None), Run.environment_id == self.env.id,
                    Run.source_hash != self.kernel.source_hash).order_by(Trial.median_us)).all()
        out: dict[str, dict[str, Any]] = {}
        for t in rows:
            if len(out) == limit:
                break
            cfg = self._carried(t.config, wkey_workload)
            if cfg is not None and config_key(cfg) not in out:
                out[config_key(cfg)] = cfg
        return list(out.values())

    def _tune_one(self, workload: Any, worker: Worker, storage, deadline: float) -> Outcome:
        import optuna
        from optuna.trial import TrialState

        k, s = self.kernel, self.settings
        wd, wkey = workload_dict(workload), workload_key(workload)
        why = k.feasible(workload)
        if why:
            log.warning("skipping %s %s: %s", k.name, wkey, why)
            return Outcome(wkey, 0, skipped=why)
        cost = k.spec.cost(workload)
        floor = roofline.floor_us(cost[0], cost[1], self.env.gpu)
        seen = self._history(wkey)
        evaluated = sum(t.status != TrialStatus.pruned for t in seen.values())
        if not s.retune and evaluated >= s.n_trials and self._winner(wkey) is not None:
            return Outcome(wkey, evaluated, skipped="already tuned (use --retune to tune again)")
        self.on_event("workload_start", {"workload": wkey, "evaluated": evaluated})
        study = optuna.create_study(
            storage=storage, load_if_exists=True, direction="minimize",
            study_name=f"{k.name}|{wkey}|{self.env.fingerprint_hash}|{k.source_hash}",
            sampler=make_sampler(s.sampler, k, s.seed))
        self._fail_stale_trials(study, storage)
        default = k.default_config(workload, self.target)
        earlier = self._earlier_bests(wkey, workload)
        base = self._try_base(seen, earlier, default)
        tried = [dict(base, **dict(t)) for t in s.tries]
        if not k.admits(default, workload, self.target):
            log.warning("%s %s: the default config is outside the search space or refused by its constraints, so "
                        "it is not measured and a winner is not compared with it: %s", k.name, wkey, default)
        asked = set()  # the default and the tries: measured even where the trials already reach n_trials
        neighbours = [c for c in map(lambda c: self._carried(c, workload), self._neighbours(workload)) if c]
        for i, cfg in enumerate([default, *tried, *earlier, *neighbours]):
            why = k.refusal(cfg, workload, self.target) if i <= len(tried) else None
            if why and i > 0:
                log.warning("%s %s: --try %s is not measured: %s", k.name, wkey, json.dumps(dict(s.tries[i - 1])), why)
            if k.space.contains(cfg) and config_key(cfg) not in seen:
                self._enqueue(study, cfg)
                if i <= len(tried) and why is None:
                    asked.add(config_key(cfg))
        ok_times = [t.median_us for t in seen.values() if t.status == TrialStatus.ok]
        best = min(ok_times) if ok_times else math.inf
        since_best, streak = 0, 0
        base_seed = self._seed(wkey)
        before = evaluated
        # The budget bounds the search, not coverage: the first trial (the default, enqueued
        # above) runs even past the deadline, so every workload of the grid gets a measured
        # entry in the pack (a short budget once left 9 of 20 workloads without one).
        n_trials = max(s.n_trials + (evaluated if s.extend else 0), evaluated + len(asked))  # a re-tune's tries run too
        while (evaluated < n_trials and (since_best < s.patience or asked - seen.keys())
               and (time.monotonic() < deadline or evaluated == 0)):
            trial = study.ask()
            try:
                trial.set_user_attr(OWNER, self.run_id)
                cfg = k.canonical(k.space.suggest(trial), workload, self.target)
            except optuna.exceptions.UpdateFinishedTrialError:  # failed meanwhile by a run of an older tuner
                streak += 1
                continue
            ck = config_key(cfg)
            if ck not in seen and (other := self._measured(wkey, ck)) is not None:
                seen[ck] = other  # measured meanwhile by another run of this study
            if not k.constraints(cfg, workload, self.target):
                _tell(study, trial, state=TrialState.PRUNED)
                if ck not in seen:
                    seen[ck] = self._record(wkey, wd, cfg, TrialResult("pruned", meaningful=self.meaningful), floor,
                                            number=trial.number)
                streak += 1
            elif ck in seen:  # already measured: tell the sampler again, spend nothing
                prev = seen[ck]
                if prev.status == TrialStatus.ok:
                    _tell(study, trial, prev.median_us)
                else:
                    _tell(study, trial, state=TrialState.FAIL)
                streak += 1
            else:
                streak = 0
                res = worker.evaluate(k.name, wd, cfg, base_seed + evaluated % 2)
                seen[ck] = self._record(wkey, wd, cfg, res, floor, number=trial.number)
                if res.status == "ok":
                    _tell(study, trial, res.median_us)
                else:
                    _tell(study, trial, state=TrialState.FAIL)
                evaluated += 1
                if res.status == "ok" and res.median_us < best:
                    best, since_best = res.median_us, 0
                else:
                    since_best += 1
                self.on_event("trial", {"workload": wkey, "config": cfg, "result": res, "best": best})
            if streak >= max(50, 4 * s.n_trials):  # the sampler keeps proposing what is known or illegal
                break
        outcome = self._finalize(workload, wd, wkey, default, seen, worker, floor)
        outcome.evaluated, outcome.new = evaluated, evaluated - before
        return outcome

    def _seed(self, wkey: str) -> int:
        """Input seed of a workload, stable across processes (str hash is not)."""
        return input_seed(wkey, self.settings.seed)

    def _winner(self, wkey: str) -> Winner | None:
        with self.store.session() as sess:
            return sess.scalar(select(Winner).where(
                Winner.kernel == self.kernel.name, Winner.workload_key == wkey,
                Winner.environment_id == self.env.id, Winner.source_hash == self.kernel.source_hash))

    def _finalize(self, workload, wd, wkey, default, seen, worker: Worker, floor) -> Outcome:
        s = self.settings
        statuses: dict[str, int] = {}
        for t in seen.values():
            statuses[t.status.value] = statuses.get(t.status.value, 0) + 1
        ok = sorted((t for t in seen.values() if t.status == TrialStatus.ok), key=lambda t: t.median_us)
        if not ok:
            return Outcome(wkey, 0, statuses)
        dkey = config_key(default)
        if dkey not in seen and (other := self._measured(wkey, dkey)) is not None:
            seen[dkey] = other  # measured by another run of this study
        default_ok = dkey in seen and seen[dkey].status == TrialStatus.ok
        finalists = [t.config for t in ok[: s.finalists] if t.config_key != dkey]
        if default_ok:
            finalists.append(default)
        rounds = worker.retime(self.kernel.name, wd, finalists, s.rounds, self._seed(wkey)) if len(finalists) > 1 else None
        if rounds is None:  # one finalist, or the re-timing failed: keep the search times
            rounds = [[[seen[config_key(c)].median_us, seen[config_key(c)].p20_us, seen[config_key(c)].p80_us]]
                      for c in finalists]
        # per finalist: median over rounds of the median, p20 and p80
        stats = [[statistics.median(x[j] for x in r) for j in range(3)] for r in rounds]
        meds = [st[0] for st in stats]
        for cfg, st in zip(finalists, stats):
            self._record(wkey, wd, cfg, TrialResult("ok", *st, meaningful=self.meaningful), floor, phase="final")
        best_i = min(range(len(finalists)), key=lambda i: meds[i])

        def noise(i: int) -> float:
            t = seen[config_key(finalists[i])]
            band = (t.p80_us - t.p20_us) / (2 * t.median_us) if t.median_us else 0.0
            r = [x[0] for x in rounds[i]]
            return max(band, (max(r) - min(r)) / (2 * meds[i]) if len(r) > 1 else 0.0)

        d_i = len(finalists) - 1 if default_ok else None
        if d_i is None:
            win_i, nz = best_i, noise(best_i)
        else:
            nz = max(noise(best_i), noise(d_i))
            win_i = best_i if best_i != d_i and meds[best_i] < meds[d_i] * (1 - nz) else d_i
        win_cfg = finalists[win_i]
        self._store_winner(wkey, wd, win_cfg, win_i == d_i, stats[win_i],
                           meds[d_i] if d_i is not None else None, floor, nz)
        return Outcome(wkey, 0, statuses, win_cfg, meds[win_i], meds[d_i] if d_i is not None else None,
                       win_i == d_i)

    def _store_winner(self, wkey, wd, cfg, is_default, stats, default_med, floor, nz) -> None:
        for attempt in range(3):  # another run of this study may insert the row first: update it then
            try:
                return self._put_winner(wkey, wd, cfg, is_default, stats, default_med, floor, nz)
            except IntegrityError:
                if attempt == 2:
                    raise

    def _put_winner(self, wkey, wd, cfg, is_default, stats, default_med, floor, nz) -> None:
        with self.store.session() as sess:
            row = sess.scalar(select(Winner).where(
                Winner.kernel == self.kernel.name, Winner.workload_key == wkey,
                Winner.environment_id == self.env.id, Winner.source_hash == self.kernel.source_hash))
            if row is None:
                row = Winner(kernel=self.kernel.name, workload_key=wkey, environment_id=self.env.id,
                             source_hash=self.kernel.source_hash)
                sess.add(row)
            row.workload, row.run_id, row.config, row.is_default = wd, self.run_id, cfg, is_default
            row.median_us, row.p20_us, row.p80_us = stats
            row.default_median_us, row.floor_us, row.noise, row.meaningful = default_med, floor, nz, self.meaningful
            row.updated = utcnow()
            sess.commit()
