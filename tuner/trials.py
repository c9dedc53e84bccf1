"""The trial loop of one workload: ask, prune, deduplicate, compile ahead, measure, record.

``TrialLoop.run(n)`` measures candidates until ``n`` trials are recorded for the workload,
the patience runs out (that many trials in a row without an improvement beyond the noise of
the times compared), the deadline passes (the first trial and the configs asked for by name
always run) or the sampler keeps proposing what is known or illegal. Candidates are asked
``1 + Settings.ahead`` at a time: while the worker measures one, the next ones compile in the
compile-ahead pool (``tuner.precompile``). The study asked is the sampler's copy in memory
(``Tuner._study``): a trial recorded in our tables (measured, or pruned the first time) is
copied to the database's study first, under the number the row names. What is asked and left
unmeasured when the loop stops is told failed in memory (never recorded, asked again by a
later run).
"""
from __future__ import annotations

import math
import time
from typing import TYPE_CHECKING, Any, Callable

from tuner import cost
from tuner.spec import TrialResult, config_key
from tuner.store import TrialStatus

if TYPE_CHECKING:
    from tuner.study import Tuner


def spread(median: float | None, p20: float | None, p80: float | None) -> float:
    """Relative half-width of a time's p20..p80 band (0 where unknown)."""
    return (p80 - p20) / (2 * median) if median and p20 is not None and p80 is not None else 0.0


