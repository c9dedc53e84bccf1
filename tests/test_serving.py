"""The runtime loader in a server process: selection from many threads (and CUDA streams), the
warm-up before serving, selections first made inside a CUDA graph capture."""
from __future__ import annotations

import json
import logging
import random
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pytest
import torch
from conftest import DEVICE

import kernel_templates.mhc as MH
import kernel_templates.moe_routing as MR
from tuner import runtime
from tuner.runtime import gpu_identity, load_pack, manifest_digest, sha256_file

ops = torch.ops.tuner
ROOT = Path(__file__).resolve().parents[1]

# moe_routing at toy size (16 experts, 4 groups): the "custom" profile
ROUTING = {"top_k": 2, "n_group": 4, "topk_group": 2, "scoring": "sigmoid", "routed_scaling_factor": 2.5}
CFG_A = {"BLOCK_T": 2, "MAX_PROGRAMS": 4, "FUSED": False, "num_warps": 1, "num_stages": 1}
CFG_B = {"BLOCK_T": 4, "MAX_PROGRAMS": 2, "FUSED": True, "num_warps": 2, "num_stages": 1}
ENTRIES = [{"workload": {"tokens": 2, "profile": "custom"}, "config": CFG_A},
           {"workload": {"tokens": 8, "profile": "custom"}, "config": CFG_B},
           {"workload": {"tokens": 64, "profile": "custom"}, "config": CFG_A, "is_default": True}]


def write_pack(root: Path, tables: dict[str, list[dict]]) -> Path:
    """A sealed pack made on this device of ``tables`` (kernel -> entries, axes from the first entry)."""
    root.mkdir(parents=True)
    files = {}
    for kernel, entries in tables.items():
        w = entries[0]["workload"]
        table = {"schema": 1, "kernel": kernel, "categorical_axes": [a for a in w if isinstance(w[a], str)],
                 "numeric_axes": [a for a in w if not isinstance(w[a], str)], "entries": entries}
        (root / f"{kernel}.json").write_text(json.dumps(table))
        files[f"{kernel}.json"] = sha256_file(root / f"{kernel}.json")
    manifest = {"schema": 1, "name": root.name, "fingerprint": dict(gpu_identity()),
                "kernels": {k: {"file": f"{k}.json"} for k in tables}, "files": files}
    (root / "manifest.json").write_text(json.dumps(manifest))
    (root / "manifest.sha256").write_text(manifest_digest(manifest))
    return root


@pytest.fixture(autouse=True)
def _no_pack_after():
    yield
    runtime.use_pack(None)


@pytest.fixture
def fast_switching():
    """Threads switch every microsecond, so unlocked read-modify-writes would lose updates."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(before)


def _threads(n: int, seconds: float, work) -> list:
    """``work(i, rng, k)`` (thread ``i``, its ``k``-th call) in a loop on ``n`` threads, each
    starting at once and calling until ``seconds`` have passed; every thread's results."""
    results: list[list] = [[] for _ in range(n)]
    errors: list[BaseException] = []
    stop = time.monotonic() + seconds
    start = threading.Barrier(n)

    def run(i: int) -> None:
        rng = random.Random(i)
        start.wait()
        try:
            while time.monotonic() < stop:
                results[i].append(work(i, rng, len(results[i])))
        except BaseException as e:  # noqa: BLE001 - reported by the test
            errors.append(e)

    ts = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors, errors[:3]
    return results


