"""Sparse MQA indexer: indices (and logits) equal the reference through the interpreter for
both key formats, ragged and short sequences, next_n = 2 causality, exact ties, every
top-k path (prunes, shared thresholds, merge levels); verify's tolerance; the baseline;
the search space; lowering for sm_90 (default configs within shared memory, FP8 wgmma,
16-byte key loads) / sm_100."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from kernel_templates import sparse_mqa as M
from search_spaces import sparse_mqa as S
from tuner.verify import assert_equal

ROOT = Path(__file__).resolve().parents[1]


def ragged_inputs(profile: str, next_n: int, seq_lens: list[int], *, top_k: int, context: int | None = None,
                  device: str = "cpu", seed: int = 0, logits: bool = False) -> dict:
    ctx = context or max(max(seq_lens), 1)
    inp = M.make_inputs(M.Workload(len(seq_lens), ctx, next_n, profile), device, seed)
    inp.update(seq_lens=torch.tensor(seq_lens, dtype=torch.int32, device=device), top_k=top_k, return_logits=logits)
    return inp


def min_gap(ref_logits: torch.Tensor, ref_idx: torch.Tensor) -> float:
    """Smallest relative gap between consecutive selected scores (random data: no near ties)."""
    gaps = []
    for b in range(ref_idx.shape[0]):
        for t in range(ref_idx.shape[1]):
            i = ref_idx[b, t][ref_idx[b, t] >= 0].long()
            if i.numel() > 1:
                s = ref_logits[b, t][i].double()
                gaps.append(float((s[:-1] - s[1:]).min() / s.abs().max()))
    return min(gaps) if gaps else 1.0


def check_exact(inp: dict, config: dict) -> None:
    """The indices are exactly the top-k of the kernel's own logits on any device (immune
    to the MMA's rounding); the run without logits (another compile) gives the same; on
    the CPU (fp32 accumulation) they also equal the float64 reference's; ``verify``
    (tolerance for the device's MMA) passes."""
    want_logits = inp["return_logits"]
    idx, logits = M.launch(config=config, **dict(inp, return_logits=True))
    ref = M.reference(**dict(inp, return_logits=True))
    assert idx.dtype == torch.int32 and idx.shape == ref[0].shape
    assert_equal("topk_idx vs own logits", idx, M.topk_of_logits(logits, inp["top_k"]))
    if not want_logits:
        assert_equal("topk_idx without logits", M.launch(config=config, **inp), idx)
    if idx.device.type == "cpu":
        assert min_gap(ref[1], ref[0]) > 1e-6, "inputs with near-ties: pick another seed"
        assert_equal("topk_idx", idx, ref[0])
    M.verify((idx, logits) if want_logits else idx, ref if want_logits else ref[0], inp)


def cfg(profile: str, next_n: int = 1, **over) -> dict:
    return dict(M.default_config(M.Workload(2, 4096, next_n, profile)), **over)


CASES = [
    # profile, next_n, seq_lens, top_k, config overrides
    ("dsv32", 1, [300, 37, 130], 40, dict(BLOCK_N=32, NUM_SPLITS=4, MERGE_GROUP=2, SELECT_BLOCK=256,
                                                 SHARE_THRESHOLD=True)),
    ("dsv32", 2, [700, 1, 0], 50, dict(BLOCK_N=16, NUM_SPLITS=2, MERGE_GROUP=2, CAND_MULT=2,
                                             SHARE_THRESHOLD=True)),  # prunes, tiny seqs
    ("dsv32", 2, [900, 450], 33, dict(BLOCK_N=64, NUM_SPLITS=8, MERGE_GROUP=2, SHARE_THRESHOLD=False)),  # 3 levels
    ("dsv41-flash", 1, [600, 20], 64, dict(BLOCK_N=128, NUM_SPLITS=1, MX_FP8_DOT=True)),  # tiles of 2 pages
    ("dsv41-flash", 2, [520, 333], 100, dict(BLOCK_N=32, NUM_SPLITS=3, MERGE_GROUP=4, MX_FP8_DOT=True, CAND_MULT=4,
                                                       SHARE_THRESHOLD=True)),
    ("dsv41-flash", 2, [400, 64], 16, dict(BLOCK_N=64, NUM_SPLITS=2, MERGE_GROUP=2, MX_FP8_DOT=False)),
]


@pytest.mark.parametrize("profile, next_n, seqs, top_k, over", CASES)
def test_indices_equal_reference(profile, next_n, seqs, top_k, over, device):
    inp = ragged_inputs(profile, next_n, seqs, top_k=top_k, device=device, logits=next_n == 2)
    check_exact(inp, cfg(profile, next_n, **over))


def test_fewer_keys_than_top_k_pad_with_minus_one(device):
    inp = ragged_inputs("dsv41-flash", 2, [5, 70, 1], top_k=80, context=128, device=device)
    idx = M.launch(config=cfg("dsv41-flash", 2, BLOCK_N=32, NUM_SPLITS=2, MERGE_GROUP=2), **inp)
    assert_equal("topk_idx", idx, M.reference(**inp))
    # query i of next_n = 2 sees seq_len - 1 + i keys: 4 / 5, 69 / 70, 0 / 1
    assert (idx >= 0).sum(-1).tolist() == [[4, 5], [69, 70], [0, 1]]
    assert sorted(idx[1, 1, :70].tolist()) == list(range(70))


def test_causality_next_n_2(device):
    # the newest key scores far above all others: only the last query token may pick it
    inp = ragged_inputs("dsv32", 2, [200], top_k=8, device=device)
    page = int(inp["block_table"][0, 199 // 64])
    q_mean = inp["q"][0, 1].float().mean(0)
    inp["k_cache"][page, 199 % 64] = (q_mean.sign() * 448).to(torch.float8_e4m3fn)
    inp["k_scales"][page, 199 % 64] = 1.0
    inp["weights"][0] = inp["weights"][0].abs()
    idx = M.launch(config=cfg("dsv32", 2, BLOCK_N=64, NUM_SPLITS=2, MERGE_GROUP=2), **inp)
    assert_equal("topk_idx", idx, M.reference(**inp))
    assert int(idx[0, 1, 0]) == 199 and 199 not in idx[0, 0].tolist()


def test_exact_ties_lower_index_first(device):
    # every key of pages 0..3 repeated: each score appears 4 times, must come out in index order
    inp = ragged_inputs("dsv32", 1, [256], top_k=24, device=device)
    bt = inp["block_table"][0].long()
    inp["k_cache"][bt[1:4]] = inp["k_cache"][bt[0]].clone()
    inp["k_scales"][bt[1:4]] = inp["k_scales"][bt[0]].clone()
    idx = M.launch(config=cfg("dsv32", 1, BLOCK_N=16, NUM_SPLITS=4, MERGE_GROUP=2), **inp)
    assert_equal("topk_idx", idx, M.reference(**inp))
    first = idx[0, 0, :4].tolist()
    assert first == sorted(first) and len({i % 64 for i in first}) == 1


def test_verify_accepts_near_tie_swaps_and_rejects_wrong_keys(device):
    inp = ragged_inputs("dsv32", 1, [300, 200], top_k=20, device=device)
    ref = M.reference(**inp)
    M.verify(ref.clone(), ref, inp)
    out = ref.clone()
    out[0, 0, 3] = int(ref[0, 0, -1]) - 0  # a key of the set at the wrong rank
    out[0, 0, -1] = int(ref[0, 0, 3])
    with pytest.raises(AssertionError, match="rank|order"):
        M.verify(out, ref, inp)
    out = ref.clone()
    rest = [i for i in range(300) if i not in ref[0, 0].tolist()]
    out[0, 0, 5] = rest[0]
    with pytest.raises(AssertionError):
        M.verify(out, ref, inp)
    out = ref.clone()
    out[1, 0, -1] = -1
    with pytest.raises(AssertionError, match="padding"):
        M.verify(out, ref, inp)
    # a swap of two keys with equal scores is a valid answer
    dup = ragged_inputs("dsv32", 1, [128], top_k=10, device=device)
    bt = dup["block_table"][0].long()
    dup["k_cache"][bt[1]] = dup["k_cache"][bt[0]].clone()
    dup["k_scales"][bt[1]] = dup["k_scales"][bt[0]].clone()
    r = M.reference(**dup)
    o = r.clone()
    o[0, 0, 0], o[0, 0, 1] = r[0, 0, 1], r[0, 0, 0]
    assert (r[0, 0, 1] - r[0, 0, 0]).abs() == 64
    M.verify(o, r, dup)


@settings(max_examples=6, deadline=None)
@given(seqs=st.lists(st.integers(0, 260), min_size=1, max_size=3), top_k=st.integers(1, 70),
       next_n=st.integers(1, 3), splits=st.sampled_from([1, 2, 4]), seed=st.integers(0, 2**16))
def test_property_random_shapes(seqs, top_k, next_n, splits, seed):
    inp = ragged_inputs("dsv41-flash", next_n, seqs, top_k=top_k, context=max(seqs + [64]), seed=seed)
    out = M.launch(config=cfg("dsv41-flash", next_n, BLOCK_N=32, NUM_SPLITS=splits, MERGE_GROUP=2), **inp)
    M.verify(out, M.reference(**inp), inp)


def test_scoring_only_and_public_api(device):
    inp = ragged_inputs("dsv32", 2, [150, 90], top_k=0, device=device, logits=True)
    idx, logits = M.launch(config=cfg("dsv32", 2, NUM_SPLITS=2), **inp)
    assert idx.shape == (2, 2, 0)
    _, ref_logits = M.reference(**inp)
    M.verify((idx, logits), (idx, ref_logits), inp)
    inp = ragged_inputs("dsv41-flash", 1, [150, 90], top_k=512, device=device)
    out = M.mqa_topk(inp["q"], inp["weights"], inp["k_cache"], inp["k_scales"], inp["block_table"],
                     inp["seq_lens"], top_k=512, k_format="mxfp4")
    assert_equal("topk_idx", out, M.reference(**inp))


def test_torch_eager_baseline(device):
    for prof in ("dsv32", "dsv41-flash"):
        inp = ragged_inputs(prof, 2, [300, 17], top_k=30, device=device, logits=True)
        M.verify(M.torch_eager(**inp, chunk_elems=4096), M.reference(**inp), inp)


def test_spec_round_trip_small_workloads(device):
    for w in S.SMALL_WORKLOADS:
        inp = M.make_inputs(w, device, 1)
        c = M.default_config(w)
        assert S.constraints(c, w) and S.SPACE.contains(c)
        M.SPEC.verify(M.SPEC.launch(config=c, **inp), M.SPEC.reference(**inp), inp)


def test_validation_errors():
    inp = ragged_inputs("dsv32", 1, [100], top_k=8)
    c = cfg("dsv32")
    with pytest.raises(ValueError, match="q must be torch.float8_e4m3fn"):
        M.launch(config=c, **dict(inp, q=inp["q"].float()))
    with pytest.raises(ValueError, match="weights must have shape"):
        M.launch(config=c, **dict(inp, weights=inp["weights"][:, :, :3]))
    with pytest.raises(ValueError, match="k_format must be one of"):
        M.launch(config=c, **dict(inp, k_format="fp4"))
    with pytest.raises(ValueError, match="k_cache must be torch.uint8"):
        M.launch(config=c, **dict(inp, k_format="mxfp4"))
    with pytest.raises(ValueError, match="k_scales must have shape"):
        M.launch(config=c, **dict(inp, k_scales=inp["k_scales"][:, :32]))
    with pytest.raises(ValueError, match="top_k must be"):
        M.launch(config=c, **dict(inp, top_k=5000))
    with pytest.raises(ValueError, match="MX_FP8_DOT"):
        M.launch(config=dict(c, MX_FP8_DOT=True), **inp)


def test_cost_profiles_and_bytes_per_key():
    assert M.BYTES_PER_KEY == {"fp8": 132, "mxfp4": 68}
    inp = M.make_inputs(M.Workload(1, 64, 1, "dsv41-flash"), "cpu", 0)
    assert inp["k_cache"][0, 0].numel() + inp["k_scales"][0, 0].numel() == 68
    w = M.Workload(8, 32768, 2, "dsv32")
    assert M.cost(w) == (8 * 32768 * 132, 2 * 8 * 2 * 64 * 128 * 32768)
    assert M.cost(M.Workload(8, 32768, 1, "dsv41-flash")) == (8 * 32768 * 68, 2 * 8 * 32 * 128 * 32768)


def test_search_space_defaults_and_feasibility():
    assert len(S.WORKLOADS) == 64
    for w in S.WORKLOADS:
        c = M.default_config(w)
        assert S.SPACE.contains(c) and S.constraints(c, w), (w, c)
        assert S.feasible(w, budget_bytes=int(0.7 * 141e9)) is None, w
    assert S.feasible(M.Workload(128, 524288, 2, "dsv32"), budget_bytes=10**9)
    w = M.Workload(1, 524288, 1, "dsv32")
    assert M.default_config(w)["NUM_SPLITS"] == 128
    assert not S.constraints(dict(M.default_config(w), MX_FP8_DOT=True), w)
    assert sum(S.constraints(c, w) for c in S.SPACE.grid()) > 100


_LOWER = r"""
import json, os, sys
os.environ.pop("TRITON_INTERPRET", None)
import triton
from triton.compiler import ASTSource
from triton.backends.compiler import GPUTarget
from kernel_templates import sparse_mqa as M
res = []
for cc, prof, n in json.loads(sys.argv[1]):
    w = M.Workload(1, 131072, n, prof)
    cfg = M.default_config(w)
    for fn, sig, cx in M.lower_signatures(w, cfg):
        c = triton.compile(ASTSource(fn=fn, signature=sig, constexprs=cx), target=GPUTarget("cuda", cc, 32),
                           options={"num_warps": cfg["num_warps"], "num_stages": cfg["num_stages"]})
        ptx = c.asm["ptx"]
        res.append([cc, prof, fn.__name__, "wgmma" in ptx, "tcgen05.mma" in ptx])
print(json.dumps(res))
"""


def test_lowers_for_sm100():
    """sm_100 (sm_90: test_default_configs_fit_sm90): the scoring MMA is tcgen05."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = str(ROOT)
    env.setdefault("TRITON_DEFAULT_FP_FUSION", "1")
    cases = [[100, "dsv32", 2], [100, "dsv41-flash", 1]]
    p = subprocess.run([sys.executable, "-c", _LOWER, json.dumps(cases)], capture_output=True, text=True, env=env,
                       cwd=ROOT, timeout=900)
    assert p.returncode == 0, p.stderr[-3000:]
    res = json.loads(p.stdout.strip().splitlines()[-1])
    score = [r for r in res if r[2] == "_score_kernel"]
    assert len(score) == 2
    assert all(r[4] for r in score if r[0] == 100), "sm_100: the scoring MMA should be tcgen05"
    assert sum(r[2] == "_merge_kernel" for r in res) == 2 * 3  # 128 splits, 8-way: three levels


_SM90 = r"""
import json, re
import torch, triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from kernel_templates import sparse_mqa as M
from search_spaces.sparse_mqa import WORKLOADS
m = lambda *s, dt=torch.float32: torch.empty(*s, dtype=dt, device="meta")
seen = {}
for wl in WORKLOADS:
    cfg = M.default_config(wl)
    prof = M.PROFILES[wl.profile]
    B, T, H, D, fmt = wl.batch, wl.next_n, prof["heads"], M.D_INDEX, prof["k_format"]
    pages = B * triton.cdiv(wl.context, M.PAGE)
    kc, ks = ((m(pages, M.PAGE, D, dt=torch.float8_e4m3fn), m(pages, M.PAGE)) if fmt == "fp8" else
              (m(pages, M.PAGE, D // 2, dt=torch.uint8), m(pages, M.PAGE, D // 32, dt=torch.uint8)))
    bufs = M._buffers(B, T, (pages // B) * M.PAGE, prof["top_k"], False, cfg, "meta",
                      alloc=lambda shape, dtype, fill=None: m(*shape, dt=dtype))
    plan = M._plan(m(B, T, H, D, dt=torch.float8_e4m3fn), m(B, T, H), kc, ks, m(B, pages // B, dt=torch.int32),
                   m(B, dt=torch.int32), prof["top_k"], fmt, False, cfg, bufs)
    for fn, _grid, args in plan:
        sig, cx = M.lowering.signature(fn, args)
        # As the JIT specializes on the GPU: pointers and 16-divisible ints get
        # tt.divisibility 16 (it sets vector widths), ints == 1 become constexprs.
        attrs = M.lowering.specialize(fn, args, sig, cx)
        # NUM_SPLITS / MERGE_GROUP only enter scalar index math: one compile per rest
        key = repr((fn.__name__, sorted(sig.items()), sorted((k, v) for k, v in cx.items()
                    if k not in ("NUM_SPLITS", "MERGE_GROUP")), sorted(attrs), args["num_warps"], args["num_stages"]))
        if key in seen:
            continue
        c = triton.compile(ASTSource(fn=fn, signature=sig, constexprs=cx, attrs=attrs), target=GPUTarget("cuda", 90, 32),
                           options={"num_warps": args["num_warps"], "num_stages": args["num_stages"]})
        ptx = c.asm["ptx"]
        seen[key] = dict(fn=fn.__name__, wl=[wl.batch, wl.context, wl.next_n, wl.profile], cfg=cfg,
                         shared=c.metadata.shared, wgmma=sorted(set(re.findall(r"wgmma\.mma_async\S*", ptx))),
                         cp16=len(re.findall(r"cp\.async\.\w+\.shared\.global \[[^]]*\], \[[^]]*\], 0x10", ptx)),
                         v4=len(re.findall(r"ld\.global(?:\.\w+)*\.v4", ptx)))
print(json.dumps(list(seen.values())))
"""


def test_default_configs_fit_sm90():
    """The distinct default kernels of the GPU grid compile for sm_90 (with the
    specialisation real launches get) within the 232448 B of shared memory an H100 / H200
    block may have and under ``smem_estimate``; the scoring MMA is FP8 wgmma for both key
    formats and its key tile arrives through 16-byte loads (cp.async or ld.global.v4).
    Triton 3.6 numbers of the same compiles are in ``default_config``'s docstring."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = str(ROOT)
    p = subprocess.run([sys.executable, "-c", _SM90], capture_output=True, text=True, env=env, cwd=ROOT, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    res = json.loads(p.stdout.strip().splitlines()[-1])
    score = [r for r in res if r["fn"] == "_score_kernel"]
    assert {(r["wl"][2], r["wl"][3]) for r in score} == {(t, prof) for t in (1, 2) for prof in M.PROFILES}
    assert {r["fn"] for r in res} == {"_score_kernel", "_merge_kernel"}
    for r in res:
        assert r["shared"] <= S.SMEM_BYTES, r
    for r in score:
        wl = M.Workload(*r["wl"])
        assert r["shared"] <= S.smem_estimate(r["cfg"], wl), (r, S.smem_estimate(r["cfg"], wl))
        assert r["wgmma"] and all(i.endswith(".e4m3.e4m3") for i in r["wgmma"]), r
        assert r["cp16"] + r["v4"] > 0, r


@pytest.mark.gpu
@pytest.mark.parametrize("profile", ["dsv32", "dsv41-flash"])
def test_gpu_default_configs(profile, device):
    for n in (1, 2):
        w = M.Workload(4, 16384, n, profile)
        inp = M.make_inputs(w, device, 0)
        M.verify(M.launch(config=M.default_config(w), **inp), M.reference(**inp), inp)


def test_space_names_are_kernel_constexprs():
    import inspect

    import triton.language as tl

    names = {n for k in (M._score_kernel, M._merge_kernel)
             for n, prm in inspect.signature(k.fn).parameters.items() if prm.annotation in (tl.constexpr, "tl.constexpr")}
    assert set(S.SPACE) - {"num_warps", "num_stages"} <= names
