"""Fewer and cheaper trials: predicted entries, other GPUs' winners first, patience beyond the
noise, the coarse grid first, and where each trial's seconds went."""
from __future__ import annotations

import json
import re
import statistics

import pytest
from conftest import FakeWorker
from sqlalchemy import func, select

from tuner import registry
from tuner.cli.main import main
from tuner.spec import TrialResult
from tuner.store import Trial

X = dict(BLOCK_T=8, MAX_PROGRAMS=64, FUSED=False, num_warps=8, num_stages=2)
Y = dict(BLOCK_T=4, MAX_PROGRAMS=32, FUSED=False, num_warps=2, num_stages=2)
PHASES = {"compile": 2.0, "inputs": 0.0, "reference": 0.1, "timing": 0.5, "overhead": 0.05, "compiled": 1, "cached": 0}


class Fast(FakeWorker):
    """The fake's times, X and Y at 1 us; phases as a GPU trial might report them."""

    calls: list[dict] = []

    @staticmethod
    def _us(config: dict) -> float:
        return 1.0 if config in (X, Y) else FakeWorker._us(config)

    def evaluate(self, kernel, workload, config, seed):
        Fast.calls.append(config)
        t = self._us(config)
        return TrialResult("ok", t, 0.99 * t, 1.01 * t, meaningful=False, phases=PHASES)


@pytest.fixture
def fast(monkeypatch):
    import tuner.study

    Fast.calls = []
    monkeypatch.setattr(tuner.study, "Worker", Fast)


def _tune(store, tokens, **kw):
    from tuner.study import Settings, Tuner

    k = registry.get("moe_routing")
    w = k.spec.workload(tokens, "dsv3")
    return Tuner(store, k, Settings(**{"n_trials": 3, "patience": 100, "rounds": 1, **kw})).run([w])[0]


def test_agreeing_neighbours_predict_a_workload_with_two_measurements(tmp_path, fast):
    from tuner.pack import export_pack
    from tuner.store import open_store

    db = str(tmp_path / "r.db")
    store = open_store(db)
    for tokens in (1024, 8192):
        assert _tune(store, tokens, tries=(tuple(X.items()),)).winner == X
    Fast.calls = []
    o = _tune(store, 4096, n_trials=8, predict=2)
    assert o.obtained == "predicted" and o.winner == X and o.evaluated == 2
    k = registry.get("moe_routing")
    assert Fast.calls == [k.default_config(k.spec.workload(4096, "dsv3"), _target()), X]
    # neighbours that disagree (256 won Y, 1024 X): a search of all the trials
    assert _tune(store, 256, tries=(tuple(Y.items()),)).winner == Y
    o = _tune(store, 512, n_trials=6, predict=2)
    assert o.obtained == "tuned" and o.evaluated == 6
    pack = export_pack(store, tmp_path / "pack")
    entries = {e["workload"]["tokens"]: e["obtained"] for e in json.loads((pack / "moe_routing.json").read_text())["entries"]}
    assert entries == {256: "tuned", 512: "tuned", 1024: "tuned", 4096: "predicted", 8192: "tuned"}
    # a predicted entry is searched first once the campaign goes on, and no longer predicts others
    from tuner import campaign

    plan = campaign.plan(store, [(k, [k.spec.workload(t, "dsv3") for t in (256, 512, 1024, 4096, 8192)])])
    assert plan[0].key == "tokens=4096,profile=dsv3" and plan[0].trials == 2


def _target():
    from tuner.runtime.target import Target

    return Target.of()


def _won_elsewhere(store, gpu: str, config: dict, source_hash: str = "older") -> None:
    """A winner of moe_routing dsv3 T=4096 on another GPU (under ``source_hash``)."""
    from tuner.store import Environment, Run, Winner

    name = registry.get("moe_routing").name
    with store.session() as s:
        env = Environment(fingerprint_hash=f"elsewhere {gpu}", gpu=gpu, cc="9.0", fingerprint={"cc": "9.0"})
        s.add(env)
        s.flush()
        run = Run(kernel=name, environment_id=env.id, source_hash=source_hash, settings={}, status="done")
        s.add(run)
        s.flush()
        s.add(Winner(kernel=name, workload_key="tokens=4096,profile=dsv3", workload={"tokens": 4096, "profile": "dsv3"},
                     environment_id=env.id, source_hash=source_hash, run_id=run.id, config=config, median_us=5.0,
                     p20_us=4.9, p80_us=5.1))
        s.commit()