def test_selection_from_8_threads_is_cached_counted_and_warned_once(tmp_path, fast_switching, caplog):
    runtime.register_defaults("toy2", lambda w, t: {"BLOCK_T": 1})
    pack = load_pack(write_pack(tmp_path / "p", {"toy2": [
        {"workload": {"tokens": 4, "profile": "a"}, "config": {"BLOCK_T": 4}},
        {"workload": {"tokens": 64, "profile": "a"}, "config": {"BLOCK_T": 64}}]}))
    shapes = [{"tokens": t, "profile": p} for t in (1, 4, 5, 64, 100, 3000) for p in ("a", "b")]
    want = {json.dumps(w): load_pack(tmp_path / "p").select("toy2", w) for w in shapes}
    def work(i: int, rng: random.Random, k: int):
        w = rng.choice(shapes)
        return w, pack.select("toy2", w)

    with caplog.at_level(logging.WARNING, logger="tuner.runtime"):
        per_thread = _threads(8, 0.6, work)
        pack.select("toy2", {"tokens": 4})  # a workload without the table's axes: default, one warning
        pack.select("toy2", {"tokens": 5})
    calls = [c for r in per_thread for c in r]
    assert len(calls) > 1000
    assert all(sel == want[json.dumps(w)] for w, sel in calls)
    hows = Counter(sel.how for _, sel in calls)
    hows["default"] += 2
    assert pack.stats()["toy2"] == {h: hows[h] for h in ("exact", "nearest", "default")}
    assert sum("does not name the axes" in r.getMessage() for r in caplog.records) == 1
    # with no pack active: the defaults, cached and counted the same way
    runtime.use_pack(None)
    before = runtime.stats()["kernels"].get("toy2", {}).get("default", 0)
    n = sum(len(r) for r in _threads(8, 0.3, lambda i, rng, k: runtime.select("toy2", rng.choice(shapes))))
    assert runtime.stats()["kernels"]["toy2"]["default"] == before + n


def _moe_case(T: int, seed: int) -> dict:
    g = torch.Generator().manual_seed(seed)
    inputs = dict(logits=torch.randn(T, 16, generator=g).to(DEVICE),
                  bias=(0.1 * torch.rand(16, generator=g)).to(DEVICE), block_m=16, renormalize=True, expert_map=None,
                  **ROUTING)
    return {"inputs": inputs, "ref": MR.reference(**inputs)}


def _mhc_case(T: int, seed: int) -> dict:
    inputs = MH.make_inputs(MH.Workload("post", T, 32), DEVICE, seed)
    return {"inputs": inputs, "ref": MH.reference(**inputs)}


def test_8_threads_select_and_launch_ops_against_the_reference(tmp_path):
    """Eight threads call the moe_routing and mhc_post ops for a few seconds with a pack active
    (exact, nearest and default selections): every result checks against the reference, every
    call is counted. Through the interpreter the launches themselves take turns (one interpreted
    launch at a time in a process); on a GPU they overlap."""
    runtime.use_pack(write_pack(tmp_path / "p", {"moe_routing": ENTRIES}))
    moe = {T: _moe_case(T, T) for T in (1, 2, 3, 8, 20, 50)}
    mhc = {T: _mhc_case(T, T) for T in (1, 3)}

    def work(i: int, rng: random.Random, k: int):
        if k % 4 != 3:  # each thread's first call routes a shape of its own: all six among the first calls
            T = list(moe)[(i + k) % len(moe)]
            x = moe[T]["inputs"]
            out = ops.moe_routing(x["logits"], x["bias"], top_k=2, n_group=4, topk_group=2, scoring="sigmoid",
                                  routed_scaling_factor=2.5, block_m=16)
            MR.verify(MR.MoeRouting(*out), moe[T]["ref"], x)
            return "moe_routing"
        T = list(mhc)[i % 2]
        x = mhc[T]["inputs"]
        MH.verify(ops.mhc_post(x["X"], x["y"], x["post"], x["comb"]), mhc[T]["ref"], x)
        return "mhc"

    calls = Counter(c for r in _threads(8, 2.0, work) for c in r)
    assert calls["moe_routing"] >= 8
    s = runtime.stats()
    assert sum(s["kernels"]["moe_routing"].values()) == calls["moe_routing"]
    assert sum(s["kernels"].get("mhc", {}).values()) == calls["mhc"] == s["kernels"].get("mhc", {}).get("default", 0)
    assert all(s["kernels"]["moe_routing"][h] for h in ("exact", "nearest", "default"))