class TrialLoop:
    """The search state of one workload in one run; ``run`` may be called again to go on."""

    def __init__(self, tuner: "Tuner", study, keep: Callable[[Any], int], workload: Any, wd: dict[str, Any],
                 wkey: str, worker, seen: dict, floor: float | None, deadline: float, evaluated: int,
                 asked: set[str]) -> None:
        self.t, self.study, self.keep, self.workload, self.wd, self.wkey = tuner, study, keep, workload, wd, wkey
        self.worker, self.seen, self.floor, self.deadline = worker, seen, floor, deadline
        self.evaluated, self.asked = evaluated, asked
        ok = [t for t in seen.values() if t.status == TrialStatus.ok]
        best = min(ok, key=lambda t: t.median_us) if ok else None
        self.best = best.median_us if best else math.inf
        self.best_noise = spread(best.median_us, best.p20_us, best.p80_us) if best else 0.0
        self.since_best = self.streak = 0
        self.free_s = 0.0  # study seconds since the last measured trial (asks that cost no measurement, keeping)
        self.spent: dict[str, float] = {}  # this run's seconds per phase: its trials', and the study's after the last
        self.base_seed = tuner._seed(wkey)

    # -- the loop -------------------------------------------------------------------
    def _going(self, n_trials: int, queue: list) -> bool:
        """Whether to ask (or measure) one more: the configs in ``asked`` (the default, the
        tries, a stale entry's old winner) are measured past the patience and the deadline."""
        s = self.settings
        pending = bool(self.asked - self.seen.keys() - {q[2] for q in queue})
        return (self.evaluated + len(queue) < n_trials
                and (self.since_best < s.patience or pending)
                and (time.monotonic() < self.deadline or self.evaluated + len(queue) == 0 or pending))

    def _due(self, ck: str, queued: int = 0) -> bool:
        """Whether a candidate may be queued (``queued`` ahead of it) or measured: past the
        deadline only the configs asked for by name are, and a first trial where none of those
        waits. Others (the warm-start configs enqueued, the sampler's asks where a named one
        was lost to another run of the study) are dropped: neither compiled nor measured past
        the budget."""
        return (time.monotonic() < self.deadline or ck in self.asked
                or (self.evaluated + queued == 0 and not self.asked - self.seen.keys()))

    @property
    def settings(self):
        return self.t.settings

    def run(self, n_trials: int) -> None:
        """Measure until ``n_trials`` trials are recorded for the workload, or a stop rule ends it."""
        s = self.settings
        depth = 1 + max(0, s.ahead)
        queue: list[tuple[Any, dict[str, Any], str]] = []  # asked, new, admitted: waiting for the worker
        echoes: list[tuple[Any, str]] = []  # asked again while queued: told once measured
        cap = max(50, 4 * s.n_trials)
        from optuna.trial import TrialState

        try:
            while True:
                while self.streak < cap and len(queue) < depth and self._going(n_trials, queue):
                    self._ask(queue, echoes)
                if not queue or not self._going(n_trials, []):
                    break
                trial, cfg, ck = queue.pop(0)
                if not self._due(ck):  # queued before the deadline, not named: dropped (asked again by a later run)
                    self.study.tell(trial, state=TrialState.FAIL)
                    continue
                self._measure(trial, cfg, ck)
                for tr, k in [e for e in echoes if e[1] == ck]:
                    echoes.remove((tr, k))
                    self._tell_known(tr, ck)
        finally:
            for trial, *_ in queue:  # asked ahead, never measured: nothing to learn from them
                self.study.tell(trial, state=TrialState.FAIL)
            for trial, ck in echoes:
                self._tell_known(trial, ck) if ck in self.seen else self.study.tell(trial, state=TrialState.FAIL)
            # the study's seconds no trial of this run was charged with (the last one's writes): the workload's
            self.spent["study"] = self.spent.get("study", 0.0) + self.free_s
            self.free_s = 0.0

    def _tell_known(self, trial, ck: str) -> None:
        from optuna.trial import TrialState

        prev = self.seen[ck]
        if prev.status == TrialStatus.ok:
            self.study.tell(trial, prev.median_us)
        else:
            self.study.tell(trial, state=TrialState.FAIL)

    def _ask(self, queue: list, echoes: list) -> None:
        """Ask one candidate: a new admitted config joins ``queue`` (and the compile-ahead pool);
        a pruned or known one is told at once, one still queued joins ``echoes``."""
        from optuna.trial import TrialState

        t, k = self.t, self.t.kernel
        t0 = time.perf_counter()
        try:
            trial = self.study.ask()
            cfg = k.canonical(k.space.suggest(trial), self.workload, t.target)
            ck = config_key(cfg)
            if ck not in self.seen and (other := t._measured(self.wkey, ck)) is not None:
                self.seen[ck] = other  # measured meanwhile by another run of this study
            if not k.constraints(cfg, self.workload, t.target):
                self.study.tell(trial, state=TrialState.PRUNED)
                if ck not in self.seen:
                    self.seen[ck] = t._record(self.wkey, self.wd, cfg, TrialResult("pruned", meaningful=t.meaningful),
                                              self.floor, number=self.keep(trial))
                self.streak += 1
            elif ck in self.seen:  # already measured: tell the sampler again, spend nothing
                self._tell_known(trial, ck)
                self.streak += 1
            elif any(q[2] == ck for q in queue):
                echoes.append((trial, ck))
                self.streak += 1
            elif not self._due(ck, len(queue)):  # past the deadline, not named: dropped before it compiles
                self.study.tell(trial, state=TrialState.FAIL)
                self.streak += 1
            else:
                self.streak = 0
                queue.append((trial, cfg, ck))
                t.ahead.submit(self.wd, cfg)
        finally:
            self.free_s += time.perf_counter() - t0

    def _measure(self, trial, cfg: dict[str, Any], ck: str) -> None:
        from optuna.trial import TrialState

        t, s = self.t, self.settings
        waited = t.ahead.wait(self.wd, cfg, s.trial_timeout_s)
        res = self.worker.evaluate(t.kernel.name, self.wd, cfg, self.base_seed + self.evaluated % 2)
        phases = dict(res.phases or {})
        phases["compile"] = phases.get("compile", 0.0) + waited
        phases["study"] = self.free_s  # keeping and recording this trial: charged to the next one
        for p in cost.PHASES:
            self.spent[p] = self.spent.get(p, 0.0) + float(phases.get(p, 0.0))
        trial.set_user_attr(cost.ATTR, phases)
        t0 = time.perf_counter()
        if res.status == "ok":
            self.study.tell(trial, res.median_us)
        else:
            self.study.tell(trial, state=TrialState.FAIL)
        # the database's study first: a kill between the two leaves a trial there that no row
        # of ours names (a later run measures that config again), never a row naming no trial
        self.seen[ck] = t._record(self.wkey, self.wd, cfg, res, self.floor, number=self.keep(trial))
        self.free_s = time.perf_counter() - t0
        self.evaluated += 1
        if res.status == "ok" and res.median_us < self.best:
            # patience counts trials without an improvement beyond the noise of the two times
            noise = max(self.best_noise, spread(res.median_us, res.p20_us, res.p80_us))
            self.since_best = 0 if res.median_us < self.best * (1 - noise) else self.since_best + 1
            self.best, self.best_noise = res.median_us, spread(res.median_us, res.p20_us, res.p80_us)
        else:
            self.since_best += 1
        t.on_event("trial", {"workload": self.wkey, "config": cfg, "result": res, "best": self.best,
                             "phases": phases})
