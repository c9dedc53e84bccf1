"""NVFP4 decode attention: kernel == reference through the interpreter on small odd shapes,
the SDPA baseline, validation, the search space, and lowering for sm_90 / sm_100."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import triton
import triton.language as tl

from kernel_templates import nvfp4 as F
from kernel_templates import nvfp4_attention as A
from search_spaces import nvfp4_attention as S
from conftest import clean_env, run_clean

ROOT = Path(__file__).resolve().parents[1]


def ragged_inputs(kv_dtype: str, mode: str, *, page: int = 64, heads: int = 5, device: str = "cpu", seed: int = 0):
    """Three sequences: shorter than the window (and than one page), a partly filled
    last page, and several pages; sparse indices with -1 and out-of-range entries."""
    w = A.Workload(batch=3, context=300, heads=heads, kv_dtype=kv_dtype, mode="dense", page=page)
    inp = A.make_inputs(w, device, seed)
    inp["seq_lens"] = torch.tensor([37, 130, 300], dtype=torch.int32, device=device)
    if mode == "sparse":
        g = torch.Generator().manual_seed(seed + 1)
        k = 45
        idx = torch.stack([torch.randint(0, n, (k,), generator=g) for n in (37, 130, 300)]).to(torch.int32)
        idx[0, 5:20] = -1   # unused slots
        idx[1, -3:] = -1
        idx[2, 7] = 299     # last valid entry
        idx[0, 3] = 40      # beyond seq_len 37: skipped like -1
        inp["topk_idx"] = idx.to(device)
    return inp


def run_and_check(inp, config):
    ref = A.reference(**inp)
    out = A.launch(config=config, **inp)
    assert out.shape == ref.shape and out.dtype == torch.bfloat16
    A.verify(out, ref, inp)
    return out, ref


CASES = [
    # kv_dtype, mode, config overrides
    ("nvfp4", "dense", dict(DQ_FP16=True, SWAP_AB=True, BLOCK_N=32, NUM_SPLITS=4)),
    ("nvfp4", "dense", dict(DQ_FP16=False, SWAP_AB=False, BLOCK_N=16, NUM_SPLITS=1)),
    ("nvfp4", "sparse", dict(DQ_FP16=True, SWAP_AB=False, BLOCK_N=16, NUM_SPLITS=2)),
    ("nvfp4", "sparse", dict(DQ_FP16=False, SWAP_AB=True, BLOCK_N=32, NUM_SPLITS=1)),
    ("fp8", "dense", dict(SWAP_AB=True, BLOCK_N=64, NUM_SPLITS=2)),
    ("fp8", "sparse", dict(SWAP_AB=False, BLOCK_N=16, NUM_SPLITS=4)),
    ("bf16", "dense", dict(SWAP_AB=False, BLOCK_N=128, NUM_SPLITS=2)),  # tiles spanning two pages
    ("bf16", "sparse", dict(SWAP_AB=True, BLOCK_N=16, NUM_SPLITS=1)),
    # the latent in column chunks (each decoded and multiplied on its own)
    ("nvfp4", "dense", dict(DQ_FP16=True, SWAP_AB=True, BLOCK_N=32, NUM_SPLITS=4, D_CHUNKS=2)),
    ("nvfp4", "sparse", dict(DQ_FP16=True, SWAP_AB=False, BLOCK_N=16, NUM_SPLITS=2, D_CHUNKS=4)),
    ("nvfp4", "dense", dict(DQ_FP16=False, SWAP_AB=False, BLOCK_N=32, NUM_SPLITS=1, D_CHUNKS=4)),
    ("fp8", "sparse", dict(SWAP_AB=True, BLOCK_N=16, NUM_SPLITS=2, D_CHUNKS=2)),
    ("bf16", "dense", dict(SWAP_AB=False, BLOCK_N=128, NUM_SPLITS=2, D_CHUNKS=2)),
]


@pytest.mark.parametrize("kv_dtype, mode, over", CASES)
def test_kernel_matches_reference(kv_dtype, mode, over, device):
    inp = ragged_inputs(kv_dtype, mode, device=device)
    cfg = dict(A.default_config(A.Workload(3, 300, 5, kv_dtype, mode)), **over)
    run_and_check(inp, cfg)


def test_page_256_and_many_heads(device):
    inp = ragged_inputs("nvfp4", "dense", page=256, heads=33, device=device)
    cfg = dict(A.default_config(A.Workload(3, 300, 33, "nvfp4", "dense", 256)), BLOCK_N=64, BLOCK_H=16, NUM_SPLITS=2)
    run_and_check(inp, cfg)


def test_sink_and_scale_matter(device):
    inp = ragged_inputs("nvfp4", "dense", device=device)
    cfg = dict(A.default_config(A.Workload(3, 300, 5, "nvfp4", "dense")), BLOCK_N=32, NUM_SPLITS=2)
    base, _ = run_and_check(inp, cfg)
    inp2 = dict(inp, sink=inp["sink"] + 3.0, sm_scale=0.07)
    other, _ = run_and_check(inp2, cfg)
    assert (other.float() - base.float()).abs().max() > 0.05


def test_empty_splits_and_tiny_sequence(device):
    # many splits for a 1-entry sequence: empty splits must merge without NaN
    inp = ragged_inputs("fp8", "dense", device=device)
    inp["seq_lens"] = torch.tensor([1, 2, 65], dtype=torch.int32, device=device)
    cfg = dict(A.default_config(A.Workload(3, 300, 5, "fp8", "dense")), BLOCK_N=16, NUM_SPLITS=8)
    out, _ = run_and_check(inp, cfg)
    assert torch.isfinite(out.float()).all()


def test_empty_sequence_and_many_splits(device):
    # seq_len 0: every partial is empty (the SWA one too), only the sink is left, so the
    # output is exactly 0; 64 splits: two chunks of 32 in the reduce, each column block
    # merged by its own program
    inp = ragged_inputs("nvfp4", "dense", device=device)
    inp["seq_lens"] = torch.tensor([0, 3, 300], dtype=torch.int32, device=device)
    cfg = dict(A.default_config(A.Workload(3, 300, 5, "nvfp4", "dense")), BLOCK_N=16, NUM_SPLITS=64)
    assert A._reduce_blocks(3, 5, 512, 64) == (2, 64, 32, 4)
    out, ref = run_and_check(inp, cfg)
    assert (out[0] == 0).all() and (ref[0] == 0).all()
    assert out[1:].float().abs().amax() > 0.1


def _merge_reference(m, l, acc, sink):
    """The split-KV merge in float64: partials (log2-domain max, sum, unnormalised acc) and
    the sink as one more logit with a zero value."""
    m, l, acc = m.double(), l.double(), acc.double()
    s2 = sink.double()[None, :] * A.LOG2E  # [1, H]
    top = torch.maximum(m.amax(-1), s2)  # [B, H]
    w = torch.exp2(m - top[..., None])
    den = torch.exp2(s2 - top) + (w * l).sum(-1)
    return (w[..., None] * acc).sum(-2) / den[..., None]


@pytest.mark.parametrize("blocks, S, D", [
    ((2, 64, 4, 4), 13, 512),   # 13 splits in chunks of 4 (the last one short), 8 column blocks, 3 head blocks of 5
    ((4, 32, 16, 4), 40, 64),   # a 64-wide latent, 40 splits in 3 chunks, one head block with 3 heads masked
    (None, 64, 128),            # the host heuristic: 2 heads x 64 columns, 2 chunks of 32 splits
])
def test_reduce_merges_partials(blocks, S, D, monkeypatch, device):
    if blocks is not None:
        monkeypatch.setattr(A, "_reduce_blocks", lambda *a: blocks)
    g = torch.Generator().manual_seed(S)
    B, H = 3, 5
    m = 8.0 * torch.randn(B, H, S + 1, generator=g)
    m[0, 0, 1] = 90.0                                   # one split far above the sink and the rest
    l = 1.0 + 4.0 * torch.rand(B, H, S + 1, generator=g)
    acc = torch.randn(B, H, S + 1, D, generator=g) * l[..., None]
    empty = torch.rand(B, H, S + 1, generator=g) < 0.4  # empty splits, as the split kernel writes them
    empty[0, 1] = True                                   # (0, 1): nothing but the sink -> 0
    empty[:, 3, S] = False                               # head 3 has no sink: never all empty
    m[empty], l[empty], acc[empty] = float("-inf"), 0.0, 0.0
    sink = torch.randn(H, generator=g)
    sink[3] = float("-inf")
    want = _merge_reference(m, l, acc, sink)
    m, l, acc, sink = (t.to(device) for t in (m, l, acc, sink))
    out = torch.full((B, H, D), float("nan"), dtype=torch.bfloat16, device=device)
    kern, grid, args = A._reduce_launch(m, l, acc, sink, out)
    if blocks is not None:
        assert grid == (B, -(-H // blocks[0]), D // blocks[1])
    kern[grid](**args)
    out = out.cpu().double()
    assert torch.isfinite(out).all()
    assert (out[0, 1] == 0).all()
    torch.testing.assert_close(out, want, rtol=2**-7, atol=2**-7 * want.abs().amax().item())


@pytest.mark.parametrize("kv_dtype, mode", [("nvfp4", "dense"), ("fp8", "sparse"), ("bf16", "dense")])
def test_sdpa_baseline_matches_reference(kv_dtype, mode, device):
    inp = ragged_inputs(kv_dtype, mode, device=device)
    whole = A.torch_eager(**inp)
    A.verify(whole, A.reference(**inp), inp)
    # one sequence per SDPA call (the memory-bounded path of large batches): same result
    torch.testing.assert_close(A.torch_eager(**inp, chunk_bytes=1), whole)


def test_public_api_default_config(device):
    inp = ragged_inputs("nvfp4", "sparse", device=device)
    out = A.nvfp4_decode_attention(inp["q"], inp["kv_codes"], inp["kv_scales"], inp["block_table"], inp["seq_lens"],
                                   inp["swa_kv"], inp["swa_scales"], inp["sink"], topk_idx=inp["topk_idx"])
    A.verify(out, A.reference(**inp), inp)


def test_spec_round_trip_small_workloads(device):
    for w in S.SMALL_WORKLOADS:
        inp = A.make_inputs(w, device, 1)
        cfg = A.default_config(w)
        assert S.constraints(cfg, w) and S.SPACE.contains(cfg)
        A.SPEC.verify(A.SPEC.launch(config=cfg, **inp), A.SPEC.reference(**inp), inp)


def test_validation_errors():
    inp = ragged_inputs("nvfp4", "dense")
    cfg = A.default_config(A.Workload(3, 300, 5, "nvfp4", "dense"))
    with pytest.raises(ValueError, match="q must be torch.bfloat16"):
        A.launch(config=cfg, **dict(inp, q=inp["q"].float()))
    with pytest.raises(ValueError, match="kv_scales must have shape"):
        A.launch(config=cfg, **dict(inp, kv_scales=inp["kv_scales"][:, :, :8]))
    with pytest.raises(ValueError, match="kv_dtype must be one of"):
        A.launch(config=cfg, **dict(inp, kv_dtype="fp4"))
    with pytest.raises(ValueError, match="kv_codes must be torch.float8_e4m3fn"):
        A.launch(config=dict(cfg, DQ_FP16=False), **dict(inp, kv_dtype="fp8"))
    with pytest.raises(ValueError, match="sink must have shape"):
        A.launch(config=cfg, **dict(inp, sink=inp["sink"][:2]))
    with pytest.raises(ValueError, match="DQ_FP16"):
        A.launch(config=cfg, **ragged_inputs("bf16", "dense"))


def test_cost_and_bytes_per_entry():
    assert A.BYTES_PER_ENTRY == {"nvfp4": 288, "fp8": 528, "bf16": 1024}
    kv, _ = F.quantize_nvfp4(torch.randn(1, 512))
    assert kv.numel() + 512 // 16 == 288
    w = A.Workload(8, 32768, 16, "nvfp4", "dense")
    nbytes, flops = A.cost(w)
    assert nbytes == 8 * (32768 * 288 + 128 * 528 + 16 * 512 * 4)
    assert flops == 4 * 16 * 512 * (32768 + 128) * 8
    assert A.cost(A.Workload(8, 32768, 16, "nvfp4", "sparse"))[1] == 4 * 16 * 512 * (512 + 128) * 8


def test_search_space_defaults_and_feasibility():
    reasons = {}
    for w in S.WORKLOADS:
        cfg = A.default_config(w)
        assert S.SPACE.contains(cfg), (w, cfg)
        assert S.constraints(cfg, w), (w, cfg)
        r = S.feasible(w, budget_bytes=int(0.7 * 141e9))
        if r:
            reasons[w] = r
    assert A.Workload(256, 524288, 64, "bf16", "dense") in reasons
    assert all(w.batch == 256 for w in reasons), reasons
    assert A.Workload(256, 524288, 64, "nvfp4", "dense") not in reasons
    # variants are pruned where they do nothing or cannot run
    w = A.Workload(4, 32768, 16, "fp8", "dense")
    assert not S.constraints(dict(A.default_config(w), DQ_FP16=True), w)
    wn = A.Workload(4, 32768, 16, "nvfp4", "dense")
    assert not S.constraints(dict(A.default_config(wn), USE_DOT_SCALED=True, BLOCK_N=128), wn)  # no sm_100 here
    assert sum(S.constraints(c, wn) for c in S.SPACE.grid()) > 20


def test_q_residual_split_is_bf16_accurate():
    # the USE_DOT_SCALED variant multiplies q as three NVFP4 terms; their sum is ~bf16-exact
    q = (2.0 * torch.randn(64, 512)).to(torch.bfloat16).float()
    r, total = q.clone(), torch.zeros_like(q)
    for _ in range(3):
        c, s = F.quantize_nvfp4(r)
        part = F.dequantize_nvfp4(c, s)
        total, r = total + part, r - part
    assert ((total - q).abs() <= 2.0 ** -7 * q.abs().amax(-1, keepdim=True)).all()


_LOWER = r"""
import json, os, re, sys
os.environ.pop("TRITON_INTERPRET", None)
import triton
from triton.compiler import ASTSource
from triton.backends.compiler import GPUTarget
from kernel_templates import nvfp4_attention as A
res = []
for cc, kv, over in json.loads(sys.argv[1]):
    w = A.Workload(4, 32768, 16, kv, "dense")
    cfg = dict(A.default_config(w), **over)
    for fn, sig, cx in A.lower_signatures(w, cfg):
        if fn.is_gluon():
            from triton.experimental.gluon._runtime import GluonASTSource as ASTSource
        else:
            from triton.compiler import ASTSource
        c = triton.compile(ASTSource(fn=fn, signature=sig, constexprs=cx), target=GPUTarget("cuda", cc, 32),
                           options={"num_warps": 4, "num_stages": cfg["num_stages"], **sig.options})
        ptx = c.asm["ptx"]
        body = c.asm["ttgir"].split("scf.for", 1)[-1].split("scf.yield", 1)[0]  # the global-KV loop
        # native NVFP4 MMA (E2M1, E4M3 scales per 16): PTX spells it block16 (Triton 3.9), scale_vec::4X (3.6)
        nvf4 = re.search(r"tcgen05\.mma\S*kind::mxf4nvf4\.block_scale\.(?:block16|scale_vec::4X)", ptx)
        res.append([cc, kv, fn.__name__, "wgmma" in ptx, "tcgen05.mma" in ptx, nvf4 is not None,
                    body.count("tt.join")])