def test_warmup_selects_without_counting_and_reports_a_line_per_kernel(tmp_path):
    pack = load_pack(write_pack(tmp_path / "p", {"moe_routing": [
        {"workload": {"tokens": 3, "profile": "dsv4-flash"}, "config": CFG_A}]}))
    lines: list[str] = []
    shapes = {"moe_routing": [{"tokens": 3, "profile": "dsv4-flash"}, {"profile": "dsv4-flash", "tokens": 5}],
              "engram": [{"tokens": 2, "placement": "hbm", "table_rows": 50_000_000}]}
    report = runtime.warmup(pack, shapes, progress=lines.append)
    assert report["moe_routing"] == {"shapes": 2, "configs": 1, "exact": 1, "nearest": 1, "default": 0,
                                     "seconds": report["moe_routing"]["seconds"]}
    assert report["engram"]["default"] == 1 and len(lines) == 2
    assert lines[0].startswith("warmup moe_routing: 2 shapes, 1 configs (1 exact, 1 nearest, 0 default)")
    assert pack.stats() == {}  # warm-up selections are not what ran
    runtime.use_pack(pack)
    with pytest.MonkeyPatch.context() as mp:  # the call as a capture makes it: the warm-up's selection serves it
        mp.setattr(runtime, "_capturing", lambda: True)
        MR.moe_routing(torch.randn(5, 256, device=DEVICE), None, top_k=6, scoring="sqrtsoftplus",
                       routed_scaling_factor=1.5)
    assert runtime.stats()["kernels"]["moe_routing"]["nearest"] == 1 and pack.cold() == {}
    with pytest.raises(ValueError, match="a moe_routing workload has the axes tokens, profile"):
        runtime.warmup(pack, [("moe_routing", {"tokens": 3})])
    with pytest.raises(TypeError, match="warmup shapes"):
        runtime.warmup(pack, [("moe_routing", 3)])


def test_a_selection_first_made_inside_a_capture_is_counted_cold_with_one_warning(tmp_path, monkeypatch, caplog):
    pack = load_pack(write_pack(tmp_path / "p", {"moe_routing": ENTRIES}))
    w = {"tokens": 2, "profile": "custom"}
    pack.select("moe_routing", w)  # selected before: warm
    monkeypatch.setattr(runtime, "_capturing", lambda: True)
    with caplog.at_level(logging.WARNING, logger="tuner.runtime"):
        for t in (2, 2, 9, 9, 10):
            pack.select("moe_routing", dict(w, tokens=t))
    assert pack.cold() == {"moe_routing": 2}
    assert sum("inside a CUDA graph capture" in r.getMessage() for r in caplog.records) == 1
    with pytest.raises(RuntimeError, match="before capturing"):
        runtime.warmup(pack, {"moe_routing": [w]})


@pytest.mark.gpu
def test_8_threads_on_4_streams_for_10_s_with_the_shipped_packs():
    """The folder of shipped packs (the one for this GPU, else the nearest), warmed up, then eight
    threads launching on four CUDA streams for 10 s: every result equals the single-threaded one."""
    import kernel_templates.sparse_mqa as SM

    pack = runtime.use_pack(ROOT / "packs")
    moe_shapes = [{"tokens": t, "profile": "dsv4-flash"} for t in (1, 16, 64, 256)]
    mqa_shapes = [{"batch": b, "context": 8192, "next_n": 1, "profile": "dsv41-flash"} for b in (1, 16)]
    runtime.warmup(pack, {"moe_routing": moe_shapes, "sparse_mqa": mqa_shapes})
    cases = []
    for w in moe_shapes:
        x = MR.make_inputs(MR.Workload(**w), "cuda", 1)
        cases.append(lambda x=x: ops.moe_routing(x["logits"], x["bias"], top_k=x["top_k"], scoring=x["scoring"],
                                                  routed_scaling_factor=x["routed_scaling_factor"]))
    for w in mqa_shapes:
        x = SM.make_inputs(SM.Workload(**w), "cuda", 1)
        cases.append(lambda x=x: (ops.mqa_topk(x["q"], x["weights"], x["k_cache"], x["k_scales"], x["block_table"],
                                                x["seq_lens"], top_k=x["top_k"], k_format=x["k_format"]),))
    want = [[t.clone() for t in c()] for c in cases]
    torch.cuda.synchronize()
    streams = [torch.cuda.Stream() for _ in range(4)]

    def work(i: int, rng: random.Random, n: int) -> int:
        k = rng.randrange(len(cases))
        with torch.cuda.stream(streams[i % 4]):
            got = cases[k]()
        streams[i % 4].synchronize()
        assert all(torch.equal(g, w) for g, w in zip(got, want[k])), k
        return k

    calls = sum(len(r) for r in _threads(8, 10.0, work))
    assert calls > 100 and pack.cold() == {}
    print(f"{calls} calls in 10 s on 8 threads, 4 streams; {runtime.stats()}")
