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


@pytest.mark.skipif(shutil.which("bash") is None or shutil.which("sha256sum") is None, reason="needs bash, sha256sum")
def test_chain_carries_results_across_calls_until_the_tree_moves_on(tmp_path):
    """chain.sh on a warm machine: each device call copies the tree afresh (results.db and the pack as committed)
    and keeps ignored paths; the chain puts back what the earlier call left, unless the tree has moved on."""
    tree, dev = tmp_path / "tree", tmp_path / "dev"
    (tree / "benchmarks" / "device_runs").mkdir(parents=True)
    (tree / "packs" / "nvidia-h200").mkdir(parents=True)
    shutil.copy(ROOT / "benchmarks" / "device_runs" / "chain.sh", tree / "benchmarks" / "device_runs")
    for n in (1, 2):  # a "run" appends its number to results.db and writes the pack from it
        (tree / "benchmarks" / "device_runs" / f"device_run{n}.sh").write_text(
            f"echo run{n} >> results.db; cp results.db packs/nvidia-h200/manifest.json\n")
    (tree / "results.db").write_text("A\n")
    (tree / "packs" / "nvidia-h200" / "manifest.json").write_text("A\n")

    def call(*runs):  # the device: the tree copied over what is there, ignored .devstate/ kept
        shutil.copytree(tree, dev, dirs_exist_ok=True)
        r = subprocess.run(["bash", "benchmarks/device_runs/chain.sh", *map(str, runs)], cwd=dev,
                           capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        return (dev / "results.db").read_text().split(), r.stdout

    assert call(1, 2)[0] == ["A", "run1", "run2"]  # one call, two runs: the second sees the first's results
    db, out = call(1)  # the next call: its tree still holds A, the machine's state wins
    assert db == ["A", "run1", "run2", "run1"] and "from an earlier call" in out
    assert (dev / "packs" / "nvidia-h200" / "manifest.json").read_text().split() == db
    (tree / "results.db").write_text("B\n")  # results copied back and committed here: the tree wins
    db, out = call(2)
    assert db == ["B", "run2"] and "using the tree's" in out
    assert call(1)[0] == ["B", "run2", "run1"]  # and the machine carries on from there
