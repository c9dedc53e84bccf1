"""The search driver: one Optuna study per (kernel, workload, environment, source).

Per workload: seed the study with the default config, the fastest configs this workload
measured under earlier sources of the template, its winners on other GPUs and the winners
of tuned neighbours, ask the sampler, prune by constraints before compiling, evaluate in the
isolated worker (the next candidates compiled meanwhile by ``tuner.precompile`` where
``Settings.ahead``), record every trial as it finishes with where its time went
(``tuner.cost``), stop on trials / budget / patience (trials without an improvement beyond
the noise), then re-time the finalists interleaved and admit a winner only if it beats the
default by more than the measured noise. With ``Settings.predict``, a workload whose nearest
tuned neighbours' winners agree measures that config and the default only (``predicted``),
and searches as usual where the prediction fails. A killed run resumes from what it recorded.

The study lives in the database (Optuna's tables, beside ours) and holds the trials recorded
there, measured or pruned, each under the number our trial row names. The sampler runs on a
copy in memory, loaded from it when the workload starts; each trial recorded is copied back in
one transaction. Asks that cost no measurement (a pruned config asked again, a known one, one
dropped) stay in memory: written to the database one by one, an ask cost 34-83 ms on SQLite,
up to 42% of a search's time (docs/campaigns.md).
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
from tuner.precompile import Precompiler
from tuner.registry import Kernel
from tuner.runtime.env import INTERPRETER_GPU
from tuner.runtime.target import Target
from tuner.spec import TrialResult, config_key, input_seed, log2_distance, numeric_axes, workload_dict, workload_key
from tuner.store import Environment, Run, Store, Trial, TrialStatus, Winner
from tuner.store.models import utcnow
from tuner.trials import TrialLoop
from tuner.worker import Worker

log = logging.getLogger(__name__)

SAMPLERS = ("tpe", "random", "gp", "grid")


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
    ahead: int = 0
    """Candidates asked of the sampler ahead of the one being measured, each compiled meanwhile
    by one of as many compile-only processes (``tuner.precompile``); 0: one at a time, nothing
    compiled ahead. The interpreter compiles nothing, so there it only reorders asking."""
    cache_dir: str | None = None
    """Triton's cache folder for the worker and the compile-ahead pool (None: Triton's own)."""
    precision: float | None = 0.01
    """A trial's replays stop once its median is known within this fraction (``tuner.timing.settled``);
    None: every replay. The finalists' re-timing always takes every replay."""
    predict: int = 0
    """Where this many nearest tuned neighbours (same categorical axes, today's source) have one
    winner between them, measure it and the default only (the entry is ``predicted``); 0: never."""
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
    obtained: str = "tuned"  # or "predicted": the neighbours' winner measured against the default only
    seconds: float = 0.0  # wall time of the workload in this run: its trials, the finalists' re-timing, the rest
    final_s: float = 0.0  # of ``seconds``, the finalists' re-timing
    phases: dict[str, float] = field(default_factory=dict)  # of ``seconds``, this run's trials per phase (tuner.cost)


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


_SAMPLER_NEEDS = {"gp": "scipy"}


def check_sampler(name: str) -> None:
    """Raise ValueError (one line) for an unknown sampler or one whose package is missing."""
    import importlib.util

    if name not in SAMPLERS:
        raise ValueError(f"unknown sampler {name!r} (choose from {', '.join(SAMPLERS)})")
    need = _SAMPLER_NEEDS.get(name)
    if need and importlib.util.find_spec(need) is None:
        raise ValueError(f"sampler {name!r} needs the {need!r} package (pip install 'tuner[{name}]')")


def make_sampler(name: str, kernel: Kernel, seed: int, ahead: int = 0):
    """The sampler ``name``; with candidates asked ahead (``Settings.ahead``) TPE treats those
    still unmeasured as lies at the worst value seen, so it spreads its asks instead of
    repeating one."""
    import warnings

    import optuna

    if name == "tpe":
        with warnings.catch_warnings():  # constant_liar is marked experimental
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            return optuna.samplers.TPESampler(seed=seed, n_startup_trials=4, multivariate=True,
                                              constant_liar=ahead > 0)
    if name == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    if name == "grid":
        return optuna.samplers.GridSampler({n: list(p.values()) for n, p in kernel.space.items()}, seed=seed)
    if name == "gp":
        return optuna.samplers.GPSampler(seed=seed)
    raise ValueError(f"unknown sampler {name!r} (choose from {', '.join(SAMPLERS)})")


def find_environment(store: Store) -> Environment | None:
    """This machine's environment row, if the database holds it (reads only)."""
    with store.session() as s:
        return s.scalar(select(Environment).where(Environment.fingerprint_hash == fingerprint_hash(fingerprint())))


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


