"""benchmarks/_results.py: where the benchmarks' raw JSON goes and how it is written."""
from __future__ import annotations

import json
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from _results import raw_path, save_raw, target_lines, write_raw  # noqa: E402


def test_raw_path_creates_folder_and_names_stem_time(tmp_path: Path) -> None:
    out = tmp_path / "a" / "b"
    path = raw_path(out, "kernel_breakdown-sparse_mqa")
    assert out.is_dir() and path.parent == out and not path.exists()
    assert re.fullmatch(r"kernel_breakdown-sparse_mqa-\d{8}-\d{6}\.json", path.name), path.name
    assert raw_path(out, "x").parent == out  # an existing folder is fine


def test_write_raw_round_trips_and_replaces(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    assert write_raw(path, {"pack": Path("packs/h200"), "us": [1.5, 2], "ok": True}) == path
    assert json.loads(path.read_text()) == {"pack": "packs/h200", "us": [1.5, 2], "ok": True}
    assert "\n " in path.read_text()  # indented: one key a line
    write_raw(path, {"records": []})
    assert json.loads(path.read_text()) == {"records": []}


def test_save_raw_writes_and_prints_once(tmp_path: Path, capsys) -> None:
    path = save_raw(tmp_path / "out", "mhc", [{"us": 3.0}])
    assert path.parent == tmp_path / "out" and re.fullmatch(r"mhc-\d{8}-\d{6}\.json", path.name)
    assert json.loads(path.read_text()) == [{"us": 3.0}]
    assert capsys.readouterr().out == f"raw results: {path}\n"


def test_target_lines_count_and_mark_each_check() -> None:
    assert target_lines([]) == []
    lines = target_lines([("H=16: >= 75% HBM", False, "31%"), ("B=1: >= 20x", True, "23.0x")])
    assert lines == ["targets: 1/2 met", "  MISS H=16: >= 75% HBM (31%)", "  ok   B=1: >= 20x (23.0x)"]
