"""Regression detection: steps in a series beyond the measured noise band.

The method, per (kernel, workload, GPU) series of meaningful points, in log time:

1. **Noise of a point** from its stored spread: the p20..p80 band of a normal spans
   +-0.8416 sigma, so ``sigma_i = half-width_i / 0.8416``, floored at ``MIN_NOISE`` and
   at the run-to-run scatter of the series (robust: MAD of successive differences), so
   neither a point with no spread nor optimistic spreads make every change significant.
2. **Step detection** by optimal partitioning: the least-squares segmentation (weighted by
   1 / sigma^2, a BIC-like penalty per step) proposes the steps.
3. **The test of each step** between its two neighbouring levels: the shift of the level
   *medians* (an outlier moves neither), each side's variance the larger of its observed
   scatter and its points' own noise, ``z = shift / sqrt(var_L / n_L + var_R / n_R)``; a
   step stands when the two-sided p-value is below ``alpha``, the shift is at least
   ``threshold``, and the new level lies beyond the noise band (its p20..p80 band does
   not overlap the baseline's). Failing steps are merged away, weakest first.
4. **One timing method at a time**: a change of how trials are timed
   (``tuner.timing.TIMING_METHOD``) moves every number, so the points of each method are
   segmented and tested on their own; no step is drawn across the change.
5. **Outliers and confirmation**: an inner level shorter than ``min_points`` that the
   series left again is an outlier: its points are dropped and the series segmented
   again, so a single noisy point is never a step. A step seen only in the newest
   point(s) is *unconfirmed* (the next run or revalidation decides) and does not fail CI;
   so is a step from a baseline of fewer than ``min_points`` points (one first, short
   tune is no level to regress from);
   a regression the series has since come back from is *resolved*.

A regression is a confirmed step to a slower time; a step to a faster time is an
improvement. Points timed through the interpreter are not meaningful and are skipped.
"""
from __future__ import annotations

import datetime as dt
import math
import statistics
from dataclasses import dataclass, replace
from typing import Iterable, Sequence

from tuner.dashboard.history import Point, Series, versions_label

Z_P20_P80 = 0.8416  # p80 of the standard normal: the p20..p80 band is +-0.8416 sigma
MIN_NOISE = 0.005   # relative: GPU timing is never better than half a percent run to run
MAD_TO_SIGMA = 1.4826


@dataclass(frozen=True)
class Change:
    """A step detected in one series. Times in microseconds; ``ratio`` = after / before."""

    kernel: str
    workload_key: str
    gpu: str
    index: int
    """Position, in the series' points, of the first point after the step."""
    when: dt.datetime
    before_us: float
    after_us: float
    band: float
    """Relative half-width of the baseline's noise band."""
    p_value: float
    confirmed: bool
    points_after: int
    """Points at the new level (up to the next step or the newest point)."""
    cause: str
    """What changed between the last point before and the first after (versions, source, config)."""
    resolved: bool = False
    """A regression whose series came back within the band of its baseline since."""

    @property
    def ratio(self) -> float:
        return self.after_us / self.before_us

    @property
    def change(self) -> float:
        """Relative change of the time: +0.12 = 12% slower."""
        return self.ratio - 1.0

    @property
    def is_regression(self) -> bool:
        return self.ratio > 1.0

    @property
    def kind(self) -> str:
        """``regression`` / ``improvement``, with ``unconfirmed`` in front when not confirmed."""
        base = "regression" if self.is_regression else "improvement"
        if self.resolved:
            return f"resolved {base}"
        return base if self.confirmed else f"unconfirmed {base}"


def _sigma(p: Point) -> float:
    return max(p.spread, MIN_NOISE) / Z_P20_P80


