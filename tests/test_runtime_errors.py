"""The runtime's answers to a wrong kernel name or workload: one ValueError (one line) naming the
kernel and what is wrong, from ``select``, ``Pack.select`` and ``warmup`` alike, and no warning
about defaults before it. Valid workloads select as before; the check runs once per workload."""
from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

import kernel_templates.moe_routing  # noqa: F401  (registers its defaults)
from tuner import runtime
from tuner.runtime import gpu_identity, load_pack, manifest_digest, sha256_file
from tuner.runtime.target import INTERPRETER

FAMILIES = ("engram", "mhc", "moe_routing", "nvfp4_attention", "sparse_mqa")


def _lists_every_family(msg: str, kernel: str) -> bool:
    """The message for an unknown kernel: every family kernel_templates ships (imported or not),
    plus any kernel registered from elsewhere (other tests' toys)."""
    head = f"unknown kernel {kernel!r}: not a kernel family (known: "
    return msg.startswith(head) and msg.endswith(")") and set(FAMILIES) <= set(msg[len(head):-1].split(", "))
CFG = {"BLOCK_T": 2, "MAX_PROGRAMS": 4, "FUSED": False, "num_warps": 1, "num_stages": 1}


def _pack(root: Path) -> Path:
    """A sealed pack made on this device: moe_routing at dsv3, 64 tokens."""
    root.mkdir(parents=True)
    table = {"schema": 1, "kernel": "moe_routing", "categorical_axes": ["profile"], "numeric_axes": ["tokens"],
             "entries": [{"workload": {"tokens": 64, "profile": "dsv3"}, "config": CFG}]}
    (root / "moe_routing.json").write_text(json.dumps(table))
    manifest = {"schema": 1, "name": root.name, "fingerprint": dict(gpu_identity()),
                "kernels": {"moe_routing": {"file": "moe_routing.json"}},
                "files": {"moe_routing.json": sha256_file(root / "moe_routing.json")}}
    (root / "manifest.json").write_text(json.dumps(manifest))
    (root / "manifest.sha256").write_text(manifest_digest(manifest))
    return root


@pytest.fixture(params=["no pack", "pack"])
def select(request, tmp_path):
    """``runtime.select`` with no pack active, and ``Pack.select`` of a usable pack."""
    runtime.use_pack(None)
    if request.param == "no pack":
        with runtime._NO_PACK.lock:  # selections other tests made: an equal workload (3.0 after 3) would hit one
            runtime._NO_PACK.cache.clear()
        yield lambda kernel, workload: runtime.select(kernel, workload, INTERPRETER)
    else:
        pack = load_pack(_pack(tmp_path / "p"))
        assert pack.usable
        yield lambda kernel, workload: pack.select(kernel, workload, INTERPRETER)
    runtime.use_pack(None)


def _one_line(e: pytest.ExceptionInfo) -> str:
    msg = str(e.value)
    assert "\n" not in msg and (e.value.__suppress_context__ or e.value.__context__ is None)
    return msg


def test_an_unknown_kernel_is_a_value_error_naming_every_family(select, caplog):
    with caplog.at_level(logging.WARNING, logger="tuner.runtime"), pytest.raises(ValueError) as e:
        select("nosuch", {"tokens": 3})
    assert _lists_every_family(_one_line(e), "nosuch")
    assert not caplog.records  # no "using defaults" before the error
    with pytest.raises(ValueError, match="unknown kernel 'ops'"):  # a module of the package, not a family
        select("ops", {"tokens": 3})


@pytest.mark.parametrize("workload, why", [
    ({"tokens": 3}, "axis 'profile' missing (moe_routing's axes: tokens, profile)"),
    ({}, "axis 'tokens', 'profile' missing"),
    ({"tokens": 3, "profile": "dsv3", "extra": 1}, "'extra' not an axis of moe_routing (moe_routing's axes: tokens, profile)"),
    ({"tokens": "x", "profile": "dsv3"}, "axis 'tokens' is 'x' (str), not an integer"),
    ({"tokens": 64, "profile": "dsv3", "Tokens": 64}, "'Tokens' not an axis of moe_routing"),
    ({"tokens": True, "profile": "dsv3"}, "axis 'tokens' is True (bool), not an integer"),
    ({"tokens": 3.0, "profile": "dsv3"}, "axis 'tokens' is 3.0 (float), not an integer"),
    ({"tokens": 3, "profile": 3}, "axis 'profile' is 3 (int), not a string"),
    ({"tokens": [3], "profile": "dsv3"}, "axis 'tokens' is [3] (list), not an integer"),  # unhashable
])
def test_a_wrong_workload_is_a_value_error_naming_the_axis(select, caplog, workload, why):
    with caplog.at_level(logging.WARNING, logger="tuner.runtime"), pytest.raises(ValueError) as e:
        select("moe_routing", workload)
    assert _one_line(e).startswith("moe_routing workload {") and why in str(e.value)
    assert not caplog.records  # not "does not name the axes ... using defaults", then a TypeError


