"""The kernels as PyTorch custom ops: ``torch.library.opcheck`` on every op, a small layer calling
all five families' ops compiled with ``fullgraph=True`` against eager, CUDA-graph capture."""
from __future__ import annotations

import pytest
import torch
from conftest import DEVICE

import kernel_templates.engram as EN
import kernel_templates.mhc as MH
import kernel_templates.moe_routing as MR
import kernel_templates.nvfp4_attention as NA
import kernel_templates.sparse_mqa as SM
from kernel_templates import nvfp4
from kernel_templates.ops import OPS
from tuner import runtime
from tuner.runtime.ops import register_op, registered_ops

ops = torch.ops.tuner
FP8 = (torch.float8_e4m3fn, torch.float8_e5m2)
LATENT = 512 if DEVICE == "cuda" else 64


@pytest.fixture(scope="module")
def cases() -> dict[str, tuple[tuple, dict]]:
    """Tiny inputs of every op (CPU through the interpreter, or the GPU): name -> (args, kwargs)."""
    dev = DEVICE
    g = torch.Generator().manual_seed(0)
    mh = MH.make_inputs(MH.Workload("seam", 2, 32), dev, 0)
    sq = SM.make_inputs(SM.Workload(1, 64, 1, "dsv41-flash"), dev, 0)
    p = EN.make_params(4096, 0, device=dev)
    tokens = EN.zipf_tokens((2, 3), 0).to(dev)
    table = EN.EngramTable(4096, "hbm", dev).fill_random_(0)
    rows = EN.engram_hash(tokens, p["comp"], p["multipliers"], p["primes"], p["offsets"], pad_id=0)
    mqa = ((sq["q"], sq["weights"], sq["k_cache"], sq["k_scales"], sq["block_table"], sq["seq_lens"]),
           {"top_k": 16, "k_format": "mxfp4"})
    # one sequence of 50 entries in one page, a 16-entry window, 16 heads; a 64-wide latent through the
    # interpreter, the model's 512 on a GPU (the sm_90 default for 16 heads is a Gluon kernel for 512)
    L = LATENT
    kc, ks = nvfp4.quantize_nvfp4(torch.randn(64, L, generator=g))
    attention = (torch.randn(1, 16, L, generator=g).to(torch.bfloat16), kc.view(1, 64, L // 2),
                 ks.view(1, 64, L // 16), torch.zeros(1, 1, dtype=torch.int32), torch.tensor([50], dtype=torch.int32),
                 torch.randn(1, 16, L, generator=g).to(torch.float8_e4m3fn),
                 torch.full((1, 16, L // 32), 127, dtype=torch.uint8), torch.randn(16, generator=g),
                 torch.randperm(50, generator=g)[:16].to(torch.int32).view(1, 16))
    return {
        "moe_routing": ((torch.randn(5, 16, generator=g).to(dev), torch.rand(16, generator=g).to(dev)),
                        {"top_k": 2, "n_group": 4, "topk_group": 2}),
        "mhc_pre": ((mh["X"], mh["fn"], mh["scale"], mh["base"], mh["norm_w"]), {}),
        "mhc_post": ((mh["X"], mh["y"], mh["post"], mh["comb"]), {}),
        "mhc_seam": ((mh["X"], mh["y"], mh["post"], mh["comb"], mh["fn"], mh["scale"], mh["base"], mh["norm_w"]), {}),
        "nvfp4_decode_attention": (tuple(t.to(dev) for t in attention), {}),
        "quantize_nvfp4": ((torch.randn(3, 64, generator=g).to(dev),), {}),
        "mqa_topk": mqa,
        "mqa_topk_logits": mqa,
        "engram_hash": ((tokens, p["comp"], p["multipliers"], p["primes"], p["offsets"]), {"pad_id": 0}),
        "engram_lookup": ((table.codes, table.scales, rows), {"placement": "hbm"}),
    }


def _plain(name: str, args: tuple, kw: dict):
    """What the family's plain function returns for the op's arguments."""
    if name == "moe_routing":
        return tuple(MR.moe_routing(*args, **kw))
    if name.startswith("mhc_"):
        return getattr(MH, name)(*args, **kw)
    if name == "nvfp4_decode_attention":
        return NA.nvfp4_decode_attention(*args[:8], topk_idx=args[8])
    if name == "quantize_nvfp4":
        return nvfp4.quantize_nvfp4(*args)
    if name.startswith("mqa_topk"):
        return SM.mqa_topk(*args, **kw, return_logits=name.endswith("logits"))
    if name == "engram_hash":
        return EN.engram_hash(*args, **kw)
    table = EN.EngramTable(args[0].shape[0], "hbm", args[0].device)
    table.write_(0, torch.cat([args[0], args[1]], dim=1))
    return EN.engram_lookup(table, args[2])


def test_every_public_kernel_function_is_an_op():
    names = {"moe_routing", "mhc_pre", "mhc_post", "mhc_seam", "nvfp4_decode_attention", "quantize_nvfp4",
             "mqa_topk", "mqa_topk_logits", "engram_hash", "engram_lookup"}
    assert set(OPS) == names and names <= set(registered_ops())
    for n in names:
        assert getattr(ops, n) is OPS[n]
    assert register_op("moe_routing", "(Tensor x) -> Tensor", None, None) is ops.moe_routing  # defined once


@pytest.mark.parametrize("name", sorted(OPS))
def test_opcheck_and_same_result_as_the_plain_function(name, cases, monkeypatch):
    """opcheck: the schema (no input mutated, outputs fresh), the fake against the real outputs,
    and a trace with dynamic shapes; then the op's outputs equal the plain function's, bit for bit."""
    args, kw = cases[name]
    allclose = torch.allclose

    def allclose_fp8(a, b, *rest, **kwargs):  # SchemaCheckMode compares inputs with allclose: none for float8
        if a.dtype in FP8:
            return torch.equal(a.view(torch.uint8), b.view(torch.uint8))
        return allclose(a, b, *rest, **kwargs)

    monkeypatch.setattr(torch, "allclose", allclose_fp8)
    torch.library.opcheck(getattr(ops, name).default, args, kw)
    got, want = getattr(ops, name)(*args, **kw), _plain(name, args, kw)
    got, want = (got, want) if isinstance(got, tuple) else ((got,), (want,))
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape and torch.equal(g, w), name


@pytest.mark.parametrize("width", [32, 48])  # 48: not a power of two, the PyTorch quantizer
def test_quantize_op_takes_a_global_scale_and_the_engines_rounding(width, device):
    x = torch.randn(2, 3, width, device=device)
    for rounding in ("exact", "engine"):
        got = ops.quantize_nvfp4(x, 0.5, rounding=rounding)
        for g, w in zip(got, nvfp4.quantize_nvfp4(x, 0.5, rounding=rounding)):
            assert g.is_contiguous() and torch.equal(g, w)


def test_engram_lookup_op_checks_where_the_table_lives(cases, device):
    (codes, scales, rows), _ = cases["engram_lookup"]
    with pytest.raises(ValueError, match="placement must be one of"):
        ops.engram_lookup(codes, scales, rows, placement="disk")
    with pytest.raises(ValueError, match=r"scales must be uint8 \[rows, 8\]"):
        ops.engram_lookup(codes, scales[:-1], rows)
    if device == "cuda":
        with pytest.raises(ValueError, match="must be on cpu"):
            ops.engram_lookup(codes, scales, rows, placement="host")


# ----------------------------------------------------------------------------- one layer, all five families

class TinyLayer(torch.nn.Module):
    """A decode step of one layer at toy sizes, calling every family through its op: Engram hash
    and lookup, mHC pre, the indexer's top-k feeding sparse NVFP4 attention over a paged cache
    the step's new latent is quantized into, mHC post, MoE routing feeding a PyTorch expert
    mix, and the mHC seam into the next layer."""

    def __init__(self, device: str, *, batch: int = 2, dim: int = 64, latent: int = 64, heads: int = 16,
                 pages: int = 4, page: int = 64, experts: int = 16) -> None:
        super().__init__()
        g = torch.Generator().manual_seed(1)
        rn = lambda *s: torch.randn(*s, generator=g)
        B, D, L = batch, dim, latent
        mh = MH.make_inputs(MH.Workload("pre", B, D), "cpu", 1)
        self.p = EN.make_params(4096, 0)
        self.table = EN.EngramTable(4096, "hbm", device).fill_random_(0)
        kc, ks = nvfp4.quantize_nvfp4(rn(B * pages * page, L))
        self.t = {
            "fn": mh["fn"], "scale": mh["scale"], "base": mh["base"], "norm_w": mh["norm_w"],
            "kv_codes": kc.view(B * pages, page, L // 2), "kv_scales": ks.view(B * pages, page, L // 16),
            "k_cache": rn(B * pages, page, 128).to(torch.float8_e4m3fn), "k_scales": rn(B * pages, page).abs(),
            "block_table": torch.randperm(B * pages, generator=g).to(torch.int32).view(B, pages),
            "swa_kv": rn(B, 16, L).to(torch.float8_e4m3fn),
            "swa_scales": torch.full((B, 16, L // 32), 127, dtype=torch.uint8),
            "sink": rn(heads), "w_qi": rn(D, 4 * 128) / D ** 0.5, "w_wi": rn(D, 4) / D ** 0.5,
            "w_q": rn(D, heads * L) / D ** 0.5, "w_kv": rn(D, L) / D ** 0.5,
            "w_o": rn(heads * L, D) / (heads * L) ** 0.5,
            "w_e": rn(256, D) / 16, "w_r": rn(D, experts) / D ** 0.5, "bias": 0.1 * rn(experts),
            "experts": rn(experts, D, D) / D ** 0.5,
            **{k: v for k, v in self.p.items() if k != "pad_id"},
        }
        self.t = {k: v.to(device) for k, v in self.t.items()}
        self.shape = {"B": B, "D": D, "L": L, "H": heads, "page": page}

    def forward(self, X: torch.Tensor, tokens: torch.Tensor, seq_lens: torch.Tensor):
        t, s = self.t, self.shape
        B, L, H = s["B"], s["L"], s["H"]
        rows = ops.engram_hash(tokens, t["comp"], t["multipliers"], t["primes"], t["offsets"], pad_id=0)
        emb = ops.engram_lookup(self.table.codes, self.table.scales, rows, placement="hbm")
        u, post, comb = ops.mhc_pre(X, t["fn"], t["scale"], t["base"], t["norm_w"])
        uf = u.float()
        qi = (uf @ t["w_qi"]).view(B, 1, 4, 128).to(torch.float8_e4m3fn)
        idx = ops.mqa_topk(qi, (uf @ t["w_wi"]).view(B, 1, 4), t["k_cache"], t["k_scales"], t["block_table"],
                           seq_lens, top_k=32, k_format="fp8")
        # the new token's latent, quantized into its slot of the paged cache (out of place)
        codes, scales = ops.quantize_nvfp4(uf @ t["w_kv"])
        pos = (seq_lens - 1).long()
        page = t["block_table"].gather(1, (pos // s["page"])[:, None]).squeeze(1).long()
        kv_codes = torch.index_put(t["kv_codes"], (page, pos % s["page"]), codes)
        kv_scales = torch.index_put(t["kv_scales"], (page, pos % s["page"]), scales)
        q = (uf @ t["w_q"]).view(B, H, L).to(torch.bfloat16)
        att = ops.nvfp4_decode_attention(q, kv_codes, kv_scales, t["block_table"], seq_lens, t["swa_kv"],
                                         t["swa_scales"], t["sink"], idx.view(B, -1))
        y = (att.float().reshape(B, H * L) @ t["w_o"] + emb.float().sum((1, 2)) @ t["w_e"]).to(torch.bfloat16)
        X1 = ops.mhc_post(X, y, post, comb)
        w, ids, *_ = ops.moe_routing(uf @ t["w_r"], t["bias"], top_k=2, n_group=4, topk_group=2,
                                     scoring="sigmoid", routed_scaling_factor=2.5)
        h = torch.einsum("bd,bkde->bke", y.float(), t["experts"][ids.long()])
        moe_y = (w[:, :, None] * h).sum(1).to(torch.bfloat16)
        X2, u2, post2, comb2 = ops.mhc_seam(X1, moe_y, post, comb, t["fn"], t["scale"], t["base"], t["norm_w"])
        return X2, u2, post2, comb2, idx, ids


def _layer_inputs(layer: TinyLayer, device: str, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    B, D = layer.shape["B"], layer.shape["D"]
    X = torch.randn(B, 4, D, generator=g).to(torch.bfloat16).to(device)
    tokens = EN.zipf_tokens((B, 1), seed).to(device)
    seq_lens = torch.randint(40, 4 * layer.shape["page"], (B,), generator=g).to(torch.int32).to(device)
    return X, tokens, seq_lens


@pytest.fixture(scope="module")
def layer():
    return TinyLayer(DEVICE, latent=LATENT)


def _same(a, b, *, tol: float = 0.0) -> None:
    """Equal outputs (integer ones always bit for bit; floating ones within ``tol`` relative)."""
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert x.dtype == y.dtype and x.shape == y.shape
        if tol and x.is_floating_point():
            torch.testing.assert_close(x.float(), y.float(), rtol=tol, atol=tol)
        else:
            assert torch.equal(x, y)


def test_layer_of_all_five_families_compiles_in_one_graph_and_matches_eager(layer, device):
    graphs = []

    def backend(gm, example_inputs):
        graphs.append({str(n.target).removesuffix(".default") for n in gm.graph.nodes if n.op == "call_function"})
        return torch._dynamo.lookup_backend("aot_eager")(gm, example_inputs)

    torch._dynamo.reset()
    compiled = torch.compile(layer, fullgraph=True, backend=backend)
    inputs = _layer_inputs(layer, device)
    eager = layer(*inputs)
    _same(compiled(*inputs), eager)
    assert len(graphs) == 1
    assert {f"tuner.{n}" for n in OPS if n != "mqa_topk_logits"} <= graphs[0]
    seq_lens = inputs[2]
    X2, _, _, _, idx, ids = eager
    assert ((idx >= 0) & (idx < seq_lens[:, None, None])).sum(-1).tolist() == [[32]] * layer.shape["B"]
    assert ids.shape == (layer.shape["B"], 2) and torch.isfinite(X2.float()).all()


@pytest.mark.gpu
def test_cuda_graph_capture_and_reduce_overhead_replay_the_ops():
    """A layer of every op captured in a CUDA graph (after one eager step compiled its kernels)
    replays new inputs as eager computes them; ``mode="reduce-overhead"`` likewise."""
    layer = TinyLayer("cuda", latent=LATENT)
    static = _layer_inputs(layer, "cuda", 0)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        layer(*static)  # compiles every kernel outside the capture
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = layer(*static)
    for seed in (1, 2):
        fresh = _layer_inputs(layer, "cuda", seed)
        for s, f in zip(static, fresh):
            s.copy_(f)
        graph.replay()
        torch.cuda.synchronize()
        _same(out, layer(*fresh))
    assert runtime.stats()["cold"] == {}  # every selection the capture made was made before it
    torch._dynamo.reset()
    from torch._dynamo.utils import counters

    counters.clear()
    compiled = torch.compile(layer, fullgraph=True, mode="reduce-overhead")
    for seed in (3, 4, 5):
        fresh = _layer_inputs(layer, "cuda", seed)
        # Inductor's own kernels for the PyTorch glue may sum in another order: bf16-level slack
        _same([o.clone() for o in compiled(*fresh)], layer(*fresh), tol=2e-2)
    assert not counters["inductor"].get("cudagraph_skips"), dict(counters["inductor"])
