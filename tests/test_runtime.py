"""The runtime loader: verification of packs, selection, fallbacks, and its import hygiene."""
from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tuner import runtime
from tuner.runtime import PackError, gpu_identity, load_pack, sha256_file
from tuner.runtime.target import INTERPRETER

ENTRIES = [
    {"workload": {"tokens": 1, "profile": "dsv3"}, "config": {"BLOCK_T": 1, "num_warps": 1}},
    {"workload": {"tokens": 64, "profile": "dsv3"}, "config": {"BLOCK_T": 8, "num_warps": 4}},
    {"workload": {"tokens": 4096, "profile": "dsv3"}, "config": {"BLOCK_T": 32, "num_warps": 8}},
    {"workload": {"tokens": 64, "profile": "dsv41-flash"}, "config": {"BLOCK_T": 4, "num_warps": 2}},
]


def write_pack(root: Path, *, gpu: str | None = None, entries=ENTRIES, kernel: str = "toy", schema: int = 1) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    table = {"schema": 1, "kernel": kernel, "categorical_axes": ["profile"], "numeric_axes": ["tokens"],
             "entries": entries}
    (root / f"{kernel}.json").write_text(json.dumps(table))
    fp = dict(gpu_identity())
    if gpu is not None:
        fp["gpu"], fp["cc"] = gpu, "9.0"
    manifest = {"schema": schema, "name": root.name, "fingerprint": fp,
                "kernels": {kernel: {"file": f"{kernel}.json", "entries": len(entries)}},
                "files": {f"{kernel}.json": sha256_file(root / f"{kernel}.json")}}
    return _seal(root, manifest)


def _seal(root: Path, manifest: dict) -> Path:
    """Write ``manifest`` and its seal, as a tamperer who knows the format does."""
    (root / "manifest.json").write_text(json.dumps(manifest))
    (root / runtime.MANIFEST_SEAL).write_text(runtime.manifest_digest(manifest) + "\n")
    return root


@pytest.fixture(autouse=True)
def _defaults():
    runtime.register_defaults("toy", lambda w, t: {"BLOCK_T": 2, "num_warps": 4, "tokens_seen": w.get("tokens")})
    yield
    runtime.use_pack(None)


def test_exact_nearest_default_and_counters(tmp_path):
    pack = load_pack(write_pack(tmp_path / "p"))
    s = pack.select("toy", {"tokens": 64, "profile": "dsv3"})
    assert (s.how, s.config) == ("exact", {"BLOCK_T": 8, "num_warps": 4})
    # 200 is nearer 64 than 4096 in log space (log2 ratio 1.6 vs 4.4)
    s = pack.select("toy", {"tokens": 200, "profile": "dsv3"})
    assert s.how == "nearest" and s.config["BLOCK_T"] == 8 and s.workload["tokens"] == 64
    s = pack.select("toy", {"tokens": 3000, "profile": "dsv3"})
    assert s.how == "nearest" and s.config["BLOCK_T"] == 32
    # categorical axes must match: no dsv4-flash entries at all -> default
    s = pack.select("toy", {"tokens": 64, "profile": "dsv4-flash"})
    assert s.how == "default" and s.config == {"BLOCK_T": 2, "num_warps": 4, "tokens_seen": 64}
    pack.select("toy", {"tokens": 64, "profile": "dsv3"})
    assert pack.stats()["toy"] == {"exact": 2, "nearest": 2, "default": 1}


def test_nearest_entry_that_kept_the_default_gives_this_workloads_default(tmp_path):
    entries = [{"workload": {"tokens": 256, "profile": "dsv3"}, "config": {"BLOCK_T": 1, "num_warps": 1},
                "is_default": True},
               {"workload": {"tokens": 64, "profile": "dsv41-flash"}, "config": {"BLOCK_T": 4, "num_warps": 2},
                "is_default": False}]
    pack = load_pack(write_pack(tmp_path / "p", entries=entries))
    s = pack.select("toy", {"tokens": 4096, "profile": "dsv3"})
    assert (s.how, s.config["tokens_seen"]) == ("default", 4096)
    assert pack.select("toy", {"tokens": 256, "profile": "dsv3"}).how == "exact"
    s = pack.select("toy", {"tokens": 128, "profile": "dsv41-flash"})
    assert (s.how, s.config) == ("nearest", {"BLOCK_T": 4, "num_warps": 2})


