"""Timing with as few replays as the noise allows: when a median is known well enough."""
from __future__ import annotations

import random
import statistics

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tuner.timing import MIN_SAMPLES, bench, median_ci, settled


def test_a_steady_kernel_settles_at_the_first_check_a_noisy_one_never():
    rng = random.Random(0)
    steady = [10.0 * (1 + rng.uniform(-0.002, 0.002)) for _ in range(MIN_SAMPLES)]
    assert settled(steady, 0.01) and not settled(steady[:-1], 0.01)  # too few samples to judge
    noisy = [10.0 * (1 + rng.uniform(-0.3, 0.3)) for _ in range(100)]
    assert not settled(noisy, 0.01) and settled(noisy, 0.2)
    # rare slow outliers (a clock dip, a preemption) leave the median's interval alone
    spiky = steady * 3 + [50.0, 80.0]
    assert settled(spiky, 0.01)


@settings(max_examples=30, deadline=None)
@given(st.lists(st.floats(1.0, 1000.0), min_size=1, max_size=200))
def test_median_ci_brackets_the_median(samples):
    lo, hi = median_ci(samples)
    assert min(samples) <= lo <= statistics.median(samples) <= hi <= max(samples)


def test_the_interval_narrows_as_samples_grow():
    rng = random.Random(1)
    widths = []
    for n in (16, 64, 256):
        s = [rng.gauss(100.0, 5.0) for _ in range(n)]
        lo, hi = median_ci(s)
        widths.append(hi - lo)
    assert widths[0] > widths[1] > widths[2]


@pytest.mark.gpu
def test_a_steady_kernel_takes_fewer_replays_with_a_precision():
    import torch

    x = torch.randn(1 << 20, device="cuda")
    full = bench(lambda: x.mul_(1.0), reps=100, flush_l2=False)
    quick = bench(lambda: x.mul_(1.0), reps=100, flush_l2=False, precision=0.05)
    assert full.n == 100 and MIN_SAMPLES <= quick.n < 100
    assert abs(quick.median_us - full.median_us) <= 0.1 * full.median_us