def predicted_winners(sess, rows: list[Winner]) -> set[int]:
    """The ids of the ``rows`` whose winner was predicted (``Settings.predict``): their run
    lists their workload under ``predicted`` in its settings."""
    ids = {r.run_id for r in rows}
    if not ids:
        return set()
    runs = dict(sess.execute(select(Run.id, Run.settings).where(Run.id.in_(ids))).all())
    out = set()
    for r in rows:
        guessed = (runs.get(r.run_id) or {}).get("predicted")
        if isinstance(guessed, list) and r.workload_key in guessed:
            out.add(r.id)
    return out


def _percentiles(trial: Trial) -> list[float]:
    """A measured trial's median, p20 and p80; a row without percentiles (an older run's, or
    one written by hand) has them at its median: no noise band."""
    med = trial.median_us
    return [med, med if trial.p20_us is None else trial.p20_us, med if trial.p80_us is None else trial.p80_us]


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
            with Worker(timeout_s=s.trial_timeout_s, cache_dir=s.cache_dir, precision=s.precision) as worker, \
                    Precompiler(self.kernel.name, self.target, processes=s.ahead, cache_dir=s.cache_dir) as ahead:
                self.ahead = ahead
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

    def _study(self, storage, name: str) -> tuple[Any, Callable[[Any], int]]:
        """The sampler's study in memory, holding the finished trials (measured or pruned) of
        the database's study ``name``, and ``keep``: copies one of its trials, finished, to the
        database's study in one transaction and returns its number there."""
        import optuna
        from optuna.trial import TrialState

        kept = optuna.create_study(storage=storage, load_if_exists=True, direction="minimize", study_name=name)
        study = optuna.create_study(direction="minimize", study_name=name,
                                    sampler=make_sampler(self.settings.sampler, self.kernel, self.settings.seed,
                                                         self.settings.ahead))
        # a trial left running or waiting by a run of an older tuner is not one: never measured
        study.add_trials(kept.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.PRUNED)))
        study_id = storage.get_study_id_from_name(name)

        def keep(trial) -> int:
            frozen = study._storage.get_trial(trial._trial_id)
            return storage.get_trial_number_from_id(storage.create_new_trial(study_id, template_trial=frozen))

        return study, keep

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
        """Enqueue ``cfg`` unless it waits in the study's queue already. Callers pass configs no
        row of ours holds (``seen``): one the database's study holds without a row (a kill
        between its copy there and its row) is measured again. One another run is measuring is
        measured here too unless that run records it first (``_measured``): both compare with it."""
        from optuna.trial import TrialState

        key = config_key(cfg)
        for t in study.get_trials(deepcopy=False, states=(TrialState.WAITING,)):
            if config_key(t.system_attrs.get("fixed_params") or t.params) == key:
                return
        study.enqueue_trial(cfg)

    def _close_dead_runs(self) -> None:
        """Runs of this host still marked running whose process is gone were killed."""
        with self.store.session() as sess:
            for r in sess.scalars(select(Run).where(Run.status == "running")).all():
                if r.options.get("host") == socket.gethostname() and not _alive(r.options.get("pid")):
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
        the first of ``earlier`` (the pack's entry after a source change), else its default (a
        re-tune's tries would be laid over the default, not the entry they mean to vary)."""
        ok = [t for t in seen.values() if t.status == TrialStatus.ok and t.median_us is not None]
        if ok:
            return dict(min(ok, key=lambda t: t.median_us).config)
        return dict(earlier[0]) if earlier else default

    def _carried(self, config: dict[str, Any], workload: Any) -> dict[str, Any] | None:
        """A config stored under an earlier source as today's space runs it: knobs the space no
        longer has dropped, knobs it has gained at the default's value, then canonical; None when
        it is not a config of today's space."""
        cfg = self.kernel.default_config(workload, self.target)
        cfg.update({n: v for n, v in config.items() if n in self.kernel.space})
        cfg = self.kernel.canonical(cfg, workload, self.target)
        return cfg if self.kernel.admits(cfg, workload, self.target) else None

    def _old_winner(self, wkey: str, workload: Any, earlier: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The entry a stale workload's pack held: its newest winner here under an earlier source,
        as today's space runs it; else its fastest earlier config (``earlier``); [] when none carries."""
        with self.store.session() as sess:
            rows = sess.scalars(select(Winner).where(
                Winner.kernel == self.kernel.name, Winner.workload_key == wkey, Winner.environment_id == self.env.id,
                Winner.source_hash != self.kernel.source_hash)).all()
        for r in sorted(rows, key=lambda r: r.updated.timestamp(), reverse=True):
            cfg = self._carried(r.config, workload)
            if cfg is not None:
                return [cfg]
        return earlier[:1]

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
        t0 = time.perf_counter()
        outcome = self._tune_workload(workload, worker, storage, deadline)
        outcome.seconds = time.perf_counter() - t0
        return outcome

    def _tune_workload(self, workload: Any, worker: Worker, storage, deadline: float) -> Outcome:
        k, s = self.kernel, self.settings
        wd, wkey = workload_dict(workload), workload_key(workload)
        why = k.feasible(workload)
        if why:
            log.warning("skipping %s %s: %s", k.name, wkey, why)
            return Outcome(wkey, 0, skipped=why)
        cost_ = k.spec.cost(workload)
        floor = roofline.floor_us(cost_[0], cost_[1], self.env.gpu)
        seen = self._history(wkey)
        evaluated = sum(t.status != TrialStatus.pruned for t in seen.values())
        current = self._winner(wkey) is not None  # a winner under today's source: not stale
        if not s.retune and evaluated >= s.n_trials and current:
            return Outcome(wkey, evaluated, skipped="already tuned (use --retune to tune again)")
        self.on_event("workload_start", {"workload": wkey, "evaluated": evaluated})
        study, keep = self._study(storage, f"{k.name}|{wkey}|{self.env.fingerprint_hash}|{k.source_hash}")
        default = k.default_config(workload, self.target)
        earlier = self._earlier_bests(wkey, workload)
        # A stale entry (no winner under today's source, a resumed one included) re-times its old
        # winner next to the default even where the budget allows no search: the pack's entry is
        # revalidated, not replaced by the default for want of time.
        old = [] if current else self._old_winner(wkey, workload, earlier)
        base = self._try_base(seen, [*old, *earlier], default)
        tried = [dict(base, **dict(t)) for t in s.tries]
        if not k.admits(default, workload, self.target):
            log.warning("%s %s: the default config is outside the search space or refused by its constraints, so "
                        "it is not measured and a winner is not compared with it: %s", k.name, wkey, default)
        asked = set()  # the default, the old winner, the tries: measured even past n_trials and the deadline
        for i, cfg in enumerate([default, *old, *tried]):
            why = k.refusal(cfg, workload, self.target)
            if why and i > len(old):
                log.warning("%s %s: --try %s is not measured: %s", k.name, wkey,
                            json.dumps(dict(s.tries[i - 1 - len(old)])), why)
            if k.space.contains(cfg) and config_key(cfg) not in seen:
                self._enqueue(study, cfg)
                if why is None:
                    asked.add(config_key(cfg))
        search = TrialLoop(self, study, keep, workload, wd, wkey, worker, seen, floor, deadline, evaluated, asked)
        predicted = self._prediction(workload) if (s.predict and not (s.retune or s.extend or s.tries)
                                                   and evaluated == 0 and not old) else None
        if predicted is not None:  # the neighbours agree: measure their winner (and the default) only
            if config_key(predicted) not in seen:
                self._enqueue(study, predicted)
            search.run(len({config_key(default), config_key(predicted)}))
            mine = seen.get(config_key(predicted))
            if mine is not None and mine.status == TrialStatus.ok:
                outcome = self._finalize(workload, wd, wkey, default, seen, worker, floor, obtained="predicted",
                                         retime=time.monotonic() < deadline)
                outcome.evaluated, outcome.new = search.evaluated, search.evaluated - evaluated
                outcome.phases = dict(search.spent)
                return outcome
            log.warning("%s %s: the neighbours' winner failed here (%s): searching", k.name, wkey,
                        mine.status.value if mine is not None else "not measured")
        # warm start: another GPU's winner, this workload's best under earlier sources, the other
        # GPUs' next winner, then its tuned neighbours
        others = self._other_gpus(wkey, workload)
        neighbours = [c for c in (self._carried(n, workload) for n in self._neighbours(workload)) if c]
        for cfg in [*others[:1], *earlier, *others[1:], *neighbours]:
            if k.space.contains(cfg) and config_key(cfg) not in seen and config_key(cfg) not in asked:
                self._enqueue(study, cfg)
        asked.update(config_key(c) for c in others[:1])  # admitted already (``_carried``)
        # The budget bounds the search, not coverage: the configs named above (the default, a
        # stale entry's old winner, another GPU's winner) run even past the deadline, so every
        # workload of the grid gets a measured entry in the pack (a short budget once left 9 of
        # 20 without one), and one that another GPU tuned starts from what won there (a campaign
        # of 8 minutes over 264 workloads once measured the default alone in most of them).
        search.run(max(s.n_trials + (evaluated if s.extend else 0), evaluated + len(asked)))  # a re-tune's tries run too
        outcome = self._finalize(workload, wd, wkey, default, seen, worker, floor, retime=time.monotonic() < deadline)
        outcome.evaluated, outcome.new = search.evaluated, search.evaluated - evaluated
        outcome.phases = dict(search.spent)
        return outcome

    def _other_gpus(self, wkey: str, workload: Any, limit: int = 2) -> list[dict[str, Any]]:
        """This workload's winners in other environments (other GPUs, other software), today's
        source first, then the newest, as this GPU's space runs them (``_carried``)."""
        with self.store.session() as sess:
            rows = sess.scalars(select(Winner).where(
                Winner.kernel == self.kernel.name, Winner.workload_key == wkey,
                Winner.environment_id != self.env.id)).all()
        rows = sorted(rows, key=lambda r: (r.source_hash != self.kernel.source_hash, -r.updated.timestamp()))
        out: dict[str, dict[str, Any]] = {}
        for r in rows:
            cfg = self._carried(r.config, workload)
            if cfg is not None and len(out) < limit:
                out.setdefault(config_key(cfg), cfg)
        return list(out.values())

    def _prediction(self, workload: Any) -> dict[str, Any] | None:
        """The config the ``settings.predict`` nearest tuned neighbours agree on (their winners
        under today's source, same categorical axes, predicted ones left out, each carried into
        this workload's space), or None where they are fewer or disagree."""
        need = self.settings.predict
        wd, wkey = workload_dict(workload), workload_key(workload)
        num = numeric_axes(type(workload))
        with self.store.session() as sess:
            rows = sess.scalars(select(Winner).where(
                Winner.kernel == self.kernel.name, Winner.environment_id == self.env.id,
                Winner.source_hash == self.kernel.source_hash)).all()
            guessed = predicted_winners(sess, rows)
        near = sorted(((log2_distance(r.workload, wd, num), r.workload_key, r.config) for r in rows
                       if r.workload_key != wkey and r.id not in guessed
                       and all(str(r.workload.get(a)) == str(v) for a, v in wd.items() if a not in num)),
                      key=lambda x: (x[0], x[1]))[:need]
        if len(near) < need:
            return None
        cfgs = [self._carried(c, workload) for _, _, c in near]
        if any(c is None for c in cfgs) or len({config_key(c) for c in cfgs}) != 1:
            return None
        return cfgs[0]

    def _seed(self, wkey: str) -> int:
        """Input seed of a workload, stable across processes (str hash is not)."""
        return input_seed(wkey, self.settings.seed)

    def _winner(self, wkey: str) -> Winner | None:
        with self.store.session() as sess:
            return sess.scalar(select(Winner).where(
                Winner.kernel == self.kernel.name, Winner.workload_key == wkey,
                Winner.environment_id == self.env.id, Winner.source_hash == self.kernel.source_hash))

    def _finalize(self, workload, wd, wkey, default, seen, worker: Worker, floor, obtained: str = "tuned",
                  retime: bool = True) -> Outcome:
        """The winner from the finalists, re-timed in interleaved rounds (``retime``; past the
        deadline the search times decide, so a spent budget is not overrun by the rounds)."""
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
        t0 = time.perf_counter()
        rounds = worker.retime(self.kernel.name, wd, finalists, s.rounds, self._seed(wkey)) \
            if len(finalists) > 1 and retime else None
        final_s = time.perf_counter() - t0
        if rounds is None:  # one finalist, or the re-timing failed: keep the search times
            rounds = [[_percentiles(seen[config_key(c)])] for c in finalists]
        # per finalist: median over rounds of the median, p20 and p80
        stats = [[statistics.median(x[j] for x in r) for j in range(3)] for r in rounds]
        meds = [st[0] for st in stats]
        for cfg, st in zip(finalists, stats):
            self._record(wkey, wd, cfg, TrialResult("ok", *st, meaningful=self.meaningful), floor, phase="final")
        best_i = min(range(len(finalists)), key=lambda i: meds[i])

        def noise(i: int) -> float:
            t = seen[config_key(finalists[i])]
            med, p20, p80 = _percentiles(t)
            band = (p80 - p20) / (2 * med) if med else 0.0
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
                           meds[d_i] if d_i is not None else None, floor, nz, obtained)
        return Outcome(wkey, 0, statuses, win_cfg, meds[win_i], meds[d_i] if d_i is not None else None,
                       win_i == d_i, obtained=obtained, final_s=final_s)

    def _store_winner(self, wkey, wd, cfg, is_default, stats, default_med, floor, nz, obtained="tuned") -> None:
        for attempt in range(3):  # another run of this study may insert the row first: update it then
            try:
                return self._put_winner(wkey, wd, cfg, is_default, stats, default_med, floor, nz, obtained)
            except IntegrityError:
                if attempt == 2:
                    raise

    def _put_winner(self, wkey, wd, cfg, is_default, stats, default_med, floor, nz, obtained="tuned") -> None:
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
            if obtained == "predicted":  # said by the run that wrote the row (a later search's run will not)
                run = sess.get(Run, self.run_id)
                run.settings = {**run.settings, "predicted": sorted({*run.settings.get("predicted", ()), wkey})}
            sess.commit()
