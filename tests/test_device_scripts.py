"""The shell scripts in ``benchmarks/`` parse, and ``device_env.sh`` sets what the benchmarks' usage lines use."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")


def test_every_script_parses():
    scripts = sorted((ROOT / "benchmarks").glob("*.sh"))
    assert scripts
    bad = {p.name: r.stderr.strip() for p in scripts
           if (r := subprocess.run(["bash", "-n", str(p)], capture_output=True, text=True)).returncode}
    assert not bad, bad


def test_device_env_sets_cli_pack_and_out(tmp_path: Path):
    out, tree = tmp_path / "out", tmp_path / "tree"  # a tree without the GPU machine's wheels (.whl/)
    (tree / "benchmarks").mkdir(parents=True)
    shutil.copy(ROOT / "benchmarks" / "device_env.sh", tree / "benchmarks")
    r = subprocess.run(["bash", "-c", '. benchmarks/device_env.sh && echo "$T|$P|$L|$PYTHONPATH"'], cwd=tree,
                       capture_output=True, text=True, env={"PATH": "/usr/bin:/bin", "OUT": str(out), "PACK": "p/x"})
    assert r.returncode == 0, r.stderr
    t, p, logs, path = r.stdout.strip().split("|")
    assert t == "python3 -m tuner.cli.main" and p == f"--pack p/x --out {out}"
    assert Path(logs).is_dir() and path.split(":")[-1] == str(tree)
