"""benchmarks/peers.py without a GPU: the shapes, the layout converters (round trips against our own
formats), the rows, tables and JSON built from measurements, and the one-line exits."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))  # the benchmarks import their siblings by name

import peers_core as C  # noqa: E402
import peers_layouts as L  # noqa: E402

from benchmarks.peers import main, parse_args, parse_budget, parse_only  # noqa: E402
from kernel_templates.engram.hashing import make_params, zipf_tokens  # noqa: E402
from kernel_templates.engram.reference import reference_hash  # noqa: E402
from kernel_templates.nvfp4 import dequantize_fp8_ue8m0, quantize_fp8_ue8m0  # noqa: E402

# ----------------------------------------------------------------------------- shapes


def test_shapes_cover_the_issue_grids() -> None:
    sm = C.shapes("sparse_mqa")
    assert {s["context"] for s in sm} == {8192, 32768, 131072, 524288} and {s["batch"] for s in sm} == {1, 8, 32, 64}
    assert {s["profile"] for s in sm} == {"dsv32"}
    mhc = C.shapes("mhc")
    assert {s["tokens"] for s in mhc} == {1, 64, 256, 1024, 4096, 8192} and {s["dim"] for s in mhc} == {4096, 5120, 7168}
    assert {s["op"] for s in mhc} == {"pre", "post", "seam"} and len(mhc) == 3 * 3 * 6
    att = C.shapes("attention")
    assert {(s["heads"], s["mode"]) for s in att} == {(64, "dense"), (64, "sparse"), (16, "dense")}
    for fam in C.FAMILIES:
        full, quick = C.shapes(fam), C.shapes(fam, quick=True)
        assert quick and all(q in full for q in quick) and len(quick) < len(full)
    with pytest.raises(ValueError, match="unknown family"):
        C.shapes("nope")


def test_shape_key_and_select() -> None:
    assert C.shape_key({"batch": 1, "context": 8192, "profile": "dsv32"}) == "batch=1 context=8K profile=dsv32"
    sm = C.shapes("sparse_mqa")
    kept = C.select(sm, {"batch": {"1", "32"}, "context": {"8K", "524288"}})
    assert {(s["batch"], s["context"]) for s in kept} == {(1, 8192), (32, 8192), (1, 524288), (32, 524288)}
    assert C.select(sm, {"heads": {"64"}}) == sm  # an axis the family lacks filters nothing


# ----------------------------------------------------------------------------- peers


def test_load_peer_keeps_the_exact_error() -> None:
    def broken(name: str) -> None:
        raise OSError(f"{name}/_C.so: undefined symbol: _ZN3c104cuda29c10_cuda_check_implementation")

    mod, err = C.load_peer("deep_gemm", broken)
    assert mod is None and err == "OSError: deep_gemm/_C.so: undefined symbol: _ZN3c104cuda29c10_cuda_check_implementation"
    mod, err = C.load_peer("json")
    assert mod is json and err is None
    mod, err = C.load_peer("no_such_peer_module_xyz")
    assert mod is None and err.startswith("ModuleNotFoundError: No module named 'no_such_peer_module_xyz'")

    def wrapped(name: str) -> None:  # torch.ops.load_library wraps the loader's message
        try:
            raise OSError("libc10_cuda.so: cannot open shared object file")
        except OSError as e:
            raise OSError(f"Could not load this library: {name}/cuda.abi3.so") from e

    assert C.load_peer("flash_mla", wrapped)[1] == ("OSError: Could not load this library: flash_mla/cuda.abi3.so <- "
                                                   "OSError: libc10_cuda.so: cannot open shared object file")


def test_probe_import_runs_the_import_in_a_child() -> None:
    assert C.probe_import("json") is None
    err = C.probe_import("no_such_peer_module_xyz")
    assert err == "import no_such_peer_module_xyz exited with status 1: ModuleNotFoundError: No module named 'no_such_peer_module_xyz'"
    calls = []
    assert C.load_peer("json", probe=lambda m: calls.append(m) or "it crashed") == (None, "it crashed") and calls == ["json"]


def test_probe_resolves_every_symbol_of_a_lazily_opened_peer(tmp_path, monkeypatch) -> None:
    # DeepGEMM's extension is opened with RTLD_LAZY: its probe imports with LD_BIND_NOW, the others' without
    for name in ("deep_gemm", "lazy_peer_xyz"):
        (tmp_path / f"{name}.py").write_text("import os\nassert os.environ.get('LD_BIND_NOW') == '1', 'lazy'\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    monkeypatch.delenv("LD_BIND_NOW", raising=False)
    assert "deep_gemm" in C.BIND_NOW and C.probe_import("deep_gemm") is None
    assert C.probe_import("lazy_peer_xyz").endswith("AssertionError: lazy")


# ----------------------------------------------------------------------------- rows, tables, JSON


def _cands() -> dict[str, dict]:
    return {"peer a": C.candidate("ok", [10.0, 12.0, 11.0], kv_bytes=576),
            "peer b": C.candidate("unavailable", error="flash_mla: OSError: libcudart.so.13: cannot open\nmore"),
            "ours x": C.candidate("ok", [20.0, 22.0, 21.0]), "ours y": C.candidate("ok", [5.0, 5.5, 4.5]),
            "ours z": C.candidate("mismatch", error="out: 3 of 512 elements differ")}


def test_rows_ratio_and_table() -> None:
    assert C.summarize([3.0, 1.0, 2.0]) == {"median_us": 2.0, "min_us": 1.0, "max_us": 3.0}
    assert C.ratio(10.0, 5.0) == 2.0 and C.ratio(None, 5.0) is None and C.ratio(3.0, 0.0) is None
    pairs = [C.Pair("peer a", "ours x", "ours does more"), C.Pair("peer a", "ours y"), C.Pair("peer b", "ours y"),
             C.Pair("peer a", "ours z"), C.Pair("peer a", "ours missing")]
    rows = C.pair_rows("attention", {"batch": 16, "context": 32768}, _cands(), pairs)
    assert len(rows) == 4  # the pair naming a candidate the shape lacks is left out
    ax, ay, by, az = rows
    assert ax["ratio"] == pytest.approx(11.0 / 21.0) and ay["ratio"] == pytest.approx(11.0 / 5.0)
    assert ax["peer_kv_bytes"] == 576 and ax["shape_key"] == "batch=16 context=32K"
    assert by["ratio"] is None and by["peer_status"] == "unavailable"
    assert by["peer_error"] == "flash_mla: OSError: libcudart.so.13: cannot open"  # first line only
    assert az["ratio"] is None and az["ours_error"] == "out: 3 of 512 elements differ"
    lines = C.table("attention", rows, "NVIDIA H100 80GB HBM3")
    assert "NVIDIA H100 80GB HBM3" in lines[0] and lines[1].split()[:2] == ["peer", "shape"]
    assert lines[2].split()[-6:-3] == ["21.0", "0.52", "peer"]
    assert "2.20" in lines[3]
    assert "unavailable" in lines[4] and "libcudart.so.13" in lines[4]
    assert "mismatch" in lines[5] and "3 of 512 elements differ" in lines[5]
    assert lines[-1] == "  note peer a vs ours x: ours does more"
    assert C.table("engram", [], "gpu")[1] == "  (no rows)"


def test_closing_note_best_peer_and_report() -> None:
    rows = C.pair_rows("mhc", {"op": "pre", "tokens": 1}, _cands(),
                       [C.Pair("peer a", "ours x"), C.Pair("peer a", "ours y"), C.Pair("peer b", "ours y")])
    assert [r["ours"] for r in C.slower(rows)] == ["ours x"]
    note = C.closing_note(rows, {("mhc", "op=pre tokens=1", "ours x"): "ours 3 launches, 20.0 us in kernels"})
    assert note[0] == "ours is slower at 1 timed row(s):"
    assert "ours x 21.0 us vs peer a 11.0 us (0.52x); ours 3 launches" in note[1]
    assert C.closing_note([r for r in rows if r["ours"] == "ours y"]) == ["ours is not slower than a peer at any timed shape"]
    bp = C.best_peer(rows)
    assert bp["rows"] == 2 and bp["ratio_min"] == pytest.approx(11 / 21) and bp["ratio_max"] == pytest.approx(2.2)
    assert C.best_peer([])["ratio_min"] is None
    rep = C.report({"gpu": "H100"}, {"flash_mla": "OSError: x", "tile_kernels": None}, {"mhc": {"rows": rows}}, rounds=5)
    assert rep["peers"]["flash_mla"] == {"package": C.PEER_PACKAGES["flash_mla"], "loaded": False, "error": "OSError: x"}
    assert rep["peers"]["tile_kernels"]["loaded"] and rep["rounds"] == 5 and len(rep["slower"]) == 1
    json.dumps(rep)  # what the benchmark writes is plain JSON


# ----------------------------------------------------------------------------- layouts


def _fp8_keys(pages: int, page: int = 64, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(pages, page, 128, generator=g)
    s = x.abs().amax(-1).clamp(min=1e-4) / 448.0
    return (x / s[..., None]).to(torch.float8_e4m3fn), s


def test_deepgemm_fused_cache_round_trip_and_layout() -> None:
    k, s = _fp8_keys(3)
    fused = L.deepgemm_fused_kv(k, s)
    assert fused.shape == (3, 64, 1, 132) and fused.dtype == torch.uint8 and fused.stride(1) == 132
    page0 = fused[0].reshape(-1)
    assert torch.equal(page0[:128], k[0, 0].view(torch.uint8))                 # key 0's codes first
    assert torch.equal(page0[64 * 128:64 * 128 + 4], s[0, :1].view(torch.uint8))  # then the page's scales
    k2, s2 = L.split_deepgemm_fused_kv(fused)
    assert torch.equal(k2.view(torch.uint8), k.view(torch.uint8)) and torch.equal(s2, s)
    with pytest.raises(ValueError, match="fp32 scales"):
        L.deepgemm_fused_kv(k, s.double())


def test_context_lens_mask_and_topk() -> None:
    lens = L.context_lens_2d(torch.tensor([5, 3], dtype=torch.int32), 2)
    assert lens.tolist() == [[4, 5], [2, 3]] and lens.dtype == torch.int32
    logits = torch.arange(2 * 2 * 6, dtype=torch.float32).view(4, 6)
    m = L.mask_logits(logits, lens)
    assert m.shape == (2, 2, 6) and torch.isinf(m[0, 0, 4:]).all() and not torch.isinf(m[0, 1, :5]).any()
    idx = L.topk_from_logits(m, 4)
    assert idx[1, 0].tolist() == [1, 0, -1, -1] and idx[0, 1].tolist() == [4, 3, 2, 1]
    assert L.topk_from_logits(m, 8).shape == (2, 2, 8)


def test_v4_format_keeps_our_fp8_latents() -> None:
    g = torch.Generator().manual_seed(1)
    codes, scales = quantize_fp8_ue8m0(torch.randn(3, 64, 512, generator=g))
    ours = dequantize_fp8_ue8m0(codes, scales)
    v4 = L.pack_v4(ours)
    assert v4.shape == (3, 64, 1, 584) and v4.stride(1) == 584 and v4.stride(0) % 576 == 0
    back = L.unpack_v4(v4)
    assert torch.equal(back[..., 448:], ours[..., 448:])            # the last 64 values are bf16: exact
    err = (back - ours).abs()
    assert float(err.max()) < 1e-3 and float((err > 0).float().mean()) < 0.01  # only tiny values lose bits
    assert torch.equal(L.unpack_v4(L.pack_v4(back)), back)           # what the format holds, it keeps
    out = torch.zeros(3, L.v4_page_stride(64), dtype=torch.uint8)
    assert torch.equal(L.unpack_v4(L.pack_v4(ours, out=out)), back)
    with pytest.raises(ValueError, match="out must be"):
        L.pack_v4(ours, out=out[:, :100])


def test_physical_indices_and_window_cache() -> None:
    bt = torch.tensor([[3, 0], [1, 2]], dtype=torch.int32)
    idx = torch.tensor([[0, 65, -1], [127, 5, 64]], dtype=torch.int32)
    phys = L.physical_indices(idx, bt, 64)
    assert phys.shape == (2, 1, 3) and phys[:, 0].tolist() == [[192, 1, -1], [191, 69, 128]]
    win = dequantize_fp8_ue8m0(*quantize_fp8_ue8m0(torch.randn(2, 128, 512)))
    cache, widx = L.window_as_extra_cache(win)
    assert cache.shape == (4, 64, 1, 584) and widx.shape == (2, 1, 128) and widx[1, 0, 0] == 128
    assert float((L.unpack_v4(cache).view(2, 128, 512) - win).abs().max()) < 1e-3
    with pytest.raises(ValueError, match="multiple"):
        L.window_as_extra_cache(win[:, :100])


def test_dense_fp8_pow2_and_appended_pages() -> None:
    x = dequantize_fp8_ue8m0(*quantize_fp8_ue8m0(torch.randn(4, 64, 512)))
    codes, s = L.pow2_fp8(x, 576)
    assert codes.shape == (4, 64, 576) and torch.equal(codes[..., 512:].float(), torch.zeros(4, 64, 64))
    assert float(torch.log2(s)) == round(float(torch.log2(s)))      # a power of two: dequantized exact in bf16
    back = L.unpow2_fp8(codes, s, 512)
    assert torch.equal(back.to(torch.bfloat16).float(), back) and float((back - x).abs().max()) < 1e-3
    c2, s2 = L.pow2_fp8(x[:2], 576, scale=s)
    assert torch.equal(s2, s) and torch.equal(c2.view(torch.uint8), codes[:2].view(torch.uint8))
    cache = torch.arange(3 * 64, dtype=torch.float32).view(3, 64, 1)
    bt = torch.tensor([[2], [0]], dtype=torch.int32)
    extra = -torch.arange(2 * 128, dtype=torch.float32).view(2, 128, 1)
    new, bt2 = L.append_pages(cache, bt, extra)
    assert new.shape == (7, 64, 1) and bt2.tolist() == [[2, 3, 4], [0, 5, 6]]
    assert torch.equal(new[bt2[1, 1:].long()].reshape(128, 1), extra[1])


def _tile_kernels_hash(ids: torch.Tensor, mult: torch.Tensor, sizes: torch.Tensor, offs: torch.Tensor) -> torch.Tensor:
    """tile-kernels' documented engram_hash math: per layer, the XOR of ``ids[:, k] * mult[k]`` up to
    n-gram index k, then for every k >= 1 the 8 tables ``hash mod size + offset``."""
    h = torch.zeros(ids.shape[0], dtype=torch.int64)
    cols = []
    for k in range(ids.shape[1]):
        h = h ^ (ids[:, k].long() * mult[0, k])
        if k:
            cols.append(h[:, None] % sizes[0, k - 1].long()[None, :])
    return (torch.cat(cols, dim=1) + offs[0].long()[None, :]).to(torch.int32)[None]


def test_engram_ids_for_tile_kernels_hash_to_our_rows() -> None:
    p = make_params(8 * 2**20, seed=0)
    tokens = zipf_tokens((3, 7), seed=0)
    tokens[0, 2] = -5  # a bad id hashes as class 0 on both sides
    ids = L.ngram_ids(tokens, p["comp"], p["pad_id"])
    assert ids.shape == (21, 4) and ids.dtype == torch.int32
    assert ids[0, 1] == p["comp"][p["pad_id"]] and ids[8, 1] == p["comp"][tokens[1, 0]]  # lookback stops at the row
    mult, sizes, offs = L.tk_hash_params(p["multipliers"], p["primes"], p["offsets"])
    assert mult.shape == (1, 4) and sizes.shape == (1, 3, 8) and offs.shape == (1, 24) and sizes.dtype == torch.int32
    want = reference_hash(tokens, p["comp"], p["multipliers"], p["primes"], p["offsets"], pad_id=p["pad_id"])
    assert torch.equal(_tile_kernels_hash(ids, mult, sizes, offs)[0].long(), want.view(-1, 24))
    with pytest.raises(ValueError, match="int32"):
        L.tk_hash_params(p["multipliers"], p["primes"] * 2**30, p["offsets"])


# ----------------------------------------------------------------------------- CLI


def test_parse_args_bad_input(capsys: pytest.CaptureFixture[str]) -> None:
    for argv, msg in ((["--family", "attention,nope"], "unknown nope"), (["--budget", "soon"], "--budget"),
                      (["--only", "batch"], "--only"), (["--rounds", "0"], "--rounds"),
                      (["--pack", "/nonexistent"], "not a kernel pack")):
        with pytest.raises(SystemExit) as e:
            parse_args(argv)
        assert e.value.code == 2 and msg in capsys.readouterr().err
    a = parse_args(["--family", "mhc", "--quick", "--only", "tokens=1;dim=5120", "--budget", "9m"])
    assert a.families == ["mhc"] and a.budget_s == 540 and a.filters == {"tokens": {"1"}, "dim": {"5120"}}
    assert parse_budget("90s") == 90 and parse_budget("1h") == 3600 and parse_only("a=1,2;b=x") == {"a": {"1", "2"}, "b": {"x"}}


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the exits without a GPU")
def test_main_exits_with_one_line_without_a_gpu(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["--family", "engram", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["peers: no CUDA GPU: this benchmark runs our kernels and the peers' on one"]
    assert main(["--family", "engram", "--only", "tokens=3"]) == 2
    assert capsys.readouterr().err.strip() == "peers: --only leaves no shape to run"
    assert not list(tmp_path.iterdir())  # nothing written


# ----------------------------------------------------------------------------- the harness end to end (interpreter)


def _fake_tile_kernels() -> object:
    """tile-kernels' engram_hash and MoE gates in torch (their documented math), and a topk_gate that
    picks the wrong experts: the harness must time the first two and report the third as a mismatch."""
    from types import SimpleNamespace

    from kernel_templates.moe_routing.reference import reference_topk

    def top2_sum_gate(logits, bias, k, topk_group, n_group, shared, n_shared, scaling, *ranks_and_scoring):
        w, ids = reference_topk(logits, bias, top_k=k, n_group=n_group, topk_group=topk_group,
                                scoring=ranks_and_scoring[-1], routed_scaling_factor=scaling, renormalize=True)
        return ids.long(), w

    return SimpleNamespace(engram=SimpleNamespace(engram_hash=_tile_kernels_hash),
                           moe=SimpleNamespace(top2_sum_gate=top2_sum_gate,
                                               topk_gate=lambda s, k: torch.argsort(s, dim=1)[:, :k]))


@pytest.mark.skipif(torch.cuda.is_available(), reason="the interpreter smoke test of the harness")
def test_harness_checks_times_and_reports_on_the_interpreter() -> None:
    from peers_runs import Ctx, run_engram, run_moe_routing

    ctx = Ctx(peers={"tile_kernels": _fake_tile_kernels()}, errors={"tile_kernels": None}, rounds=1, reps=1,
              breakdown=False, device="cpu")
    res = run_engram({"tokens": 3}, ctx)
    c = res["candidates"]
    assert {n: v["status"] for n, v in c.items()} == {"ours engram_hash": "ok", "tk engram_hash": "ok",
                                                       "torch n-grams + tk engram_hash": "ok"}
    assert [r["ratio"] is not None for r in res["rows"]] == [True, True] and res["timing"] == "graph replay"
    res = run_moe_routing({"profile": "dsv41-flash", "tokens": 2}, ctx)
    st = {n: v["status"] for n, v in res["candidates"].items()}
    assert st == {"ours routing": "ok", "ours top-k only": "ok", "tk top2_sum_gate": "ok",
                  "tk topk_gate (scores given)": "mismatch"}
    assert "differ from the reference" in res["candidates"]["tk topk_gate (scores given)"]["error"]
    assert len(res["rows"]) == 3 and res["rows"][2]["ratio"] is None
    gone = Ctx(peers={"tile_kernels": None}, errors={"tile_kernels": "OSError: libcudart.so.13: cannot open"},
               rounds=1, reps=1, breakdown=False, device="cpu")
    rows = run_engram({"tokens": 1}, gone)["rows"]
    assert {r["peer_status"] for r in rows} == {"unavailable"}
    assert rows[0]["peer_error"] == "tile_kernels: OSError: libcudart.so.13: cannot open"


def _fake_mhc_peers(monkeypatch: pytest.MonkeyPatch) -> tuple[object, object]:
    """tile-kernels' mHC entry points (and DeepGEMM's prenorm GEMM) in torch, at the module paths the
    harness imports them from."""
    from types import ModuleType, SimpleNamespace

    from kernel_templates.mhc.reference import coeffs_from_mix

    def coeffs(mix, scale, base, eps, iters, X):
        pre, post, comb = coeffs_from_mix(mix.double(), scale, base, eps, iters)
        return (pre[:, :, None] * X.double()).sum(1).to(torch.bfloat16), post.float(), comb.float()

    def big_fuse(residual, fn, scale, base, rms_eps, mhc_pre_eps, mhc_sinkhorn_eps, mhc_post_mult_value,
                 sinkhorn_repeat, n_splits=16):
        X = residual[0]
        x = X.float().flatten(1)
        h, post, comb = coeffs((x @ fn.t()) * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + rms_eps), scale, base,
                               rms_eps, sinkhorn_repeat, X)
        return post[None, :, :, None], comb[None], h[None]

    def mhc_pre(residual, fn, scale, base, *, norm_eps, post_mult_value, pre_eps, sinkhorn_eps, sinkhorn_repeat):
        post, comb, h = big_fuse(residual, fn, scale, base, norm_eps, pre_eps, sinkhorn_eps, post_mult_value,
                                 sinkhorn_repeat)
        return h, (post, comb)

    def post_fwd(x, residual, post, comb):
        return (post * x[:, :, None, :].float() + torch.einsum("stij,stid->stjd", comb, residual.float())).to(torch.bfloat16)

    def fused_rest(D, rms_eps, pre_eps, sinkhorn_eps, post_mult, iters, n_splits, mhc_mult):
        def run(d, sq, scale, base, X, post, comb, h):
            mix = d.sum(0) * torch.rsqrt(sq.sum(0)[:, None] / (4 * D) + rms_eps)
            hh, p, c = coeffs(mix, scale, base, rms_eps, iters, X)
            h.copy_(hh), post.copy_(p), comb.copy_(c.reshape(-1, 16))
        return run

    def prenorm_gemm(a, b, d, sq, n):
        d.zero_(), sq.zero_()
        d[0], sq[0] = a.float() @ b.t(), a.float().pow(2).sum(-1)

    mods = {"tile_kernels": {}, "tile_kernels.mhc": {}, "tile_kernels.mhc.post_kernel": {"mhc_post_fwd": post_fwd},
            "tile_kernels.mhc.pre_big_fuse_kernel": {"_mhc_pre_big_fuse": fused_rest}, "tile_kernels.modeling": {},
            "tile_kernels.modeling.mhc": {}, "tile_kernels.modeling.mhc.ops": {},
            "tile_kernels.modeling.mhc.ops.pre_big_fuse": {"mhc_pre_big_fuse": big_fuse},
            "tile_kernels.modeling.mhc.functional": {"mhc_pre": mhc_pre}}
    for name, attrs in mods.items():
        m = ModuleType(name)
        m.__dict__.update(attrs)
        monkeypatch.setitem(sys.modules, name, m)
    return sys.modules["tile_kernels"], SimpleNamespace(tf32_hc_prenorm_gemm=prenorm_gemm)


@pytest.mark.skipif(torch.cuda.is_available(), reason="the interpreter smoke test of the harness")
def test_mhc_peers_checked_against_our_reference_on_the_interpreter(monkeypatch: pytest.MonkeyPatch) -> None:
    from peers_runs import Ctx, run_mhc

    tk, dg = _fake_mhc_peers(monkeypatch)
    ctx = Ctx(peers={"tile_kernels": tk, "deep_gemm": dg}, errors={"tile_kernels": None, "deep_gemm": None}, rounds=1,
              reps=1, breakdown=False, device="cpu")
    for op, peers in (("pre", {"tk fused pre", "tk pre (4 kernels)", "deepgemm gemm + tk fused pre"}),
                      ("post", {"tk post"}), ("seam", {"tk post + tk fused pre", "tk post + deepgemm gemm + tk fused pre"})):
        res = run_mhc({"op": op, "dim": 64, "tokens": 2}, ctx)
        assert {n: v["status"] for n, v in res["candidates"].items()} == {f"ours {op}": "ok", **dict.fromkeys(peers, "ok")}
        assert {r["peer"] for r in res["rows"]} == peers and all(r["ratio"] for r in res["rows"])


def _fake_flash_mla() -> object:
    """FlashMLA's decode entry points in torch, reading the layouts the harness builds (``peers_layouts``):
    dense (FP8 with per-tensor descales, or bf16) over paged entries, sparse V4 with the extra cache and
    the sink; it returns (out, lse) as FlashMLA does (the sink already applied in sparse mode only)."""
    from types import SimpleNamespace

    def attend(q, ent, tau):  # q [H, d], ent [n, d] -> out [H, 512], lse [H]
        logits = tau * q @ ent.t()
        return torch.softmax(logits, -1) @ ent[:, :512], torch.logsumexp(logits, -1)

    def call(q, k_cache, block_table, lens, d_v, sched, softmax_scale, is_fp8_kvcache, indices=None, attn_sink=None,
             extra_k_cache=None, extra_indices_in_kvcache=None, use_legacy=False, kv_format=None, descale_q=None,
             descale_k=None):
        assert use_legacy and d_v == 512
        B, _, H, _ = q.shape
        outs, lses = [], []
        for b in range(B):
            if indices is None:
                qb = q[b, 0].float() * (descale_q if is_fp8_kvcache else 1.0)
                K = k_cache.float() * (descale_k if is_fp8_kvcache else 1.0)
                ent = K[block_table[b].long()].reshape(-1, K.shape[-1])[:int(lens[b])]
            else:
                assert kv_format == "V4"
                qb = q[b, 0].float()
                glob, win = L.unpack_v4(k_cache).reshape(-1, 512), L.unpack_v4(extra_k_cache).reshape(-1, 512)
                i, j = indices[b, 0].long(), extra_indices_in_kvcache[b, 0].long()
                ent = torch.cat([glob[i[i >= 0]], win[j[j >= 0]]])
            o, lse = attend(qb, ent, softmax_scale)
            if attn_sink is not None:
                o = o * torch.sigmoid(lse - attn_sink)[:, None]
            outs.append(o)
            lses.append(lse)
        return torch.stack(outs)[:, None].to(torch.bfloat16), torch.stack(lses)[:, :, None]

    return SimpleNamespace(get_mla_metadata=lambda: (SimpleNamespace(tile_scheduler_metadata=None, num_splits=None), None),
                           get_mla_decoding_metadata=lambda *a, **k: (torch.zeros(1), torch.zeros(1)),
                           flash_mla_with_kvcache=call)


@pytest.mark.skipif(torch.cuda.is_available(), reason="the interpreter smoke test of the harness")
def test_attention_peers_see_our_problem_on_the_interpreter() -> None:
    from peers_runs import Ctx, run_attention

    ctx = Ctx(peers={"flash_mla": _fake_flash_mla()}, errors={"flash_mla": None}, rounds=1, reps=1, breakdown=False,
              device="cpu")
    res = run_attention({"heads": 16, "mode": "sparse", "context": 256, "batch": 2}, ctx)
    c = res["candidates"]
    assert {n: v["status"] for n, v in c.items()} == {"ours nvfp4": "ok", "ours fp8": "ok", "flashmla sparse v4": "ok"}
    assert c["flashmla sparse v4"]["kv_bytes"] == 584 and c["flashmla sparse v4"]["kv_conversion_max_err"] < 1e-3
    res = run_attention({"heads": 16, "mode": "dense", "context": 256, "batch": 2}, ctx)
    c = res["candidates"]
    assert {n: v["status"] for n, v in c.items()} == {"ours nvfp4": "ok", "ours fp8": "ok", "ours bf16": "ok",
                                                     "flashmla dense fp8": "ok", "flashmla dense bf16": "ok"}
    assert len(res["rows"]) == 4 and all(r["ratio"] for r in res["rows"])


def _fake_deep_gemm() -> object:
    """DeepGEMM's paged MQA logits in torch over its fused cache; past each query's visible keys it
    writes garbage (the kernel leaves those entries unwritten), which the harness must mask."""
    from types import SimpleNamespace

    def logits(q, fused, weights, lens, block_table, meta, max_len):
        assert q.dtype == torch.float8_e4m3fn  # bare FP8 queries: a query scale selects the sm_100 FP4 path
        keys, scales = L.split_deepgemm_fused_kv(fused)
        B, n, H, D = q.shape
        out = torch.full((B * n, max_len), 7.0)
        for b in range(B):
            k = keys[block_table[b].long()].float().reshape(-1, D)[:max_len]
            s = scales[block_table[b].long()].reshape(-1)[:max_len]
            dots = torch.relu(torch.einsum("thd,nd->thn", q[b].float(), k))
            val = (dots * weights.view(B, n, H)[b][..., None]).sum(1) * s
            for t in range(n):
                vis = int(lens[b, t])
                out[b * n + t, :vis] = val[t, :vis]
        return out

    return SimpleNamespace(get_num_sms=lambda: 4, get_paged_mqa_logits_metadata=lambda lens, page, sms: torch.zeros(sms + 1, 2),
                           fp8_paged_mqa_logits=logits)


@pytest.mark.skipif(torch.cuda.is_available(), reason="the interpreter smoke test of the harness")
def test_sparse_mqa_peer_logits_masked_and_checked_on_the_interpreter() -> None:
    from peers_runs import Ctx, run_sparse_mqa

    ctx = Ctx(peers={"deep_gemm": _fake_deep_gemm()}, errors={"deep_gemm": None}, rounds=1, reps=1, breakdown=False,
              device="cpu")
    res = run_sparse_mqa({"profile": "dsv32", "next_n": 1, "context": 256, "batch": 2}, ctx)
    assert {n: v["status"] for n, v in res["candidates"].items()} == dict.fromkeys(
        ("ours scoring", "ours scoring + top-k", "deepgemm logits", "deepgemm logits + torch.topk", "deepgemm metadata"), "ok")
    assert [(r["peer"], r["ours"]) for r in res["rows"]] == [("deepgemm logits", "ours scoring"),
                                                            ("deepgemm logits + torch.topk", "ours scoring + top-k")]


def test_peer_package_labels_name_the_versions_the_extra_pins() -> None:
    """The report names each peer's package as pyproject's `peers` extra pins it (a label naming
    another version would misreport which kernel was measured)."""
    import re
    import tomllib

    pins = dict(p.split("==") for p in tomllib.loads((ROOT / "pyproject.toml").read_text())
                ["project"]["optional-dependencies"]["peers"])
    named = {name: version for label in C.PEER_PACKAGES.values()
             for name, version in re.findall(r"([a-z][a-z0-9-]*) (\d[\w.]*)", label)}
    assert named == pins, (named, pins)