def test_a_value_the_family_refuses_is_a_value_error_naming_the_kernel(select):
    with pytest.raises(ValueError, match=r"^sparse_mqa workload .*: profile must be one of"):
        select("sparse_mqa", {"batch": 1, "context": 1024, "next_n": 1, "profile": "nosuch"})


def test_a_workload_that_is_not_a_dict_is_a_type_error(select):
    with pytest.raises(TypeError, match="moe_routing: a workload is a dict of axis -> value, not tuple"):
        select("moe_routing", (("tokens", 3), ("profile", "dsv3")))


def test_valid_workloads_select_as_before(select):
    assert select("moe_routing", {"tokens": 3, "profile": "nosuch"}).how == "default"  # the family's to judge
    assert select("moe_routing", {"profile": "dsv3", "tokens": 64}).how in ("exact", "default")
    # an axis with a default (page) may be left out
    assert select("nvfp4_attention", {"batch": 1, "context": 1024, "heads": 64, "kv_dtype": "nvfp4",
                                      "mode": "sparse"}).how == "default"
    # a kernel registered from outside kernel_templates: its workloads are its own business
    runtime.register_defaults("outside", lambda w, t: {"X": w.get("anything")})
    try:
        assert runtime.select("outside", {"anything": "goes"}, INTERPRETER).config == {"X": "goes"}
    finally:
        del runtime._DEFAULTS["outside"]


def test_the_check_runs_once_per_distinct_workload(select, monkeypatch):
    calls = []
    check = runtime._check_workload
    monkeypatch.setattr(runtime, "_check_workload", lambda k, w: (calls.append(dict(w)), check(k, w))[1])
    w = {"tokens": 7919, "profile": "dsv4-flash"}  # selected by no other test
    for _ in range(5):
        select("moe_routing", w)
    select("moe_routing", dict(w, tokens=7920))
    assert calls == [w, dict(w, tokens=7920)]


def test_warmup_names_an_unknown_kernel_and_a_mistyped_axis_before_launching_anything(caplog):
    with pytest.raises(ValueError) as e:
        runtime.warmup(None, {"nosuch": [{}]})
    assert _lists_every_family(_one_line(e), "nosuch")
    lines: list[str] = []
    with caplog.at_level(logging.WARNING, logger="tuner.runtime"), pytest.raises(ValueError) as e:
        runtime.warmup(None, {"moe_routing": [{"tokens": "x", "profile": "dsv3"}]}, progress=lines.append)
    assert _one_line(e) == ("warmup: a moe_routing workload has the axes tokens, profile; got {'tokens': 'x', "
                            "'profile': 'dsv3'}: axis 'tokens' is 'x' (str), not an integer")
    assert not caplog.records
    with pytest.raises(ValueError, match="'extra' not an axis of moe_routing"):
        runtime.warmup(None, {"moe_routing": [{"tokens": 3, "profile": "dsv3", "extra": 1}]})
    # a bad workload of a later kernel stops the warm-up before the first kernel launches
    with pytest.raises(ValueError, match="a mhc workload has the axes op, tokens, dim; got .*: axis 'dim' missing"):
        runtime.warmup(None, [("moe_routing", {"tokens": 2, "profile": "dsv3"}), ("mhc", {"op": "pre", "tokens": 2})],
                       progress=lines.append)
    assert lines == []


def test_a_workload_equal_to_one_selected_takes_its_selection(select):
    """The check runs on a selection's first making: a workload equal to one already selected
    (``3.0 == 3``, as Python's dict keys compare) is that workload, and takes its selection."""
    first = select("moe_routing", {"tokens": 5, "profile": "dsv3"})
    assert select("moe_routing", {"tokens": 5.0, "profile": "dsv3"}) is first
