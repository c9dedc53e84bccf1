"""The `tune` command line as a newcomer meets it: folders of packs, the database named by
$TUNER_DB, workloads no config runs, empty paths, option checks before any lookup, help text."""
from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

import pytest

from tuner.cli.main import main

ROOT = Path(__file__).resolve().parents[1]


def tune(*args: str) -> int:
    return main(list(args))


def _one_line(capsys, *needles: str) -> str:
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    for n in needles:
        assert n in err, err
    return err


def test_verify_pack_checks_every_pack_of_a_folder(tmp_path, capsys):
    packs = tmp_path / "packs"
    shutil.copytree(ROOT / "packs", packs)
    assert tune("verify-pack", str(packs)) == 0
    out = capsys.readouterr().out
    assert str(packs / "nvidia-h100") in out and str(packs / "nvidia-h200") in out and out.count("ok") >= 2
    table = packs / "nvidia-h200" / "moe_routing.json"
    data = bytearray(table.read_bytes())
    data[100] ^= 1  # one byte of the pack a runtime here would not choose
    table.write_bytes(bytes(data))
    assert tune("verify-pack", str(packs)) == 2
    _one_line(capsys, "1 of 2 packs", "nvidia-h200: checksum mismatch for moe_routing.json")


def test_commands_running_no_kernel_of_a_pack_do_not_warn_about_its_gpu(capsys, caplog):
    with caplog.at_level(logging.WARNING, logger="tuner.runtime"):
        assert tune("verify-pack", str(ROOT / "packs" / "nvidia-h100")) == 0
        assert tune("revalidate", "--pack", str(ROOT / "packs" / "nvidia-h100"), "--workload", "tokens=5") == 2
    _one_line(capsys, "no entry matches")
    assert not [r.getMessage() for r in caplog.records if r.name == "tuner.runtime"]


