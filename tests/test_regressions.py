"""Regression detection on synthetic histories, `tune regressions` exit codes, `tune revalidate`."""
from __future__ import annotations

import datetime as dt
import json
import shutil
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy import inspect, select

from tuner.cli.main import main
from tuner.dashboard.detect import detect_series, regressions
from tuner.dashboard.history import Point, Series, load_history
from tuner.runtime.target import INTERPRETER
from tuner.spec import TrialResult
from tuner.store import Environment, Run, TrialStatus, Winner, open_store
from tuner.store.db import head_revision
from tuner.store.models import Revalidation

FIXTURES = Path(__file__).parent / "fixtures"
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(FIXTURES))
import synthetic_history  # noqa: E402


def series(meds: list[float], spread: float = 0.02, upgrade_at: int | None = None, meaningful: bool = True) -> Series:
    pts = []
    for i, m in enumerate(meds):
        tri = "3.5.0" if upgrade_at is not None and i >= upgrade_at else "3.4.0"
        pts.append(Point(dt.datetime(2026, 11, 1) + dt.timedelta(days=i), i + 1, "tune", 1,
                         {"torch": "2.13.0", "triton": tri, "cuda": "12.8", "driver": "575.51", "python": "3.12"},
                         "src", "", {"BLOCK": 8}, m, m * (1 - spread), m * (1 + spread), m * 1.3, m * 0.4, meaningful))
    return Series("moe_routing", "tokens=64,profile=dsv3", {"tokens": 64, "profile": "dsv3"}, "NVIDIA H200", pts)


# -- detection ------------------------------------------------------------------------------
def test_a_real_step_is_flagged_where_it_happened_and_attributed():
    (c,) = detect_series(series([10.0, 10.1, 9.9, 10.0, 11.6, 11.5, 11.7], upgrade_at=4))
    assert c.index == 4 and c.confirmed and c.is_regression and not c.resolved
    assert c.change == pytest.approx(0.16, abs=0.02) and c.p_value < 0.01
    assert "triton 3.4.0 -> 3.5.0" in c.cause
    assert regressions([c]) == [c]


def test_noise_within_the_band_is_not_flagged():
    assert detect_series(series([10.0, 10.15, 9.9, 10.1, 9.85, 10.05, 10.2, 9.95])) == []


def test_a_single_outlier_is_not_a_regression():
    assert detect_series(series([10.0, 10.1, 9.9, 14.0, 10.0, 10.1, 9.95])) == []
    assert detect_series(series([10.0, 14.0, 10.0, 10.1])) == []


def test_a_jump_in_the_newest_point_only_is_unconfirmed():
    (c,) = detect_series(series([10.0, 10.1, 9.9, 10.0, 13.0]))
    assert not c.confirmed and c.kind == "unconfirmed regression"
    assert regressions([c]) == []
    (c1,) = detect_series(series([10.0, 10.1, 9.9, 10.0, 13.0]), min_points=1)
    assert c1.confirmed


def test_improvements_thresholds_and_resolved_regressions():
    (c,) = detect_series(series([10.0, 10.0, 10.1, 8.5, 8.4, 8.5]))
    assert c.kind == "improvement" and regressions([c]) == []
    assert detect_series(series([10.0, 10.1, 9.9, 10.8, 10.8, 10.9], spread=0.005), threshold=0.10) == []
    up, down = detect_series(series([10.0, 10.0, 10.1, 13.0, 13.1, 13.0, 10.0, 10.1, 9.9]))
    assert up.resolved and up.kind == "resolved regression" and down.kind == "improvement"
    assert regressions([up, down]) == []


def test_a_one_point_baseline_is_no_level_to_regress_from():
    """A step from a single first point (one short first tune) is shown, unconfirmed: it does
    not fail CI, as a single newest point does not."""
    (c,) = detect_series(series([3.21, 4.09, 4.01, 4.02, 3.99, 3.97, 4.06]))
    assert c.is_regression and not c.confirmed and regressions([c]) == []


