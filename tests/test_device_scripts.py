"""The shell scripts in ``benchmarks/`` parse, and ``device_env.sh`` sets what the benchmarks' usage lines use."""
from __future__ import annotations

import shutil
import subprocess
import sys
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


def _wheel(folder: Path, name: str, size: int) -> None:
    """A pure-Python wheel of module ``name`` (a module of ``size`` bytes, incompressible by the tar)."""
    import base64
    import hashlib
    import os
    import zipfile

    files = {f"{name}.py": f"VALUE = {name!r}\n# {base64.b64encode(os.urandom(size)).decode()}\n".encode(),
             f"{name}-1.0.dist-info/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n".encode(),
             f"{name}-1.0.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    record = "".join(f"{p},sha256={base64.urlsafe_b64encode(hashlib.sha256(d).digest()).rstrip(b'=').decode()},{len(d)}\n"
                     for p, d in files.items()) + f"{name}-1.0.dist-info/RECORD,,\n"
    with zipfile.ZipFile(folder / f"{name}-1.0-py3-none-any.whl", "w") as z:
        for p, d in {**files, f"{name}-1.0.dist-info/RECORD": record.encode()}.items():
            z.writestr(p, d)


def test_peer_wheels_travel_in_parts_and_install_with_the_last(tmp_path: Path):
    # the peers' wheels are more than one transfer carries: `pack` splits them, each `install` of a part stashes
    # it on the machine, and the last one joins, checks and installs the set
    src, wheels, site = tmp_path / "src", tmp_path / "wheels", tmp_path / "site"
    src.mkdir()
    _wheel(src, "peer_one", 6000)
    _wheel(src, "peer_two", 3000)
    env = {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "PEERS_WHEELS": str(wheels), "PEERS_SITE": str(site), "PEERS_PART_SIZE": "5K"}
    sh = ["bash", str(ROOT / "benchmarks" / "peers_device.sh")]

    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([*sh, *args], capture_output=True, text=True, env=env)

    assert run("pack", str(src), "tk").returncode == 0
    parts = sorted(wheels.glob("tk-*"), key=lambda p: int(p.name.split("-")[1]))
    assert len(parts) >= 3 and all(p.stat().st_size <= 5 * 1024 for d in parts for p in d.glob("tk.part*"))
    for i, d in enumerate(parts[:-1]):
        r = run("install", str(d))
        assert r.returncode == 0 and f"part {i + 1} of {len(parts)} stashed" in r.stdout, r.stdout + r.stderr
    assert not site.joinpath("peer_one.py").exists()
    r = run("install", str(parts[-1]))
    assert r.returncode == 0 and f"all {len(parts)} parts joined and installed" in r.stdout, r.stdout + r.stderr
    assert site.joinpath("peer_one.py").read_text().startswith("VALUE = 'peer_one'") and site.joinpath("peer_two.py").exists()
    # a folder with neither wheels nor a part is bad usage
    r = run("install", str(tmp_path))
    assert r.returncode == 2 and "no wheels and no part" in r.stderr