print(json.dumps(res))
"""


def _lower(cases):
    return run_clean(_LOWER, json.dumps(cases))


def test_lowers_for_sm90_and_sm100():
    res = _lower([[90, "nvfp4", {"SWAP_AB": True, "BLOCK_N": 64}], [100, "nvfp4", {"SWAP_AB": True, "BLOCK_N": 64}],
                  [100, "nvfp4", {"USE_DOT_SCALED": True, "BLOCK_N": 128, "SWAP_AB": True, "num_warps": 4,
                                  "num_stages": 1}]])
    split = [r for r in res if r[2] == "_split_kernel"]
    assert split[0][3], "sm_90: SWAP_AB with 64-entry tiles should use wgmma"
    assert split[1][4] and not split[1][5], "sm_100 SWAP_AB: tcgen05 BF16/FP16 MMA"
    assert split[2][4] and split[2][5], "sm_100 USE_DOT_SCALED: tcgen05 mxf4nvf4 block16 (scale_vec::4X)"
    assert len(res) == 6


def test_gluon_lowers_for_sm90():
    """The GLUON plan: the Gluon split kernel on wgmma (register A: its decoded tile never
    goes through a layout conversion), the SWA window's Triton program, the reduce."""
    res = _lower([[90, "nvfp4", {"GLUON": True}],
                  [90, "nvfp4", {"GLUON": True, "BLOCK_N": 128, "BLOCK_H": 64, "GL_AHEAD": 2, "num_warps": 8}]])
    assert [r[2] for r in res] == ["_gl_split_kernel", "_split_kernel", "_reduce_kernel"] * 2
    assert res[0][3] and res[3][3], "the Gluon kernel multiplies on wgmma (one and two warpgroups)"