def test_no_step_is_drawn_across_a_change_of_timing_method():
    from dataclasses import replace

    s = series([3.21, 3.2, 4.09, 4.01, 4.02, 3.99, 3.97, 4.06])
    assert regressions(detect_series(s))  # one method throughout: a step
    s.points[:2] = [replace(p, timing=1) for p in s.points[:2]]
    assert detect_series(s) == []  # the first points timed otherwise: nothing to compare them with
    # a step inside one method's stretch is still found, at its own index
    s2 = series([10.0, 10.1, 10.0, 10.1, 12.0, 12.1, 12.0, 12.1])
    s2.points[:2] = [replace(p, timing=1) for p in s2.points[:2]]
    (c,) = detect_series(s2)
    assert c.index == 4 and c.confirmed and c.is_regression


def test_timing_method_recorded_and_in_the_fingerprint_from_3_on(monkeypatch):
    import tuner.timing
    from tuner.dashboard.history import timing_method
    from tuner.device import fingerprint

    assert timing_method(Run(settings={})) == 2  # runs from before the key
    assert timing_method(Run(settings={"timing": 3})) == 3
    assert "timing" not in fingerprint()  # method 2: the environments already stored stay the same
    monkeypatch.setattr(tuner.timing, "TIMING_METHOD", 3)
    assert fingerprint()["timing"] == 3  # a bump starts new studies and winners


def test_interpreter_points_are_never_tested():
    assert detect_series(series([10.0, 10.0, 20.0, 20.0, 20.0], meaningful=False)) == []


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(-0.015, 0.015), min_size=2, max_size=16), st.floats(0.015, 0.03))
def test_property_jitter_inside_the_stored_band_is_never_a_change(jitter, spread):
    assert detect_series(series([10.0 * (1 + j) for j in jitter], spread=spread)) == []


@settings(max_examples=60, deadline=None)
@given(st.integers(2, 6), st.integers(2, 6), st.floats(0.12, 0.6), st.booleans())
def test_property_a_step_well_beyond_the_band_is_found(n_before, n_after, size, slower):
    f = 1 + size if slower else 1 / (1 + size)
    found = detect_series(series([10.0] * n_before + [10.0 * f] * n_after))
    assert [(c.index, c.confirmed, c.is_regression) for c in found] == [(n_before, True, slower)]


# -- history from the store -----------------------------------------------------------------
@pytest.fixture
def planted(tmp_path) -> tuple[str, dict]:
    db = str(tmp_path / "history.db")
    facts = synthetic_history.build(open_store(db))
    return db, facts


def test_history_spans_runs_revalidations_and_software_versions(planted):
    db, facts = planted
    hist = {(s.kernel, s.workload_key): s for s in load_history(open_store(db))}
    assert set(hist) == set(facts["workloads"])
    s = hist[facts["regression"]]
    assert [p.kind for p in s.points] == ["tune"] * 4 + ["revalidate"] * 2
    assert {p.versions["triton"] for p in s.points} == {"3.4.0", "3.5.0"}
    assert all(p.default_us and p.default_us > p.median_us for p in s.points)  # the default's time is known
    found = [(c.kernel, c.workload_key) for c in regressions(c for x in hist.values() for c in detect_series(x))]
    assert found == [facts["regression"]]  # not the outlier, not the improvement


