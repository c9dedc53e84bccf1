"""The device scripts (``benchmarks/device_runs/*.sh``) parse: a syntax error found on the GPU
machine costs a device call (session 27's edit of run 145 lost a closing quote before this check)."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = sorted((ROOT / "benchmarks" / "device_runs").glob("*.sh"))


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_every_device_script_parses():
    assert len(SCRIPTS) > 100
    bad = {}
    for path in SCRIPTS:
        r = subprocess.run(["bash", "-n", str(path)], capture_output=True, text=True)
        if r.returncode:
            bad[path.name] = r.stderr.strip()
    assert not bad, bad


def test_a_broken_script_is_caught(tmp_path):
    """The check above fails where it should (bash -n reports an unclosed quote)."""
    broken = tmp_path / "broken.sh"
    broken.write_text('tune 60 --op seam "${A[@]}\n')
    assert subprocess.run(["bash", "-n", str(broken)], capture_output=True).returncode != 0