def test_other_gpus_winners_are_measured_right_after_the_default(tmp_path, fast):
    from tuner.store import open_store

    store = open_store(str(tmp_path / "r.db"))
    k = registry.get("moe_routing")
    w = k.spec.workload(4096, "dsv3")
    _won_elsewhere(store, "NVIDIA H100 80GB HBM3", X)
    o = _tune(store, 4096, n_trials=2)
    assert Fast.calls == [k.default_config(w, _target()), X] and o.winner == X


def test_another_gpus_winner_is_measured_even_with_no_budget_left(tmp_path, fast):
    """Out of budget a workload still measures the default and what won on another GPU (the
    cheapest likely gain); the rest of the warm start and any search wait for a later run."""
    from tuner.store import open_store

    store = open_store(str(tmp_path / "r.db"))
    k = registry.get("moe_routing")
    w = k.spec.workload(4096, "dsv3")
    _won_elsewhere(store, "NVIDIA H100 80GB HBM3", X, k.source_hash)
    _won_elsewhere(store, "NVIDIA B200", Y, k.source_hash)
    o = _tune(store, 4096, n_trials=8, budget_s=1e-6)
    assert len(Fast.calls) == 2 and Fast.calls[0] == k.default_config(w, _target())
    assert Fast.calls[1] in (X, Y) and o.winner == Fast.calls[1]


def test_a_winner_from_before_a_knob_existed_runs_with_the_defaults_value(tmp_path, fast):
    """Another GPU's winner of an earlier source that lacks a knob (here FUSED, which another
    knob's snap reads) is measured with that knob at the default's value, not a KeyError."""
    from tuner.store import open_store

    store = open_store(str(tmp_path / "r.db"))
    k = registry.get("moe_routing")
    w = k.spec.workload(4096, "dsv3")
    old = {n: v for n, v in X.items() if n != "FUSED"}
    _won_elsewhere(store, "NVIDIA H100 80GB HBM3", old)
    default = k.default_config(w, _target())
    _tune(store, 4096, n_trials=2)
    assert Fast.calls[0] == default
    assert Fast.calls[1] == k.canonical({**old, "FUSED": default["FUSED"]}, w, _target())


class Creeping(FakeWorker):
    """Every trial a hair faster than the last: 0.1%, inside its 1% noise band."""

    n = 0

    def evaluate(self, kernel, workload, config, seed):
        Creeping.n += 1
        t = 100.0 * (1 - 0.001 * Creeping.n)
        return TrialResult("ok", t, 0.99 * t, 1.01 * t, meaningful=False)


@pytest.mark.parametrize("ahead", [0, 2])
def test_patience_counts_only_improvements_beyond_the_noise(tmp_path, monkeypatch, ahead):
    import optuna
    from optuna.trial import TrialState

    import tuner.study
    from tuner.store import open_store

    monkeypatch.setattr(tuner.study, "Worker", Creeping)
    Creeping.n = 0
    store = open_store(str(tmp_path / "r.db"))
    o = _tune(store, 4096, n_trials=12, patience=3, ahead=ahead)
    assert o.evaluated == 4  # the first, then three that improve by less than the noise
    study = optuna.load_study(study_name=optuna.get_all_study_names(store.optuna_storage())[0],
                              storage=store.optuna_storage())
    states = [t.state for t in study.get_trials(deepcopy=False)]
    # the database's study holds the trials recorded; those asked ahead and never measured stay out
    assert TrialState.RUNNING not in states and TrialState.FAIL not in states
    with store.session() as s:
        assert len(states) == s.scalar(select(func.count()).select_from(Trial).where(Trial.phase == "search"))


def test_missing_entries_go_coarse_grid_first_family_by_family(tmp_path):
    from tuner import campaign
    from tuner.store import open_store

    ks = [registry.get("moe_routing"), registry.get("mhc")]
    plan = campaign.plan(open_store(str(tmp_path / "r.db")), [(k, list(k.workloads)) for k in ks])
    names = [it.kernel.name for it in plan]
    assert names == sorted(names, key=["moe_routing", "mhc"].index)
    for k in ks:
        coarse = [it.coarse for it in plan if it.kernel is k]
        assert coarse == sorted(coarse) and 0 < sum(coarse) < len(coarse)
    tokens = sorted({w.tokens for w in ks[0].workloads})
    firsts = {it.workload.tokens for it in plan if it.kernel is ks[0] and not it.coarse}
    assert firsts == set(tokens[::2])  # every other point of the axis; those between follow


