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


@pytest.mark.parametrize("name", ["engram", "mhc", "moe_routing", "nvfp4_attention", "sparse_mqa"])
def test_canonical_is_legal_idempotent_and_keeps_admitted_configs(name):
    """What the study evaluates for a draw (``Kernel.canonical``): legal values, a fixed point,
    and any config the constraints already admit (every default among them) unchanged."""
    import random

    from tuner.registry import kernels

    k = kernels()[name]
    rng = random.Random(7)
    for w in list(k.workloads)[::7] + list(k.small_workloads):
        default = dict(k.spec.default_config(w))
        assert k.canonical(default, w) == default, w
        for _ in range(300):
            c = {p: rng.choice(v.values()) for p, v in k.space.items()}
            cc = k.canonical(c, w)
            assert k.space.contains(cc) and k.canonical(cc, w) == cc, (w, c, cc)
            if k.constraints(c, w):
                assert cc == c, (w, c, cc)


def test_canonical_makes_sparse_draws_admissible():
    """sparse_mqa pins each top-k path's unused knobs: a uniform draw was admitted ~1 time in
    1000, so studies ended on their rejection streak with a handful of trials; its canonical
    form is admitted most of the time (shapes where the register and split limits bite less)."""
    import random

    from kernel_templates.sparse_mqa import Workload
    from tuner.registry import kernels

    k = kernels()["sparse_mqa"]
    rng = random.Random(0)
    for w in (Workload(1, 32768, 1, "dsv32"), Workload(32, 131072, 1, "dsv41-flash"), Workload(8, 8192, 2, "dsv32")):
        draws = [{p: rng.choice(v.values()) for p, v in k.space.items()} for _ in range(1000)]
        raw = sum(k.constraints(c, w) for c in draws)
        canon = sum(k.constraints(k.canonical(c, w), w) for c in draws)
        assert canon > 300 and canon > 20 * raw, (w, raw, canon)


def test_complete_fills_only_parameters_with_an_absent_value():
    """``Space.complete``: a config tuned before a parameter existed gets the parameter's
    ``absent`` value; parameters without one stay missing (the config is then outside the
    space), and values the config has are never replaced."""
    sp = Space(A=Pow2(1, 4), B=Choice(("x", "y"), absent="x"), C=Bool(absent=False), D=IntRange(0, 2))
    assert sp.complete({"A": 2, "D": 1}) == {"A": 2, "B": "x", "C": False, "D": 1}
    assert sp.contains(sp.complete({"A": 2, "D": 1}))
    assert sp.complete({"A": 2, "B": "y", "C": True, "D": 0}) == {"A": 2, "B": "y", "C": True, "D": 0}
    assert not sp.contains(sp.complete({"B": "y", "D": 0}))  # A has no absent value
