"""Timing: GPU events with an L2 flush, or CUDA-graph replay for launch-bound kernels.

Without a GPU the same calls time the Triton interpreter with a host clock and mark the
result as not meaningful (correctness checks stay real; times never count as GPU results).
"""
from __future__ import annotations

import math
import statistics
import time
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import torch

from tuner.runtime.target import Target

TIMING_METHOD = 2
"""How trials are timed. Bump it with any change that moves the numbers of an unchanged
kernel: it is stored in each run's settings (``"timing"``), so a series' points timed
differently are never compared (``tuner.dashboard.detect``), and from 3 on it is part of
the environment fingerprint (``tuner.device.fingerprint``), so studies and winners start
afresh instead of comparing new trials with old-method winners.

1. CUDA-graph replay ignored ``flush_l2``: graph-timed kernels ran with a warm L2 (before
   commit 64832f2, 2026-11-29; no run in the project's results.db but MoE routing's first,
   which is timed warm anyway).
2. Graph replay honours ``flush_l2``: each captured call follows an L2 flush, and a graph
   of the flushes alone, timed the same way, is subtracted."""

L2_FLUSH_BYTES = 256 * 2**20  # > 60 MB L2 of an H200 / 126 MB of a B200; cleared before each timed call


@dataclass(frozen=True)
class Timing:
    """Microseconds per call: median and the 20th / 80th percentiles."""

    median_us: float
    p20_us: float
    p80_us: float
    n: int
    meaningful: bool

    @property
    def spread(self) -> float:
        """Relative half-width of the p20..p80 band around the median."""
        return (self.p80_us - self.p20_us) / (2 * self.median_us) if self.median_us > 0 else 0.0


def _quantiles(samples: Sequence[float], meaningful: bool) -> Timing:
    s = sorted(samples)
    q = lambda f: s[min(len(s) - 1, max(0, round(f * (len(s) - 1))))]  # noqa: E731
    return Timing(statistics.median(s), q(0.2), q(0.8), len(s), meaningful)


MIN_SAMPLES = 8
"""Samples taken before ``settled`` may stop a measurement."""


def median_ci(samples: Sequence[float], z: float = 1.96) -> tuple[float, float]:
    """Distribution-free confidence interval of the median (95% at ``z`` = 1.96): the order
    statistics ``n/2 -+ z*sqrt(n)/2`` of the sorted samples (no normality assumed: kernel
    times are skewed, with rare slow outliers)."""
    s = sorted(samples)
    n = len(s)
    half = z * math.sqrt(n) / 2
    return s[max(0, math.floor(n / 2 - half))], s[min(n - 1, math.ceil(n / 2 + half) - 1)]


def settled(samples: Sequence[float], precision: float) -> bool:
    """At least ``MIN_SAMPLES`` and the median's confidence interval (``median_ci``) within
    +-``precision`` of the median: more replays would not move a ranking the study can
    trust anyway (a winner must beat the default by more than the p20..p80 noise band)."""
    if len(samples) < MIN_SAMPLES:
        return False
    lo, hi = median_ci(samples)
    med = statistics.median(samples)
    return med > 0 and (hi - lo) / 2 <= precision * med


def gpu_available() -> bool:
    return not Target.of().interpret


_flush_buf: torch.Tensor | None = None