def test_each_trial_records_its_phases_and_show_prints_median_and_p90(tmp_path, fast, capsys):
    from tuner import cost
    from tuner.store import open_store

    db = str(tmp_path / "r.db")
    store = open_store(db)
    _tune(store, 4096, n_trials=3)
    rows = cost.stored(store, "moe_routing")
    (gpu, phases), = rows.items()
    assert len(phases) == 3 and all(p["compile"] == 2.0 and p["timing"] == 0.5 and p["study"] > 0 for p in phases)
    assert main(["show", "moe-routing", "--db", db]) == 0
    out = capsys.readouterr().out
    assert f"trial cost by phase on {gpu}" in out
    line = next(ln for ln in out.splitlines() if ln.startswith("compile"))
    assert line.split()[1:3] == ["2.000", "2.000"]


def test_summarize_gives_median_p90_and_shares():
    rows = [{"compile": float(i), "timing": 1.0, "compiled": 1} for i in range(1, 11)]
    s = __import__("tuner.cost", fromlist=["summarize"]).summarize(rows)
    assert s["trials"] == 10 and s["compiled"] == 10 and s["cached"] == 0
    assert s["phases"]["compile"]["median"] == statistics.median(range(1, 11)) == 5.5
    assert s["phases"]["compile"]["p90"] == 9.0
    assert s["phases"]["compile"]["share"] == pytest.approx(55 / 65)
    assert s["phases"]["inputs"] == {"median": 0.0, "p90": 0.0, "share": 0.0}
    assert s["total"]["sum"] == 65.0


def test_the_worker_splits_a_trial_and_builds_inputs_once_per_seed(monkeypatch):
    """The evaluation as the worker process runs it (here in this process, through the interpreter)."""
    import dataclasses

    from tuner.spec import workload_dict
    from tuner.worker import _Evaluator

    k = registry.get("moe_routing")
    built = []

    def reference(**inputs):
        built.append(1)
        return k.spec.reference(**inputs)

    counted = dataclasses.replace(k, spec=dataclasses.replace(k.spec, reference=reference))
    monkeypatch.setattr(registry, "get", lambda name: counted)
    w = k.small_workloads[0]
    ev = _Evaluator()
    cfg = k.default_config(w, _target())
    first = ev.evaluate(k.name, workload_dict(w), cfg, 7, 3)
    again = ev.evaluate(k.name, workload_dict(w), cfg, 7, 3)
    assert first["status"] == again["status"] == "ok"
    p, q = first["phases"], again["phases"]
    assert p["inputs"] > 0 and p["reference"] > 0 and p["compile"] > 0 and p["timing"] > 0
    assert q["inputs"] == 0 and q["reference"] > 0 and built == [1]  # built once; the check itself remains
    ev.evaluate(k.name, workload_dict(w), cfg, 8, 3)
    assert built == [1, 1]  # another seed: its own inputs and reference
    assert p["work"] >= p["inputs"] + p["reference"] + p["compile"] + p["timing"]


def test_campaign_runs_its_worker_in_the_databases_cache_and_prints_the_phases(tmp_path, monkeypatch, capsys):
    import tuner.study

    seen: list[dict] = []

    class Kept(Fast):
        def __init__(self, timeout_s=0, reps=0, **options):
            seen.append(options)

    monkeypatch.setattr(tuner.study, "Worker", Kept)
    db = str(tmp_path / "r.db")
    assert main(["campaign", "--kernel", "moe-routing", "--trials", "2", "--limit", "1", "--db", db]) == 0
    assert seen == [{"cache_dir": db + ".triton-cache", "precision": 0.01}]
    out = capsys.readouterr().out
    assert "trial cost by phase" in out and "moe_routing: 1 workloads, " in out
    line = next(ln for ln in out.splitlines() if ln.startswith("[1/1] moe_routing"))  # no TTY: a line a workload
    assert re.search(r"2 trials \(\+2\).*; \d+\.\d s: compile 4\.0, .*timing 1\.0", line), line
    assert main(["campaign", "--ahead", "-1", "--db", db]) == 2
