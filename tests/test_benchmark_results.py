"""benchmarks/_results.py: where the benchmarks' raw JSON goes, how it is written, and the published per-family JSON."""
from __future__ import annotations

import json
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from _results import compact, main, publish, raw_path, save_raw, target_lines, write_raw  # noqa: E402


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


RESULTS = Path(__file__).resolve().parents[1] / "benchmarks" / "results"
FAMILIES = ("engram", "mhc", "moe_routing", "nvfp4_attention", "sparse_mqa")


def test_published_results_name_gpu_date_commit_and_command() -> None:
    """The JSON behind the README's results table: one file a family, each measurement with its provenance."""
    for family in FAMILIES:
        doc = json.loads((RESULTS / f"{family}.json").read_text())
        assert doc["family"] == family and doc["measurements"], family
        for m in doc["measurements"]:
            assert m["gpu"].startswith("NVIDIA ") and re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d", m["date"])
            assert re.fullmatch(r"[0-9a-f]{7,40}", m["commit"]) and m["command"].startswith("python3 benchmarks/")
            assert m["software"]["torch"] and m["software"]["triton"]


def test_compact_drops_samples_and_rounds() -> None:
    assert compact({"median_us": 4.468000121414661, "n": 20, "rounds": [{"x": 1.0}], "rows": [{"b": 17301504.0,
                    "meaningful": True, "ok": 3}]}) == {"median_us": 4.468, "rows": [{"b": 1.73e7, "ok": 3}]}


def test_publish_writes_and_appends(tmp_path: Path) -> None:
    raw = tmp_path / "mhc-20261205-033803.json"
    raw.write_text(json.dumps({"kernel": "mhc", "gpu": {"gpu": "NVIDIA H200", "torch": "2.11.0", "triton": "3.6.0"},
                               "pack": "packs/nvidia-h200", "rows": [{"us": 18.681597, "n": 30}]}))
    path = publish(raw, "mhc", "python3 benchmarks/mhc.py --op seam", "abc1234", results=tmp_path, note="graph")
    doc = json.loads(path.read_text())
    assert path == tmp_path / "mhc.json" and doc["family"] == "mhc"
    (m,) = doc["measurements"]
    assert m == {"gpu": "NVIDIA H200", "date": "2026-12-05T03:38", "commit": "abc1234",
                 "command": "python3 benchmarks/mhc.py --op seam", "pack": "packs/nvidia-h200", "note": "graph",
                 "software": {"gpu": "NVIDIA H200", "torch": "2.11.0", "triton": "3.6.0"}, "rows": [{"us": 18.68}]}
    assert '\n   "rows": [\n    {"us":18.68}\n' in path.read_text()  # a record a line
    publish(raw, "mhc", "again", "abc1234", append=True, results=tmp_path)
    assert [m["command"] for m in json.loads(path.read_text())["measurements"]] == [m["command"], "again"]
    publish(raw, "mhc", "alone", "abc1234", results=tmp_path)
    assert [m["command"] for m in json.loads(path.read_text())["measurements"]] == ["alone"]


def test_publish_cli_bad_input_one_line(tmp_path: Path, capsys) -> None:
    (tmp_path / "x.json").write_text("[1, 2]")
    assert main(["publish", str(tmp_path / "x.json"), "--family", "mhc", "--command", "c", "--commit", "a"]) == 2
    assert capsys.readouterr().err.count("\n") == 1
    assert main(["publish", str(tmp_path / "none.json"), "--family", "mhc", "--command", "c"]) == 2