def test_gluon_ws_lowers_for_sm90():
    """GL_WS: the warp-specialised Gluon kernel (decoder warpgroups beside the MMA warps) compiles
    for sm_90 at 64 heads (one decoder) and 16 (two), and refuses what it cannot take."""
    res = _lower([[90, "nvfp4", {"GLUON": True, "BLOCK_N": 64, "BLOCK_H": 64, "GL_WS": 1}],
                  [90, "nvfp4", {"GLUON": True, "BLOCK_N": 64, "BLOCK_H": 16, "GL_WS": 2}],
                  [90, "nvfp4", {"GLUON": True, "BLOCK_N": 64, "BLOCK_H": 64, "GL_WS": 1, "GL_WS_A": 1}]])
    assert [r[2] for r in res] == ["_gl_ws_kernel", "_split_kernel", "_reduce_kernel"] * 3
    assert res[0][3] and res[3][3] and res[6][3], "wgmma in both partitions"
    cfg = dict(A.default_config(A.Workload(4, 32768, 64, "nvfp4", "dense")), GLUON=True, BLOCK_N=64, BLOCK_H=64)
    assert A.gl_ws_error(dict(cfg, GL_WS=2), False) and A.gl_ws_error(dict(cfg, GL_WS=1), True)
    assert A.gl_ws_error(dict(cfg, GL_WS=1), False) is None
    assert A.gl_ws_launch(64, 1) == {"NW": 8, "DEC_REGS": A.GL_WS_DEC_REGS, "maxnreg": 168}