def test_unknown_kernel_warns_once_and_defaults(tmp_path, caplog):
    pack = load_pack(write_pack(tmp_path / "p"))
    runtime.register_defaults("other", lambda w, t: {"X": 1})
    with caplog.at_level(logging.WARNING, logger="tuner.runtime"):
        for t in (1, 2, 3):
            assert pack.select("other", {"tokens": t}).how == "default"
    assert sum("no entries for kernel 'other'" in r.message for r in caplog.records) == 1


def test_pack_of_another_gpu_falls_back_with_one_warning(tmp_path, caplog):
    with caplog.at_level(logging.WARNING, logger="tuner.runtime"):
        pack = load_pack(write_pack(tmp_path / "p", gpu="NVIDIA B200"))
        sels = [pack.select("toy", {"tokens": 64, "profile": "dsv3"}) for _ in range(3)]
    assert all(s.how == "default" for s in sels)
    assert sum("NVIDIA B200" in r.message for r in caplog.records) == 1


def test_corrupt_and_tampered_packs_raise(tmp_path):
    p = write_pack(tmp_path / "tampered")
    data = json.loads((p / "toy.json").read_text())
    data["entries"][0]["config"]["BLOCK_T"] = 128
    (p / "toy.json").write_text(json.dumps(data))
    with pytest.raises(PackError, match="checksum"):
        load_pack(p)

    p = write_pack(tmp_path / "corrupt")
    (p / "manifest.json").write_text("{not json")
    with pytest.raises(PackError, match="JSON"):
        load_pack(p)

    p = write_pack(tmp_path / "schema", schema=99)
    with pytest.raises(PackError, match="schema"):
        load_pack(p)

    p = write_pack(tmp_path / "missing")
    (p / "toy.json").unlink()
    with pytest.raises(PackError, match="missing"):
        load_pack(p)

    with pytest.raises(PackError, match="manifest"):
        load_pack(tmp_path / "nowhere")

    p = write_pack(tmp_path / "escape")
    m = json.loads((p / "manifest.json").read_text())
    m["files"] = {"../toy.json": "0" * 64}
    _seal(p, m)
    with pytest.raises(PackError, match="not a file name"):
        load_pack(p)

    p = write_pack(tmp_path / "fingerprint")
    m = json.loads((p / "manifest.json").read_text())
    m["fingerprint"] = "H200"
    _seal(p, m)
    with pytest.raises(PackError, match="fingerprint"):
        load_pack(p)

    # an entry whose config is no object fails at load, not at a kernel call's lookup
    p = write_pack(tmp_path / "config", entries=[dict(ENTRIES[0], config="BLOCK_T=1")])
    with pytest.raises(PackError, match="not a JSON object"):
        load_pack(p)
    with pytest.raises(TypeError, match="use_pack takes"):
        runtime.use_pack(123)


def test_active_pack_and_module_select(tmp_path):
    assert runtime.select("toy", {"tokens": 64, "profile": "dsv3"}).how == "default"
    runtime.use_pack(write_pack(tmp_path / "p"))
    assert runtime.select("toy", {"tokens": 64, "profile": "dsv3"}).how == "exact"


def _run(code: str, env_extra: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, **(env_extra or {})}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                          cwd=Path(__file__).resolve().parents[1], timeout=300)


def test_tuner_pack_env_var(tmp_path):
    p = write_pack(tmp_path / "p")
    code = ("from tuner import runtime\n"
            "runtime.register_defaults('toy', lambda w, t: {})\n"
            "print(runtime.select('toy', {'tokens': 64, 'profile': 'dsv3'}).how)")
    r = _run(code, {"TUNER_PACK": str(p)})
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "exact"
    r = _run(code, {"TUNER_PACK": str(tmp_path / "nope")})
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "default" and "TUNER_PACK ignored" in r.stderr