def test_show_names_the_database_it_read(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.delenv("TUNER_DB", raising=False)
    assert tune("show", "moe-routing") == 0  # unset: the shipped history, and said so
    first = capsys.readouterr().out.splitlines()[0]
    assert first.startswith("database: sqlite:///") and "shipped history" in first, first


def test_an_explicit_tuner_db_is_taken_as_db_is(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("TUNER_DB", str(tmp_path / "typo.db"))
    for args in (["show", "moe-routing"], ["regressions"], ["dashboard", "--out", str(tmp_path / "r.html")]):
        assert tune(*args) == 2, args
        _one_line(capsys, f"no database at {tmp_path / 'typo.db'} ($TUNER_DB)")
    missing = tmp_path / "no" / "dir"
    monkeypatch.setenv("TUNER_DB", str(missing / "x.db"))
    assert tune("moe-routing", "--trials", "1") == 2
    _one_line(capsys, f"no folder {missing}")
    monkeypatch.delenv("TUNER_DB")
    assert tune("moe-routing", "--trials", "1", "--db", str(missing / "y.db")) == 2
    _one_line(capsys, f"no folder {missing}")
    assert not (tmp_path / "no").exists()


def test_a_workload_whose_default_the_constraints_refuse_is_an_error(tmp_path, capsys):
    db = tmp_path / "r.db"
    assert tune("nvfp4-attention", "--page", "3", "--batch", "1", "--context", "64", "--heads", "16",
                "--kv-dtype", "nvfp4", "--mode", "dense", "--trials", "1", "--db", str(db)) == 2
    _one_line(capsys, "nvfp4_attention batch=1,context=64,heads=16,kv_dtype=nvfp4,mode=dense,page=3",
              "refused by the search space's constraints")
    assert tune("sparse-mqa", "--next-n", "100", "--trials", "1", "--db", str(db)) == 2
    _one_line(capsys, "sparse_mqa", "next_n=100", "refused by")
    assert not db.exists()  # nothing tuned, nothing opened


def _fake_tuner(monkeypatch, outcomes):
    import tuner.cli.tune as T

    class FakeTuner:
        def __init__(self, store, kernel, settings, on_event):
            pass

        def run(self, workloads):
            return outcomes(workloads)

    monkeypatch.setattr(T, "Tuner", FakeTuner)


def test_summary_names_no_winner_where_nothing_was_measured(tmp_path, monkeypatch, capsys):
    from tuner.study import Outcome

    _fake_tuner(monkeypatch, lambda ws: [Outcome("tokens=3,profile=dsv3", 0)])
    assert tune("moe-routing", "--tokens", "3", "--profile", "dsv3", "--db", str(tmp_path / "r.db")) == 0
    row = next(ln for ln in capsys.readouterr().out.splitlines() if "tokens=3" in ln and "(+0)" in ln)
    assert "default" not in row and row.rstrip("│ ").endswith("-"), row


def test_the_interpreter_note_says_when_a_workload_is_large(tmp_path, monkeypatch, capsys):
    _fake_tuner(monkeypatch, lambda ws: [])
    db = str(tmp_path / "r.db")
    assert tune("moe-routing", "--tokens", "3", "--profile", "dsv3", "--db", db) == 0
    out = capsys.readouterr().out
    assert "on small workloads" in out and "large for the interpreter" not in out
    assert tune("moe-routing", "--tokens", "8192", "--profile", "dsv3", "--db", db) == 0
    out = capsys.readouterr().out
    assert "on small workloads" not in out
    assert "tokens=8192,profile=dsv3 is large for the interpreter" in out and "may take minutes" in out


def test_an_empty_range_lists_the_axis_values_here(capsys):
    assert tune("moe-routing", "--tokens", "1..2", "--profile", "dsv3") == 2
    _one_line(capsys, "--tokens: no workload in 1..2", "tokens here: 3, 20")
    assert tune("moe-routing", "--help") == 0
    assert "only the grid's values in that range" in " ".join(capsys.readouterr().out.replace("│", " ").split())


@pytest.mark.parametrize("args", [["verify-pack", ""], ["export", "--out", ""], ["dashboard", "--out", ""],
                                  ["revalidate", "--pack", " "], ["lower", "moe-routing", "--pack", ""]])
def test_an_empty_path_is_an_error(args, capsys):
    assert tune(*args) == 2
    _one_line(capsys, "empty path")


@pytest.mark.parametrize("args, needle", [
    (["--rounds", "0"], "--rounds: 0"),
    (["--timeout", "5x"], "--timeout: bad duration '5x'"),
    (["--workload", "tokens=abc"], "--workload: tokens=abc: 'abc' is not a valid int"),
    (["--pack", "packs/nvidia-h100", "--timeout", "5x"], "--timeout: bad duration"),
])
def test_revalidate_checks_its_options_first(args, needle, tmp_path, capsys):
    assert tune("revalidate", "--db", str(tmp_path / "none.db"), *args) == 2  # no database: not looked at
    _one_line(capsys, needle)


def test_dashboard_refuses_a_missing_folder(tmp_path, capsys):
    out = tmp_path / "no" / "x.html"
    assert tune("dashboard", "--db", str(ROOT / "results.db"), "--out", str(out)) == 2
    _one_line(capsys, f"--out: no folder {out.parent}")
    assert not out.parent.exists()


def test_help_states_defaults_and_targets(capsys):
    assert tune("moe-routing", "--help") == 0
    text = " ".join(capsys.readouterr().out.replace("│", " ").split())
    assert "(default 8, 3 with --quick)" in text and "1h (default: none)" in text
    assert tune("lower", "--help") == 0
    text = " ".join(capsys.readouterr().out.replace("│", " ").split())
    assert "sm_90, sm_90a, sm_100, sm_100a, sm_120" in text


def test_export_says_one_entry(tmp_path, capsys):
    """One winner exported: "1 entry", not "1 entries"."""
    from tuner.store import Environment, Run, Winner, open_store

    db = str(tmp_path / "r.db")
    with open_store(db).session() as s:
        env = Environment(fingerprint_hash="h", gpu="cpu-interpreter", cc="", fingerprint={"gpu": "cpu-interpreter"})
        s.add(env)
        s.flush()
        from tuner import registry
        from tuner.runtime.target import INTERPRETER

        k = registry.get("moe_routing")
        run = Run(kind="tune", kernel=k.name, environment_id=env.id, source_hash=k.source_hash, settings={})
        s.add(run)
        s.flush()
        w = k.small_workloads[0]
        s.add(Winner(kernel=k.name, workload_key=f"tokens={w.tokens},profile={w.profile}", environment_id=env.id,
                     workload={"tokens": w.tokens, "profile": w.profile}, config=k.default_config(w, INTERPRETER),
                     median_us=5.0, p20_us=5.0, p80_us=5.0, default_median_us=5.0, floor_us=None, noise=0.0,
                     is_default=True, meaningful=False, source_hash=k.source_hash, run_id=run.id))
        s.commit()
    assert tune("export", "--out", str(tmp_path / "pack"), "--db", db) == 0
    out = capsys.readouterr().out
    assert "moe_routing (1 entry)" in out, out
    assert json.loads((tmp_path / "pack" / "manifest.json").read_text())["kernels"]["moe_routing"]["entries"] == 1