# -- `tune regressions` ----------------------------------------------------------------------
def test_regressions_exit_codes(planted, tmp_path, capsys):
    db, facts = planted
    assert main(["regressions", "--db", db]) == 1
    out = capsys.readouterr().out
    assert "1 regression" in out and "tokens=64" in out and "tokens=512" not in out
    assert main(["regressions", "--db", db, "--since", "2026-11-05"]) == 0  # the step was on 11-04
    assert main(["regressions", "--db", db, "--since", "2026-11-04"]) == 1
    assert main(["regressions", "--db", db, "--since", "87600h"]) == 1  # an age: no cap as for a timeout
    assert main(["regressions", "--db", db, "--threshold", "25%"]) == 0
    assert main(["regressions", "--db", db, "--kernel", "mhc"]) == 0
    capsys.readouterr()
    assert main(["regressions", "--db", db, "--min-points", "50"]) == 0  # the step, not confirmed by 50 points
    out = " ".join(capsys.readouterr().out.split())
    assert "unconfirmed: moe_routing tokens=64,profile=dsv3" in out
    assert "`tune revalidate --kernel moe-routing --workload tokens=64,profile=dsv3` on that GPU" in out
    clean = str(tmp_path / "clean.db")
    synthetic_history.build(open_store(clean), plant=False)
    capsys.readouterr()
    assert main(["regressions", "--db", clean]) == 0
    assert "no regressions" in capsys.readouterr().out
    for bad, needle in ((["--threshold", "lots"], "bad value"), (["--since", "yesterday-ish"], "bad date"),
                        (["--min-points", "0"], "at least 1")):
        assert main(["regressions", "--db", db, *bad]) == 2
        err = capsys.readouterr().err.strip()
        assert needle in err and len(err.splitlines()) == 1
    assert main(["regressions", "--db", str(tmp_path / "absent.db")]) == 2


# -- schema -----------------------------------------------------------------------------------
def test_golden_first_schema_database_gains_the_revalidations_table(tmp_path):
    db = tmp_path / "old.db"
    shutil.copy(FIXTURES / "results-0001.db", db)
    store = open_store(str(db))
    assert "tuner_revalidations" in inspect(store.engine).get_table_names()
    with store.engine.connect() as c:
        assert c.exec_driver_sql("SELECT version_num FROM tuner_alembic_version").scalar() == head_revision()


# -- `tune revalidate` ------------------------------------------------------------------------
class FakeWorker:
    """Stands in for tuner.worker.Worker: times from a table keyed by a config's num_warps."""

    times: dict[int, float] = {}
    fail: set[int] = set()

    def __init__(self, timeout_s: float = 120.0, reps: int = 100) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        pass

    def evaluate(self, kernel, workload, config, seed) -> TrialResult:
        nw = config["num_warps"]
        if nw in self.fail:
            return TrialResult("mismatch", error="max error 3.1 > tolerance")
        m = self.times[nw]
        return TrialResult("ok", m, m * 0.99, m * 1.01, None, True)

    def retime(self, kernel, workload, configs, rounds, seed):
        return [[[self.times[c["num_warps"]] * f, self.times[c["num_warps"]] * f * 0.99,
                  self.times[c["num_warps"]] * f * 1.01] for f in (1.0, 1.002, 0.998)[:rounds]] for c in configs]


def _one_winner(db: str, gpu: str = "cpu-interpreter") -> dict:
    """A tuned moe_routing entry (tokens=3, dsv3) tuned on ``gpu`` at 10 us, default 13 us."""
    from tuner import registry
    from tuner.device import fingerprint
    from kernel_templates.moe_routing import Workload

    k = registry.get("moe_routing")
    default = k.default_config(Workload(3, "dsv3"), INTERPRETER)
    winner = dict(default, num_warps=2 if default["num_warps"] != 2 else 1)
    store = open_store(db)
    with store.session() as s:
        env = Environment(fingerprint_hash="here" if gpu == "cpu-interpreter" else "there", gpu=gpu, cc="",
                          fingerprint={**fingerprint(), "gpu": gpu})
        s.add(env)
        s.flush()
        run = Run(kind="tune", kernel="moe_routing", environment_id=env.id, source_hash=k.source_hash, settings={},
                  status="done")
        s.add(run)
        s.flush()
        s.add(Winner(kernel="moe_routing", workload_key="tokens=3,profile=dsv3", workload={"tokens": 3, "profile": "dsv3"},
                     environment_id=env.id, source_hash=k.source_hash, run_id=run.id, config=winner, is_default=False,
                     median_us=10.0, p20_us=9.9, p80_us=10.1, default_median_us=13.0, floor_us=None, noise=0.01,
                     meaningful=True))
        s.commit()
    return {"default": default, "winner": winner}


