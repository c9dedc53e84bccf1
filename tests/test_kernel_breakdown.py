"""benchmarks/kernel_breakdown.py without a GPU: the K=V parser, the per-kernel table, and bad input."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.kernel_breakdown import kernel_times, launch_sequence, main, parse_kv, resolve_config
from tuner.runtime.target import INTERPRETER

ROOT = Path(__file__).resolve().parent.parent


def test_parse_kv_types() -> None:
    assert parse_kv("batch=1,context=8192,profile=dsv32,f=0.25,ok=true,no=False") == {
        "batch": 1, "context": 8192, "profile": "dsv32", "f": 0.25, "ok": True, "no": False}
    assert parse_kv("") == {}


@pytest.mark.parametrize("bad", ["batch", "=3", "a=1,b"])
def test_parse_kv_rejects(bad: str) -> None:
    with pytest.raises(ValueError, match="KEY=VALUE"):
        parse_kv(bad)


def test_kernel_times_per_call_and_skip() -> None:
    ev = [("score", 10.0), ("pass", 2.0), ("pass", 3.0), ("fill", 50.0), ("score", 12.0), ("pass", 1.0),
          ("pass", 2.0)]
    rows = kernel_times(ev, calls=2, skip={"fill"})
    assert rows == [("score", 1.0, 11.0), ("pass", 2.0, 4.0)]


def test_launch_sequence_by_position() -> None:
    ev = [("fill", 9.0), ("score", 10.0), ("pass", 2.0), ("pass", 4.0), ("fill", 9.0), ("score", 12.0),
          ("pass", 4.0), ("pass", 6.0)]
    assert launch_sequence(ev, calls=2, skip={"fill"}) == [("score", 11.0), ("pass", 3.0), ("pass", 5.0)]
    assert launch_sequence(ev[:-1], calls=2, skip={"fill"}) == []  # uneven: no sequence
    assert launch_sequence([("a", 1.0), ("b", 1.0), ("b", 1.0), ("a", 1.0)], calls=2, skip=set()) == []


@pytest.mark.parametrize("argv, msg", [
    (["no_such_kernel", "--workload", "batch=1"], "no_such_kernel"),
    (["mhc", "--workload", "op=seam,tokens=64,dimm=256"], "dimm"),
    (["mhc", "--workload", "op=seam,tokens=64,dim=256", "--config", "SPLITK=2"], "SPLITK: not a config key of mhc"),
    (["mhc", "--workload", "op=seam,tokens=64,dim=256", "--pack", "/nonexistent/pack"], "/nonexistent/pack"),
    (["mhc", "--workload", "op=seam,tokens=64,dim=256", "--inputs", "eps"], "KEY=VALUE"),
])
def test_bad_input_exits_2_in_one_line_before_the_gpu(argv: list[str], msg: str,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """Checked before any GPU work (so the same line with or without a GPU)."""
    assert main(argv) == 2
    line = capsys.readouterr().err.strip()
    assert line.startswith("kernel_breakdown: ") and msg in line and "\n" not in line, line


def test_bad_input_from_the_shell_has_no_traceback() -> None:
    r = subprocess.run([sys.executable, "benchmarks/kernel_breakdown.py", "mhc", "--workload", "op=seam,dimm=256"],
                       cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and r.stderr.startswith("kernel_breakdown: ") and "dimm" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_resolve_config_pack_default_and_overrides() -> None:
    spec, w, cfg, how = resolve_config("mhc", {"op": "seam", "tokens": 64, "dim": 256}, None, [{"SPLIT_K": 2}])
    assert how == "default" and w.dim == 256 and cfg == spec.default_config(w, INTERPRETER)
    with pytest.raises(ValueError, match="SPLITK: not a config key of mhc"):
        resolve_config("mhc", {"op": "seam", "tokens": 64, "dim": 256}, None, [{"SPLIT_K": 2}, {"SPLITK": 4}])
