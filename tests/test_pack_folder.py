"""A folder of packs (one per GPU kind): the loader picks the pack made on the GPU at hand, else
the nearest by compute capability with one warning, and says which and why. Devices are faked:
``load_pack(..., gpu=...)`` takes the identity ``gpu_identity()`` would report."""
from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tuner import runtime
from tuner.runtime import PackError, load_pack, manifest_digest, sha256_file
from tuner.runtime.folder import Choice, choose, compute_capability
from tuner.runtime.target import INTERPRETER

SOFT = {"driver": "13.0", "cuda": "13.0", "torch": "2.11.0", "triton": "3.6.0"}
H100 = {"gpu": "NVIDIA H100 80GB HBM3", "cc": "9.0", "sms": 132, "memory_gb": 79.1, **SOFT}
H200 = {"gpu": "NVIDIA H200", "cc": "9.0", "sms": 132, "memory_gb": 139.8, **SOFT}
B200 = {"gpu": "NVIDIA B200", "cc": "10.0", "sms": 148, "memory_gb": 178.4, **SOFT}
RTX = {"gpu": "NVIDIA GeForce RTX 5090", "cc": "12.0", "sms": 170, "memory_gb": 31.4, **SOFT}
H100_PCIE = {"gpu": "NVIDIA H100 PCIe", "cc": "9.0", "sms": 114, "memory_gb": 79.1, **SOFT}


def write_pack(root: Path, fp: dict, block_t: int, *, seal: bool = True, **manifest_extra) -> Path:
    """A sealed pack of one 'toy' kernel made on ``fp``, whose one entry's config says ``block_t``."""
    root.mkdir(parents=True)
    table = {"schema": 1, "kernel": "toy", "categorical_axes": ["profile"], "numeric_axes": ["tokens"],
             "entries": [{"workload": {"tokens": 64, "profile": "dsv3"}, "config": {"BLOCK_T": block_t}}]}
    (root / "toy.json").write_text(json.dumps(table))
    manifest = {"schema": 1, "name": root.name, "fingerprint": fp, "kernels": {"toy": {"file": "toy.json"}},
                "files": {"toy.json": sha256_file(root / "toy.json")}, **manifest_extra}
    (root / "manifest.json").write_text(json.dumps(manifest))
    if seal:
        (root / "manifest.sha256").write_text(manifest_digest(manifest) + "\n")
    return root


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    write_pack(tmp_path / "packs" / "nvidia-h100", H100, 100)
    write_pack(tmp_path / "packs" / "nvidia-h200", H200, 200)
    write_pack(tmp_path / "packs" / "nvidia-rtx5090", RTX, 500)
    (tmp_path / "packs" / "README.md").write_text("one pack per GPU kind")
    (tmp_path / "packs" / "notes").mkdir()  # a folder that is no pack: ignored
    return tmp_path / "packs"


@pytest.fixture(autouse=True)
def _toy_defaults():
    runtime.register_defaults("toy", lambda w, t: {"BLOCK_T": 1})
    yield
    runtime.use_pack(None)


W = {"tokens": 64, "profile": "dsv3"}


def _warnings(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING and r.name == "tuner.runtime"]


@pytest.mark.parametrize("here,name,block_t", [(H100, "nvidia-h100", 100), (H200, "nvidia-h200", 200)])
def test_the_pack_made_on_this_gpu_is_chosen_without_a_warning(folder, caplog, here, name, block_t):
    with caplog.at_level(logging.INFO, logger="tuner.runtime"):
        pack = load_pack(folder, gpu=here)
    assert (pack.name, pack.usable, pack.chosen.how) == (name, True, "gpu")
    assert pack.select("toy", W, INTERPRETER).config == {"BLOCK_T": block_t}
    assert _warnings(caplog) == [] and f"made on {here['gpu']}, the GPU at hand" in caplog.text


def test_another_gpu_of_the_same_architecture_takes_the_nearest_pack_and_runs_its_configs(folder, caplog):
    """An H100 PCIe (sm_90, 114 SMs, 80 GB): no pack of its own; both sm_90 packs have 132 SMs,
    the H100 SXM's memory is the nearer."""
    with caplog.at_level(logging.WARNING, logger="tuner.runtime"):
        pack = load_pack(folder, gpu=H100_PCIE)
    assert (pack.name, pack.usable, pack.chosen.how) == ("nvidia-h100", True, "arch")
    assert pack.select("toy", W, INTERPRETER) == runtime.Selection({"BLOCK_T": 100}, "exact", W)
    [warning] = _warnings(caplog)
    assert "no pack was made on NVIDIA H100 PCIe" in warning and "same compute capability 9.0" in warning


