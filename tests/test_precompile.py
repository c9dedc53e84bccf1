"""Compiling ahead: the pool compiles for the GPU target into the cache folder the worker's
first launch then loads from; a study asks ahead and hands every candidate to the pool first."""
from __future__ import annotations

import pytest
from conftest import FakeWorker, run_clean

from tuner import registry
from tuner.precompile import Precompiler, default_cache
from tuner.runtime.target import Target

_POOL_THEN_JIT = r"""
import json, os, sys
from tuner import registry
from tuner.precompile import Precompiler, install
from tuner.runtime.target import Target
from tuner.spec import workload_dict
cache = sys.argv[1]
T = Target.named("sm_90")
k = registry.get("moe_routing")
w = k.workloads[0]
cfg = k.default_config(w, T)
other = dict(cfg, num_warps=2 if cfg["num_warps"] != 2 else 4)
with Precompiler(k.name, T, processes=1, cache_dir=cache) as pool:
    pool.submit(workload_dict(w), cfg)
    pool.wait(workload_dict(w), cfg, 300)
    stats = dict(pool.stats)
# a launch as the worker's, judged in this process: the kernel the pool compiled is a cache hit
os.environ["TRITON_CACHE_DIR"] = cache
install(T)
from triton import knobs
heard = []
knobs.compilation.listener = lambda **kw: heard.append(kw["cache_hit"])
inputs = k.spec.make_inputs(w, "meta", 0)
k.spec.launch(config=cfg, **inputs)
k.spec.launch(config=other, **inputs)
print(json.dumps({"stats": stats, "heard": heard, "files": len(os.listdir(cache))}))
"""


def test_the_pool_compiles_for_the_gpu_into_the_cache_the_launch_loads_from(tmp_path):
    out = run_clean(_POOL_THEN_JIT, str(tmp_path / "cache"), timeout=600)
    assert out["stats"] == {"submitted": 1, "compiled": 1, "failed": 0}
    assert out["files"] >= 1
    # the pool's config loads from the cache; a config it never saw compiles
    assert out["heard"] == [True, False]


def test_inert_for_the_interpreter_and_without_processes():
    k = registry.get("moe_routing")
    for target, n in ((Target.of(), 4), (Target.named("sm_90"), 0)):
        pool = Precompiler(k.name, target, processes=n)
        pool.submit({"tokens": 1, "profile": "dsv3"}, {"num_warps": 1})
        assert not pool.active and pool.stats["submitted"] == 0 and pool._pool is None
        assert pool.wait({"tokens": 1, "profile": "dsv3"}, {"num_warps": 1}, 1) == 0.0


def test_default_cache_sits_beside_a_sqlite_database():
    assert default_cache("sqlite:////data/r.db") == "/data/r.db.triton-cache"
    assert default_cache("postgresql+psycopg://u@h/db") is None


class _Pool:
    """Stands in for the compile-ahead pool: records what was handed to it, and when."""

    log: list[tuple[str, str]] = []

    def __init__(self, kernel, target, *, processes, cache_dir=None) -> None:
        self.pending: set[str] = set()

    def submit(self, workload, config) -> None:
        from tuner.spec import config_key

        _Pool.log.append(("submit", config_key(config)))

    def wait(self, workload, config, timeout_s) -> float:
        from tuner.spec import config_key

        _Pool.log.append(("measure", config_key(config)))
        return 0.0

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        pass


@pytest.mark.parametrize("ahead", [0, 3])
def test_a_study_asks_ahead_and_measures_exactly_its_trials(tmp_path, monkeypatch, ahead):
    import optuna
    from optuna.trial import TrialState
    from sqlalchemy import select

    import tuner.study
    from tuner.store import Trial, open_store
    from tuner.study import Settings, Tuner

    monkeypatch.setattr(tuner.study, "Worker", FakeWorker)
    monkeypatch.setattr(tuner.study, "Precompiler", _Pool)
    _Pool.log = []
    k = registry.get("moe_routing")
    store = open_store(str(tmp_path / "r.db"))
    w = k.small_workloads[0]
    Tuner(store, k, Settings(n_trials=7, patience=100, rounds=1, ahead=ahead)).run([w])
    with store.session() as s:
        rows = s.scalars(select(Trial).where(Trial.phase == "search", Trial.status != "pruned")).all()
    assert len(rows) == 7  # asking ahead measures no more than asked for
    measured = [c for what, c in _Pool.log if what == "measure"]
    assert sorted(measured) == sorted(r.config_key for r in rows)
    most = 0
    for i, (what, ck) in enumerate(_Pool.log):  # each candidate reached the pool before the worker
        if what == "measure":
            assert ("submit", ck) in _Pool.log[:i]
            in_flight = {c for w_, c in _Pool.log[:i] if w_ == "submit"} - {c for w_, c in _Pool.log[:i] if w_ == "measure"}
            most = max(most, len(in_flight))
    assert most == 1 + ahead  # the one measured and, while it is, up to `ahead` compiling
    study = optuna.load_study(study_name=optuna.get_all_study_names(store.optuna_storage())[0],
                              storage=store.optuna_storage())
    states = [t.state for t in study.get_trials(deepcopy=False)]
    assert TrialState.RUNNING not in states and TrialState.FAIL not in states  # never asked past the trials