def test_runtime_and_templates_do_not_import_tuning_dependencies():
    code = ("import sys, pkgutil, importlib, kernel_templates\n"
            "import tuner.runtime\n"
            "for m in pkgutil.iter_modules(kernel_templates.__path__):\n"
            "    importlib.import_module('kernel_templates.' + m.name)\n"
            "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('optuna', 'sqlalchemy', 'alembic'))\n"
            "print(bad)")
    r = _run(code, {"TRITON_INTERPRET": "1"})
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]"


def test_moe_routing_takes_its_config_from_the_active_pack(tmp_path, monkeypatch):
    import torch

    import kernel_templates.moe_routing as mr

    tuned = {"BLOCK_T": 2, "MAX_PROGRAMS": 2, "FUSED": False, "num_warps": 1, "num_stages": 1}
    entries = [{"workload": {"tokens": 5, "profile": "dsv41-flash"}, "config": tuned}]
    pack = write_pack(tmp_path / "p", entries=entries, kernel="moe_routing")
    seen = []
    real_launch = mr.launch
    monkeypatch.setattr(mr, "launch", lambda *, config, **kw: seen.append(config) or real_launch(config=config, **kw))
    inputs = mr.make_inputs(mr.Workload(5, "dsv41-flash"), "cpu", 0)
    args = {k: v for k, v in inputs.items() if k not in ("logits", "bias")}
    runtime.use_pack(pack)
    out = mr.moe_routing(inputs["logits"], inputs["bias"], **args)
    assert seen[-1] == tuned
    assert runtime.active_pack().stats()["moe_routing"]["exact"] == 1
    mr.verify(out, mr.reference(**inputs), inputs)
    runtime.use_pack(None)
    mr.moe_routing(inputs["logits"], inputs["bias"], **args)
    assert seen[-1] == mr.default_config(mr.Workload(5, "dsv41-flash"), INTERPRETER)
    assert torch.equal(out.topk_ids, mr.reference(**inputs).topk_ids)


def test_host_integer_helpers_equal_tritons():
    """The launchers' plain-Python cdiv / next_power_of_2 (kernel_templates._host) return what
    Triton's ConstexprFunctions do, for every int that sizes a grid (and 0 / negatives)."""
    import triton

    from kernel_templates._host import cdiv, next_power_of_2

    values = list(range(-70, 5000)) + [2**k + d for k in range(12, 40) for d in (-1, 0, 1)]
    for n in values:
        assert next_power_of_2(n) == triton.next_power_of_2(n), n
        for d in (1, 2, 3, 7, 16, 64, 128, 1000):
            assert cdiv(n, d) == triton.cdiv(n, d), (n, d)


def test_cpu_tensors_without_the_interpreter_get_one_clear_error():
    """On a machine without a GPU and without TRITON_INTERPRET=1, a kernel call says what to do
    (not Triton's "0 active drivers")."""
    code = ("import torch\nfrom kernel_templates import moe_routing as mr\n"
            "from tuner.runtime.target import NoBackend\n"
            "inputs = mr.make_inputs(mr.Workload(3, 'dsv3'), 'cpu', 0)\n"
            "args = {k: v for k, v in inputs.items() if k not in ('logits', 'bias')}\n"
            "try:\n    mr.moe_routing(inputs['logits'], inputs['bias'], **args)\n"
            "except NoBackend as e:\n    print('NOBACKEND', e)\n")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    r = subprocess.run([sys.executable, "-c", code], cwd=Path(__file__).resolve().parents[1], env=env,
                       capture_output=True, text=True, timeout=300)
    assert "NOBACKEND" in r.stdout and "TRITON_INTERPRET=1" in r.stdout, r.stdout + r.stderr[-2000:]
