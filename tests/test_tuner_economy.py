"""benchmarks/tuner_economy.py's replay, on a synthetic exhaustive table and on the H100's.

The synthetic table comes from an analytic model of a tiled kernel (``_model``): a block
size, a warp count and a split factor each cost a factor that grows with the square of their
log2 distance from a best value, and the best split grows with the workload's size (as a
split-K kernel's does with K), so neighbouring workloads' winners are near one another but
not equal; a few combinations exceed a resource limit and fail, as an out-of-resources trial
does. The measured tables (``--measure`` on an H100) are replayed in a small slice.
"""
from __future__ import annotations

import importlib.util
import itertools
import json
import math
import sys

import pytest
from conftest import ROOT

spec = importlib.util.spec_from_file_location("tuner_economy", ROOT / "benchmarks" / "tuner_economy.py")
econ = importlib.util.module_from_spec(spec)
sys.modules["tuner_economy"] = econ
spec.loader.exec_module(econ)

KNOBS = {"BLOCK": [1, 2, 4, 8, 16, 32], "WARPS": [1, 2, 4, 8], "SPLIT": [1, 2, 4, 8, 16]}


def _model(size: int, cfg: dict) -> float | None:
    """Microseconds of the synthetic kernel on a workload of ``size`` (None: out of resources)."""
    if cfg["BLOCK"] * cfg["WARPS"] > 128:
        return None
    best_split = 2 * size
    f = lambda v, best, w: 1 + (math.log2(v) - math.log2(best)) ** 2 / w  # noqa: E731
    return round(10.0 * size * f(cfg["BLOCK"], 8, 6) * f(cfg["WARPS"], 4, 4) * f(cfg["SPLIT"], best_split, 3), 4)


def _table(size: int) -> dict:
    configs = [dict(zip(KNOBS, c)) for c in itertools.product(*KNOBS.values())]
    default = {"BLOCK": 1, "WARPS": 1, "SPLIT": 1}
    return {"kernel": "synthetic", "workload": {"size": size}, "knobs": list(KNOBS), "values": KNOBS,
            "base": default, "default": default,
            "results": [{"config": c, "median_us": _model(size, c), "status": "ok" if _model(size, c) else
                         "out_of_resources"} for c in configs]}


@pytest.fixture(scope="module")
def tables() -> list[dict]:
    return [_table(size) for size in (1, 2, 4)]


def test_replay_counts_trials_to_within_3_percent(tables):
    t = tables[0]
    best = min(r["median_us"] for r in t["results"] if r["median_us"])
    assert best == _model(1, {"BLOCK": 8, "WARPS": 4, "SPLIT": 2})
    # the neighbours' winners as the start: the second trial (after the default) is within 3%
    start = econ.neighbours_best(tables, t)
    assert start == [{"BLOCK": 8, "WARPS": 4, "SPLIT": 4}, {"BLOCK": 8, "WARPS": 4, "SPLIT": 8}]
    assert _model(1, start[0]) > best * 1.03 and econ.replay(t, "tpe", 0, start) >= 2
    # a table whose default is the best is done in one trial, whatever the sampler
    fast = dict(t, results=[dict(r, median_us=0.5) if r["config"] == t["default"] else r for r in t["results"]])
    assert econ.replay(fast, "random", 3) == 1


def test_economy_table_and_json(tables, tmp_path, capsys):
    path = tmp_path / "synthetic.json"
    path.write_text(json.dumps({"gpu": "model", "tables": tables}))
    assert econ.main(["--table", str(path), "--samplers", "random,tpe,transfer", "--seeds", "20"]) == 0
    out = capsys.readouterr().out
    result = json.loads((tmp_path / "synthetic-replay.json").read_text())
    rows = {r["sampler"]: r for r in result["rows"]}
    assert set(rows) == {"random", "tpe", "transfer"} and all(r["runs"] == 60 and r["missed"] == 0 for r in rows.values())
    size = len(tables[0]["results"])
    assert all(1 <= r["median"] <= r["worst"] <= size for r in rows.values())
    # a model of the space beats blind search on a smooth one (where the neighbours' winners start it,
    # TPE's few good points keep it near them: on this model the start does not pay; measured, not assumed)
    assert rows["tpe"]["median"] < rows["random"]["median"] and rows["tpe"]["worst"] < rows["random"]["worst"]
    assert "trials to within 3%" in out and out.count("synthetic") >= 3


