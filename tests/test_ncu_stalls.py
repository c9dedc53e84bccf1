"""benchmarks/ncu_stalls.py without a GPU: on a committed profile (the nvfp4 GL_WS kernel at 64 heads on an H200,
trimmed to the instructions with samples) and on bad input."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.ncu_stalls import _opcode, summarize

ROOT = Path(__file__).resolve().parent.parent
PROFILE = ROOT / "benchmarks/results/ncu_sass_nvfp4_gl_ws_h64.csv"


def test_opcode() -> None:
    assert _opcode("@!P1  BRA 0x7f10e160bb70") == "BRA"
    assert _opcode("HGMMA.64x64x16.F32 R24, gdesc[UR8].tnspA.tnspB, R24") == "HGMMA"
    assert _opcode("") == "?"


def test_gl_ws_profile() -> None:
    """The GL_WS kernel at 64 heads: the MMA partition spinning on its `ready` barrier
    is the hottest instruction, a branch stalled on the long scoreboard (the try_wait)."""
    s = summarize(PROFILE.read_text(), min_share=0.05)
    assert s["samples"] == 25904
    assert s["reasons"][0][0] == "long_sb" and 0.45 < s["reasons"][0][1] < 0.47
    assert 0.9 < sum(v for _, v in s["reasons"]) <= 1.0  # a few samples carry no reason column
    hot = s["hot"]
    assert len(hot) == 1 and hot[0]["source"].startswith("@!P1  BRA") and hot[0]["top"][0] == "long_sb"
    assert 0.30 < hot[0]["share"] < 0.31
    assert s["opcodes"][0][0] == "BRA"


def test_bad_file_is_one_line_exit_2(tmp_path: Path) -> None:
    bad = tmp_path / "x.csv"
    bad.write_text("a,b\n1,2\n")
    r = subprocess.run([sys.executable, str(ROOT / "benchmarks/ncu_stalls.py"), str(bad)], capture_output=True,
                       text=True)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr
    r = subprocess.run([sys.executable, str(ROOT / "benchmarks/ncu_stalls.py"), str(tmp_path / "none.csv")],
                       capture_output=True, text=True)
    assert r.returncode == 2 and "Traceback" not in r.stderr


@pytest.mark.parametrize("top", ["3"])
def test_cli_report(top: str) -> None:
    r = subprocess.run([sys.executable, str(ROOT / "benchmarks/ncu_stalls.py"), str(PROFILE), "--top", top,
                        "--min-share", "0.02"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    out = r.stdout.splitlines()
    assert out[0] == "25904 samples" and out[2].split()[0] == "long_sb"
    assert any("BRA" in line and "long_sb" in line for line in out[out.index("instructions:"):])