def _flush_l2() -> None:
    global _flush_buf
    if _flush_buf is None:
        _flush_buf = torch.empty(L2_FLUSH_BYTES // 4, dtype=torch.int32, device="cuda")
    _flush_buf.zero_()


def bench(fn: Callable[[], Any], *, graph: bool = False, warmup: int = 10, reps: int = 100,
          flush_l2: bool = True, rotate: Sequence[Callable[[], Any]] | None = None,
          max_seconds: float = 10.0, precision: float | None = None) -> Timing:
    """Time ``fn()``.

    ``graph``: capture ``fn`` in a CUDA graph (``calls_per_graph`` back-to-back calls)
    and time replays: launch gaps shrink to what a serving engine sees under graphs
    (decode steps are replayed graphs). With ``flush_l2`` each captured call is preceded
    by the L2 flush, and a graph of the flushes alone, timed the same way, is subtracted.
    ``rotate``: alternative closures over other input sets, cycled through so repeated
    calls do not hit a warm L2. ``precision``: stop before ``reps`` once the samples are
    ``settled`` (checked every ``MIN_SAMPLES``), so a steady kernel costs a few replays and a
    noisy one all of them; None always takes ``reps``. It changes how many samples are
    taken, not what a sample measures, so ``TIMING_METHOD`` stays. On the CPU (interpreter)
    the result is not meaningful.
    """
    fns = list(rotate) if rotate else [fn]
    if not gpu_available():
        samples = []
        for i in range(max(1, min(reps, 3))):
            t0 = time.perf_counter()
            fns[i % len(fns)]()
            samples.append((time.perf_counter() - t0) * 1e6)
        return _quantiles(samples, meaningful=False)
    if graph:
        return _bench_graph(fns, warmup=warmup, reps=reps, flush_l2=flush_l2, precision=precision)
    for i in range(warmup):
        fns[i % len(fns)]()
    torch.cuda.synchronize()
    t_begin = time.perf_counter()
    samples: list[float] = []
    batch = reps if precision is None else MIN_SAMPLES
    while len(samples) < reps:
        n = min(batch, reps - len(samples))
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
        done = n
        for i in range(n):
            if flush_l2:
                _flush_l2()
            starts[i].record()
            fns[(len(samples) + i) % len(fns)]()
            ends[i].record()
            if time.perf_counter() - t_begin > max_seconds:
                done = i + 1
                break
        torch.cuda.synchronize()
        samples += [s.elapsed_time(e) * 1e3 for s, e in zip(starts[:done], ends[:done])]
        if done < n or (precision is not None and settled(samples, precision)):
            break
    return _quantiles(samples, True)


def _graph_samples(fns: list[Callable[[], Any]], *, warmup: int, n: int, calls: int, flush_l2: bool,
                   precision: float | None = None) -> list[float]:
    """``n`` replays of a graph of ``calls`` captured calls (each after a flush with
    ``flush_l2``): the microseconds of each replay, not yet divided by ``calls``; fewer once
    they are ``settled`` within ``precision``."""
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for i in range(calls):
            if flush_l2:
                _flush_l2()
            if fns:
                fns[i % len(fns)]()
    for _ in range(max(1, warmup // 5)):
        g.replay()
    torch.cuda.synchronize()
    samples = []
    for _ in range(n):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        g.replay()
        e.record()
        e.synchronize()
        samples.append(s.elapsed_time(e) * 1e3)
        if precision is not None and len(samples) % MIN_SAMPLES == 0 and settled(samples, precision):
            break
    return samples


def _bench_graph(fns: list[Callable[[], Any]], *, warmup: int, reps: int, calls_per_graph: int = 20,
                 flush_l2: bool = False, precision: float | None = None) -> Timing:
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for i in range(3):  # warm caches and compile outside the capture
            fns[i % len(fns)]()
        if flush_l2:
            _flush_l2()
    torch.cuda.current_stream().wait_stream(stream)
    torch.cuda.synchronize()
    n = max(10, reps // 5)
    # With the flushes in the graph the kernel's time is a difference of two medians, each
    # larger than it: a relative precision of either says little of it, so all replays run.
    both = _graph_samples(fns, warmup=warmup, n=n, calls=calls_per_graph, flush_l2=flush_l2,
                          precision=None if flush_l2 else precision)
    if not flush_l2:
        return _quantiles([t / calls_per_graph for t in both], True)
    flush = statistics.median(_graph_samples([], warmup=warmup, n=n, calls=calls_per_graph, flush_l2=True))
    return _quantiles([max(t - flush, 0.0) / calls_per_graph for t in both], True)


def bench_kernel(spec: Any, fn: Callable[[], Any], **kw: Any) -> Timing:
    """Time ``fn`` (a launch of ``spec``'s kernel, or a baseline beside it) the way the
    tuner times trials: CUDA-graph replay where ``spec.launch_bound``, the L2 flushed
    before each call where ``spec.cold_l2``. Benchmarks use it so their numbers and the
    tuner's stay comparable."""
    return bench(fn, graph=spec.launch_bound, flush_l2=spec.cold_l2, **kw)


def empty_launch_floor(*, graph: bool) -> Timing:
    """Time of an empty Triton kernel launched the same way: the launch-latency floor."""
    from tuner._empty import launch_empty

    dummy = torch.empty(1, device="cuda" if gpu_available() else "cpu")
    return bench(lambda: launch_empty(dummy), graph=graph, flush_l2=False)