def _level_and_var(xs: Sequence[float], sig: Sequence[float]) -> tuple[float, float]:
    """(level, variance) of a segment: its median, and max(observed scatter, own noise)^2."""
    level = statistics.median(xs)
    if len(xs) > 2:
        scatter = MAD_TO_SIGMA * statistics.median(abs(x - level) for x in xs)
    else:
        scatter = abs(xs[0] - xs[-1]) / math.sqrt(2)
    own = math.sqrt(statistics.fmean(s * s for s in sig))
    return level, max(scatter, own) ** 2


def _band(xs: Sequence[float], pts: Sequence[Point]) -> float:
    """Half-width of a segment's noise band in log units: its points' spread, or their scatter."""
    level = statistics.median(xs)
    spread = max(statistics.median(p.spread for p in pts), MIN_NOISE)
    scatter = MAD_TO_SIGMA * statistics.median(abs(x - level) for x in xs) if len(xs) > 2 else 0.0
    return max(spread, scatter)


def _partition(x: Sequence[float], w: Sequence[float], penalty: float) -> list[int]:
    """Optimal partitioning (least squares, weighted, ``penalty`` per step): segment starts."""
    n = len(x)
    s0, s1, s2 = [0.0], [0.0], [0.0]
    for xi, wi in zip(x, w):
        s0.append(s0[-1] + wi)
        s1.append(s1[-1] + wi * xi)
        s2.append(s2[-1] + wi * xi * xi)

    def cost(a: int, b: int) -> float:
        m0, m1 = s0[b] - s0[a], s1[b] - s1[a]
        return (s2[b] - s2[a]) - m1 * m1 / m0

    best = [0.0] + [math.inf] * n
    last = [0] * (n + 1)
    best[0] = -penalty
    for b in range(1, n + 1):
        for a in range(b):
            c = best[a] + penalty + cost(a, b)
            if c < best[b]:
                best[b], last[b] = c, a
    starts, b = [], n
    while b > 0:
        starts.append(last[b])
        b = last[b]
    return sorted(starts)


def _boundary(x: Sequence[float], sig: Sequence[float], pts: Sequence[Point], a: int, k: int, b: int,
              threshold: float) -> tuple[float, float, float, float] | None:
    """Test the step at k between segments [a, k) and [k, b): (p, level before, level after,
    band), or None when it is not a step (not significant, inside the band, or too small)."""
    lv_l, var_l = _level_and_var(x[a:k], sig[a:k])
    lv_r, var_r = _level_and_var(x[k:b], sig[k:b])
    se = math.sqrt(var_l / (k - a) + var_r / (b - k))
    p = math.erfc(abs(lv_r - lv_l) / se / math.sqrt(2)) if se > 0 else 0.0
    band = _band(x[a:k], pts[a:k])
    # "beyond the noise": the after level's p20..p80 band does not overlap the baseline's
    beyond = abs(lv_r - lv_l) > band + max(statistics.median(q.spread for q in pts[k:b]), MIN_NOISE)
    big = abs(math.expm1(lv_r - lv_l)) >= threshold
    return (p, lv_l, lv_r, band) if beyond and big else None


def _cause(before: Point, after: Point) -> str:
    parts = [f"{k} {before.versions.get(k) or '?'} -> {after.versions.get(k) or '?'}"
             for k in ("torch", "triton", "cuda", "driver", "python")
             if before.versions.get(k) != after.versions.get(k)]
    if before.source_hash != after.source_hash:
        parts.append("template source changed")
    if before.config != after.config:
        parts.append("another config")
    return "; ".join(parts) or f"same software ({versions_label(after.versions) or 'unknown versions'})"


def detect_series(series: Series, *, threshold: float = 0.05, alpha: float = 0.01, min_points: int = 2
                  ) -> list[Change]:
    """Steps in one series (regressions and improvements, confirmed or not), oldest first.

    ``threshold`` is the smallest relative change reported (0.05 = 5%), ``alpha`` the
    significance level of the test, ``min_points`` how many points a level needs to count
    as more than an outlier (the newest level may be shorter: it is then unconfirmed).
    """
    pts = [p for p in series.points if p.meaningful and p.median_us and p.median_us > 0]
    # Points timed by different methods are not compared: each stretch of one method on its own.
    found: list[Change] = []
    start = 0
    for i in range(1, len(pts) + 1):
        if i == len(pts) or pts[i].timing != pts[start].timing:
            found += _detect_points(series, pts[start:i], threshold, alpha, max(1, min_points))
            start = i
    return found