def test_gluon_in_the_search_space(monkeypatch):
    w = A.Workload(16, 32768, 16, "nvfp4", "dense")
    cfg = dict(A.default_config(w), GLUON=True, **S.GL_FIXED)
    assert not S.constraints(cfg, w), "never where it cannot run (here: the interpreter or no sm_90 GPU)"
    monkeypatch.setattr(S, "target_cc", lambda: 90)
    monkeypatch.setattr(S, "gluon_available", lambda **_: True)
    assert S.constraints(cfg, w)
    assert S.constraints(dict(cfg, BLOCK_H=32), w) is False  # 16 heads: one 16-head block is all
    assert S.constraints(dict(cfg, BLOCK_H=32), A.Workload(16, 32768, 32, "nvfp4", "dense"))
    h64 = A.Workload(16, 32768, 64, "nvfp4", "dense")
    assert not S.constraints(dict(cfg, BLOCK_H=64), h64), "64 heads need the 128-entry tile"
    assert S.constraints(dict(cfg, BLOCK_H=64, BLOCK_N=128, num_warps=8), h64), "two warpgroups"
    assert S.constraints(dict(cfg, BLOCK_H=64, BLOCK_N=128, num_warps=8, GL_AHEAD=2), h64)
    assert not S.constraints(dict(cfg, BLOCK_N=32), w), "the Gluon tile is 64 or 128 entries"
    assert not S.constraints(dict(cfg, num_warps=8), w), "one config per Gluon choice (no duplicate trials)"
    assert not S.constraints(dict(cfg, BLOCK_N=128, num_warps=4), w), "a warpgroup per 64 entries"
    triton_cfg = dict(A.default_config(h64), GLUON=False, BLOCK_N=64, BLOCK_H=64, D_CHUNKS=4, SWAP_AB=False,
                      GL_AHEAD=4, GL_WS=0)  # the Triton template's 64-head tile (its default where GLUON cannot run)
    assert S.constraints(triton_cfg, h64) and not S.constraints(dict(triton_cfg, GL_AHEAD=2), h64), \
        "GL_AHEAD is the Gluon kernel's alone"
    fp8 = A.Workload(16, 32768, 16, "fp8", "dense")
    assert not S.constraints(dict(A.default_config(fp8), GLUON=True), fp8)
    monkeypatch.setattr(S, "target_cc", lambda: 100)
    assert not S.constraints(cfg, w), "wgmma is sm_90 only"
    assert S.SPACE.complete({k: v for k, v in A.default_config(w).items() if k != "GLUON"})["GLUON"] is False


