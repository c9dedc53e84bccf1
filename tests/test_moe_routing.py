"""Fused MoE routing: kernel vs reference through the interpreter, ties, align invariants."""
from __future__ import annotations

import inspect
import sys
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kernel_templates import moe_routing as mr
from kernel_templates.moe_routing import chunked
from search_spaces import moe_routing as ms
from tuner.runtime.target import Target
from conftest import run_clean

ROOT = Path(__file__).resolve().parents[1]
TGT = Target.of()  # the interpreter without a GPU
INTERP = Target.named("interpreter")


def _cfg(bt: int, progs: int, fused: bool, nw: int = 4) -> dict:
    return dict(BLOCK_T=bt, MAX_PROGRAMS=progs, FUSED=fused, num_warps=nw, num_stages=1)


def _run_and_check(inputs: dict, config: dict | None) -> mr.MoeRouting:
    out = mr.launch(config=config, **inputs) if config is not None else mr.moe_routing(**inputs)
    ref = mr.reference(**inputs)
    mr.verify(out, ref, inputs)
    return out


def _check_layout(out: mr.MoeRouting, E: int, block_m: int, expert_map: torch.Tensor | None = None) -> None:
    """The align invariants, checked from first principles (not against reference_align)."""
    ids = out.topk_ids.cpu().reshape(-1).long()
    n = ids.numel()
    st_ids = out.sorted_token_ids.cpu().long()
    eids = out.expert_ids.cpu().long()
    npad = int(out.num_tokens_post_pad.cpu()[0])
    assert st_ids.numel() == n + E * (block_m - 1)
    assert eids.numel() == -(-st_ids.numel() // block_m)
    counts = torch.bincount(ids, minlength=E)
    assert npad == int(((counts + block_m - 1) // block_m * block_m).sum())
    assert npad % block_m == 0
    real = st_ids[st_ids != n]
    assert sorted(real.tolist()) == list(range(n)), "every flat index exactly once"
    assert (st_ids[npad:] == n).all(), "only padding past num_tokens_post_pad"
    local = {}
    for b in range(npad // block_m):
        blk = st_ids[b * block_m:(b + 1) * block_m]
        r = blk[blk != n]
        assert r.numel() > 0, "no all-padding block inside the padded total"
        experts = ids[r].unique()
        assert experts.numel() == 1, "one expert per block"
        e = int(experts[0])
        assert bool((blk[:r.numel()] == r).all()), "padding only at the end of a segment"
        want = e if expert_map is None else int(expert_map[e])
        assert int(eids[b]) == want
        local.setdefault(e, []).append(r)
    for e, parts in local.items():
        seq = torch.cat(parts)
        assert bool((seq[1:] > seq[:-1]).all()), "increasing flat index within an expert"
        assert seq.numel() == int(counts[e])
    assert (eids[npad // block_m:] == -1).all()
    # segments in increasing expert order
    order = [e for e in local]
    assert order == sorted(order)


# ----------------------------------------------------------------------------- kernel vs reference

@pytest.mark.parametrize("profile,tokens", [
    ("dsv3", 1), ("dsv3", 37), ("dsv3", 65),
    ("dsv4-flash", 3), ("dsv4-flash", 129),
    ("dsv41-flash", 1), ("dsv41-flash", 37),
])
def test_profiles_default_config(profile, tokens, device):
    wl = mr.Workload(tokens, profile)
    inputs = mr.make_inputs(wl, device, seed=tokens)
    out = _run_and_check(inputs, mr.default_config(wl, TGT))
    _check_layout(out, inputs["logits"].shape[1], inputs["block_m"])


# (profile, tokens, block_m, logits dtype, expert map, config) - a spread, not a product
CASES = [
    ("dsv3", 3, 16, torch.float32, False, _cfg(4, 1, True)),         # fused, one program
    ("dsv3", 37, 128, torch.bfloat16, True, _cfg(4, 4, False)),      # split path, 3 programs
    ("dsv3", 37, 32, torch.float32, False, _cfg(2, 256, True)),      # fused requested, >1 program: split in the interpreter
    ("dsv4-flash", 37, 64, torch.bfloat16, False, _cfg(8, 2, False, 2)),
    ("dsv4-flash", 129, 128, torch.float32, True, _cfg(16, 8, False)),
    ("dsv41-flash", 3, 32, torch.float32, True, _cfg(1, 4, False, 1)),
    ("dsv41-flash", 129, 16, torch.bfloat16, False, _cfg(8, 1, True)),  # fused, 17 chunks in one program
]


@pytest.mark.parametrize("profile,tokens,block_m,dtype,use_map,config", CASES)
def test_variants(profile, tokens, block_m, dtype, use_map, config, device):
    inputs = mr.make_inputs(mr.Workload(tokens, profile), device, seed=7)
    E = inputs["logits"].shape[1]
    inputs["logits"] = inputs["logits"].to(dtype)
    inputs["block_m"] = block_m
    if use_map:  # this rank owns every third expert
        g = torch.Generator().manual_seed(1)
        emap = torch.full((E,), -1, dtype=torch.int32)
        own = torch.randperm(E, generator=g)[: E // 3]
        emap[own] = torch.arange(own.numel(), dtype=torch.int32)
        inputs["expert_map"] = emap.to(device)
    out = _run_and_check(inputs, config)
    _check_layout(out, E, block_m, inputs["expert_map"])


# Direct kernel (fused, T <= BLOCK_T): every profile at 1 to 32 tokens (one warp, a warp per
# token, several tokens a warp, padded rows, the full 32), each with two block_m (every block_m
# per profile), one with a map; grids of one program (it fills all) or with fill programs.
DIRECT = [(profile, tokens, block_m, use_map, _cfg(bt, progs, True, nw))
          for p, profile in enumerate(mr.PROFILES)
          for i, (tokens, bt, progs, nw) in enumerate(((1, 1, 1, 1), (3, 4, 8, 4), (8, 8, 3, 2), (11, 16, 8, 2),
                                                       (32, 32, 1, 8)))
          for block_m, use_map in ((mr.BLOCK_MS[(i + p) % 4], False), (mr.BLOCK_MS[(i + p + 2) % 4], True))]


@pytest.mark.parametrize("profile,tokens,block_m,use_map,config", DIRECT)
def test_direct_path(profile, tokens, block_m, use_map, config, device):
    assert mr.is_direct(tokens, config)
    inputs = mr.make_inputs(mr.Workload(tokens, profile), device, seed=tokens + block_m)
    E = inputs["logits"].shape[1]
    inputs["block_m"] = block_m
    if use_map:  # this rank owns every other expert
        emap = torch.full((E,), -1, dtype=torch.int32)
        emap[1::2] = torch.arange(E // 2, dtype=torch.int32)
        inputs["expert_map"] = emap.to(device)
    out = _run_and_check(inputs, config)
    _check_layout(out, E, block_m, inputs["expert_map"])


@pytest.mark.parametrize("scoring,has_bias,n_group,topk_group,renorm", [
    ("softmax", False, 4, 2, False),
    ("softmax", True, 1, 1, True),
    ("sigmoid", False, 8, 3, True),     # no bias: group score is the group max
    ("sqrtsoftplus", True, 4, 4, False),
])
def test_custom_routing(scoring, has_bias, n_group, topk_group, renorm, device):
    g = torch.Generator().manual_seed(3)
    T, E = 21, 64
    logits = (4 * torch.randn(T, E, generator=g)).to(device)
    logits[0, :4] = torch.tensor([25.0, 30.0, -30.0, 20.5])  # both sides of the softplus threshold
    inputs = dict(logits=logits, bias=(0.1 * torch.randn(E, generator=g)).to(device) if has_bias else None,
                  top_k=5, n_group=n_group, topk_group=topk_group, scoring=scoring, routed_scaling_factor=1.7,
                  renormalize=renorm, block_m=16, expert_map=None)
    _run_and_check(inputs, _cfg(4, 2, False))
    _run_and_check(inputs, None)  # public API, "custom" profile -> default config
    assert mr.profile_of(E, 5, n_group, topk_group, scoring, 1.7) == "custom"


def test_ties_lower_index_wins(device):
    T, E, k = 5, 64, 6
    logits = torch.zeros(T, E, device=device)
    logits[1] = 1.0
    logits[2, 40:] = 3.0                  # tie among the high tail
    logits[3, ::2] = 2.0                  # tie among even experts
    base = dict(top_k=k, scoring="sigmoid", routed_scaling_factor=1.0, renormalize=True, block_m=16, expert_map=None)
    out = mr.launch(config=_cfg(8, 1, True), logits=logits, bias=None, n_group=1, topk_group=1, **base)
    want = [list(range(k)), list(range(k)), list(range(40, 40 + k)), list(range(0, 2 * k, 2)), list(range(k))]
    assert out.topk_ids.cpu().tolist() == want
    assert torch.allclose(out.topk_weights.cpu(), torch.full((T, k), 1.0 / k))
    assert chunked._sync_scratch(logits.device).tolist() == [0, 0], "the last program out resets the barrier counters"
    assert mr.is_direct(T, _cfg(8, 1, True)), "the checks above ran the direct kernel"
    # equal group scores: lower group index wins too (8 groups of 8, keep 2)
    out = mr.launch(config=_cfg(2, 4, False), logits=logits, bias=None, n_group=8, topk_group=2, **base)
    assert out.topk_ids.cpu()[0].tolist() == list(range(k))
    assert out.topk_ids.cpu()[2].tolist() == list(range(40, 40 + k))
    assert out.topk_ids.cpu()[3].tolist() == [0, 2, 4, 6, 8, 10]
    ref = mr.reference(logits=logits, bias=None, n_group=8, topk_group=2, **base)
    assert torch.equal(out.topk_ids.cpu(), ref.topk_ids.cpu())
    out = mr.launch(config=_cfg(8, 3, True, 8), logits=logits, bias=None, n_group=8, topk_group=2, **base)  # direct
    assert torch.equal(out.topk_ids.cpu(), ref.topk_ids.cpu())
    assert torch.equal(out.sorted_token_ids.cpu(), ref.sorted_token_ids.cpu())


# ----------------------------------------------------------------------------- align invariants

@st.composite
def _topk_ids(draw):
    E = draw(st.integers(1, 40))
    k = draw(st.integers(1, min(E, 6)))
    T = draw(st.integers(1, 30))
    hot = draw(st.integers(0, E - 1))
    rows = [draw(st.permutations(range(E)))[:k] for _ in range(T)]
    if draw(st.booleans()):  # skew: many tokens pick the same hot expert first
        rows = [[hot] + [e for e in r if e != hot][: k - 1] for r in rows]
    block_m = draw(st.sampled_from(mr.BLOCK_MS))
    emap = None
    if draw(st.booleans()):
        emap = torch.tensor(draw(st.lists(st.integers(-1, E - 1), min_size=E, max_size=E)), dtype=torch.int32)
    return torch.tensor(rows, dtype=torch.int32), E, block_m, emap


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_topk_ids())
def test_reference_align_invariants(case):
    ids, E, block_m, emap = case
    st_ids, eids, npad = mr.reference_align(ids, E, block_m, emap)
    fake = mr.MoeRouting(torch.zeros(ids.shape), ids, st_ids, eids, npad)
    _check_layout(fake, E, block_m, emap)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(T=st.integers(1, 24), E=st.sampled_from([8, 24, 48]), k=st.integers(1, 4), block_m=st.sampled_from(mr.BLOCK_MS),
       bt=st.sampled_from([1, 2, 4, 8]), progs=st.sampled_from([1, 2, 8]), with_map=st.booleans(),
       grouped=st.booleans(), with_bias=st.booleans(), seed=st.integers(0, 2**16))
def test_kernel_align_invariants(T, E, k, block_m, bt, progs, with_map, grouped, with_bias, seed, device):
    g = torch.Generator().manual_seed(seed)
    # few distinct logit and bias values: many exact ties (experts, group top-2 sums) and crowded experts
    logits = torch.randint(-2, 3, (T, E), generator=g).float().to(device)
    bias = (0.25 * torch.randint(-1, 2, (E,), generator=g)).float().to(device) if with_bias else None
    emap = torch.randint(-1, E, (E,), generator=g, dtype=torch.int32).to(device) if with_map else None
    inputs = dict(logits=logits, bias=bias, top_k=k, n_group=4 if grouped else 1, topk_group=2 if grouped else 1,
                  scoring="sigmoid", routed_scaling_factor=1.0, renormalize=True, block_m=block_m, expert_map=emap)
    out = _run_and_check(inputs, _cfg(bt, progs, progs == 1))
    _check_layout(out, E, block_m, emap)


# ----------------------------------------------------------------------------- verify, baselines, API

def test_verify_rejects_wrong_outputs(device):
    inputs = mr.make_inputs(mr.Workload(9, "dsv3"), device, seed=0)
    ref = mr.reference(**inputs)
    mr.verify(ref, ref, inputs)
    bad_ids = ref.topk_ids.clone()
    bad_ids[0, 0] = int((set(range(256)) - set(bad_ids[0].tolist())).pop())
    with pytest.raises(AssertionError, match="topk_ids"):
        mr.verify(ref._replace(topk_ids=bad_ids), ref, inputs)
    with pytest.raises(AssertionError, match="topk_weights"):
        mr.verify(ref._replace(topk_weights=ref.topk_weights * 1.001), ref, inputs)
    swapped = ref.sorted_token_ids.clone()
    swapped[[0, 1]] = swapped[[1, 0]]
    with pytest.raises(AssertionError, match="sorted_token_ids"):
        mr.verify(ref._replace(sorted_token_ids=swapped), ref, inputs)
    with pytest.raises(AssertionError, match="num_tokens_post_pad"):
        mr.verify(ref._replace(num_tokens_post_pad=ref.num_tokens_post_pad + 64), ref, inputs)


@pytest.mark.parametrize("profile", list(mr.PROFILES))
def test_torch_eager_baseline_matches(profile, device):
    inputs = mr.make_inputs(mr.Workload(33, profile), device, seed=2)
    mr.verify(mr.baselines["torch_eager"](**inputs), mr.reference(**inputs), inputs)


def test_public_api_and_profiles(device):
    for name, p in mr.PROFILES.items():
        assert mr.profile_of(p["num_experts"], p["top_k"], p["n_group"], p["topk_group"], p["scoring"],
                             p["routed_scaling_factor"]) == name
    inputs = mr.make_inputs(mr.Workload(5, "dsv4-flash"), device, seed=5)
    out = mr.moe_routing(**inputs)
    assert out.topk_ids.dtype == torch.int32 and out.topk_weights.dtype == torch.float32
    mr.verify(out, mr.reference(**inputs), inputs)


def test_launch_rejects_bad_inputs(device):
    inputs = mr.make_inputs(mr.Workload(4, "dsv3"), device, seed=0)
    cfg = mr.default_config(mr.Workload(4, "dsv3"), TGT)
    for change, msg in [(dict(logits=inputs["logits"].half()), "float32 or bfloat16"),
                        (dict(bias=inputs["bias"][:10]), "bias"),
                        (dict(n_group=7), "n_group"),
                        (dict(topk_group=9), "topk_group"),
                        (dict(top_k=200), "top_k"),
                        (dict(block_m=48), "block_m"),
                        (dict(scoring="relu"), "scoring"),
                        (dict(expert_map=torch.zeros(256, dtype=torch.int64, device=device)), "expert_map")]:
        with pytest.raises(ValueError, match=msg):
            mr.launch(config=cfg, **{**inputs, **change})


@pytest.mark.parametrize("knob,bad", [("MAX_PROGRAMS", 0), ("MAX_PROGRAMS", -4), ("MAX_PROGRAMS", 8.0), ("BLOCK_T", 0), ("BLOCK_T", 6), ("num_warps", 0),
                                      ("FUSED", 1), ("num_stages", 0), ("FUSED", None)])
def test_launch_rejects_bad_knobs(knob, bad, device):
    """Every knob's type and range is checked before anything launches: a ValueError naming it."""
    inputs = mr.make_inputs(mr.Workload(4, "dsv3"), device, seed=0)
    for cfg in (_cfg(4, 8, True), _cfg(1, 4, False)):  # the direct kernel and the two-launch path
        with pytest.raises(ValueError, match=knob):
            mr.launch(config=dict(cfg, **{knob: bad}), **inputs)
    with pytest.raises(ValueError, match="lacks"):
        mr.launch(config={"BLOCK_T": 4}, **inputs)


def test_spec_cost_and_space():
    spec = mr.SPEC
    assert spec.name == "moe_routing" and spec.launch_bound and "torch_eager" in spec.baselines
    b, f = spec.cost(mr.Workload(64, "dsv3"))
    assert 64 * 256 * 4 < b < 1e6 and f > 0
    consts = set(inspect.signature(chunked._moe_routing_kernel.fn).parameters)
    assert set(ms.SPACE) - {"num_warps", "num_stages"} <= consts
    for wl in ms.WORKLOADS + ms.SMALL_WORKLOADS:
        cfg = mr.default_config(wl, TGT)
        assert ms.SPACE.contains(cfg), cfg
        assert ms.constraints(cfg, wl, TGT), (wl, cfg)
        assert ms.SPACE.canonical(cfg, wl, TGT) == cfg, (wl, cfg)
    # canonical: chunks no larger than the tokens, caps no larger than the chunks (fused: the SMs)
    sm90 = Target.named("sm_90")
    canon = ms.SPACE.canonical
    assert canon(_cfg(32, 1024, True), mr.Workload(5, "dsv3"), sm90) == _cfg(8, 1024, True)  # direct: its own grid
    assert canon(_cfg(2, 1024, True), mr.Workload(64, "dsv3"), sm90) == _cfg(2, 32, True)
    assert canon(_cfg(2, 1024, True), mr.Workload(4096, "dsv3"), sm90) == _cfg(2, 256, True)
    assert canon(_cfg(2, 1024, False), mr.Workload(4096, "dsv3"), sm90) == _cfg(2, 1024, False)
    assert canon(_cfg(2, 1024, True), mr.Workload(4096, "dsv3"), INTERP) == _cfg(2, 4, True)
    wl = mr.Workload(64, "dsv3")
    assert not ms.constraints(_cfg(4, 16, True), wl, INTERP)  # a grid barrier over 16 programs in the interpreter
    assert ms.constraints(_cfg(4, 16, True), wl, Target.named("sm_90"))
    assert not ms.constraints(_cfg(32, 1, False, 1), wl, TGT)  # 8192 scores over 32 threads
    wl = mr.Workload(8, "dsv41-flash")
    assert ms.constraints(mr.default_config(wl, TGT), wl, TGT) and mr.is_direct(8, mr.default_config(wl, TGT))
    wl = mr.Workload(32, "dsv41-flash")  # the direct kernel holds 32 tokens: a tuning option, not the default
    direct32 = dict(BLOCK_T=32, MAX_PROGRAMS=8, FUSED=True, num_warps=8, num_stages=1)
    assert ms.constraints(direct32, wl, TGT) and mr.is_direct(32, direct32) and not mr.is_direct(32, mr.default_config(wl, TGT))
    wl = mr.Workload(4, "dsv41-flash")
    assert not ms.constraints(_cfg(4, 8, True, 8), wl, TGT)  # direct: more warps than tokens split a token


def test_small_workloads_run(device):
    for wl in ms.SMALL_WORKLOADS:
        _run_and_check(mr.make_inputs(wl, device, seed=0), mr.default_config(wl, TGT))


_LOWER = """
import json, sys, triton
from triton.backends.compiler import GPUTarget
from kernel_templates import moe_routing as mr
from tuner.runtime.target import Target
TGT = Target.named("sm_90")
done = []
# every launch for sm_90; each kernel kind once for sm_100 too (the first case of each loop)
for profile, tokens in (("dsv3", 64), ("dsv41-flash", 1024)):
    wl = mr.Workload(tokens, profile)
    cfg = mr.default_config(wl, TGT)
    for fused in (True, False):
        cfg["FUSED"] = fused
        for fn, sig, cx in mr.lower_signatures(wl, cfg):
            for cc in ((90, 100) if profile == "dsv3" else (90,)):
                src = triton.compiler.ASTSource(fn=fn, signature=sig, constexprs=cx)
                triton.compile(src, target=GPUTarget("cuda", cc, 32),
                               options={"num_warps": cfg["num_warps"], "num_stages": cfg["num_stages"]})
                done.append([profile, fused, cx["PHASE"], cc])
# the direct kernel (default configs at T <= DIRECT_MAX_TOKENS: one and 4 warps; 8 warps at T=32, a tuning option)
for profile, tokens in (("dsv3", 1), ("dsv41-flash", 4), ("dsv3", 32), ("dsv41-flash", 32)):
    wl = mr.Workload(tokens, profile)
    cfg = mr.default_config(wl, TGT) if tokens <= mr.DIRECT_MAX_TOKENS else dict(
        BLOCK_T=32, MAX_PROGRAMS=8, FUSED=True, num_warps=8, num_stages=1)
    for fn, sig, cx in mr.lower_signatures(wl, cfg):
        for cc in ((90, 100) if tokens == 1 else (90,)):
            src = triton.compiler.ASTSource(fn=fn, signature=sig, constexprs=cx)
            triton.compile(src, target=GPUTarget("cuda", cc, 32),
                           options={"num_warps": cfg["num_warps"], "num_stages": cfg["num_stages"]})
            done.append(["direct", True, fn.__name__, cc])
# a two-launch grid over PREFIX_MIN_PROGRAMS programs: the prefix scan launch in between
wl = mr.Workload(4096, "dsv41-flash")
cfg = dict(BLOCK_T=4, MAX_PROGRAMS=1024, FUSED=False, num_warps=8, num_stages=2)
for fn, sig, cx in mr.lower_signatures(wl, cfg):
    for cc in ((90, 100) if "PHASE" not in cx else (90,)):
        src = triton.compiler.ASTSource(fn=fn, signature=sig, constexprs=cx)
        triton.compile(src, target=GPUTarget("cuda", cc, 32),
                       options={"num_warps": cfg["num_warps"], "num_stages": cfg["num_stages"]})
        done.append(["prefix", False, cx.get("PHASE", "scan"), cc])
print(json.dumps(done))
"""


def test_lower_compiles_sm90_sm100():
    # The interpreter replaces jit functions with uncompilable wrappers: lower in a clean process.
    done = run_clean(_LOWER)
    # fused: one kernel; split: phases 1 and 2; direct: one; 1024 programs: + the scan (sm_100: one of each)
    assert len(done) == (2 * (1 + 2) + 3) + 4 + 1 + 3 + 1
    assert {(d[2], d[3]) for d in done if d[0] not in ("prefix", "direct")} == {
        (0, 90), (0, 100), (1, 90), (1, 100), (2, 90), (2, 100)}
    assert {(d[2], d[3]) for d in done if d[0] == "direct"} == {("_moe_direct_kernel", 90), ("_moe_direct_kernel", 100)}
    assert [d[2] for d in done if d[0] == "prefix"] == [1, "scan", "scan", 2]


@pytest.mark.parametrize("profile,tokens,block_m,use_map,config", [
    ("dsv3", 37, 16, True, _cfg(1, 64, False)),               # 37 one-token programs
    ("dsv41-flash", 129, 64, False, _cfg(2, 1024, False, 2)),  # 65 programs
    ("dsv4-flash", 20, 128, True, _cfg(4, 8, False)),          # 5 programs
])
def test_prefix_scan_launch(profile, tokens, block_m, use_map, config, device, monkeypatch):
    """Two-launch grids over PREFIX_MIN_PROGRAMS programs take the lower programs' counts from
    the scan launch: same outputs as the reference (threshold lowered so small T takes it)."""
    monkeypatch.setattr(mr, "PREFIX_MIN_PROGRAMS", 2)
    calls = []
    real = mr._moe_prefix_kernel

    class Spy:
        def __getitem__(self, grid):
            calls.append(grid)
            return real[grid]

    monkeypatch.setattr(mr, "_moe_prefix_kernel", Spy())
    inputs = mr.make_inputs(mr.Workload(tokens, profile), device, seed=3)
    E = inputs["logits"].shape[1]
    inputs["block_m"] = block_m
    if use_map:
        emap = torch.full((E,), -1, dtype=torch.int32)
        emap[::2] = torch.arange(len(range(0, E, 2)), dtype=torch.int32)
        inputs["expert_map"] = emap.to(device)
    out = _run_and_check(inputs, config)
    _check_layout(out, E, block_m, inputs["expert_map"])
    assert len(calls) == 1, "one scan launch"


def test_verify_accepts_group_near_ties_only(device):
    # sigmoid(x) + sigmoid(-x) = 1: groups 0 and 3 tie at the keep boundary up to an ulp,
    # so the kernel may keep either (found by hypothesis in CI); a far-off id still fails.
    logits = torch.tensor([[2.0, -2.0, 0.0, 2.0, 1.0, -1.0, -1.0, 1.0]], device=device)
    bias = torch.tensor([-0.25, 0.25, 0.0, 0.0, -0.25, -0.25, -0.25, 0.25], device=device)
    inputs = dict(logits=logits, bias=bias, top_k=1, n_group=4, topk_group=2, scoring="sigmoid",
                  routed_scaling_factor=1.0, renormalize=True, block_m=16, expert_map=None)
    ref = mr.reference(**inputs)
    for pick, ok in ((3, True), (7, True), (2, False)):  # 3 keeps group 0, 7 keeps group 3
        ids = torch.tensor([[pick]], dtype=torch.int32, device=device)
        w = torch.ones(1, 1, device=device)
        out = mr.MoeRouting(w, ids, *mr.reference_align(ids, 8, 16))
        if ok:
            mr.verify(out, ref, inputs)
        else:
            with pytest.raises(AssertionError, match="beyond near-ties"):
                mr.verify(out, ref, inputs)


@pytest.mark.parametrize("profile, tokens", [("dsv3", 3), ("dsv41-flash", 5)])
def test_floor_ladder_rungs_check_out(profile, tokens, device):
    """benchmarks/moe_floor_ladder.py's minimal kernels (touch, ungrouped top-k, the align
    outputs' fill, both fused) produce what they claim, through the interpreter: the
    ladder's lower bounds do real work."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    import moe_floor_ladder

    out = moe_floor_ladder.ladder(tokens, profile, device)
    assert out["tokens"] == tokens and out["n_sorted"] > tokens