def _detect_points(series: Series, pts: list[Point], threshold: float, alpha: float, min_points: int
                   ) -> list[Change]:
    """``detect_series`` over ``pts``, points of ``series`` timed by one method."""
    while True:
        n = len(pts)
        if n < 2:
            return []
        x = [math.log(p.median_us) for p in pts]
        own = [_sigma(p) for p in pts]
        # Run-to-run noise the stored spreads may not show: robust scatter of successive
        # differences (a few steps barely move their median).
        diffs = [abs(b - a) for a, b in zip(x, x[1:])]
        rtr = MAD_TO_SIGMA * statistics.median(diffs) / math.sqrt(2) if len(diffs) >= 3 else 0.0
        sig = [max(s, rtr) for s in own]
        starts = _partition(x, [1 / (s * s) for s in sig], penalty=2 * math.log(n) + 4) + [n]
        # Backward elimination: merge the weakest boundary until every one is a real step.
        while len(starts) > 2:
            tests = [_boundary(x, sig, pts, starts[i - 1], starts[i], starts[i + 1], threshold)
                     for i in range(1, len(starts) - 1)]
            worst = max(range(len(tests)), key=lambda i: 2.0 if tests[i] is None else tests[i][0])
            t = tests[worst]
            if t is not None and t[0] < alpha:
                break
            del starts[worst + 1]
        # An inner level shorter than min_points that the series left again is an outlier:
        # drop its points and segment again without them.
        short = [i for i in range(1, len(starts) - 2) if starts[i + 1] - starts[i] < min_points]
        if not short:
            break
        drop = {j for i in short for j in range(starts[i], starts[i + 1])}
        pts = [p for j, p in enumerate(pts) if j not in drop]
    found: list[Change] = []
    for i in range(1, len(starts) - 1):
        a, k, b = starts[i - 1], starts[i], starts[i + 1]
        t = _boundary(x, sig, pts, a, k, b, threshold)
        assert t is not None
        p, lv_l, lv_r, band = t
        found.append(Change(series.kernel, series.workload_key, series.gpu, series.points.index(pts[k]),
                            pts[k].when, math.exp(lv_l), math.exp(lv_r), band, p,
                            b - k >= min_points and k - a >= min_points, b - k,
                            _cause(pts[k - 1], pts[k])))
    if not found:
        return found
    # A regression is resolved when the newest confirmed level is back within its baseline's
    # band: it happened and the dashboard shows it, but CI no longer fails on it.
    newest = next((math.log(c.after_us) for c in reversed(found) if c.confirmed), None)
    return [replace(c, resolved=c.confirmed and c.is_regression and newest is not None and c is not found[-1]
                    and newest - math.log(c.before_us) <= max(c.band, math.log1p(threshold)))
            for c in found]


def detect(history: Iterable[Series], *, threshold: float = 0.05, alpha: float = 0.01, min_points: int = 2,
           since: dt.datetime | None = None) -> list[Change]:
    """Steps in every series; ``since`` keeps those whose first point after is at or after it."""
    out: list[Change] = []
    for s in history:
        for c in detect_series(s, threshold=threshold, alpha=alpha, min_points=min_points):
            if since is None or c.when >= since:
                out.append(c)
    return out


def regressions(changes: Iterable[Change]) -> list[Change]:
    """The confirmed slowdowns not resolved since: what `tune regressions` fails on."""
    return [c for c in changes if c.confirmed and c.is_regression and not c.resolved]