def test_gl_ws_in_the_search_space(monkeypatch):
    """GL_WS (the warp-specialised GLUON kernel): dense, 64-entry tiles, up to 64 heads a program
    (two decoders up to 32); canonical gives its MMA partition's warps and folds GL_AHEAD (unused
    there) and, without GLUON, GL_WS itself; its shared memory is a ring of two decoded tiles."""
    monkeypatch.setattr(S, "target_cc", lambda: 90)
    monkeypatch.setattr(S, "gluon_available", lambda **_: True)
    w = A.Workload(16, 32768, 64, "nvfp4", "dense")
    ws = dict(A.default_config(w), GLUON=True, **S.GL_FIXED, BLOCK_N=64, BLOCK_H=64, NUM_SPLITS=8, GL_WS=1,
              GL_AHEAD=4, num_warps=8)
    assert S.SPACE.contains(ws) and S.constraints(ws, w)
    assert S.canonical(dict(ws, num_warps=4, GL_AHEAD=2), w) == ws
    assert not S.constraints(dict(ws, GL_WS=2), w)                     # 16 warps at 64 heads: spills
    assert S.constraints(dict(ws, GL_WS=2, BLOCK_H=32, num_warps=4), w)
    assert not S.constraints(dict(ws, BLOCK_N=128), w)
    assert not S.constraints(ws, A.Workload(16, 32768, 64, "nvfp4", "sparse"))
    assert S.canonical(dict(ws, GLUON=False), w)["GL_WS"] == 0
    assert S.constraints(dict(ws, GL_WS_A=1), w)
    assert S.canonical(dict(ws, GL_WS=0, GL_WS_A=1, BLOCK_N=128, num_warps=8), w)["GL_WS_A"] == 0
    assert 221484 <= S.smem_estimate(ws) <= S.SMEM_BYTES  # measured: Triton 3.6 sm_90
    assert A.gl_ws_launch(16, 2) == {"NW": 4, "DEC_REGS": A.GL_WS_DEC_REGS, "maxnreg": 168}


def test_nvfp4_tile_decoded_once_per_iteration():
    # the nibble join is the decode's signature op: one per loop iteration means both MMAs
    # read one decoded tile (written plainly, Triton decoded it once per operand layout)
    res = _lower([[90, "nvfp4", {}], [90, "nvfp4", {"SWAP_AB": True}]])
    assert [r[6] for r in res if r[2] == "_split_kernel"] == [1, 1]


def test_default_configs_are_the_calibrated_ones(monkeypatch):
    # the ptxas-checked defaults (no spills on sm_90, default_config's docstring), except
    # nvfp4 at 16 heads (wgmma, 4 warps) and 64 heads (4 latent chunks): faster on the H200.
    # The Triton template's defaults, on a Hopper machine too (the GLUON ones: the next test)
    monkeypatch.setattr(A, "gluon_on_hopper", lambda: False)
    for h, bh in ((16, 16), (20, 32), (64, 64)):
        for kv in A.KV_DTYPES:
            cfg = A.default_config(A.Workload(16, 32768, h, kv, "dense"))
            swap = kv == "nvfp4" and bh == 16
            assert (cfg["BLOCK_N"], cfg["BLOCK_H"], cfg["num_warps"], cfg["SWAP_AB"]) == (64, bh, 4 if swap else 8, swap)
            assert cfg["D_CHUNKS"] == (4 if kv == "nvfp4" and bh == 64 else 1)
    # B=16, H=16, N=32K: 32 splits + the SWA program = 528 programs, 4 per SM of 132
    assert A.default_config(A.Workload(16, 32768, 16, "nvfp4", "dense"))["NUM_SPLITS"] == 32
    # B=1 fills the GPU too (128 splits), within the search space
    w1 = A.Workload(1, 32768, 16, "nvfp4", "dense")
    c1 = A.default_config(w1)
    assert c1["NUM_SPLITS"] == 128 and S.SPACE.contains(c1) and S.constraints(c1, w1)
    # the calibrated shared-memory estimate rejects the 128 x 64 tile (262144 B on sm_90)
    w64 = A.Workload(16, 32768, 64, "nvfp4", "dense")
    assert not S.constraints(dict(A.default_config(w64), BLOCK_N=128), w64)