def test_revalidate_reports_stale_entries_and_records_a_run(tmp_path, monkeypatch, capsys):
    import tuner.revalidate as rv

    db = str(tmp_path / "r.db")
    cfg = _one_winner(db)
    monkeypatch.setattr(rv, "Worker", FakeWorker)
    store = open_store(db)
    entries = rv.entries_from_store(store, "cpu-interpreter")
    assert len(entries) == 1
    # the winner lost to the default (now faster by far more than the noise)
    FakeWorker.times = {cfg["winner"]["num_warps"]: 10.0, cfg["default"]["num_warps"]: 8.0}
    rep = rv.revalidate(store, entries, rounds=3)
    (r,) = rep.results
    assert r.verdict == "stale" and "no longer wins" in r.reason and "default" in r.reason
    # the winner got slower than tuned beyond its band
    FakeWorker.times = {cfg["winner"]["num_warps"]: 12.0, cfg["default"]["num_warps"]: 15.0}
    (r,) = rv.revalidate(store, entries, rounds=3).results
    assert r.verdict == "stale" and "20% slower than tuned" in r.reason
    # as tuned, within the noise
    FakeWorker.times = {cfg["winner"]["num_warps"]: 10.05, cfg["default"]["num_warps"]: 13.0}
    (r,) = rv.revalidate(store, entries, rounds=3).results
    assert r.verdict == "ok", r.reason
    # the winner no longer verifies
    FakeWorker.fail = {cfg["winner"]["num_warps"]}
    try:
        (r,) = rv.revalidate(store, entries, rounds=3).results
    finally:
        FakeWorker.fail = set()
    assert r.verdict == "broken" and "mismatch" in r.reason
    with store.session() as s:
        runs = s.scalars(select(Run).where(Run.kind == "revalidate")).all()
        rows = s.scalars(select(Revalidation).order_by(Revalidation.id)).all()
    assert len(runs) == 4 and all(x.status == "done" for x in runs)
    assert all(x.settings["timing"] == 2 for x in runs)  # the timing method is recorded
    assert [x.role for x in rows[:2]] == ["winner", "default"] and rows[0].stored_median_us == 10.0
    assert [x.verdict for x in rows if x.role == "winner"] == ["stale", "stale", "ok", "broken"]
    # the CLI prints the verdicts and exits 0 (regressions, not revalidate, gate CI)
    FakeWorker.times = {cfg["winner"]["num_warps"]: 10.0, cfg["default"]["num_warps"]: 8.0}
    assert main(["revalidate", "--db", db]) == 0
    out = capsys.readouterr().out
    assert "stale" in out and "tokens=3,profile=dsv3" in out
    # the revalidations are history points
    (s,) = load_history(store)
    assert [p.kind for p in s.points] == ["revalidate"] * 4  # the broken one measured nothing
    # --kernel / --workload pick entries: a matching one is re-timed, none matching is an error
    assert main(["revalidate", "--db", db, "--kernel", "moe-routing", "--workload", "tokens=3,profile=dsv3"]) == 0
    assert len(load_history(store)[0].points) == 5
    assert main(["revalidate", "--db", db, "--workload", "tokens=3.0"]) == 2  # an int axis: 3.0 is no count
    assert main(["revalidate", "--db", db, "--workload", "profile=dsv3"]) == 0
    for args, needle in ((["--kernel", "mhc"], "no entry matches"), (["--workload", "tokens=4"], "no entry matches"),
                         (["--workload", "tokens"], "not axis=value"), (["--kernel", "nosuch"], "unknown kernel"),
                         (["--kernel", "moe-routing", "--workload", "token=3"], "no axis token")):
        capsys.readouterr()
        assert main(["revalidate", "--db", db, *args]) == 2
        err = capsys.readouterr().err.strip()
        assert needle in err and len(err.splitlines()) == 1, err


