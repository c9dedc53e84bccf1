"""benchmarks/config_sweep.py without a GPU: its arguments, its table, and the one-line exit."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

from benchmarks.config_sweep import parse_args, resolve, summarize, table
from tuner.runtime.target import INTERPRETER

ROOT = Path(__file__).resolve().parent.parent


def test_parse_args_rejects_bad_input(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        parse_args(["sparse_mqa", "--workload", "batch=1", "--config", "LAUNCH_PDL"])
    assert e.value.code == 2
    assert "KEY=VALUE" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        parse_args(["sparse_mqa", "--workload", "batch=1", "--rounds", "0"])
    a = parse_args(["sparse_mqa", "--workload", "batch=1", "--config", "A=1", "--config", "B=true,C=x"])
    assert a.config == ["A=1", "B=true,C=x"] and a.rounds == 5


def test_summarize_and_table() -> None:
    assert summarize([3.0, 1.0, 2.0]) == {"median_us": 2.0, "min_us": 1.0, "max_us": 3.0}
    rows = [dict(label="base (tuned)", status="ok", **summarize([200.0, 210.0, 205.0])),
            dict(label="LAUNCH_PDL=true", status="ok", **summarize([160.0, 164.0, 170.0])),
            dict(label="TOPK_SPLITS=3", status="mismatch", error="indices differ at row 0\nmore")]
    lines = table(rows)
    assert lines[0].split()[:3] == ["config", "median", "us"]
    assert lines[1].split()[-3:] == ["205.0", "200.0-210.0", "1.000"]
    assert lines[2].split()[-3:] == ["164.0", "160.0-170.0", "1.250"]  # 205 / 164
    assert "mismatch: indices differ at row 0" in lines[3]


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message printed without a GPU")
def test_no_gpu_exits_2_in_one_line(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from benchmarks import config_sweep

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert config_sweep.main(["sparse_mqa", "--workload", "batch=1,context=300,next_n=1,profile=dsv32"]) == 2
    assert capsys.readouterr().err.strip() == "config_sweep needs a GPU"


def test_resolve_bases_and_overrides() -> None:
    a = parse_args(["sparse_mqa", "--workload", "batch=1,context=300,next_n=1,profile=dsv32",
                    "--config", "LAUNCH_PDL=true,TOPK_SPLITS=2"])
    spec, w, configs = resolve(a)
    assert spec.name == "sparse_mqa" and w.context == 300
    (label0, base), (label1, over) = configs
    assert label0 == "base (default)" and base == spec.default_config(w, INTERPRETER)
    assert over == dict(base, LAUNCH_PDL=True, TOPK_SPLITS=2)


@pytest.mark.parametrize("argv, msg", [
    (["no_such_kernel", "--workload", "batch=1"], "no_such_kernel"),
    (["sparse_mqa", "--workload", "batch=1,context=300,next_n=1,profil=dsv32"], "profil"),
    (["sparse_mqa", "--workload", "batch=1,context=300,next_n=1,profile=dsv32", "--config", "TOPK_SPLIT=2"],
     "TOPK_SPLIT: not a config key"),
    (["sparse_mqa", "--workload", "batch=1,context=300,next_n=1,profile=dsv32", "--pack", "/nonexistent/pack"],
     "/nonexistent/pack"),
])
def test_resolve_bad_input_one_line(argv: list[str], msg: str) -> None:
    with pytest.raises(ValueError, match=msg) as e:
        resolve(parse_args(argv))
    assert "\n" not in str(e.value)


def test_bad_input_exits_2_in_one_line_without_traceback() -> None:
    r = subprocess.run([sys.executable, "benchmarks/config_sweep.py", "sparse_mqa", "--workload",
                        "batch=1,context=300,next_n=1,profile=dsv32", "--config", "TOPK_SPLIT=2"],
                       cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 2
    assert r.stderr.strip() == "config_sweep: --config: TOPK_SPLIT: not a config key of sparse_mqa"


def test_main_verifies_and_times_in_the_worker(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    """The whole sweep through the tuner's worker (here on the interpreter, the GPU check faked): the
    base and a good override verified and timed in every round, a config that cannot launch reported
    and never timed, the raw JSON written."""
    import json

    from benchmarks import config_sweep

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: "interpreter")
    rc = config_sweep.main(["sparse_mqa", "--workload", "batch=1,context=300,next_n=1,profile=dsv32",
                            "--config", "NUM_SPLITS=2", "--config", "BLOCK_N=8", "--rounds", "2",
                            "--out", str(tmp_path)])
    assert rc == 0
    out = capsys.readouterr().out
    assert "2 of 3 configs verified and timed, 2 interleaved rounds" in out
    rows = json.loads(next(tmp_path.glob("config_sweep-sparse_mqa-*.json")).read_text())["results"]
    assert [r["status"] for r in rows[:2]] == ["ok", "ok"] and rows[1]["config"]["NUM_SPLITS"] == 2
    assert all(len(r["rounds_us"]) == 2 and r["min_us"] <= r["median_us"] <= r["max_us"] for r in rows[:2])
    assert rows[2]["status"] != "ok" and "BLOCK_N" in rows[2]["error"] and rows[2]["rounds_us"] == []
    # a config outside the space is swept but named as one the tuner would not pick (a sweep's winner
    # there cannot become a pack entry)
    assert "BLOCK_N=8: the tuner would not pick it: outside the search space (BLOCK_N=8)" in out
    assert rows[2]["tuner_refuses"].startswith("outside the search space") and "tuner_refuses" not in rows[0]
