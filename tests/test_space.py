"""Typed search-space parameters and their Optuna suggestions."""
from __future__ import annotations

import optuna
import pytest

from tuner.space import Bool, Choice, IntRange, Pow2, Space


def test_values_and_grid():
    sp = Space(BLOCK=Pow2(16, 128), FUSED=Bool(), MODE=Choice(("a", "b")), num_stages=IntRange(1, 3))
    assert sp["BLOCK"].values() == (16, 32, 64, 128)
    assert sp.size() == 4 * 2 * 2 * 3
    grid = list(sp.grid())
    assert len(grid) == sp.size() and len({tuple(c.items()) for c in grid}) == sp.size()
    assert all(sp.contains(c) for c in grid)
    assert not sp.contains({**grid[0], "BLOCK": 48})
    assert not sp.contains({k: v for k, v in grid[0].items() if k != "FUSED"})


def test_pow2_rejects_non_powers():
    with pytest.raises(ValueError):
        Pow2(3, 16)
    with pytest.raises(ValueError):
        Pow2(32, 16)


def test_suggestions_use_the_kernel_names_and_legal_values():
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    sp = Space(BLOCK_T=Pow2(1, 32), num_warps=Choice((1, 2, 4, 8)), FUSED=Bool(), num_stages=IntRange(1, 4))
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=1))
    for _ in range(20):
        t = study.ask()
        cfg = sp.suggest(t)
        assert sp.contains(cfg)
        assert set(t.params) == set(sp)
        study.tell(t, 1.0)