def test_another_architecture_takes_the_nearest_compute_capability_and_runs_defaults(folder, caplog):
    """A B200 (10.0) next to 9.0 and 12.0 packs: the 9.0 ones are nearer; their configs are not for
    this architecture, so defaults run (counted), with one warning saying so."""
    with caplog.at_level(logging.WARNING, logger="tuner.runtime"):
        pack = load_pack(folder, gpu=B200)
    assert pack.chosen.how == "other" and pack.name in ("nvidia-h100", "nvidia-h200") and not pack.usable
    assert pack.select("toy", W, INTERPRETER).how == "default"
    assert pack.stats() == {"toy": {"exact": 0, "nearest": 0, "default": 1}}
    [warning] = _warnings(caplog)
    assert "default configs run" in warning and "NVIDIA B200" in warning


def test_tuner_pack_names_a_folder_and_stats_say_which_pack_and_why(folder, monkeypatch):
    monkeypatch.setattr(runtime, "gpu_identity", lambda: dict(H200))
    monkeypatch.setenv("TUNER_PACK", str(folder))
    monkeypatch.setattr(runtime, "_ACTIVE", None)
    monkeypatch.setattr(runtime, "_ACTIVE_FROM_ENV", False)
    assert runtime.select("toy", W, INTERPRETER).config == {"BLOCK_T": 200}
    s = runtime.stats()
    assert (s["pack"], s["usable"], s["path"]) == ("nvidia-h200", True, str(folder / "nvidia-h200"))
    assert "made on NVIDIA H200, the GPU at hand" in s["chosen"]
    assert s["kernels"]["toy"]["exact"] == 1 and s["cold"] == {}
    runtime.use_pack(folder)  # use_pack takes the folder too
    assert runtime.active_pack().name == "nvidia-h200"


def test_of_two_packs_for_this_gpu_the_one_with_this_software_wins(tmp_path):
    write_pack(tmp_path / "old", dict(H200, torch="2.9.0", triton="3.4.0"), 1, created="2026-12-01T00:00:00Z")
    write_pack(tmp_path / "new", H200, 2, created="2026-11-01T00:00:00Z")
    assert load_pack(tmp_path, gpu=H200).name == "new"
    # same software: the newest
    write_pack(tmp_path / "newer", H200, 3, created="2026-12-02T00:00:00Z")
    assert load_pack(tmp_path, gpu=H200).name == "newer"


def test_a_folder_of_packs_keeps_every_packs_hardening(folder, tmp_path, monkeypatch, caplog):
    # a tampered manifest anywhere in the folder: the folder is refused, whichever pack would serve
    m = json.loads((folder / "nvidia-rtx5090" / "manifest.json").read_text())
    m["fingerprint"]["gpu"] = H100["gpu"]
    (folder / "nvidia-rtx5090" / "manifest.json").write_text(json.dumps(m))
    with pytest.raises(PackError, match=r"nvidia-rtx5090: manifest.sha256 does not match"):
        load_pack(folder, gpu=H100)
    # a chosen pack whose table was altered: its checksum
    write_pack(tmp_path / "f2" / "a", H100, 1)
    (tmp_path / "f2" / "a" / "toy.json").write_text("{}")
    with pytest.raises(PackError, match="checksum mismatch"):
        load_pack(tmp_path / "f2", gpu=H100)
    # a pack that is a symbolic link to somewhere else
    write_pack(tmp_path / "elsewhere", H100, 1)
    (tmp_path / "f3").mkdir()
    os.symlink(tmp_path / "elsewhere", tmp_path / "f3" / "h100")
    with pytest.raises(PackError, match="symbolic link"):
        load_pack(tmp_path / "f3", gpu=H100)
    # nothing that is a pack
    (tmp_path / "f4" / "x").mkdir(parents=True)
    with pytest.raises(PackError, match="no manifest.json"):
        load_pack(tmp_path / "f4", gpu=H100)
    # a bad folder in TUNER_PACK leaves the server on defaults
    monkeypatch.setenv("TUNER_PACK", str(folder))
    monkeypatch.setattr(runtime, "_ACTIVE", None)
    monkeypatch.setattr(runtime, "_ACTIVE_FROM_ENV", False)
    assert runtime.select("toy", W, INTERPRETER).how == "default" and runtime.active_pack() is None
    assert "TUNER_PACK ignored" in caplog.text