def test_revalidate_errors_are_one_line(tmp_path, capsys):
    db = str(tmp_path / "empty.db")
    open_store(db)
    assert main(["revalidate", "--db", db]) == 2
    assert "nothing to revalidate" in capsys.readouterr().err
    assert main(["revalidate", "--db", db, "--pack", str(tmp_path / "nope")]) == 2
    assert "no manifest.json" in capsys.readouterr().err
    from tuner.timing import gpu_available

    if not gpu_available():  # an H200 pack's workloads are GPU-sized: hours through the interpreter
        assert main(["revalidate", "--db", db, "--pack", str(ROOT / "packs" / "nvidia-h200")]) == 2
        err = capsys.readouterr().err.strip()
        assert "no GPU here: these are NVIDIA H200 entries" in err and len(err.splitlines()) == 1, err


def test_export_prefers_the_gpu_winners_to_a_newer_interpreter_run(tmp_path):
    """A quickstart run on a CPU machine adds an interpreter environment to a database of GPU
    winners; a plain export still exports the GPU's (the interpreter's with --gpu)."""
    from tuner.pack import export_pack

    db = str(tmp_path / "r.db")
    _one_winner(db, gpu="NVIDIA H200")
    _one_winner(db)  # cpu-interpreter, newer
    store = open_store(db)
    gpu_of = lambda p: json.loads((p / "manifest.json").read_text())["fingerprint"]["gpu"]  # noqa: E731
    assert gpu_of(export_pack(store, tmp_path / "a")) == "NVIDIA H200"
    assert gpu_of(export_pack(store, tmp_path / "b", gpu="cpu-interpreter")) == "cpu-interpreter"


def test_export_replaces_its_pack_but_drops_no_kernel_unasked(tmp_path):
    """A pack of the same GPU is replaced (the files it listed that the new one does not are
    removed, others kept); `--kernel` onto a pack of the same environment keeps its other
    tables; an export that would drop a kernel the pack holds is refused unless forced."""
    from tuner.pack import ExportError, export_pack

    store = open_store(str(tmp_path / "h.db"))
    synthetic_history.build(store)
    out = export_pack(store, tmp_path / "pack")
    both = set(json.loads((out / "manifest.json").read_text())["kernels"])
    assert {"mhc", "moe_routing"} <= both
    (out / "README.txt").write_text("notes")
    # --kernel onto a pack of the same environment: that kernel's table is replaced, the others kept
    moe = (out / "moe_routing.json").read_bytes()
    export_pack(store, out, kernels=["mhc"])
    assert set(json.loads((out / "manifest.json").read_text())["kernels"]) == both
    assert (out / "moe_routing.json").read_bytes() == moe
    from tuner.runtime import load_pack

    assert set(load_pack(out, allow_other_gpu=True).tables) == both  # checksums carried over: it loads
    # a pack of another environment (same GPU) is not merged into: refused unless forced
    m = json.loads((out / "manifest.json").read_text())
    m["fingerprint"]["driver"] = "999.0"
    (out / "manifest.json").write_text(json.dumps(m))
    with pytest.raises(ExportError, match="moe_routing too"):
        export_pack(store, out, kernels=["mhc"])
    assert (out / "moe_routing.json").exists()
    export_pack(store, out, kernels=["mhc"], force=True)
    assert set(json.loads((out / "manifest.json").read_text())["kernels"]) == {"mhc"}
    assert not (out / "moe_routing.json").exists() and (out / "README.txt").exists()
    export_pack(store, out)  # every kernel again: nothing dropped, no force needed
    assert set(json.loads((out / "manifest.json").read_text())["kernels"]) == both