def test_gluon_defaults_on_hopper(monkeypatch):
    """On an sm_90 GPU: 16 heads take the 64-entry GLUON tile with GL_AHEAD 2; dense nvfp4 with
    more heads the 128-entry tiles (``_gl_wide_default``), splits for ~128 programs (32 heads a
    program), never under two tiles a split, or from 2^18 (64-head block x entry) pairs up the
    warp-specialised kernel (``GL_WS`` with ``GL_WS_A``); sparse and other dtypes stay on the
    Triton template. Every default inside the space and its constraints."""
    monkeypatch.setattr(A, "gluon_on_hopper", lambda: True)
    monkeypatch.setattr(S, "target_cc", lambda: 90)
    monkeypatch.setattr(S, "gluon_available", lambda **_: True)
    want = {(1, 8192): (32, 32), (1, 32768): (32, 64), (1, 131072): (32, 64), (4, 32768): (32, 16),
            (16, 2048): (32, 4)}  # (B, N) -> (BLOCK_H, NUM_SPLITS): runs 117-119, 127
    for (b, n), (bh, s) in want.items():
        w = A.Workload(b, n, 64, "nvfp4", "dense")
        c = A.default_config(w)
        assert (c["GLUON"], c["BLOCK_N"], c["num_warps"], c["BLOCK_H"], c["NUM_SPLITS"]) == (True, 128, 8, bh, s), (b, n)
        assert c["GL_AHEAD"] == 4 and c["GL_WS"] == 0
    # 2^18 (64-head block x entry) pairs or more: the warp-specialised kernel, ~128 programs (runs 125-127)
    for (b, h, n), s in {(16, 64, 32768): 8, (64, 64, 131072): 2, (16, 128, 8192): 4, (32, 64, 8192): 4,
                         (8, 64, 32768): 16, (4, 64, 131072): 32, (256, 64, 8192): 1,
                         (128, 128, 32768): 1}.items():
        c = A.default_config(A.Workload(b, n, h, "nvfp4", "dense"))
        assert (c["GLUON"], c["GL_WS"], c["GL_WS_A"], c["BLOCK_N"], c["BLOCK_H"], c["num_warps"],
                c["NUM_SPLITS"]) == (True, 1, 1, 64, 64, 8, s), (b, h, n)
    c16 = A.default_config(A.Workload(16, 32768, 16, "nvfp4", "dense"))
    assert (c16["GLUON"], c16["BLOCK_N"], c16["GL_AHEAD"]) == (True, 64, 2)
    assert not A.default_config(A.Workload(16, 32768, 64, "nvfp4", "sparse"))["GLUON"]
    assert not A.default_config(A.Workload(16, 32768, 64, "fp8", "dense"))["GLUON"]
    for w in [*S.WORKLOADS, A.Workload(4, 32768, 20, "nvfp4", "dense"), A.Workload(4, 32768, 128, "nvfp4", "dense")]:
        c = A.default_config(w)
        assert S.SPACE.contains(c) and S.constraints(c, w), (w, c)


