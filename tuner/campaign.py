"""`tune campaign`: the default grids of several families on the GPU at hand, under one budget.

A campaign is a plan and a loop, nothing stored of its own: each workload's state is read
from the winners in the database, so a run killed at any point resumes where it stopped
(every finished trial is committed by the study as it finishes).

Order of work: *missing* entries first (no winner on this GPU), then *stale* ones (a
winner only under an earlier template source: its old winners are re-timed first, as the
study always does), then *current* ones where more search is likeliest to pay: fewest
trials first (a predicted entry has one or two), then the largest gap to the roofline floor
widened by the winner's noise, family by family (the family of the most promising first).
Missing entries of a family go coarse grid first: the points at even positions along every
numeric axis, then those between them, whose tuned neighbours can then predict them
(``Settings.predict``).
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterable

from sqlalchemy import func, select

from tuner.registry import Kernel
from tuner.spec import numeric_axes, workload_dict, workload_key
from tuner.store import Run, Store, Trial, TrialStatus, Winner
from tuner.study import Outcome, Settings, Tuner, find_environment

STATES = ("missing", "stale", "current")


@dataclass(frozen=True)
class Item:
    """One workload of the campaign and what the database says of it."""

    kernel: Kernel
    workload: Any
    state: str
    trials: int = 0
    """Search trials measured for it here under today's source."""
    gap: float = 1.0
    """Winner time over its roofline floor (1.0 where unknown)."""
    noise: float = 0.0
    """The winner's noise band (relative)."""
    coarse: int = 0
    """0 for a point at even positions along every numeric axis of its family's grid, else 1."""

    @property
    def key(self) -> str:
        return workload_key(self.workload)


def plan(store: Store, grids: Iterable[tuple[Kernel, list[Any]]], states: Iterable[str] = STATES) -> list[Item]:
    """The campaign's workloads in the order they are worked on (see the module docstring),
    restricted to ``states``."""
    env = find_environment(store)  # none yet: every workload is missing (a plan writes nothing)
    env_id = env.id if env is not None else -1
    wanted = set(states)
    items: list[Item] = []
    with store.session() as s:
        for k, workloads in grids:
            winners: dict[str, list[Winner]] = {}
            for w in s.scalars(select(Winner).where(Winner.kernel == k.name, Winner.environment_id == env_id)):
                winners.setdefault(w.workload_key, []).append(w)
            counts = dict(s.execute(
                select(Trial.workload_key, func.count()).join(Run, Trial.run_id == Run.id).where(
                    Trial.kernel == k.name, Trial.phase == "search", Trial.status != TrialStatus.pruned,
                    Run.environment_id == env_id, Run.source_hash == k.source_hash).group_by(Trial.workload_key)).all())
            fine = _between(workloads)
            for wl in workloads:
                key = workload_key(wl)
                mine = [w for w in winners.get(key, ()) if w.source_hash == k.source_hash]
                state = "current" if mine else "stale" if key in winners else "missing"
                if state not in wanted:
                    continue
                gap = 1.0
                if mine and mine[0].floor_us and mine[0].median_us:
                    gap = mine[0].median_us / mine[0].floor_us
                items.append(Item(k, wl, state, int(counts.get(key, 0)), gap, mine[0].noise if mine else 0.0,
                                  int(key in fine)))
    rank = {s: i for i, s in enumerate(STATES)}
    family: dict[str, int] = {}
    for it in items:
        family.setdefault(it.kernel.name, len(family))
    # current entries stay together by family (one worker process keeps its compiled kernels and
    # inputs; interleaved, each workload was a stretch of its own: a new worker, its budget share
    # under a second), families ordered by their most promising entry
    best: dict[str, tuple[int, float]] = {}
    for it in (it for it in items if it.state == "current"):
        p = _promise(it)
        best[it.kernel.name] = min(best.get(it.kernel.name, p), p)
    order = {name: i for i, name in enumerate(sorted(best, key=lambda n: best[n]))}
    return sorted(items, key=lambda it: (
        rank[it.state],
        family[it.kernel.name] if it.state == "missing" else order[it.kernel.name] if it.state == "current" else 0,
        it.coarse if it.state == "missing" else 0,
        _promise(it) if it.state == "current" else (0, 0.0)))


def _promise(it: Item) -> tuple[int, float]:
    """A current entry's place: fewest trials first, then the widest gap to the floor."""
    return it.trials, -it.gap * (1 + it.noise)


def _between(workloads: list[Any]) -> set[str]:
    """Keys of the workloads at an odd position along some numeric axis (positions among that
    axis' values in ``workloads``): the points between a coarser grid's."""
    if not workloads:
        return set()
    num = numeric_axes(type(workloads[0]))
    pos = {a: {v: i for i, v in enumerate(sorted({getattr(w, a) for w in workloads}))} for a in num}
    return {workload_key(w) for w in workloads if any(pos[a][workload_dict(w)[a]] % 2 for a in num)}


def run(store: Store, items: list[Item], settings: Settings, *, budget_s: float | None = None,
        on_event: Callable[[str, dict[str, Any]], None] | None = None) -> list[Outcome]:
    """Tune ``items`` in order, one study per workload, consecutive workloads of one family
    through one worker process. ``budget_s`` bounds the whole campaign: each family's stretch
    gets the remaining time in proportion to its workloads (its first trial always runs, so
    every missing entry gets a measured default)."""
    deadline = time.monotonic() + budget_s if budget_s else math.inf
    hear = on_event or (lambda kind, info: None)
    out: list[Outcome] = []
    i = 0
    while i < len(items):
        j = i
        while j < len(items) and (items[j].kernel.name, items[j].state) == (items[i].kernel.name, items[i].state):
            j += 1
        left = deadline - time.monotonic()
        if left <= 0 and deadline != math.inf:
            hear("budget_spent", {"left": len(items) - i})
            break
        share = None if deadline == math.inf else left * (j - i) / (len(items) - i)
        more = items[i].state == "current"  # search further: this run's trials count
        stretch = Settings(**{**settings.__dict__, "budget_s": share, "retune": more, "extend": more})
        out += Tuner(store, items[i].kernel, stretch, hear).run([it.workload for it in items[i:j]])
        i = j
    return out
