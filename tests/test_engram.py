"""Engram: hash and lookup kernels vs reference (interpreter), the table's placements and
their fallbacks, prefetch handles, parameters, search space and lowering."""
from __future__ import annotations

import gc
import json
import logging
import mmap
import os
import subprocess
import sys
import types
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kernel_templates import engram as E
from kernel_templates.engram import hashing as EH
from kernel_templates.engram import lookup as EL
from kernel_templates.engram import prefetch as EP
from kernel_templates.engram.reference import reference, reference_hash
from kernel_templates.engram import table as ET
from search_spaces import engram as S
from tuner.runtime.target import Target
from conftest import run_clean

ROOT = Path(__file__).resolve().parents[1]
# The device kernels run on: mirrors tests/conftest.py (which sets TRITON_INTERPRET=1 without a GPU
# before this module is imported). Module-scoped fixtures cannot take the function-scoped `device`.
DEV = "cuda" if torch.cuda.is_available() and os.environ.get("TRITON_INTERPRET", "0") in ("", "0") else "cpu"
TGT = Target.of(DEV)
SM90, SM100 = Target.named("sm_90"), Target.named("sm_100")
_P = EH.make_params(4096, seed=3, vocab=300, classes=200)  # small vocab: many repeated n-grams
_HYP = settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _cfg(rows=8, vec=8, dedup=False, frac=0.5, chunk=0, nw=1, stages=1, stream=False) -> dict:
    return dict(ROWS=rows, VEC=vec, DEDUP=dedup, GRID_SM_FRAC=frac, CHUNK_ROWS=chunk, num_warps=nw, num_stages=stages,
                STREAM=stream)


def _on(p: dict, device: str) -> dict:
    return {k: v.to(device) if torch.is_tensor(v) else v for k, v in p.items()}