def test_more_packs_than_a_folder_may_hold_are_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(runtime, "MAX_PACKS", 2)
    for i in range(3):
        write_pack(tmp_path / f"p{i}", H100, i + 1)
    with pytest.raises(PackError, match="more than 2 packs"):
        load_pack(tmp_path, gpu=H100)


def test_compute_capability():
    assert [compute_capability(v) for v in ("9.0", "10.0", "12.1", "", None, "x.y", "9")] == \
        [90, 100, 121, None, None, None, None]


_GPUS = st.fixed_dictionaries({"gpu": st.sampled_from(["A", "B", "C", "D"]),
                               "cc": st.sampled_from(["8.0", "9.0", "10.0", ""]),
                               "sms": st.integers(1, 200), "memory_gb": st.floats(1, 200)})


@settings(max_examples=40, deadline=None)
@given(st.dictionaries(st.sampled_from(["p1", "p2", "p3", "p4"]), _GPUS, min_size=1), _GPUS)
def test_choose_picks_a_pack_of_this_gpu_when_there_is_one_else_the_nearest_compute_capability(packs, here):
    c = choose({n: {"fingerprint": fp} for n, fp in packs.items()}, here)
    assert isinstance(c, Choice) and c.name in packs and c.reason
    same = [n for n, fp in packs.items() if fp["gpu"] == here["gpu"]]
    if same:
        assert c.how == "gpu" and c.name in same
        return
    cc_here = compute_capability(here["cc"])
    gaps = {n: abs(compute_capability(fp["cc"]) - cc_here) for n, fp in packs.items()
            if cc_here is not None and compute_capability(fp["cc"]) is not None}
    if gaps:
        assert gaps[c.name] == min(gaps.values())
    assert c.runs_configs == (c.how == "arch") == (gaps.get(c.name) == 0)


@pytest.mark.parametrize("here,name", [(H100, "nvidia-h100"), (H200, "nvidia-h200")])
def test_the_shipped_folder_serves_each_gpu_its_own_pack(here, name):
    """``packs/`` as shipped: each pack verifies, and the GPU it was made on gets it."""
    from tuner.pack import verify_pack

    root = Path(__file__).resolve().parents[1] / "packs"
    assert verify_pack(root / name).problems == []
    pack = load_pack(root, gpu=here)
    assert (pack.name, pack.chosen.how) == (name, "gpu")


def test_verify_pack_says_which_grid_workloads_a_pack_lacks(tmp_path, capsys):
    """The H100 pack covers its default grid but for the 4 workloads an 80 GB card cannot hold;
    verify-pack (and export) say so per kernel. A pack of interpreter times counts the small grid."""
    from tuner.cli.main import main
    from tuner.pack import coverage_line, verify_pack

    r = verify_pack(Path(__file__).resolve().parents[1] / "packs" / "nvidia-h100")
    n, miss = r.coverage["nvfp4_attention"]
    assert n == 138 and len(miss) == 4 and all("batch=256,context=524288" in m and "mode=dense" in m for m in miss)
    assert all(not m for k, (_, m) in r.coverage.items() if k != "nvfp4_attention")
    line = coverage_line(r.coverage)
    assert "nvfp4_attention 134/138" in line and "engram 48/48" in line
    db, out = str(tmp_path / "r.db"), tmp_path / "pack"
    assert main(["moe-routing", "--quick", "--db", db]) == 0
    capsys.readouterr()
    assert main(["export", "--out", str(out), "--db", db]) == 0
    from tuner import registry

    line = "small grid covered: moe_routing {0}/{0}".format(len(registry.get("moe_routing").small_workloads))
    assert line in capsys.readouterr().out
    assert main(["verify-pack", str(out)]) == 0
    assert line in capsys.readouterr().out