def test_bad_arguments_exit_2(tmp_path):
    for args in (["--seeds", "0"], ["--samplers", "annealing"], ["--table", str(tmp_path / "none.json")]):
        with pytest.raises(SystemExit) as e:
            econ.main(args)
        assert e.value.code == 2


def test_measure_subspaces_name_knobs_of_each_space():
    from tuner import registry
    from tuner.runtime.target import Target
    from tuner.spec import workload_from_dict

    for name, knobs in econ.SUBSPACES.items():
        k = registry.get(name)
        assert set(knobs) <= set(k.space), name
        wl = workload_from_dict(k.spec.workload, econ.WORKLOADS[name][0])
        base, configs = econ.subspace(k, wl, Target.named("sm_90"), knobs)
        assert 8 <= len(configs) <= 400 and configs[0] == base, (name, len(configs))


def test_stored_tables_resume_whatever_order_the_json_keeps_the_axes_in():
    # the table file is written with sorted keys: mhc's workload comes back as dim, op, tokens
    a = {"kernel": "mhc", "workload": {"op": "seam", "tokens": 64, "dim": 5120},
         "results": [{"config": {"BLOCK_T": 16}, "median_us": 5.0}]}
    b = json.loads(json.dumps({**a, "results": [{"config": {"BLOCK_T": 16}, "median_us": 6.0},
                                                {"config": {"BLOCK_T": 32}, "median_us": 7.0}]}, sort_keys=True))
    assert list(b["workload"]) == ["dim", "op", "tokens"]
    index = econ.index_tables([a, b])
    assert list(index) == [("mhc", "op=seam,tokens=64,dim=5120")]
    assert [r["median_us"] for r in index["mhc", "op=seam,tokens=64,dim=5120"]["results"]] == [5.0, 7.0]


def test_incomplete_tables_are_left_out_of_the_replay(tables, tmp_path, capsys):
    # a table measured in part (the GPU's time ran out) names how many configs its subspace has
    part = dict(_table(8), configs=len(tables[0]["results"]))
    part["results"] = part["results"][:10]
    whole = [dict(t, configs=len(t["results"])) for t in tables[:2]]
    path = tmp_path / "partial.json"
    path.write_text(json.dumps({"gpu": "model", "tables": [*whole, part, tables[2]]}))
    assert econ.main(["--table", str(path), "--samplers", "random", "--seeds", "2"]) == 0
    out = capsys.readouterr().out
    assert out.count("leaving out") == 1 and "leaving out synthetic size=8: 10 of 120 configs measured" in out
    result = json.loads((tmp_path / "partial-replay.json").read_text())
    assert result["tables"] == 3 and result["rows"][0]["runs"] == 6 and result["rows"][0]["configs"] == [120] * 3


H100 = ROOT / "benchmarks" / "results" / "economy" / "nvidia-h100-80gb-hbm3.json"


def test_replay_of_the_h100_tables():
    # nvfp4_attention: on the two batch-16 workloads the other's winner (the nearest neighbour)
    # is the exhaustive best, on the batch-64 one the default is
    tables = [t for t in json.loads(H100.read_text())["tables"] if t["kernel"] == "nvfp4_attention"]
    assert len(tables) == 3 and all(econ.complete(t) and len(t["results"]) == t["configs"] for t in tables)
    result = econ.economy(tables, ["tpe", "transfer"], 3)
    rows = {r["sampler"]: r for r in result["rows"]}
    assert rows["tpe"]["configs"] == rows["transfer"]["configs"] == [42, 42, 57]
    # every search gets within 3% of the best inside the table's size
    assert all(r["runs"] == 9 and r["missed"] == 0 and 1 <= r["median"] <= r["worst"] <= 57 for r in rows.values())
    # the transfer start: the default, then the neighbours' winners, whatever the seed
    assert [econ.replay(t, "transfer", s, econ.neighbours_best(tables, t)) for t in tables for s in (0, 1)] == \
        [2, 2, 2, 2, 1, 1]
    assert rows["transfer"]["worst"] == 2 and rows["transfer"]["worst"] < rows["tpe"]["worst"]


def test_a_neighbours_winner_starts_the_search_as_this_workloads_space_runs_it(tables):
    # a winner carries knobs the subspace does not vary, at other values than this table's base: the study
    # runs it over this workload's space, so the replay projects it onto the base instead of dropping it
    t = tables[0]
    best = min((r for r in t["results"] if r["median_us"]), key=lambda r: r["median_us"])["config"]
    assert econ.replay(t, "transfer", 0, [dict(best, NOT_VARIED=7)]) == 2