def _hash(tokens: torch.Tensor, pad_id: int, p: dict = _P, config: dict | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """(kernel, reference) rows for ``tokens``, both run on DEV and returned on the CPU."""
    p = _on(p, DEV)
    args = (tokens.to(DEV), p["comp"], p["multipliers"], p["primes"], p["offsets"])
    return E.engram_hash(*args, pad_id=pad_id, config=config).cpu(), reference_hash(*args, pad_id=pad_id).cpu()


@pytest.fixture(scope="module")
def table():
    t = E.EngramTable(4096, "hbm", DEV).fill_random_(seed=7)
    yield t
    t.close()


# ----------------------------------------------------------------------------- hash

@pytest.mark.parametrize("B,L,pad_id,config", [
    (1, 1, 0, None), (3, 7, 5, None), (2, 37, 299, None), (5, 2, 11, {"BLOCK_T": 4, "num_warps": 1, "num_stages": 1}),
    (4, 3, 1, {"BLOCK_T": 2, "num_warps": 2, "num_stages": 1}),
])
def test_hash_matches_reference(B, L, pad_id, config, device):
    tokens = EH.zipf_tokens((B, L), seed=B * 100 + L, vocab=300).to(device)
    p = _on(_P, device)
    out, ref = _hash(tokens, pad_id, p, config)
    assert out.dtype == torch.int64 and out.shape == (B, L, 24)
    assert torch.equal(out.cpu(), ref.cpu())


def test_hash_reference_is_the_formula():
    tokens = torch.tensor([[7, 42, 7, 9, 100], [3, 3, 3, 3, 3]])
    pad = 17
    comp, m, primes, offs = (_P[k].tolist() for k in ("comp", "multipliers", "primes", "offsets"))
    want = torch.empty(2, 5, 24, dtype=torch.long)
    for b in range(2):
        for t in range(5):
            for n in (2, 3, 4):
                mix = 0
                for k in range(n):
                    tok = tokens[b, t - k].item() if t - k >= 0 else pad  # pad stands for tokens before the row start
                    mix ^= comp[tok] * m[k]
                for h in range(8):
                    want[b, t, (n - 2) * 8 + h] = mix % primes[n - 2][h] + offs[n - 2][h]
    _, ref = _hash(tokens, pad)
    assert torch.equal(ref, want)


@given(st.integers(1, 3), st.integers(1, 12), st.integers(0, 299), st.data())
@_HYP
def test_hash_property_random_streams(B, L, pad_id, data):
    vals = data.draw(st.lists(st.sampled_from([pad_id, 0, 1, 2, 150, 299]) | st.integers(0, 299),
                              min_size=B * L, max_size=B * L))
    out, ref = _hash(torch.tensor(vals, dtype=torch.int64).view(B, L), pad_id)
    assert torch.equal(out, ref)
    # column (n-2)*8 + h lies in the sub-table [off, off + p): one flat table
    lo = _P["offsets"].flatten()
    assert ((out >= lo) & (out < lo + _P["primes"].flatten())).all()


def test_hash_bad_ids_are_class_zero():
    """An id outside [0, V) (-1, V, far past it) hashes as compressed class 0, in the reference
    (no wrap to the last row, no IndexError) and in the kernel alike."""
    zero_id = int((_P["comp"] == 0).nonzero()[0, 0])
    tokens = torch.tensor([[4, -1, 9, 300, 1000], [-5, 7, 299, 0, 1 << 40]])
    out, ref = _hash(tokens, 2)
    assert torch.equal(out, ref)
    fixed = torch.where((tokens < 0) | (tokens >= 300), zero_id, tokens)
    assert torch.equal(ref, _hash(fixed, 2)[1])
    assert not torch.equal(ref, _hash(torch.where(tokens < 0, 299, tokens).clamp(max=299), 2)[1])


def test_hash_validation():
    t = torch.zeros(2, 3, dtype=torch.int64, device=DEV)
    p = _on(_P, DEV)
    with pytest.raises(ValueError, match="pad_id"):
        E.engram_hash(t, p["comp"], p["multipliers"], p["primes"], p["offsets"], pad_id=300)
    with pytest.raises(ValueError, match="comp must be"):
        E.engram_hash(t, p["comp"].long(), p["multipliers"], p["primes"], p["offsets"], pad_id=0)
    with pytest.raises(ValueError, match="tokens must be"):
        E.engram_hash(t.int(), p["comp"], p["multipliers"], p["primes"], p["offsets"], pad_id=0)


# ----------------------------------------------------------------------------- lookup

_CONFIGS = [
    _cfg(),
    _cfg(rows=2, vec=1, frac=0.25),
    _cfg(rows=16, vec=4, dedup=True, frac=1.0, nw=2),
    _cfg(rows=4, vec=2, dedup=True, chunk=48, frac=0.5),
    _cfg(rows=32, vec=8, dedup=False, frac=4.0, chunk=72, nw=4, stages=2),
    _cfg(rows=16, vec=4, dedup=True, frac=1.0, nw=2, stream=True),
    _cfg(rows=8, vec=8, stream=True),
]


@pytest.mark.parametrize("config", _CONFIGS,
                         ids=lambda c: "r{ROWS}v{VEC}d{DEDUP:d}f{GRID_SM_FRAC}c{CHUNK_ROWS}s{STREAM:d}".format(**c))
@pytest.mark.parametrize("shape", [(1, 1, 24), (2, 5, 24), (3, 7)])
def test_lookup_matches_gather_dequant(table, config, shape):
    g = torch.Generator().manual_seed(sum(shape))
    rows = torch.randint(0, 64, shape, generator=g)  # few distinct rows: long duplicate runs for DEDUP
    rows.view(-1)[::3] = torch.randint(0, table.num_rows, rows.view(-1)[::3].shape, generator=g)
    rows = rows.to(DEV)
    out = EL.launch(config=config, table=table, rows=rows)
    assert out.shape == (*shape, 256) and out.dtype == torch.bfloat16
    E.verify(out, reference(table, rows), {})


@pytest.mark.parametrize("wl", S.SMALL_WORKLOADS + [E.Workload(5, "host", 4096)], ids=str)
def test_spec_inputs_default_config_and_baseline(wl, device):
    inputs = E.make_inputs(wl, device, seed=1)
    try:
        assert inputs["table"].requested_placement == wl.placement
        ref = reference(**inputs)
        E.verify(EL.launch(config=E.default_config(wl, TGT), **inputs), ref, inputs)
        E.verify(E.engram_lookup(inputs["table"], inputs["rows"]), ref, inputs)  # config from runtime.select
        E.verify(E.baselines["torch_eager"](**inputs), ref, inputs)
    finally:
        inputs["table"].close()


@given(st.lists(st.integers(0, 4095) | st.sampled_from([0, 1, 4095]), min_size=1, max_size=60),
       st.sampled_from(_CONFIGS))
@_HYP
def test_lookup_property(table, rows, config):
    r = torch.tensor(rows, dtype=torch.int64, device=DEV)
    E.verify(EL.launch(config=config, table=table, rows=r), reference(table, r), {})


def test_out_of_range_rows_read_nothing(table):
    rows = torch.tensor([[3, -1, 4096, 5, 1 << 40, 3]], device=DEV)
    for cfg in (_cfg(), _cfg(dedup=True)):
        out = EL.launch(config=cfg, table=table, rows=rows)
        assert (out[0, [1, 2, 4]] == 0).all()
        good = rows[:, [0, 3, 5]]
        assert torch.equal(out[:, [0, 3, 5]].float().cpu(), reference(table, good).cpu())


def test_empty_rows(table):
    out = EL.launch(config=_cfg(), table=table, rows=torch.empty(0, 24, dtype=torch.int64, device=DEV))
    assert out.shape == (0, 24, 256)


def test_verify_catches_a_wrong_value(table):
    rows = torch.arange(48, device=DEV).view(2, 24)
    out = EL.launch(config=_cfg(), table=table, rows=rows)
    out[1, 3, 100] += 1.0
    with pytest.raises(AssertionError, match="embeddings"):
        E.verify(out, reference(table, rows), {})


def test_launch_validation(table):
    rows = torch.zeros(2, 24, dtype=torch.int64, device=DEV)
    with pytest.raises(ValueError, match="int64"):
        EL.launch(config=_cfg(), table=table, rows=rows.int())
    with pytest.raises(ValueError, match="VEC"):
        EL.launch(config=_cfg(vec=16), table=table, rows=rows)
    with pytest.raises(ValueError, match="lacks"):
        EL.launch(config={"ROWS": 8}, table=table, rows=rows)
    with pytest.raises(ValueError, match="NUM_CTAS"):
        EL.launch(config=dict(_cfg(), NUM_CTAS=3), table=table, rows=rows)
    for knob, bad in (("ROWS", 0), ("ROWS", 12), ("num_warps", 3), ("DEDUP", 1), ("STREAM", "yes"),
                      ("GRID_SM_FRAC", 0), ("GRID_SM_FRAC", -0.5), ("CHUNK_ROWS", -24), ("num_stages", 0),
                      ("VEC", 8.0)):
        with pytest.raises(ValueError, match=knob):
            EL.launch(config=dict(_cfg(), **{knob: bad}), table=table, rows=rows)
    with pytest.raises(ValueError, match="EngramTable"):
        EL.launch(config=_cfg(), table=table.data, rows=rows)
    closed = E.EngramTable(64, "hbm", DEV)
    closed.close()
    with pytest.raises(ValueError, match="closed"):
        EL.launch(config=_cfg(), table=closed, rows=rows)


# ----------------------------------------------------------------------------- table placements

def test_host_thp_real_mapping_on_cpu(caplog):
    caplog.set_level(logging.INFO, "kernel_templates.engram")
    t = E.EngramTable(9000, "host_thp", "cpu")
    if t.placement == "host":  # this machine gave no huge pages: the fallback said why
        assert t.reason and "huge" in caplog.text
        pytest.skip(f"no huge pages here: {t.reason}")
    assert t.data.data_ptr() % ET.HUGE_PAGE == 0 and t.data.shape == (9000, 264)
    assert t.huge_page_bytes > 0 and not t.registered
    assert "not registered" in t.reason and "not registered" in caplog.text
    t.data[-1] = 7  # writable to the last byte
    t.close()
    assert t.closed and t._mmap is None
    t.close()  # idempotent
    # a view alive at close keeps the mapping (never a dangling pointer); freed with the view
    t = E.EngramTable(100, "host_thp", "cpu")
    view = t.data[99]
    view[:] = 5
    t.close()
    assert "views of the table are alive" in caplog.text
    assert (view == 5).all()
    del view


@pytest.mark.parametrize("why", ["never", "missing", "madvise", "no_huge"])
def test_host_thp_falls_back_to_host(why, monkeypatch, tmp_path, caplog):
    if why == "never":
        f = tmp_path / "enabled"
        f.write_text("always madvise [never]\n")
        monkeypatch.setattr(ET, "THP_SYSFS", str(f))
    elif why == "missing":
        monkeypatch.setattr(ET, "THP_SYSFS", str(tmp_path / "absent"))
    elif why == "madvise":
        monkeypatch.setattr(ET, "THP_SYSFS", str(tmp_path / "enabled"))
        (tmp_path / "enabled").write_text("always [madvise] never\n")

        class NoAdvice(mmap.mmap):
            def madvise(self, *a):
                raise OSError(22, "Invalid argument")
        monkeypatch.setattr(ET.mmap, "mmap", NoAdvice)
    else:
        monkeypatch.setattr(ET, "THP_SYSFS", str(tmp_path / "enabled"))
        (tmp_path / "enabled").write_text("[always] madvise never\n")
        monkeypatch.setattr(ET, "_anon_huge_bytes", lambda start, length: 0)
    caplog.set_level(logging.INFO, "kernel_templates.engram")
    with E.EngramTable(100, "host_thp", DEV) as t:  # on a GPU the fallback is plain pinned memory
        assert t.requested_placement == "host_thp" and t.placement == "host"
        assert t._mmap is None and not t.registered
        want = {"never": "disabled", "missing": "unreadable", "madvise": "madvise", "no_huge": "none of the table"}[why]
        assert want in t.reason and "host_thp unavailable" in caplog.text
        t.fill_random_(1)  # still a working table
        rows = torch.tensor([0, 99, 5], device=DEV)
        E.verify(EL.launch(config=_cfg(), table=t, rows=rows), reference(t, rows), {})
    assert t.closed


class _FakeCuda:
    def __init__(self, fail: bool = False) -> None:
        self.live: dict[int, int] = {}
        self.calls: list[str] = []
        self.fail = fail

    def register(self, ptr: int, n: int) -> None:
        self.calls.append("register")
        if self.fail:
            raise RuntimeError("cudaErrorHostMemoryAlreadyRegistered")
        assert ptr % ET.HUGE_PAGE == 0 and n % ET.HUGE_PAGE == 0
        self.live[ptr] = n

    def unregister(self, ptr: int) -> None:
        self.calls.append("unregister")
        del self.live[ptr]


def _fake_cuda(monkeypatch, fail: bool = False) -> _FakeCuda:
    fake = _FakeCuda(fail)
    monkeypatch.setattr(ET, "_registers_with_cuda", lambda device: True)
    monkeypatch.setattr(ET, "_host_register", fake.register)
    monkeypatch.setattr(ET, "_host_unregister", fake.unregister)
    monkeypatch.setattr(ET, "_pinned_empty", lambda n: torch.empty(n, ET.ROW_BYTES, dtype=torch.uint8))
    monkeypatch.setattr(ET, "_anon_huge_bytes", lambda start, length: length)  # independent of this host
    monkeypatch.setattr(ET, "_thp_unavailable", lambda: None)
    return fake


def test_registration_freed_exactly_once(monkeypatch):
    fake = _fake_cuda(monkeypatch)
    for _ in range(3):
        with E.EngramTable(5000, "host_thp", "cpu") as t:
            assert t.placement == "host_thp" and t.registered and t.pinned and len(fake.live) == 1
        assert not fake.live
    t = E.EngramTable(5000, "host_thp", "cpu")
    del t
    gc.collect()
    assert not fake.live, "a table dropped without close() unregisters in its finalizer"
    assert fake.calls.count("register") == fake.calls.count("unregister") == 4


def test_a_shared_table_unregisters_once_after_its_last_handle(monkeypatch):
    """``shared_table``: every call with the same arguments reads one table; closing a handle
    (or dropping it) never frees memory another handle reads, and the table unregisters
    exactly once, with its last handle; the next call builds a new one."""
    fake = _fake_cuda(monkeypatch)
    a, b = ET.shared_table(5000, "host_thp", "cpu", seed=3), ET.shared_table(5000, "host_thp", "cpu", seed=3)
    c = ET.shared_table(5000, "host_thp", "cpu", seed=4)
    assert a.data.data_ptr() == b.data.data_ptr() != c.data.data_ptr() and len(fake.live) == 2
    assert a.registered and a.placement == "host_thp"
    with a:
        pass
    assert a.closed and not a.registered and len(fake.live) == 2
    a.close()  # idempotent: the count is not taken twice
    b.write_(3, torch.full((1, ET.ROW_BYTES), 7, dtype=torch.uint8))  # still mapped and registered
    assert int(b.data[3, 0]) == 7 and len(fake.live) == 2
    del b
    gc.collect()
    assert len(fake.live) == 1 and fake.calls == ["register", "register", "unregister"]
    c.close()
    assert not fake.live and not [k for k in ET._SHARED if k[0] == 5000]
    d = ET.shared_table(5000, "host_thp", "cpu", seed=3)
    assert len(fake.live) == 1 and int(d.data[3, 0]) != 7, "a new table, filled afresh"
    d.close()
    assert not fake.live


def test_shared_table_keys_resolve_and_a_gone_table_never_drops_its_successor():
    """``device=None`` and the device it resolves to share one table; when the table a key
    named was dropped from the map (so a new one was built for the key), the old table's last
    handle closes only the old one, and the key keeps naming the new."""
    if torch.cuda.is_available():
        pytest.skip("on a GPU None resolves to cuda")
    a, b = ET.shared_table(4120, "hbm", None, seed=5), ET.shared_table(4120, "hbm", "cpu", seed=5)
    assert a.data.data_ptr() == b.data.data_ptr()
    key = next(k for k in ET._SHARED if k[0] == 4120)
    old = ET._SHARED.pop(key)
    c = ET.shared_table(4120, "hbm", "cpu", seed=5)
    new = c._owner
    assert new is not old
    a.close()
    b.close()
    assert old.closed and ET._SHARED[key] is new and not c.closed
    c.close()
    assert new.closed and key not in ET._SHARED


def test_a_handle_is_never_given_out_on_a_table_being_closed():
    """A collection while a handle is made (``object.__new__`` allocates) can finalize the last
    other handle of the same table: the new handle's count is taken first, so the table stays
    open for it. Swept over the call's first allocation points (without the fix, 2-4 hit)."""
    threshold = gc.get_threshold()
    try:
        for k in range(1, 9):
            gc.collect(0)
            a = ET.shared_table(4128, "hbm", "cpu", seed=0)
            owner = a._owner
            cycle = [a]
            cycle.append(cycle)  # only a collection frees it
            del a, cycle
            gc.set_threshold(gc.get_count()[0] + k)
            b = ET.shared_table(4128, "hbm", "cpu", seed=0)
            gc.set_threshold(*threshold)
            assert not b.closed and not b._owner.closed, f"collection after {k} allocations"
            if b._owner is owner:
                assert owner._handles >= 1
            b.close()
        gc.collect()
        assert not [key for key in ET._SHARED if key[0] == 4128]
    finally:
        gc.set_threshold(*threshold)


def test_a_finalizer_never_waits_for_the_lock(monkeypatch):
    """A handle dropped while another thread holds the lock (building a table, seconds) is not
    waited for: that thread counts it when it lets the lock go, and closes its table then."""
    import threading

    h = ET.shared_table(4136, "hbm", "cpu", seed=0)
    owner = h._owner
    building, finish = threading.Event(), threading.Event()
    real = ET.EngramTable.fill_random_

    def slow_fill(self, seed=0, *a, **k):
        building.set()
        finish.wait(10)
        return real(self, seed, *a, **k)

    monkeypatch.setattr(ET.EngramTable, "fill_random_", slow_fill)
    got = []
    t = threading.Thread(target=lambda: got.append(ET.shared_table(4144, "hbm", "cpu", seed=0)))
    t.start()
    assert building.wait(10)
    h.__del__()  # as the collector would call it, here, while the builder holds the lock
    assert not owner.closed and owner in ET._DROPPED
    finish.set()
    t.join(10)
    assert owner.closed and not ET._DROPPED and not [k for k in ET._SHARED if k[0] == 4136]
    got[0].close()
    assert not [k for k in ET._SHARED if k[0] == 4144]


def test_make_inputs_shares_one_table_per_rows_and_placement(monkeypatch):
    """A study's two seeds and a grid's token counts read one filled table (a 33M-row host
    table costs seconds to build); the tokens still follow the seed, another row count or
    placement gets its own table, and the table goes when its last holder does."""
    fills = []
    real = ET.random_embeddings
    monkeypatch.setattr(ET, "random_embeddings", lambda *a, **k: fills.append(a[0]) or real(*a, **k))
    a = E.make_inputs(E.Workload(16, "hbm", 4104), DEV, seed=1)
    b = E.make_inputs(E.Workload(64, "hbm", 4104), DEV, seed=2)
    c = E.make_inputs(E.Workload(16, "host", 4104), DEV, seed=1)
    d = E.make_inputs(E.Workload(16, "hbm", 4112), DEV, seed=1)
    assert fills == [4104, 4104, 4112], "one fill per (rows, placement)"
    assert a["table"].data.data_ptr() == b["table"].data.data_ptr() != c["table"].data.data_ptr()
    assert d["table"].num_rows == 4112
    assert not torch.equal(a["rows"], E.make_inputs(E.Workload(16, "hbm", 4104), DEV, seed=2)["rows"])
    a["table"].close()  # one holder's close leaves the other's table whole
    ref = reference(**b)
    E.verify(EL.launch(config=E.default_config(E.Workload(64, "hbm", 4104), TGT), **b), ref, b)
    del a, b, c, d
    gc.collect()
    assert not [k for k in ET._SHARED if k[0] in (4104, 4112)]


def test_registration_failure_falls_back_to_pinned(monkeypatch, caplog):
    fake = _fake_cuda(monkeypatch, fail=True)
    with E.EngramTable(100, "host_thp", "cpu") as t:
        assert t.placement == "host" and t.pinned and not t.registered and t._mmap is None
        assert "cudaHostRegister failed" in t.reason
    assert fake.calls == ["register"] and not fake.live


def test_host_on_cpu_is_plain_memory(caplog):
    caplog.set_level(logging.INFO, "kernel_templates.engram")
    with E.EngramTable(10, "host", "cpu") as t:
        assert t.placement == "host" and not t.pinned and "unpinned" in t.reason and "unpinned" in caplog.text
        assert t.kernel_arg() is t.data


def test_table_validation():
    with pytest.raises(ValueError, match="placement"):
        E.EngramTable(10, "disk", "cpu")
    with pytest.raises(ValueError, match="num_rows"):
        E.EngramTable(0, "hbm", "cpu")
    with E.EngramTable(10, "hbm", "cpu") as t:
        with pytest.raises(ValueError, match="outside"):
            t.write_(8, torch.zeros(3, 264, dtype=torch.uint8))


def test_uva_pointer_is_what_triton_specializes():
    from triton._C.libtriton import native_specialize_impl
    from triton.backends.compiler import BaseBackend

    assert native_specialize_impl(BaseBackend, ET._UVAPointer(1 << 21, torch.uint8), False, True, True) == ("*u8", "D")


@pytest.fixture(scope="module")
def split_table():
    t = E.EngramTable(4096, "host_split", DEV).fill_random_(seed=7)
    yield t
    t.close()


def test_host_split_layout(split_table, table):
    """host_split: values [rows, 256] at a 256-B aligned address (two 128-B lines a row), scales
    [rows, 8] apart on the device; the same rows as the packed table filled from the same seed."""
    t = split_table
    assert t.split and t.placement == "host_split" and t.codes.shape == (4096, 256) and t.scales.shape == (4096, 8)
    assert t.codes.data_ptr() % ET.SPLIT_ALIGN == 0 and t.codes.stride() == (256, 1) and t.scales.stride() == (8, 1)
    assert t.scales.device == torch.device(DEV) and t.codes.device.type == "cpu"
    assert torch.equal(t.gather_packed(torch.arange(4096)), table.data.cpu().to(t.codes.device))
    with pytest.raises(ValueError, match="no packed"):
        t.data
    packed = ET.pack_rows(torch.randn(3, 256))
    t2 = E.EngramTable(16, "host_split", DEV)
    t2.write_(5, packed)
    assert torch.equal(t2.gather_packed(torch.arange(5, 8)), packed)
    t2.close()
    assert t2.closed
    with pytest.raises(ValueError, match="closed"):
        t2.codes


@pytest.mark.parametrize("config", [_cfg(vec=16), _cfg(rows=16, vec=16, dedup=True, frac=1.0, nw=2),
                                    _cfg(rows=4, vec=4, chunk=48)], ids=["v16", "v16-dedup", "v4-chunk"])
def test_host_split_lookup_matches_gather_dequant(split_table, config):
    g = torch.Generator().manual_seed(5)
    rows = torch.randint(0, 64, (2, 5, 24), generator=g)
    rows.view(-1)[::3] = torch.randint(0, split_table.num_rows, rows.view(-1)[::3].shape, generator=g)
    rows.view(-1)[7] = -1  # out of range: zeros, no read
    rows = rows.to(DEV)
    out = EL.launch(config=config, table=split_table, rows=rows)
    good = rows.clamp(min=0)
    ref = reference(split_table, good)
    ref.view(-1, 256)[7] = 0
    E.verify(out, ref, {})
    E.verify(E.baselines["torch_eager"](table=split_table, rows=good), reference(split_table, good), {})


def test_vec16_only_for_split_rows(table, split_table):
    rows = torch.zeros(2, 24, dtype=torch.int64, device=DEV)
    with pytest.raises(ValueError, match="VEC"):
        EL.launch(config=_cfg(vec=16), table=table, rows=rows)
    with pytest.raises(ValueError, match="VEC"):
        EL.launch(config=_cfg(vec=32), table=split_table, rows=rows)
    for p, ok in (("host_split", True), ("host", False), ("hbm", False)):
        wl = E.Workload(256, p, 1 << 20)
        cfg = dict(E.default_config(wl, TGT), VEC=16)
        assert S.constraints(cfg, wl, TGT) == ok, p


# ----------------------------------------------------------------------------- prefetch

def test_prefetch_several_in_flight(table):
    pf = EP.EngramPrefetcher(table, config=_cfg(dedup=True))
    batches = [torch.randint(0, table.num_rows, (2, n, 24), generator=torch.Generator().manual_seed(n)).to(DEV)
               for n in (1, 3, 2)]
    handles = [pf.submit(r) for r in batches]
    for r, h in reversed(list(zip(batches, handles))):
        out = h.wait()
        E.verify(out, reference(table, r), {})  # copies to the host: the lookup has finished
        assert h.ready()  # wait() never blocks the host, so ask only after the copy
    assert len({h.wait().data_ptr() for h in handles}) == 3, "each handle owns its output"


# ----------------------------------------------------------------------------- inputs, space, lowering

def test_params_and_inputs():
    p = EH.make_params(8 << 20, seed=0)
    primes = p["primes"].flatten().tolist()
    assert len(set(primes)) == 24 and all(EH._is_prime(x) for x in primes) and sum(primes) <= 8 << 20
    offs = p["offsets"].flatten()
    assert offs[0] == 0 and torch.equal(offs[1:], torch.cumsum(p["primes"].flatten(), 0)[:-1])
    m = p["multipliers"]
    assert (m % 2 == 1).all() and int(m.max()) * (EH.CLASSES - 1) < 2**63
    comp = p["comp"]
    assert comp.shape == (EH.VOCAB,) and comp.dtype == torch.int32 and int(comp.max()) == EH.CLASSES - 1
    tok = EH.zipf_tokens((4, 512), seed=0)
    counts = torch.bincount(tok.flatten(), minlength=EH.VOCAB)
    assert counts.max() > 40 * tok.numel() / EH.VOCAB * 10, "Zipfian: a few ids dominate"
    wl = E.Workload(16, "hbm", 4096)
    inputs = E.make_inputs(wl, DEV, seed=2)
    rows, data = inputs["rows"], inputs["table"].data
    assert rows.shape == (1, 16, 24) and 0 <= int(rows.min()) and int(rows.max()) < 4096
    vals = data[:, :256].view(torch.float8_e4m3fn).float()
    assert not torch.isnan(vals).any() and (vals != 0).float().mean() > 0.9
    again = E.make_inputs(wl, DEV, seed=3)["table"].data.clone()  # the same table, or one filled alike
    del inputs, rows, data, vals
    gc.collect()
    assert torch.equal(E.make_inputs(wl, DEV, seed=2)["table"].data, again), "seeded"
    assert E.cost(wl) == (16 * 24 * 264 + 16 * 24 * 512, 16 * 24 * 256)


def test_a_meta_table_is_left_unfilled(monkeypatch):
    """Compiling ahead builds a workload's inputs on ``meta``: no row of any placement's table is
    generated (an 8M-row fill there cost the pool 13 s a workload on the GPU host)."""
    monkeypatch.setattr(ET, "random_embeddings", lambda *a, **k: pytest.fail("a meta table was filled"))
    for placement in ET.PLACEMENTS:
        inputs = E.make_inputs(E.Workload(16, placement, 4096), "meta", seed=0)
        assert inputs["table"].device.type == "meta" and inputs["rows"].device.type == "meta"
        assert inputs["table"].num_rows == 4096


def test_space_matches_kernel_and_defaults():
    import inspect

    params = inspect.signature(EL._engram_lookup_kernel.fn).parameters
    constexprs = {n for n, p in params.items() if "constexpr" in str(p.annotation)}
    # RAW is the staged prefetch's copy mode (``stage``), not a tuning axis
    assert set(S.SPACE) == (constexprs - {"D", "N_SCALES", "RAW"}) | {"num_warps", "num_stages"}
    for w in S.WORKLOADS + S.SMALL_WORKLOADS:
        cfg = E.default_config(w, TGT)
        assert S.SPACE.contains(cfg) and S.constraints(cfg, w, TGT), w
        assert S.SPACE.canonical(cfg, w, TGT) == cfg, w
    # canonical: a chunk as large as the rows is none; the smallest grid fraction giving the same grid
    w = E.Workload(256, "host", 1 << 20)  # 6144 rows
    cfg = dict(E.default_config(w, SM90), CHUNK_ROWS=6144, GRID_SM_FRAC=16.0, ROWS=64)
    assert S.SPACE.canonical(cfg, w, SM90) == dict(cfg, CHUNK_ROWS=0, GRID_SM_FRAC=1.0)  # 96 tiles: 0.75 -> 1 * 132
    assert S.SPACE.canonical(cfg, w, Target.named("interpreter"))["GRID_SM_FRAC"] == 16.0  # 4 SMs: 64 programs
    assert E.feasible(S.SMALL_WORKLOADS[0]) is None
    # the interpreter's size cap (on a GPU host this table may fit)
    assert "interpreter" in E.feasible(S.WORKLOADS[-1], Target.named("interpreter"))
    assert len(S.WORKLOADS) == 48


def test_workloads_hash_and_compare():
    """Workloads are dict keys and set members (the CLI deduplicates its grid): the package's
    names must not shadow the builtin ``hash`` its dataclasses call."""
    w = E.Workload(3, "hbm", 4096)
    assert len({w, E.Workload(3, "hbm", 4096), E.Workload(4, "hbm", 4096)}) == 2 and hash(w) == hash(E.Workload(3, "hbm", 4096))


def test_feasible_and_limits_refuse_nonsense():
    """Workloads the kernels cannot run are refused with a reason (the study skips them) and the
    CLI's axis limits refuse them up front: a table too small for 24 prime sub-tables, no tokens,
    row ids past int32, an unknown placement."""
    assert E.feasible(E.Workload(3, "hbm", EH.MIN_TABLE_ROWS), Target.named("interpreter")) is None
    for wl, why in ((E.Workload(3, "hbm", 1), "table_rows"), (E.Workload(3, "hbm", EH.MIN_TABLE_ROWS - 1), "table_rows"),
                    (E.Workload(0, "hbm", 4096), "tokens"), (E.Workload(3, "hbm", 1 << 31), "table_rows"),
                    (E.Workload(E.MAX_TOKENS + 1, "hbm", 4096), "tokens"), (E.Workload(3, "disk", 4096), "placement")):
        assert why in E.feasible(wl, Target.named("interpreter")), wl
    with pytest.raises(ValueError, match="too small"):
        EH.table_primes(EH.MIN_TABLE_ROWS - 1)
    assert EH.table_primes(EH.MIN_TABLE_ROWS).numel() == 24
    assert S.LIMITS["table_rows"][0] == EH.MIN_TABLE_ROWS and S.LIMITS["tokens"] == (1, E.MAX_TOKENS)
    from tuner.cli.common import CliError, expand_grid

    with pytest.raises(CliError, match="outside"):
        expand_grid(E.Workload, list(S.SMALL_WORKLOADS), {"table_rows": "1"}, S.LIMITS)


_LOWER = r"""
import json, triton
from triton.backends.compiler import GPUTarget
from kernel_templates import engram as E
from kernel_templates.engram import hashing as EH, lookup as EL, prefetch as EP
from tuner.runtime.target import Target
SM90 = Target.named("sm_90")
done = []
for wl in (E.Workload(4096, "host_thp", 8 << 20), E.Workload(64, "hbm", 32 << 20)):
    cfg = E.default_config(wl, SM90)
    for fn, sig, cx in EL.lower_signatures(wl, cfg):
        for cc in (90, 100):
            triton.compile(triton.compiler.ASTSource(fn=fn, signature=sig, constexprs=cx), target=GPUTarget("cuda", cc, 32),
                           options={"num_warps": cfg["num_warps"], "num_stages": cfg["num_stages"]})
            done.append(["lookup", cx["DEDUP"], cc])
wl = E.Workload(4096, "host", 8 << 20)
pre = EP.prefetch_config(E.default_config(wl, SM90), target=SM90)  # two-CTA clusters
for fn, sig, cx in EL.lower_signatures(wl, pre):
    for cc in (90, 100):
        k = triton.compile(triton.compiler.ASTSource(fn=fn, signature=sig, constexprs=cx),
                           target=GPUTarget("cuda", cc, 32),
                           options={"num_warps": pre["num_warps"], "num_stages": pre["num_stages"],
                                    "num_ctas": pre["NUM_CTAS"]})
        assert ".reqnctapercluster 2" in k.asm["ptx"] and "%cluster_ctarank" in k.asm["ptx"]
        done.append(["prefetch", cx["DEDUP"], cc])
for fn, sig, cx in EL.lower_signatures(wl, dict(pre, STREAM=True)):  # evict-first reads, streaming stores
    k = triton.compile(triton.compiler.ASTSource(fn=fn, signature=sig, constexprs=cx), target=GPUTarget("cuda", 90, 32),
                       options={"num_warps": pre["num_warps"], "num_stages": pre["num_stages"], "num_ctas": 2})
    assert "L1::evict_first" in k.asm["ptx"] and "st.global.cs" in k.asm["ptx"]
    done.append(["stream", cx["STREAM"], 90])
for fn, sig, cx in EL.lower_signatures(wl, dict(pre, STREAM=True, STAGE=True)):  # a staged prefetch's raw copy
    for cc in (90, 100):
        k = triton.compile(triton.compiler.ASTSource(fn=fn, signature=sig, constexprs=cx), target=GPUTarget("cuda", cc, 32),
                           options={"num_warps": pre["num_warps"], "num_stages": pre["num_stages"], "num_ctas": 2})
        assert cx["RAW"] and "e4m3" not in k.asm["ptx"] and "bf16" not in k.asm["ptx"]  # bytes copied, nothing decoded
        done.append(["stage", cx["RAW"], cc])
fn, sig, cx = EH.lower_hash_signature(EH.hash_config(256))
for cc in (90, 100):
    triton.compile(triton.compiler.ASTSource(fn=fn, signature=sig, constexprs=cx), target=GPUTarget("cuda", cc, 32),
                   options={"num_warps": 4})
    done.append(["hash", False, cc])
print(json.dumps(done))
"""


def test_lower_compiles_sm90_sm100():
    done = run_clean(_LOWER)
    assert sorted(map(tuple, done)) == sorted([("lookup", True, 90), ("lookup", True, 100), ("lookup", False, 90),
                                               ("lookup", False, 100), ("hash", False, 90), ("hash", False, 100),
                                               ("prefetch", False, 90), ("prefetch", False, 100), ("stream", True, 90),
                                               ("stage", True, 90), ("stage", True, 100)])


_LOWER_SM90_DEFAULTS = r"""
import json, re, triton
from triton.backends.compiler import GPUTarget
from tuner import lowering
from kernel_templates import engram as E
from kernel_templates.engram import lookup as EL, table as ET
from search_spaces import engram as S
from tuner.runtime.target import Target
from tests._cubin import usage as cubin_usage
width = {"b8": 1, "u8": 1, "b16": 2, "u16": 2, "b32": 4, "u32": 4, "b64": 8, "u64": 8}
seen, out = set(), []
for wl in S.WORKLOADS:
    cfg = E.default_config(wl, Target.named("sm_90"))
    for fn, sig, cx in EL.lower_signatures(wl, cfg):
        key = json.dumps([cx, cfg["num_warps"], cfg["num_stages"]], sort_keys=True)
        if key in seen:
            continue
        seen.add(key)
        # Real launches pass 16-B aligned torch allocations: say so, as `tune lower` does.
        attrs = lowering.pointer_alignment(fn, sig)
        c = triton.compile(triton.compiler.ASTSource(fn=fn, signature=sig, constexprs=cx, attrs=attrs),
                           target=GPUTarget("cuda", 90, 32),
                           options={"num_warps": cfg["num_warps"], "num_stages": cfg["num_stages"]})
        ptx = c.asm["ptx"]
        loads = [(int(v or 1)) * width[t] for v, t in re.findall(r"ld\.global(?:\.\w+)*?(?:\.v(\d))?\.([bu]\d+) ", ptx)]
        stores = [(int(v or 1)) * width[t] for v, t in re.findall(r"st\.global(?:\.\w+)*?(?:\.v(\d))?\.([bu]\d+) ", ptx)]
        res = cubin_usage(c.asm["cubin"], stl=True)
        out.append(dict(cfg=cfg, split=wl.placement in ET.SPLIT_PLACEMENTS, loads=loads, stores=stores, usage=res,
                        ptx_local="st.local" in ptx))
print(json.dumps(out))
"""


def test_sm90_defaults_load_wide_store_16b_no_spills():
    """Every distinct default of the grid, compiled for sm_90 as launched (16-B aligned pointers):
    table values move in 8-B loads (264-B rows allow no wider; 16-B for host_split's 256-B rows),
    bf16 rows in 16-B stores, no spills."""
    done = run_clean(_LOWER_SM90_DEFAULTS)
    assert len(done) >= 2 and any(d["cfg"]["DEDUP"] for d in done) and not all(d["cfg"]["DEDUP"] for d in done)
    assert any(d["split"] for d in done)
    for d in done:
        cfg = d["cfg"]
        vec = 16 if d["split"] else 8
        assert cfg["VEC"] == vec, cfg
        threads = 32 * cfg["num_warps"]
        value_bytes = cfg["ROWS"] * ET.D // threads           # table values per thread per tile
        assert max(d["loads"]) == vec, (cfg, d["loads"])     # never wider than the row alignment
        # Everything narrower than 8 B is at most the scale bytes (8 per row) a thread holds.
        assert sum(b for b in d["loads"] if b < 8) <= max(1, cfg["ROWS"] * ET.N_SCALES // threads), (cfg, d["loads"])
        assert d["loads"].count(vec) * vec >= value_bytes, (cfg, d["loads"])
        assert set(d["stores"]) == {16} and len(d["stores"]) * 16 == 2 * value_bytes, (cfg, d["stores"])
        assert not d["ptx_local"], cfg
        if d["usage"] is not None:
            u = d["usage"]
            assert u["stack"] == 0 and u["local"] == 0 and u["stl"] == 0, (cfg, u)
            assert u["reg"] <= 192, (cfg, u)


# Runs each benchmark script given (a JSON list of [script, *args]) as ``python script args``
# would, one after another in this one process (torch imported once, not once per script):
# sys.argv, sys.path and the benchmarks' own modules as a fresh interpreter has them, its exit
# code, its stdout and its stderr each its own; prints them as one JSON line.
_RUN_SCRIPTS = r"""
import contextlib, io, json, os, runpy, sys, traceback
path, out = sys.path[:], []
for script, *args in json.loads(sys.argv[1]):
    sys.path[:] = path
    here = os.path.dirname(os.path.abspath(script)) + os.sep
    for name in [n for n, m in sys.modules.items() if str(getattr(m, "__file__", None) or "").startswith(here)]:
        del sys.modules[name]
    sys.argv = [script, *args]
    o, e, code = io.StringIO(), io.StringIO(), 0
    with contextlib.redirect_stdout(o), contextlib.redirect_stderr(e):
        try:
            runpy.run_path(script, run_name="__main__")
        except SystemExit as x:  # as the interpreter ends: None 0, a number itself, else printed and 1
            code = 0 if x.code is None else x.code if isinstance(x.code, int) else 1
            if not isinstance(x.code, (int, type(None))):
                print(x.code, file=sys.stderr)
        except BaseException:
            traceback.print_exc()
            code = 1
    out.append([code, o.getvalue(), e.getvalue()])
print(json.dumps(out))
"""


def test_benchmark_help_on_cpu():
    """Each engram benchmark's --help works on a machine without a GPU (and those that need one
    say so in one line and exit 2): the scripts run as ``python script`` runs them, in one
    process between them (torch imported once)."""
    b = ROOT / "benchmarks"
    page, probe = str(b / "engram_page_probe.py"), str(b / "pcie_link_probe.py")
    runs = [[str(b / "engram.py"), "--help"], [str(b / "host_gather_probe.py"), "--help"],
            [str(b / "engram_overlap_probe.py"), "--help"], [page, "--help"], [probe, "--help"]]
    if DEV == "cpu":  # no GPU: one line and exit 2
        runs += [[page, "--rows", "1K"], [probe]]
    r = subprocess.run([sys.executable, "-c", _RUN_SCRIPTS, json.dumps(runs)], cwd=ROOT, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    done = dict(zip((" ".join([Path(s).name, *a]) for s, *a in runs), json.loads(r.stdout.strip().splitlines()[-1])))
    for name, needle in (("engram.py", "--pack"), ("host_gather_probe.py", "--spans"),
                         ("engram_overlap_probe.py", "--clusters"), ("engram_page_probe.py", "--window"),
                         ("pcie_link_probe.py", "--cold-sets")):
        code, out, err = done[f"{name} --help"]
        assert code == 0 and needle in out, (name, err[-2000:])
    if DEV == "cpu":
        code, _, err = done["engram_page_probe.py --rows 1K"]
        assert code == 2 and err.strip().endswith("needs a CUDA GPU (and TRITON_INTERPRET unset)"), err[-2000:]
        code, _, err = done["pcie_link_probe.py"]
        assert code == 2 and err.strip() == "pcie_link_probe.py needs a CUDA GPU", err[-2000:]


def test_page_probe_vmm_table_copies_rows_and_owns_nothing():
    """The page probe's second table (``vmm_table``) is an EngramTable over memory it was
    handed: same rows as its source through the lookup kernel, and closing it leaves the
    source table open and unchanged. A plain CPU tensor stands in for the driver's mapping."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import engram_page_probe as P

    n = 67
    src = E.EngramTable(n, "host", "cpu").fill_random_(seed=5)
    mem = types.SimpleNamespace(tensor=torch.zeros(n * ET.ROW_BYTES + 100, dtype=torch.uint8))
    t = P.vmm_table(src, mem)
    assert isinstance(t, E.EngramTable) and t.data.data_ptr() == mem.tensor.data_ptr()
    assert not t.registered and t._mmap is None
    rows = torch.randint(0, n, (2, 3, EH.ROWS_PER_TOKEN), generator=torch.Generator().manual_seed(2))
    cfg = E.default_config(E.Workload(6, "host", n), TGT)
    want = EL.launch(config=cfg, table=src, rows=rows)
    assert torch.equal(EL.launch(config=cfg, table=t, rows=rows), want)
    t.close()
    assert t.closed and not src.closed
    assert torch.equal(EL.launch(config=cfg, table=src, rows=rows), want)
    src.close()


def test_benchmark_gather_kernel_gathers_rows():
    """The raw 264-B row gather the engram benchmark measures its ceiling with (and the host
    gather probe reuses) equals plain indexing, through the interpreter."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import engram as B

    rows, n = 50, 37
    g = torch.Generator().manual_seed(3)
    buf = torch.randint(0, 256, (rows * ET.ROW_BYTES,), dtype=torch.uint8, generator=g)
    idx = torch.randint(0, rows, (n,), generator=g)
    dst = torch.zeros(n, ET.ROW_BYTES, dtype=torch.uint8)
    B._gather_kernel()[(3,)](buf, B.offset_arg(buf, 256), idx, dst, n, ET.ROW_BYTES, ET.ROW_BYTES, ROWS=16)
    assert torch.equal(dst, buf[idx[:, None] * ET.ROW_BYTES + torch.arange(ET.ROW_BYTES)[None, :]])


def test_benchmark_overlap_rounds_summary():
    """The overlap target reads the median round (by hidden fraction) and reports the range;
    a lookup that ran fully under the layer is 1.0, one fully after it 0.0, never outside [0, 1]."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import engram as B

    assert B.hidden_fraction(80.0, 80.0, 80.0) == 1.0
    assert B.hidden_fraction(80.0, 80.0, 160.0) == 0.0
    assert B.hidden_fraction(80.0, 80.0, 170.0) == 0.0 and B.hidden_fraction(80.0, 90.0, 85.0) == 1.0
    assert abs(B.hidden_fraction(81.4, 80.8, 89.2) - (81.4 + 80.8 - 89.2) / 81.4) < 1e-12
    rounds = [{"lookup_us": 80.0, "layer_us": 80.0, "both_us": b, "hidden_fraction": B.hidden_fraction(80.0, 80.0, b)}
              for b in (88.0, 84.0, 100.0, 86.0)]
    s = B.overlap_summary(rounds)
    assert s["both_us"] == 88.0 and s["hidden_fraction"] == 0.9  # the lower middle of four: 0.75, 0.9, 0.925, 0.95
    assert s["hidden_min"] == 0.75 and s["hidden_max"] == 0.95 and s["rounds"] == rounds
    assert B.overlap_summary(rounds[:1])["both_us"] == 88.0
    with pytest.raises(ValueError, match="no overlap rounds"):
        B.overlap_summary([])
    line = B._table({"ceilings": {"d2d_bytes_per_s": 4e12, "h2d_pinned_bytes_per_s": 5e10, "launch_eager_us": 5.0},
                     "gather_ceilings": {}, "rows": [],
                     "overlap": [{"tokens": 256, "placement": "host", "stream_priority": -1, **s}]})
    assert "median of 4 rounds, stream priority -1" in line and "90.0% hidden (rounds 75.0-95.0%" in line
    # a prefetch override measured in the same rounds gets its own line under its run
    v = B.overlap_summary([{**r, "hidden_fraction": r["hidden_fraction"] / 2} for r in rounds])
    line = B._table({"ceilings": {"d2d_bytes_per_s": 4e12, "h2d_pinned_bytes_per_s": 5e10, "launch_eager_us": 5.0},
                     "gather_ceilings": {}, "rows": [],
                     "overlap": [{"tokens": 4096, "placement": "host_split", **s,
                                  "variants": [{"override": {"num_warps": 16}, **v}]}]})
    assert line.splitlines()[-1] == ('  with {"num_warps": 16}: lookup 80.0 us, layer 80.0 us, both 88.0 us -> 45.0% '
                                     'hidden (rounds 37.5-47.5%), exposed 8.0 us vs 8.0')
    line = B._table({"ceilings": {"d2d_bytes_per_s": 4e12, "h2d_pinned_bytes_per_s": 5e10, "launch_eager_us": 5.0},
                     "gather_ceilings": {}, "rows": [],
                     "overlap": [{"tokens": 4096, "placement": "host_split", **s,
                                  "variants": [{"override": {"DEDUP": True}, "error": "CompilationError: gather"}]}]})
    assert line.splitlines()[-1] == '  with {"DEDUP": true}: FAILED CompilationError: gather'
    with pytest.raises(SystemExit):  # not an object: argparse's one-line usage error
        B._parse(["--prefetch-override", "[1]"])
    assert B._parse(["--prefetch-override", '{"VEC": 16}']).prefetch_override == [{"VEC": 16}]
    # rounds that carry the layer / lookup ratio print its range
    s2 = B.overlap_summary([{**r, "layer_ratio": x} for r, x in zip(rounds, (1.004, 0.991, 1.012, 1.0))])
    line = B._table({"ceilings": {"d2d_bytes_per_s": 4e12, "h2d_pinned_bytes_per_s": 5e10, "launch_eager_us": 5.0},
                     "gather_ceilings": {}, "rows": [], "overlap": [{"tokens": 256, "placement": "host", **s2}]})
    assert line.splitlines()[-1].endswith("target >= 90%) layer/lookup 0.991-1.012")


def test_benchmark_overlap_layer_is_resized_when_the_lookup_drifts():
    """A layer more than 2% longer or shorter than the round's lookup is sized again (a longer
    one absorbs the lookup's slowdown: 96-97% hidden was read with a layer 11-16% long)."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import engram as B

    assert B.layer_off(None, 80.0)
    assert not B.layer_off(80.0, 80.0) and not B.layer_off(81.5, 80.0) and not B.layer_off(78.5, 80.0)
    assert B.layer_off(102.2, 89.9) and B.layer_off(76.0, 80.0)
    assert not B.layer_off(84.0, 80.0, tol=0.06)


def test_benchmark_overlap_round_resizes_on_drift(monkeypatch):
    """``_OverlapCase.round`` sizes the layer on the first round and again only when the round's
    lookup is more than 2% off the last measured layer; every round records the layer / lookup ratio.
    The GPU timings are stood in for: (lookup, layer, both) per round, in the order timed."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import engram as B
    import tuner.timing

    times = iter([100, 100.5, 110, 99, 100, 108, 90, 92, 100, 91, 91.5, 99])
    monkeypatch.setattr(tuner.timing, "bench", lambda fn, **kw: types.SimpleNamespace(median_us=next(times)))
    sized = []
    monkeypatch.setattr(B, "_equal_layer", lambda us, reps: (sized.append(us), ((1, 0), lambda: None))[1])

    class Pf:
        def submit(self, rows):
            return types.SimpleNamespace(wait=lambda: None)

    c = B._OverlapCase(Pf(), None)
    for _ in range(4):
        c.round(None, 5)
    assert sized == [100, 90]  # round 1; round 3's lookup (90) is 11% under the last layer (100)
    assert [r["resized"] for r in c.samples] == [True, False, True, False]
    assert [round(r["layer_ratio"], 4) for r in c.samples] == [1.005, round(100 / 99, 4), round(92 / 90, 4),
                                                                round(91.5 / 91, 4)]
    assert c.samples[1]["hidden_fraction"] == B.hidden_fraction(99, 100, 108)
    assert set(c.spans) == {"lookup", "layer", "both"} and len(c.spans["both"]) == 4


def test_benchmark_ten_x_line_takes_the_smallest_host_baseline():
    """Each host placement's T=256 ratio is against the smallest CPU-gather baseline of the host
    placements (the same rows gathered on the CPU), not its own sample alone (684.5 us was measured for
    host beside 360.1 / 353.9 us for the others); HBM rows take no part."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import engram as B

    def row(p, kern, eager, T=256):
        return {"tokens": T, "placement": p, "table_rows": 8 << 20, "kernel": {"median_us": kern},
                "torch_eager": {"median_us": eager}, "floor_us": 1.0, "gb_per_s": 1.0, "rows_per_s": 1e6,
                "speedup_vs_eager": eager / kern, "hbm_fraction": 0.7, "how": "exact"}

    rows = [row("hbm", 4.0, 40.0), row("host", 45.0, 684.5), row("host_thp", 44.2, 360.1),
            row("host_split", 34.1, 353.9), row("host", 800.0, 3000.0, T=4096)]
    text = B._table({"ceilings": {"d2d_bytes_per_s": 4e12, "h2d_pinned_bytes_per_s": 5e10, "launch_eager_us": 5.0},
                     "gather_ceilings": {}, "rows": rows, "overlap": []})
    ten = next(x for x in text.splitlines() if x.startswith("target host lookup"))
    assert "host 8M 7.86x, host_thp 8M 8.01x, host_split 8M 10.38x" in ten and "8M 353.9 us" in ten


def test_clock_spans_reads_phase_and_round_spans(tmp_path):
    """benchmarks/clock_spans.py averages the sampled clocks inside each phase's spans: one
    (start, end) a phase (older sweeps) or one a round (``_overlap``'s rounds)."""
    import datetime
    import inspect

    sys.path.insert(0, str(ROOT / "benchmarks"))
    import clock_spans
    import engram as B

    t0 = datetime.datetime(2026, 12, 3, 10, 0, 0).timestamp()
    csv = tmp_path / "clocks.csv"
    csv.write_text("".join(f"{datetime.datetime.fromtimestamp(t0 + i).strftime('%Y/%m/%d %H:%M:%S.%f')}, "
                           f"{1900 + 10 * i} MHz, {300 + i} W\n" for i in range(10)))
    line = {"part": "overlap", "tokens": 256, "programs": 2, "hidden_fraction": 0.9, "lookup_us": 1, "layer_us": 1,
            "both_us": 1, "config": {"ROWS": 128, "num_warps": 32, "GRID_SM_FRAC": 0.03, "num_stages": 3},
            "spans": {"lookup": [[t0, t0 + 1.5], [t0 + 5, t0 + 6.5]], "layer": [t0 + 2, t0 + 3]}}
    log = tmp_path / "sweep.log"
    log.write_text(json.dumps(line) + "\n")
    import contextlib
    import io

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert clock_spans.main([str(log), str(csv)]) == 0
    # lookup: samples at t0, t0+1, t0+5, t0+6 -> 1900, 1910, 1950, 1960; layer: t0+2, t0+3
    assert "lookup 1930 MHz" in buf.getvalue() and "(4)" in buf.getvalue() and "layer 1925 MHz" in buf.getvalue()
    # the sweep's overlap calls (benchmarks/engram_sweep.py) match _overlap's parameters
    assert {"rounds", "priority", "cap"} <= set(inspect.signature(B._overlap).parameters)


# ----------------------------------------------------------------------------- what the GPU tests launch

_GPU_PLACEMENTS = ["hbm", "host", "host_thp", "host_split"]


def _gpu_workload(placement: str) -> E.Workload:
    return E.Workload(300, placement, 1 << 20)


def _default_and_dedup_flipped(wl: E.Workload) -> list[dict]:
    """The default config and the same with DEDUP flipped, both admitted by the search space:
    a flip to DEDUP above S._MAX_DEDUP_ROWS rows (hbm's default tile is 32) would not compile on
    Triton 3.6, so the flipped tile shrinks to that many rows (warps as default_config sizes them
    for it) and takes the smallest grid fraction giving the same grid, as default_config does."""
    cfg = E.default_config(wl, TGT)
    flip = dict(cfg, DEDUP=not cfg["DEDUP"])
    if flip["DEDUP"] and flip["ROWS"] > S._MAX_DEDUP_ROWS:
        rows = S._MAX_DEDUP_ROWS
        flip.update(ROWS=rows, num_warps=max(1, min(8, rows // 8)))
        n, sms = wl.tokens * EH.ROWS_PER_TOKEN, TGT.sms
        want = EL.grid_programs(n, flip, sms)
        flip["GRID_SM_FRAC"] = min(f for f in EL.GRID_SM_FRACS
                                   if EL.grid_programs(n, dict(flip, GRID_SM_FRAC=f), sms) == want)
    for c in (cfg, flip):
        assert S.SPACE.contains(c) and S.constraints(c, wl, TGT), (wl, c)
    assert {cfg["DEDUP"], flip["DEDUP"]} == {False, True}
    return [cfg, flip]


@pytest.mark.parametrize("placement", _GPU_PLACEMENTS)
def test_placement_configs_are_admitted(placement):
    """What test_gpu_lookup_every_placement launches, checked without a GPU: both DEDUP paths,
    each config one the search space admits (the 32-row hbm and 64-row host defaults flip to a
    16-row DEDUP tile)."""
    default, flipped = _default_and_dedup_flipped(_gpu_workload(placement))  # asserts admission, both paths
    assert not default["DEDUP"] and flipped["DEDUP"]  # 300 tokens: no dedup by default
    expect = (32, 8) if placement == "hbm" else (64, 16)
    assert (default["ROWS"], default["num_warps"]) == expect
    assert (flipped["ROWS"], flipped["num_warps"]) == (16, 2)
    assert not S.constraints(dict(default, DEDUP=True), _gpu_workload(placement), TGT)  # the plain flip


# ----------------------------------------------------------------------------- GPU only

@pytest.mark.gpu
@pytest.mark.parametrize("placement", _GPU_PLACEMENTS)
def test_gpu_lookup_every_placement(placement):
    wl = _gpu_workload(placement)
    inputs = E.make_inputs(wl, "cuda", seed=0)
    table = inputs["table"]._owner  # the shared table this handle reads (its only handle here)
    with inputs["table"] as t:
        assert t.placement in (placement, "host")
        if t.placement != "hbm":
            assert t.codes.device.type == "cpu" and t.codes.is_pinned()
            assert isinstance(t.kernel_args()[0], ET._UVAPointer)
            assert (t.scales.device.type == "cuda") == t.split  # host_split: the scales in HBM
        ref = reference(**inputs)
        for cfg in _default_and_dedup_flipped(wl):
            E.verify(EL.launch(config=cfg, **inputs), ref, inputs)
        E.verify(E.baselines["torch_eager"](**inputs), ref, inputs)
    assert table.closed and not table.registered, "the last handle's close unregisters the table"


@pytest.mark.gpu
def test_gpu_prefetch_streams_several_in_flight():
    with E.EngramTable(1 << 20, "host_thp", "cuda").fill_random_(1) as t:
        pf = EP.EngramPrefetcher(t)
        batches = [torch.randint(0, t.num_rows, (4, n, 24), device="cuda") for n in (64, 256, 16)]
        assert pf.stream.priority == EP.PREFETCH_PRIORITY
        assert EP.EngramPrefetcher(t, priority=-1).stream.priority < 0
        handles = [pf.submit(r) for r in batches]
        x = torch.randn(4096, 4096, device="cuda")
        for _ in range(5):
            x = x @ x.T / 4096  # main-stream work while the lookups run
        for r, h in zip(batches, handles):
            E.verify(h.wait(), reference(t, r), {})
        torch.cuda.synchronize()


@pytest.mark.gpu
def test_gpu_staged_prefetch_in_flight_beside_tiles():
    """host_split: a T=4096 lookup (staged: its dequant runs at wait()) in flight with two short
    ones (the tile), main-stream work between, waited out of order; each equals the reference."""
    with E.EngramTable(1 << 20, "host_split", "cuda").fill_random_(2) as t:
        pf = EP.EngramPrefetcher(t)
        batches = [torch.randint(0, t.num_rows, shape, device="cuda") for shape in ((1, 4096, 24), (4, 64, 24),
                                                                                     (2, 2048, 24))]
        handles = [pf.submit(r) for r in batches]
        assert [h._finish is not None for h in handles] == [True, False, True]
        x = torch.randn(4096, 4096, device="cuda")
        for _ in range(5):
            x = x @ x.T / 4096
        for i in (2, 0, 1):
            E.verify(handles[i].wait(), reference(t, batches[i]), {})
        # a second wait() on another stream orders after the first one's dequant and returns its output
        side = torch.cuda.Stream()
        with torch.cuda.stream(side):
            again = handles[0].wait()
            copy = again.clone()  # on `side`: reads the output only after the dequant
        torch.cuda.synchronize()
        assert again is handles[0].wait()
        E.verify(copy, reference(t, batches[0]), {})


def test_prefetch_config_runs_host_tables_as_two_cta_clusters():
    """A host-table prefetch runs PREFETCH_CLUSTERS programs of two-CTA clusters (whole SM
    pairs) with the prefetch tile; an HBM-table prefetch keeps the pack's config."""
    wide = E.default_config(E.Workload(4096, "host", 1 << 20), SM90)
    pre = EP.prefetch_config(wide, target=SM90)
    assert pre == dict(wide, **EP.PREFETCH_TILE, GRID_SM_FRAC=EP.PREFETCH_CLUSTERS / 132, STAGE=False)
    assert pre["NUM_CTAS"] == 2 and EL.grid_programs(4096 * EH.ROWS_PER_TOKEN, pre, 132) == EP.PREFETCH_CLUSTERS
    assert EL.grid_programs(4096 * EH.ROWS_PER_TOKEN, EP.prefetch_config(wide, clusters=3, target=SM100), 148) == 3
    assert EL.grid_programs(5, pre, 132) == 1  # fewer rows than a tile: one program
    hbm = E.default_config(E.Workload(4096, "hbm", 1 << 20), SM90)
    assert EP.prefetch_config(hbm, placement="hbm") == hbm  # HBM gathers keep every SM
    with pytest.raises(ValueError, match="clusters"):
        EP.prefetch_config(wide, clusters=0)


def test_prefetch_config_stages_long_host_split_lookups():
    """STAGE where it was measured hiding more: host_split from T=4096 on; not host / host_thp, not T=256."""
    wide = E.default_config(E.Workload(4096, "host_split", 1 << 20), SM90)
    long, short = 4096 * EH.ROWS_PER_TOKEN, 256 * EH.ROWS_PER_TOKEN
    assert EP.STAGE_MIN_ROWS == long
    assert EP.prefetch_config(wide, "host_split", target=SM90, rows=long)["STAGE"] is True
    assert EP.prefetch_config(wide, "host_split", target=SM90, rows=short)["STAGE"] is False
    for placement in ("host", "host_thp"):
        assert EP.prefetch_config(wide, placement, target=SM90, rows=long)["STAGE"] is False
    assert "STAGE" not in EP.prefetch_config(wide, "hbm", rows=long)


@pytest.mark.parametrize("placement", ["hbm", "host_split"])
def test_overlap_probe_traffic_kernels(placement):
    """The overlap probe's traffic-only cases (benchmarks/engram_overlap_probe.py --traffic):
    ``read`` sums the values it reads, ``write`` writes row + column as bf16, ``stage`` stores the
    raw values and its dequant gives the lookup's output bit for bit; 4 programs over 37 x 24
    rows (one partial tile), through the interpreter where there is no GPU."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import engram_overlap_probe as P

    cfg = dict(EP.PREFETCH_TILE, ROWS=32)
    with E.EngramTable(5000, placement, DEV).fill_random_(seed=5) as t:
        g = torch.Generator().manual_seed(11)
        rows = torch.randint(0, 5000, (37, EH.ROWS_PER_TOKEN), generator=g).to(t.device)
        flat = rows.reshape(-1).cpu()
        values = t.codes.index_select(0, flat.to(t.codes.device)).cpu()[:, :ET.D]
        _, sink = P.traffic_launch(t, rows, "read", cfg, programs=4)
        assert int(sink.long().sum()) == int(values.long().sum()) > 0  # < 2^31: no int32 wrap
        out, _ = P.traffic_launch(t, rows, "write", cfg, programs=4)
        want = ((flat[:, None] + torch.arange(ET.D)[None, :]) & 127).float().to(torch.bfloat16)
        assert torch.equal(out.cpu(), want)
        stage, _ = P.traffic_launch(t, rows, "stage", cfg, programs=4)
        assert torch.equal(stage.cpu(), values)
        assert torch.equal(P.stage_dequant(t, stage, rows).float().cpu(), reference(t, rows).float().cpu())


@pytest.mark.parametrize("placement", ["hbm", "host", "host_split"])
def test_staged_prefetch_equals_reference(placement):
    """STAGE: the prefetch copies the rows' bytes into HBM (``stage``: values and scales as they
    are, zeros for rows out of range) and ``wait()`` dequantizes them (``unstage``); several
    handles, rows out of range (zeros, as the lookup gives), partial tiles (48 and 240 rows in
    32-row tiles), and a second ``wait()`` returning the same output."""
    cfg = dict(_cfg(), **EP.PREFETCH_TILE, GRID_SM_FRAC=0.5, STAGE=True)
    cfg["ROWS"] = 32
    with E.EngramTable(3000, placement, DEV).fill_random_(seed=9) as t:
        g = torch.Generator().manual_seed(4)
        batches = [torch.randint(0, 3000, (2, n, 24), generator=g) for n in (1, 5)]
        batches[1][0, 0, :3] = torch.tensor([-1, 3000, 2999])
        batches = [b.to(t.device) for b in batches]
        for b in batches:
            vals, scales = EL.stage(cfg, t, b)
            flat = b.reshape(-1)
            bad = ((flat < 0) | (flat >= 3000)).cpu()
            assert vals.shape == (flat.numel(), ET.D) and scales.shape == (flat.numel(), ET.N_SCALES)
            want = t.gather_packed(flat.clamp(0, 2999)).cpu()
            want[bad] = 0
            assert torch.equal(torch.cat([vals, scales], 1).cpu(), want)
        pf = EP.EngramPrefetcher(t, config=cfg)
        handles = [pf.submit(b) for b in batches]
        for b, h in reversed(list(zip(batches, handles))):
            out = h.wait()
            want = reference(t, b.clamp(0, 2999))
            want[(b < 0) | (b >= 3000)] = 0
            assert out.shape == (*b.shape, ET.D)
            E.verify(out, want, {})
            assert h.wait() is out
        with pytest.raises(ValueError, match="DEDUP"):
            EL.stage(dict(cfg, DEDUP=True), t, batches[0])
        with pytest.raises(ValueError, match="DEDUP"):
            EL.lower_signatures(E.Workload(1, placement, 3000), dict(cfg, DEDUP=True))
        with pytest.raises(ValueError, match="lacks"):
            EL.unstage({"ROWS": 16}, vals, scales, (vals.shape[0],))


def test_prefetch_handle_runs_its_finish_once():
    """A staged handle's dequant (``finish``) runs at the first ``wait()`` only; later waits
    return the same output (the CPU form: no event)."""
    calls = []

    def finish():
        calls.append(1)
        return torch.ones(3)

    h = EP.PrefetchHandle(None, None, (torch.zeros(1),), finish=finish)
    assert h.ready()
    first = h.wait()
    assert h.wait() is first and len(calls) == 1 and torch.equal(first, torch.ones(3))


def test_overlap_probe_override_cannot_stage():
    """The probe's spans end at the side stream's end: a staged override (its dequant at wait())
    is a usage error, not a number that leaves the dequant out."""
    r = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "engram_overlap_probe.py"), "--override",
                        '{"STAGE": true}'], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "cannot stage" in r.stderr and "Traceback" not in r.stderr, r.stderr[-2000:]