@triton.jit
def _words_probe(codes_ptr, scales_ptr, out_ptr, R: tl.constexpr, C: tl.constexpr):
    r = tl.arange(0, R)
    codes = tl.load(codes_ptr + r[:, None] * C + tl.arange(0, C)[None, :])
    scales = tl.load(scales_ptr + r[:, None] * (C // 8) + tl.arange(0, C // 8)[None, :])
    v = A._nvfp4_tile_to_f16_words(codes, scales)
    tl.store(out_ptr + r[:, None] * (2 * C) + tl.arange(0, 2 * C)[None, :], v)


def test_f16_words_decode_every_code_and_scale(device):
    """The split kernel's fp16 decode (``_nvfp4_tile_to_f16_words``) gives the exact value
    * 2^-14, bit for bit against the PyTorch dequant, for every code byte under every
    scale byte but the two NaNs (through the interpreter, and compiled on a GPU)."""
    R, C = 256, 256
    codes = (torch.arange(R * C) % 256).to(torch.uint8).reshape(R, C)
    sb = torch.arange(256, dtype=torch.int64)
    sb = sb[(sb & 0x7F) != 0x7F]
    scales = sb.repeat(R * (C // 8) // sb.numel() + 1)[: R * (C // 8)].roll(3).to(torch.uint8).reshape(R, C // 8)
    out = torch.empty(R, 2 * C, dtype=torch.float16, device=device)
    _words_probe[(1,)](codes.to(device), scales.to(device), out, R=R, C=C)
    want = F.dequantize_nvfp4(codes, scales).double() * 2.0 ** -14
    assert torch.equal(out.cpu().double(), want), (out.cpu().double() - want).abs().max()


@pytest.mark.gpu
@pytest.mark.parametrize("kv_dtype", ["nvfp4", "fp8", "bf16"])
def test_gpu_default_configs(kv_dtype, device):
    """The defaults on the GPU, dense and sparse; for nvfp4 also B = 8 32K at 64 heads, the
    warp-specialised kernel with GL_WS_A on Hopper (``_gl_ws_default``)."""
    shapes = [(4, 8192, mode) for mode in ("dense", "sparse")]
    if kv_dtype == "nvfp4":
        shapes.append((8, 32768, "dense"))
    for b, n, mode in shapes:
        w = A.Workload(b, n, 64, kv_dtype, mode)
        inp = A.make_inputs(w, device, 0)
        A.verify(A.launch(config=A.default_config(w), **inp), A.reference(**inp), inp)


GLUON_CASES = [
    # mode, page, heads, config overrides
    ("dense", 64, 5, dict(NUM_SPLITS=1)),
    ("dense", 64, 33, dict(NUM_SPLITS=4)),      # three head blocks, the last one partial
    ("dense", 256, 16, dict(NUM_SPLITS=3)),     # four tiles a page
    ("sparse", 64, 5, dict(NUM_SPLITS=2)),
    ("sparse", 256, 33, dict(NUM_SPLITS=1, BLOCK_H=32)),
    ("dense", 64, 64, dict(NUM_SPLITS=2, BLOCK_H=32)),
    ("dense", 16, 5, dict(NUM_SPLITS=2)),       # a tile spans four pages
    ("dense", 64, 5, dict(NUM_SPLITS=1, GL_AHEAD=2)),
    ("sparse", 64, 33, dict(NUM_SPLITS=2, GL_AHEAD=2)),
    # 128-entry tiles (two warpgroups): two pages a tile, one a page, four tiles a page
    ("dense", 64, 64, dict(NUM_SPLITS=2, BLOCK_N=128, BLOCK_H=64)),
    ("dense", 128, 64, dict(NUM_SPLITS=1, BLOCK_N=128, BLOCK_H=64, GL_AHEAD=2)),
    ("dense", 512, 40, dict(NUM_SPLITS=3, BLOCK_N=128, BLOCK_H=32)),
    ("sparse", 64, 64, dict(NUM_SPLITS=2, BLOCK_N=128, BLOCK_H=64, GL_AHEAD=2)),
    ("sparse", 256, 16, dict(NUM_SPLITS=1, BLOCK_N=128, BLOCK_H=16)),
    # warp-specialised (GL_WS): decoder warpgroups, a ring of two decoded tiles
    ("dense", 64, 64, dict(NUM_SPLITS=2, BLOCK_H=64, GL_WS=1)),
    ("dense", 128, 40, dict(NUM_SPLITS=1, BLOCK_H=64, GL_WS=1)),   # one head block, partial
    ("dense", 64, 5, dict(NUM_SPLITS=1, GL_WS=1)),
    ("dense", 16, 33, dict(NUM_SPLITS=3, BLOCK_H=32, GL_WS=2)),    # a tile spans four pages
    ("dense", 256, 16, dict(NUM_SPLITS=2, GL_WS=2)),
    # GL_WS_A: the decoders' K q^T from the ring slot (not run on a GPU yet: session 23)
    ("dense", 64, 64, dict(NUM_SPLITS=2, BLOCK_H=64, GL_WS=1, GL_WS_A=1)),
    ("dense", 16, 33, dict(NUM_SPLITS=3, BLOCK_H=32, GL_WS=2, GL_WS_A=1)),
]


@pytest.mark.gpu
@pytest.mark.parametrize("mode, page, heads, over", GLUON_CASES)
def test_gpu_gluon_split_kernel(mode, page, heads, over, device):
    """The GLUON split kernel (global entries) next to the Triton SWA program, on the
    ragged inputs: sequences shorter than the window and than a page, partial pages,
    -1 and out-of-range top-k entries."""
    inp = ragged_inputs("nvfp4", mode, page=page, heads=heads, device=device)
    w = A.Workload(3, 300, heads, "nvfp4", mode, page)
    cfg = dict(A.default_config(w), GLUON=True, BLOCK_N=64, BLOCK_H=16)
    run_and_check(inp, dict(cfg, **over))


@pytest.mark.gpu
def test_gpu_gluon_long_rows(device):
    """Many tiles a split (the loop-carried softmax state) at B=4, 8K entries."""
    for mode in ("dense", "sparse"):
        w = A.Workload(4, 8192, 16, "nvfp4", mode)
        inp = A.make_inputs(w, device, 0)
        cfg = dict(A.default_config(w), GLUON=True, BLOCK_N=64, BLOCK_H=16, NUM_SPLITS=8)
        A.verify(A.launch(config=cfg, **inp), A.reference(**inp), inp)
    w = A.Workload(2, 8192, 64, "nvfp4", "dense")  # two warpgroups a tile, 64 heads a program
    inp = A.make_inputs(w, device, 0)
    for ahead in (2, 4):
        cfg = dict(A.default_config(w), GLUON=True, BLOCK_N=128, BLOCK_H=64, NUM_SPLITS=4, GL_AHEAD=ahead)
        A.verify(A.launch(config=cfg, **inp), A.reference(**inp), inp)
    for bh, ws, splits, wsa in ((64, 1, 4, 0), (64, 1, 1, 0), (32, 2, 2, 0), (64, 1, 1, 1), (16, 2, 4, 1)):
        cfg = dict(A.default_config(w), GLUON=True, BLOCK_N=64, BLOCK_H=bh, NUM_SPLITS=splits, GL_WS=ws, GL_WS_A=wsa)
        A.verify(A.launch(config=cfg, **inp), A.reference(**inp), inp)  # warp-specialised: many trips round the ring


def test_gluon_refused_where_it_cannot_run():
    inp = ragged_inputs("nvfp4", "dense")
    w = A.Workload(3, 300, 5, "nvfp4", "dense")
    cfg = dict(A.default_config(w), GLUON=True, BLOCK_N=64, BLOCK_H=16)
    if os.environ.get("TRITON_INTERPRET") == "1":
        with pytest.raises(ValueError, match="TRITON_INTERPRET"):
            A.launch(config=cfg, **inp)
    fp8 = ragged_inputs("fp8", "dense")
    cfg8 = dict(A.default_config(A.Workload(3, 300, 5, "fp8", "dense")), GLUON=True, BLOCK_N=64, BLOCK_H=16)
    with pytest.raises(ValueError, match="GLUON applies"):
        A.launch(config=cfg8, **fp8)
    with pytest.raises(ValueError, match="GLUON applies"):
        A.launch(config=dict(cfg, BLOCK_N=32), **inp)


# Shared memory of the split kernel as allocated for sm_100 (metadata.shared, set while
# lowering to LLVM IR; the later ptx / cubin stages do not change it, so they are skipped)
_SMEM = r"""
import json, os, sys
os.environ.pop("TRITON_INTERPRET", None)
import triton
from triton.backends.nvidia.compiler import CUDABackend
from triton.compiler import ASTSource
from triton.backends.compiler import GPUTarget
from kernel_templates import nvfp4_attention as A
class _Done(Exception):
    pass
_add_stages = CUDABackend.add_stages
def add_stages(self, stages, options, *args):
    _add_stages(self, stages, options, *args)
    llir = stages["llir"]
    def stop(src, metadata):
        llir(src, metadata)
        raise _Done(metadata["shared"])
    stages["llir"] = stop
CUDABackend.add_stages = add_stages
heads, mode, cfg = json.loads(sys.argv[1])
w = A.Workload(16, 32768, heads, "nvfp4", mode)
fn, sig, cx = A.lower_signatures(w, cfg)[0]
assert fn is A._split_kernel
try:
    c = triton.compile(ASTSource(fn=fn, signature=sig, constexprs=cx), target=GPUTarget("cuda", 100, 32),
                       options={"num_warps": cfg["num_warps"], "num_stages": cfg["num_stages"]})
    shared = c.metadata.shared  # a cached full compile
except _Done as e:
    shared = e.args[0]
print(json.dumps(shared))
"""


def test_dot_scaled_configs_fit_shared_memory_on_sm100(monkeypatch, tmp_path):
    monkeypatch.setattr(S, "target_cc", lambda: 100)
    w = A.Workload(16, 32768, 64, "nvfp4", "dense")
    base = dict(A.default_config(w), USE_DOT_SCALED=True, SWAP_AB=True, BLOCK_N=128, NUM_SPLITS=2, D_CHUNKS=1)
    ds = [c for c in S.SPACE.grid() if c["USE_DOT_SCALED"] and S.constraints(c, w)]
    assert ds, "some dot-scaled configs must stay admitted on sm_100"
    # the largest admitted ones as measured (Triton 3.6 / 3.9): 128 x 16 pipelined 200720 / 176144,
    # 128 x 32 unpipelined 196616 / 163848 (num_warps 8: quicker to compile than 4, same shared memory)
    cases = [[64, "dense", dict(base, BLOCK_H=16, DQ_FP16=True, num_warps=8, num_stages=3)],
             [64, "sparse", dict(base, BLOCK_H=32, DQ_FP16=True, num_warps=8, num_stages=1)]]
    for _, mode, cfg in cases:
        assert S.constraints(cfg, A.Workload(16, 32768, 64, "nvfp4", mode)), cfg
    env = dict(clean_env(), TRITON_CACHE_DIR=str(tmp_path))
    procs = [subprocess.Popen([sys.executable, "-c", _SMEM, json.dumps(c)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT) for c in cases]
    for c, p in zip(cases, procs):
        out, err = p.communicate(timeout=600)
        assert p.returncode == 0, err[-3000:]
        shared = json.loads(out.strip().splitlines()[-1])
        assert shared <= S.SMEM_BYTES, (c, shared)
        assert shared <= S.smem_estimate(c[2]), (c, shared)
    # measured above the limit (Triton 3.6 / 3.9), admitted by the sm_90 estimate: rejected now
    for over in ({"BLOCK_H": 32, "DQ_FP16": True, "num_warps": 8, "num_stages": 3},     # 233488 / 184336
                 {"BLOCK_H": 16, "DQ_FP16": False, "num_warps": 8, "num_stages": 3}):  # 286752 / 270368
        cfg = dict(base, **over)
        assert not S.constraints(cfg, w), cfg
    # the sm_90 (non-dot-scaled) estimate is unchanged: 128 x 16 still fits, 128 x 64 does not
    assert S.constraints(dict(base, USE_DOT_SCALED=False, BLOCK_H=16, DQ_FP16=True, num_stages=3), w)
    assert not S.constraints(dict(base, USE_DOT_SCALED=False, BLOCK_H=64, DQ_FP16=True), w)


def test_committed_pack_verifies_for_its_gpu():
    """The H200 pack's entries are judged for the GPU it was made on (sm_90, from its manifest),
    not for the machine verifying it (here: no GPU, the interpreter on), and all pass: its GLUON
    entries, and engram's / MoE routing's, which the interpreter's own limits (its SM count,
    one program at a time) would refuse (the outcome depended on TRITON_INTERPRET before)."""
    from tuner.pack import _pack_cc, verify_pack
    from tuner.runtime.env import interpreting

    before = interpreting(), os.environ.get("TRITON_INTERPRET")
    rep = verify_pack(ROOT / "packs" / "nvidia-h200")
    assert _pack_cc(rep.pack) == 90
    entries = rep.pack.tables["nvfp4_attention"].entries
    assert any(e["config"].get("GLUON") for e in entries)
    assert not rep.problems, rep.problems
    assert (interpreting(), os.environ.get("TRITON_INTERPRET")) == before  # left as it was
