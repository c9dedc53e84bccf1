"""Typed search-space parameters and their Optuna suggestions."""
from __future__ import annotations

import optuna
import pytest

from tuner.runtime.target import INTERPRETER, Target
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


TARGETS = [Target.named("sm_90"), Target.named("sm_100"), INTERPRETER]


@pytest.mark.parametrize("name", ["engram", "mhc", "moe_routing", "nvfp4_attention", "sparse_mqa"])
def test_canonical_is_legal_idempotent_and_defaults_are_admitted(name):
    """What the study evaluates for a draw (``Kernel.canonical``): legal values and a fixed
    point, on every target; each target's default is canonical, in the space and admitted."""
    import random

    from tuner.registry import kernels

    k = kernels()[name]
    rng = random.Random(7)
    for t in TARGETS:
        for w in list(k.workloads)[::11] + list(k.small_workloads):
            default = k.default_config(w, t)
            assert k.refusal(default, w, t) is None, (t.name, w, default, k.refusal(default, w, t))
            for _ in range(60):
                c = {p: rng.choice(v.values()) for p, v in k.space.items()}
                cc = k.canonical(c, w, t)
                assert k.space.contains(cc) and k.canonical(cc, w, t) == cc, (t.name, w, c, cc)


def test_canonical_makes_sparse_draws_admissible():
    """sparse_mqa pins each path's unused knobs: a uniform draw is rarely admitted as drawn,
    so studies would end on their rejection streak with a handful of trials; its canonical
    form is admitted most of the time."""
    import random

    from kernel_templates.sparse_mqa import Workload
    from tuner.registry import kernels

    k = kernels()["sparse_mqa"]
    t = Target.named("sm_90")
    rng = random.Random(0)
    for w in (Workload(1, 32768, 1, "dsv32"), Workload(32, 131072, 1, "dsv41-flash"), Workload(8, 8192, 2, "dsv32")):
        draws = [{p: rng.choice(v.values()) for p, v in k.space.items()} for _ in range(400)]
        raw = sum(k.admits(c, w, t) for c in draws)
        canon = sum(k.admits(k.canonical(c, w, t), w, t) for c in draws)
        assert canon > 100 and canon > 5 * max(raw, 1), (w, raw, canon)


def test_when_pins_a_knob_that_does_not_apply_and_snap_maps_duplicates():
    """``when`` / ``off`` / ``snap``: evaluated in declaration order, each ``when`` seeing the
    earlier knobs already canonical; knobs without them unchanged."""
    sp = Space(BLOCK=Pow2(1, 64, snap=lambda v, c, w, t: min(v, w)),
               FUSED=Bool(when=lambda c, w, t: c["BLOCK"] > 2),
               MODE=Choice(("a", "b"), when=lambda c, w, t: c["FUSED"]),
               STAGES=IntRange(1, 3, when=lambda c, w, t: not t.interpret, off=2))
    gpu = Target.named("sm_90")
    assert sp.canonical({"BLOCK": 64, "FUSED": True, "MODE": "b", "STAGES": 3}, 4, gpu) == \
        {"BLOCK": 4, "FUSED": True, "MODE": "b", "STAGES": 3}
    assert sp.canonical({"BLOCK": 64, "FUSED": True, "MODE": "b", "STAGES": 3}, 2, gpu) == \
        {"BLOCK": 2, "FUSED": False, "MODE": "a", "STAGES": 3}  # FUSED pinned, so MODE too
    assert sp.canonical({"BLOCK": 8, "FUSED": True, "MODE": "b", "STAGES": 3}, 64, INTERPRETER)["STAGES"] == 2


def test_targets_are_values_not_switches():
    """A ``Target`` is named or taken from a device; unknown names fail with the known ones."""
    assert Target.named("sm_90").cc == 90 and Target.named("sm_90").sms == 132
    assert Target.named("sm_100a").cc == 100 and not Target.named("sm_100").interpret
    assert Target.of("cpu") == INTERPRETER and INTERPRETER.interpret
    with pytest.raises(ValueError, match="sm_90"):
        Target.named("sm_91")