def test_pack_entries_are_keyed_as_the_database_keys_them(tmp_path):
    """A pack file stores workloads with sorted keys (profile, tokens); its revalidation must
    join the tune history's series (tokens=3,profile=dsv3), or a regression could never be
    confirmed or cleared by `tune revalidate --pack`."""
    from tuner.pack import export_pack
    from tuner.revalidate import entries_from_pack

    db = str(tmp_path / "r.db")
    _one_winner(db)
    pack = export_pack(open_store(db), tmp_path / "pack")
    assert list(json.loads((pack / "moe_routing.json").read_text())["entries"][0]["workload"]) == ["profile", "tokens"]
    (e,) = entries_from_pack(pack)
    assert e.workload_key == "tokens=3,profile=dsv3"


def test_revalidate_a_pack_through_the_real_worker_in_the_interpreter(tmp_path):
    """moe_routing on a tiny workload: compiled, verified and timed in the isolated worker."""
    from tuner.pack import export_pack
    from tuner.revalidate import entries_from_pack, revalidate

    db = str(tmp_path / "r.db")
    _one_winner(db)
    store = open_store(db)
    pack = export_pack(store, tmp_path / "pack")
    rep = revalidate(store, entries_from_pack(pack), rounds=1, n_runners_up=0, timeout_s=600, pack=str(pack))
    (r,) = rep.results
    assert r.verdict == "unchecked" and "interpreter" in r.reason  # correct, but times are not GPU times
    assert [t.result.status for t in r.timed] == ["ok", "ok"]
    with store.session() as s:
        rows = s.scalars(select(Revalidation)).all()
    assert {x.role for x in rows} == {"winner", "default"} and all(x.status == TrialStatus.ok for x in rows)


def test_verify_names_a_pack_config_that_lacks_a_parameter_added_since(tmp_path, monkeypatch):
    """A pack exported before its space gained a parameter no longer describes how to run it:
    verify-pack names the entry (outside the search space, the missing knob named)."""
    from tuner import registry
    from tuner.pack import export_pack, verify_pack
    from tuner.space import Choice

    db = str(tmp_path / "r.db")
    _one_winner(db)
    out = export_pack(open_store(db), tmp_path / "pack")
    assert verify_pack(out).problems == []
    space = registry.kernels()["moe_routing"].space
    monkeypatch.setitem(space, "NEW_KNOB", Choice((0, 1)))
    assert any("outside the search space" in p and "NEW_KNOB missing" in p for p in verify_pack(out).problems)


def test_export_leaves_out_winners_outside_todays_space(tmp_path, capsys):
    """A winner tuned on an older source whose config lacks a parameter added since (or holds a
    value dropped since) is left out of the pack and named in the manifest; the pack verifies."""
    from tuner.pack import ExportError, export_pack, verify_pack

    db = str(tmp_path / "r.db")
    _one_winner(db)
    store = open_store(db)
    with store.session() as s:
        w = s.scalars(select(Winner)).one()
        s.add(Winner(kernel="moe_routing", workload_key="tokens=5,profile=dsv3", workload={"tokens": 5, "profile": "dsv3"},
                     environment_id=w.environment_id, source_hash="older", run_id=w.run_id,
                     config={k: v for k, v in w.config.items() if k != "num_stages"}, is_default=False,
                     median_us=10.0, p20_us=9.9, p80_us=10.1, default_median_us=13.0, floor_us=None, noise=0.01,
                     meaningful=True))
        s.commit()
    out = export_pack(store, tmp_path / "pack")
    m = json.loads((out / "manifest.json").read_text())
    assert m["kernels"]["moe_routing"]["entries"] == 1
    assert m["kernels"]["moe_routing"]["left_out_outside_space"] == ["tokens=5,profile=dsv3"]
    assert m["left_out_outside_space"] == {"moe_routing": ["tokens=5,profile=dsv3"]}
    assert verify_pack(out).problems == []
    with store.session() as s:  # every winner outside the space: a clear error, not an empty pack
        for w in s.scalars(select(Winner)).all():
            w.config = {k: v for k, v in w.config.items() if k != "num_stages"}
        s.commit()
    with pytest.raises(ExportError, match="retune moe_routing"):
        export_pack(store, tmp_path / "pack2")
