"""mHC kernels against the float64 reference, through the interpreter on the CPU."""
from __future__ import annotations

import dataclasses

import pytest
import torch
from conftest import run_clean
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kernel_templates import mhc
from kernel_templates.mhc import gluon_kernels, triton_kernels
from search_spaces.mhc import SPACE, SMALL_WORKLOADS, WORKLOADS, constraints, smem_estimate
from tuner import lowering
from tuner.runtime.target import INTERPRETER, Target

SM90, SM100 = Target.named("sm_90"), Target.named("sm_100")
TARGETS = (INTERPRETER, SM90, SM100)


def _cfg(**kw) -> dict:
    """A Triton config: 16 x 16 tiles, one fused launch, 2 stages, unless overridden."""
    return dict(GLUON=False, BLOCK_T=16, BLOCK_D=16, SPLIT_K=1, num_warps=4, num_stages=2, XY_GROUP=1) | kw


def _run(op: str, T: int, D: int, device: str, seed: int = 0, config: dict | None = None):
    wl = mhc.Workload(op, T, D)
    inputs = mhc.make_inputs(wl, device, seed)
    out = mhc.launch(config=config or mhc.default_config(wl, Target.of(device)), **inputs)
    return inputs, out


def _launch_for(target: Target, config: dict, inputs: dict):
    """``launch``, planned for ``target`` (another SM count than the device's, say)."""
    i = dict(inputs)
    op, X = i.pop("op"), i.pop("X")
    launches, outs = mhc._plan(op, X, i.get("y"), i.get("post"), i.get("comb"), i.get("fn"), i.get("scale"),
                               i.get("base"), i.get("norm_w"), i.get("eps", 1e-6), i.get("sinkhorn_iters", 20),
                               config, target)
    for kern, grid, args in launches:
        kern[grid](**args, num_warps=config["num_warps"], num_stages=config["num_stages"])
    return outs


def _assert_doubly_stochastic(comb: torch.Tensor) -> None:
    one = torch.ones(comb.shape[:2], device=comb.device)
    assert torch.allclose(comb.sum(-1), one, atol=1e-3), (comb.sum(-1) - 1).abs().max()
    assert torch.allclose(comb.sum(-2), one, atol=1e-3), (comb.sum(-2) - 1).abs().max()


@pytest.mark.parametrize("op", mhc.OPS)
@pytest.mark.parametrize("T, D", [(1, 48), (3, 80), (37, 48)])
def test_matches_reference(op, T, D, device):
    inputs, out = _run(op, T, D, device, seed=T * 100 + D)
    ref = mhc.reference(**inputs)
    mhc.verify(out, ref, inputs)
    if op != "post":
        assert out[-1].dtype == torch.float32 and out[-2].shape == (T, 4)
        _assert_doubly_stochastic(out[-1])
        assert (out[-2] > 0).all() and (out[-2] < 2).all()  # post = 2 sigmoid


@pytest.mark.parametrize("op", mhc.OPS)
def test_model_width(op, device):
    """D = 4096 (V4-Flash): split chunks over a real width, odd T (wide blocks: the
    interpreter's cost is per step)."""
    cfg = _cfg(BLOCK_D=64, SPLIT_K=4) if op != "post" else _cfg(BLOCK_T=4, BLOCK_D=256)
    wl = mhc.Workload(op, 3, 4096)
    assert constraints(cfg, wl, INTERPRETER) and SPACE.canonical(cfg, wl, INTERPRETER) == cfg
    inputs, out = _run(op, 3, 4096, device, seed=7, config=cfg)
    mhc.verify(out, mhc.reference(**inputs), inputs)


CONFIGS = [
    _cfg(),  # one fused launch
    _cfg(BLOCK_D=32, SPLIT_K=2),  # split, the last chunk short with a D tail
    _cfg(BLOCK_T=64, num_stages=3),  # block > T (the large-T default tile)
    _cfg(BLOCK_T=32, SPLIT_K=2, num_stages=4),  # two token blocks, 48 + 32 columns
]


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: f"T{c['BLOCK_T']}-D{c['BLOCK_D']}-K{c['SPLIT_K']}")
@pytest.mark.parametrize("op", ["pre", "seam"])
def test_configs(op, config, device):
    wl = mhc.Workload(op, 37, 80)
    assert constraints(config, wl, INTERPRETER) and SPACE.canonical(config, wl, INTERPRETER) == config
    inputs, out = _run(op, 37, 80, device, seed=3, config=config)
    mhc.verify(out, mhc.reference(**inputs), inputs)


def test_finish_launch_tiles(device):
    """The split-K finish launch tiles D on its own (``finish_tiles``): chunks of whole
    U_BLOCK_D tiles covering D once, never narrower than the first launch's BLOCK_D (or D);
    planned for 2 SMs (16-row tiles of a 32-token first launch, two chunks, the last one and its
    last tile short) u equals the reference and the one-chunk plan bit for bit."""
    for T in (1, 37, 1024, 4096):
        for D in (48, 336, 4096, 5120):
            for bt, nw, bd in ((16, 4, 32), (64, 4, 16), (4, 1, 256), (16, 1, 16)):
                rows, ubd, chunk = triton_kernels.finish_tiles(T, D, bt, nw, bd, 132)
                n = -(-D // chunk)
                assert chunk % ubd == 0 and min(bd, 1 << (D - 1).bit_length()) <= ubd <= 256, (T, D, bt, nw, bd)
                assert (n - 1) * chunk < D <= n * chunk and rows == min(bt, triton_kernels.FINISH_ROWS)
    assert triton_kernels.finish_tiles(4096, 5120, 64, 4, 32, 132) == (16, 256, 2560)  # GLUON's 64 x 32
    assert triton_kernels.finish_tiles(37, 336, 16, 1, 16, 2) == (16, 64, 192)
    inputs = mhc.make_inputs(mhc.Workload("seam", 37, 336), device, 5)
    cfg = _cfg(BLOCK_T=32, SPLIT_K=4, num_warps=1)
    two = _launch_for(dataclasses.replace(INTERPRETER, sms=2), cfg, inputs)
    mhc.verify(two, mhc.reference(**inputs), inputs)
    one = _launch_for(dataclasses.replace(INTERPRETER, sms=1), cfg, inputs)
    assert all(torch.equal(a, b) for a, b in zip(two, one))


def test_zero_tokens_split_k(device):
    """T = 0 with a split-K config (the pack's choice at tokens=0): empty outputs, no
    error from planning the finish launch (finish_tiles divided by the token blocks)."""
    inp = mhc.make_inputs(mhc.Workload("seam", 0, 64), device, 0)
    outs = mhc.launch(config=_cfg(SPLIT_K=4, num_warps=1), **inp)
    assert [tuple(o.shape) for o in outs] == [(0, 4, 64), (0, 64), (0, 4), (0, 4, 4)]
    assert triton_kernels.finish_tiles(0, 64, 16, 1, 16, 132) == (16, 64, 64)


def test_constraints_reject_oversized_shared_memory():
    """The seam at 64 x 64 with 3 stages is pruned by the shared-memory estimate alone (its
    3xtf32 form needed 245760 B on an H200, more than the 232448 a block may have)."""
    cfg = _cfg(BLOCK_T=64, BLOCK_D=64, num_stages=3)
    assert smem_estimate(cfg, "seam") >= 245760
    assert not constraints(cfg, mhc.Workload("seam", 37, 80), SM90)


def test_post_configs(device):
    for cfg in (_cfg(BLOCK_T=1, BLOCK_D=128, num_warps=1), _cfg(BLOCK_T=8, BLOCK_D=128)):
        assert constraints(cfg, mhc.Workload("post", 37, 80), INTERPRETER)
        inputs, out = _run("post", 37, 80, device, seed=5, config=cfg)
        mhc.verify(out, mhc.reference(**inputs), inputs)


# `device` is a constant per session, so sharing it across examples is safe.
@settings(max_examples=5, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(T=st.integers(1, 40), D16=st.integers(1, 6), seed=st.integers(0, 2**16), split=st.sampled_from([1, 2]))
def test_seam_is_post_then_pre(T, D16, seed, split, device):
    """The fused seam equals post followed by pre, and its comb is doubly stochastic."""
    D = 16 * D16
    inputs = mhc.make_inputs(mhc.Workload("seam", T, D), device, seed)
    cfg = _cfg(SPLIT_K=min(split, D16))
    Xn, u, post, comb = mhc.mhc_seam(inputs["X"], inputs["y"], inputs["post"], inputs["comb"], inputs["fn"],
                                     inputs["scale"], inputs["base"], inputs["norm_w"], config=cfg)
    Xn2 = mhc.mhc_post(inputs["X"], inputs["y"], inputs["post"], inputs["comb"], config=_cfg())
    u2, post2, comb2 = mhc.mhc_pre(Xn2, inputs["fn"], inputs["scale"], inputs["base"], inputs["norm_w"], config=cfg)
    # bit-equal under the interpreter; on a GPU the two kernels contract their multiply-adds
    # differently (the H200 gave 1 element of 9472 one bf16 ulp apart), so 1 ulp is allowed
    ulps = (Xn.view(torch.int16).int() - Xn2.view(torch.int16).int()).abs().max().item()
    assert ulps <= (0 if device == "cpu" else 1), f"X_new: {ulps} bf16 ulps apart"
    atol = 1e-6 if device == "cpu" else 1e-5
    torch.testing.assert_close(post, post2, rtol=0, atol=atol)
    torch.testing.assert_close(comb, comb2, rtol=0, atol=atol)
    torch.testing.assert_close(u.float(), u2.float(), rtol=0, atol=float(u2.float().abs().max()) * 2**-8)
    _assert_doubly_stochastic(comb)


def test_public_api_default_config(device):
    inputs = mhc.make_inputs(mhc.Workload("pre", 5, 32), device, 1)
    u, post, comb = mhc.mhc_pre(inputs["X"], inputs["fn"], inputs["scale"], inputs["base"], inputs["norm_w"])
    mhc.verify((u, post, comb), mhc.reference(**inputs), inputs)


def test_defaults_per_target():
    """The target decides whether a default takes the Gluon kernel (sm_90 with Gluon only),
    and sizes the split by its SMs; every default is canonical and admitted there."""
    from kernel_templates._gluon import gluon

    wl = mhc.Workload("seam", 1024, 5120)
    assert not mhc.default_config(wl, SM100)["GLUON"] and not mhc.default_config(wl, INTERPRETER)["GLUON"]
    assert mhc.default_config(wl, SM90)["GLUON"] == (gluon is not None)
    small = mhc.Workload("seam", 64, 5120)
    assert [mhc.default_config(small, t)["SPLIT_K"] for t in TARGETS] == [1, 32, 32]
    for w in WORKLOADS + SMALL_WORKLOADS:
        for t in TARGETS:
            cfg = mhc.default_config(w, t)
            assert SPACE.contains(cfg) and SPACE.canonical(cfg, w, t) == cfg and constraints(cfg, w, t), (w, t, cfg)


def test_space_pins_what_does_not_apply():
    """``when``: post has no split, stages or Gluon; pre / seam run 4 warps; the Gluon kernel's
    tile is fixed and XY_GROUP is its alone; GLUON is pinned off where it cannot run."""
    post = mhc.Workload("post", 64, 5120)
    assert SPACE.canonical(_cfg(GLUON=True, SPLIT_K=4, num_stages=4, XY_GROUP=2, num_warps=8), post, SM90) == \
        _cfg(num_warps=8)
    seam = mhc.Workload("seam", 1024, 5120)
    assert SPACE.canonical(_cfg(num_warps=8, XY_GROUP=2), seam, SM90) == _cfg()
    g = SPACE.canonical(_cfg(GLUON=True, SPLIT_K=8, XY_GROUP=2), seam, SM90)
    assert g == dict(_cfg(GLUON=True, SPLIT_K=8, XY_GROUP=2), **gluon_kernels.GL_FIXED)
    assert SPACE.canonical(g, seam, INTERPRETER) == dict(g, GLUON=False, XY_GROUP=1)


def test_bad_inputs_raise(device):
    inputs = mhc.make_inputs(mhc.Workload("seam", 2, 32), device, 0)
    cfg = _cfg()
    with pytest.raises(ValueError, match="X must be"):
        mhc.launch(config=cfg, **dict(inputs, X=inputs["X"].float()))
    with pytest.raises(ValueError, match="fn must have shape"):
        mhc.launch(config=cfg, **dict(inputs, fn=inputs["fn"][:, :-16]))
    with pytest.raises(ValueError, match="comb must have shape"):
        mhc.launch(config=cfg, **dict(inputs, comb=inputs["comb"][:, 0]))
    with pytest.raises(ValueError, match="op must be"):
        mhc.launch(config=cfg, **dict(inputs, op="mid"))


def test_verify_catches_wrong_output(device):
    inputs, out = _run("seam", 3, 32, device)
    ref = mhc.reference(**inputs)
    bad = list(out)
    bad[3] = out[3].clone()
    bad[3][1, 2, 3] += 0.01
    with pytest.raises(AssertionError, match="comb"):
        mhc.verify(tuple(bad), ref, inputs)
    bad = list(out)
    bad[1] = (out[1].float() * 1.05).to(torch.bfloat16)
    with pytest.raises(AssertionError, match="u"):
        mhc.verify(tuple(bad), ref, inputs)


def test_space_matches_kernels():
    """Config keys are the kernels' constexprs plus the launch options and GLUON (which kernel).
    U_BLOCK_D is the finish launch's own tiling (``finish_tiles``), SEAM the op, STAGES the Gluon
    kernel's num_stages, SOFT_BF16 the target's: not config keys."""
    names = set()
    for kern in (triton_kernels._mhc_pre_kernel, triton_kernels._mhc_seam_kernel, triton_kernels._mhc_finish_kernel,
                 triton_kernels._mhc_post_kernel, gluon_kernels._gl_mix_kernel):
        names |= lowering.constexpr_names(kern)
    assert (names - {"U_BLOCK_D", "SEAM", "STAGES", "SOFT_BF16"}) | {"num_warps", "num_stages", "GLUON"} == set(SPACE)


def test_cost_floor():
    b, f = mhc.cost(mhc.Workload("seam", 1, 5120))
    assert 1.9e6 < b < 2.1e6 and f == 2 * 24 * 4 * 5120  # the fn weights dominate at T = 1
    b8k, _ = mhc.cost(mhc.Workload("seam", 8192, 5120))
    assert b8k == 24 * 4 * 5120 * 4 + 8192 * 20 * 5120


_LOWER = """
import json, triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from kernel_templates import mhc
from search_spaces.mhc import WORKLOADS
from tuner.runtime.target import Target
todo = {}
for wl in sorted(WORKLOADS, key=lambda w: -w.tokens):  # generic signatures (T not 1) first
    cfg = mhc.default_config(wl, Target.named("sm_100"))  # the Triton kernels' defaults (no Gluon there)
    for c in (cfg, dict(cfg, SPLIT_K=1)) if wl.op == "seam" and wl.tokens == 8192 else (cfg,):  # and the fused launch
        for fn, sig, cx in mhc.lower_signatures(wl, c, Target.named("sm_90")):
            # one compile a kernel and tile: SPLIT_K (past 1) and T only change loop counts and masks
            key = (fn.__name__, str(sorted((k, v) for k, v in cx.items() if k not in ("SPLIT_K", "T"))),
                   c["SPLIT_K"] > 1, c["num_warps"], c["num_stages"])
            todo.setdefault(key, (wl, c, fn, sig, cx))
done = []
for wl, cfg, fn, sig, cx in todo.values():
    for cc in (90, 100):
        # As the JIT specializes on the GPU: pointers and 16-divisible ints get tt.divisibility 16
        # (it changes vector widths, so shared memory), ints == 1 become constexprs (lowering.signature).
        k = triton.compile(ASTSource(fn=fn, signature=sig, constexprs=cx, attrs=sig.attrs),
                           target=GPUTarget("cuda", cc, 32),
                           options={"num_warps": cfg["num_warps"], "num_stages": cfg["num_stages"]})
        done.append([wl.op, wl.tokens, wl.dim, fn.__name__, cfg, cc, k.metadata.shared])
print(json.dumps(done))
"""


def test_defaults_compile_for_hopper_and_blackwell():
    """`tune lower mhc --target sm_90|sm_100`: the Triton default configs of the GPU grid (split,
    fused, finish and post launches) compile for both; on sm_90 within the 232448 B of shared
    memory a block may have on an H100 / H200 and under the constraints' estimate (calibrated
    with Triton 3.6, whose sm_90 layouts take more shared memory than 3.9's). In a clean
    process: the interpreter swaps jit functions for uncompilable wrappers."""
    done = run_clean(_LOWER)
    assert {(d[3], d[5]) for d in done} == {(k, cc) for cc in (90, 100) for k in (
        "_mhc_seam_kernel", "_mhc_finish_kernel", "_mhc_pre_kernel", "_mhc_post_kernel")}
    assert any(d[4]["SPLIT_K"] == 1 and d[3] == "_mhc_seam_kernel" for d in done)  # the fused single-launch path
    for op, T, D, name, cfg, cc, shared in done:
        if cc == 90:
            assert shared <= 232448, (op, T, D, name, cfg, shared)
            if name in ("_mhc_seam_kernel", "_mhc_pre_kernel"):
                assert shared <= smem_estimate(cfg, op), (op, T, D, name, cfg, shared, smem_estimate(cfg, op))


@pytest.mark.gpu
@pytest.mark.parametrize("op", mhc.OPS)
@pytest.mark.parametrize("T", [1, 256, 4096])
def test_gpu_model_shapes(op, T, device):
    wl = mhc.Workload(op, T, 5120)
    inputs = mhc.make_inputs(wl, device, 0)
    mhc.verify(mhc.launch(config=mhc.default_config(wl, Target.of(device)), **inputs), mhc.reference(**inputs),
               inputs)


# ----------------------------------------------------------------------------- GLUON (sm_90)

GL_CASES = [  # op, T, D, SPLIT_K, stages, XY_GROUP: token tails, one block, many blocks, model widths
    ("seam", 1, 256, 2, 2, 1), ("seam", 37, 512, 4, 3, 1), ("seam", 130, 256, 8, 4, 1), ("pre", 100, 256, 8, 3, 1),
    ("seam", 1024, 5120, 16, 3, 1), ("seam", 4096, 5120, 4, 3, 1), ("pre", 1024, 4096, 16, 3, 1),
    ("seam", 256, 7168, 32, 2, 1), ("seam", 37, 512, 4, 2, 2), ("pre", 100, 256, 4, 2, 2),
    ("seam", 1000, 5120, 8, 2, 2), ("seam", 4096, 5120, 4, 2, 2), ("pre", 1024, 4096, 16, 2, 2),
]


def _gl_config(sk: int, stages: int, xy: int = 1) -> dict:
    return _cfg(GLUON=True, SPLIT_K=sk, num_stages=stages, XY_GROUP=xy, **gluon_kernels.GL_FIXED)


@pytest.mark.gpu
@pytest.mark.parametrize("op, T, D, sk, stages, xy", GL_CASES)
def test_gpu_gluon(op, T, D, sk, stages, xy, device):
    """The Gluon mix kernel (register-A tf32 wgmma, fn's K axis permuted) with the finish
    launch against the reference; XY_GROUP 2 (two steps' stream copies together) bit for bit
    against XY_GROUP 1 (the same sums in the same order)."""
    wl = mhc.Workload(op, T, D)
    cfg = _gl_config(sk, stages, xy)
    assert gluon_kernels.gluon_config_error(cfg, D) is None, cfg
    inputs = mhc.make_inputs(wl, device, T + D)
    out = mhc.launch(config=cfg, **inputs)
    mhc.verify(out, mhc.reference(**inputs), inputs)
    _assert_doubly_stochastic(out[-1])
    if xy == 2:
        one = mhc.launch(config=dict(cfg, XY_GROUP=1), **inputs)
        assert all(torch.equal(a, b) for a, b in zip(out, one))


def test_gluon_config_error():
    """XY_GROUP 2 needs 2 stages and whole pairs of steps; the tile is fixed; SPLIT_K even."""
    cfg = _gl_config(16, 2)
    assert gluon_kernels.gluon_config_error(dict(cfg, XY_GROUP=2), 5120) is None
    assert "XY_GROUP" in gluon_kernels.gluon_config_error(dict(cfg, XY_GROUP=2, num_stages=3), 5120)
    assert "XY_GROUP" in gluon_kernels.gluon_config_error(dict(cfg, XY_GROUP=2, SPLIT_K=32), 5120)  # 5 steps
    assert "BLOCK_T" in gluon_kernels.gluon_config_error(dict(cfg, BLOCK_D=16), 5120)
    assert "SPLIT_K" in gluon_kernels.gluon_config_error(dict(cfg, SPLIT_K=1), 5120)
    assert "SPLIT_K" in gluon_kernels.gluon_config_error(dict(cfg, SPLIT_K=64), 5120)  # not whole steps


def test_fn_k_order(device):
    """fn in the GLUON kernel's K order: in each 32-column block, position 4 m + q holds
    column 8 q + m (the columns a thread's registers hold, as the tf32 A fragment reads them)."""
    fn = torch.randn(24, 4 * 96, device=device)
    want = fn.view(24, -1, 4, 8).transpose(-1, -2).reshape(24, -1)
    assert torch.equal(gluon_kernels.fn_k_order(fn), want)
    p = torch.arange(32)
    assert torch.equal(want[:, :32], fn[:, 8 * (p % 4) + p // 4])


def test_gluon_in_the_search_space(device):
    """GLUON is admitted on sm_90 only (not for post), with its tile fixed; the launcher
    refuses it elsewhere with one line."""
    from kernel_templates._gluon import gluon

    if gluon is None:
        pytest.skip("this Triton has no Gluon")
    wl = mhc.Workload("seam", 1024, 5120)
    cfg = _gl_config(16, 3)
    assert constraints(cfg, wl, SM90) and SPACE.canonical(cfg, wl, SM90) == cfg
    assert SPACE.canonical(cfg, wl, SM100)["GLUON"] is False
    assert not constraints(dict(cfg, SPLIT_K=1), wl, SM90)  # partials need a split
    assert not constraints(dict(cfg, SPLIT_K=64), wl, SM90)  # 5120 / 64 is not whole 32-column steps
    xy = dict(cfg, XY_GROUP=2, num_stages=2)  # SPLIT_K 16 at D = 5120: 10 steps a split, 5 pairs
    assert constraints(xy, wl, SM90) and not constraints(dict(xy, num_stages=3), wl, SM90)
    assert not constraints(dict(xy, SPLIT_K=32), wl, SM90), "5 steps a split: no whole pairs"
    assert not constraints(dict(xy, SPLIT_K=64), mhc.Workload("seam", 8192, 5120), SM90)  # past the partials cap
    assert [mhc.gluon_default(T, 5120, 132)["SPLIT_K"] for T in (1024, 4096, 8192)] == [8, 4, 2]
    assert [mhc.gluon_default(256, D, 132)["SPLIT_K"] for D in (4096, 5120, 7168)] == [32, 32, 32]
    assert mhc.default_config(mhc.Workload("seam", 256, 7168), SM90) == mhc.gluon_default(256, 7168, 132)
    assert not mhc.default_config(mhc.Workload("pre", 256, 7168), SM90)["GLUON"]  # pre below 1024: not measured
    assert not mhc.default_config(mhc.Workload("seam", 64, 5120), SM90)["GLUON"]
    for T, D in ((256, 4096), (512, 5120), (1000, 7168), (65536, 5120)):
        g = mhc.gluon_default(T, D, 132)
        assert SPACE.contains(g) and constraints(g, mhc.Workload("seam", T, D), SM90), (T, D, g)
    if device == "cpu":
        inputs = mhc.make_inputs(mhc.Workload("seam", 3, 256), "cpu", 0)
        with pytest.raises(ValueError, match="GLUON kernels run on sm_90 only, not on interpreter"):
            mhc.launch(config=_gl_config(2, 2), **inputs)


_GL_LOWER = """
import json, re, torch, triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from triton.experimental.gluon._runtime import GluonASTSource
from kernel_templates import mhc
from kernel_templates.mhc.gluon_kernels import GL_FIXED
from tuner import lowering
from tuner.runtime.target import Target
from tests._cubin import usage as cubin_usage
m = lambda *s, dt=torch.float32: torch.empty(*s, dtype=dt, device="meta")
bf = torch.bfloat16
res = []
for op, T, sk, xy in (("seam", 4096, 4, 1), ("pre", 256, 8, 1), ("seam", 4096, 4, 2), ("pre", 4096, 4, 2)):
    cfg = dict(GL_FIXED, GLUON=True, SPLIT_K=sk, num_stages=2, XY_GROUP=xy)
    plan, _ = mhc._plan(op, m(T, 4, 5120, dt=bf), m(T, 5120, dt=bf), m(T, 4), m(T, 4, 4), m(24, 4 * 5120), m(3),
                        m(24), m(5120, dt=bf), 1e-6, 20, cfg, Target.named("sm_90"))
    for fn, _grid, args in plan:
        sig, cx = lowering.signature(fn, args)
        if not fn.is_gluon() and any(r[1] == fn.__name__ for r in res):
            res.append([op, fn.__name__, 0, False, 0, 0, [], xy, 0, []])  # compiled once already
            continue
        src = (GluonASTSource if fn.is_gluon() else ASTSource)(fn=fn, signature=sig, constexprs=cx, attrs=sig.attrs)
        k = triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": 4, "num_stages": 2})
        stack = cubin_usage(k.asm["cubin"])["stack"]
        ptx = k.asm["ptx"]
        waits = sorted(set(re.findall(r"cp\\.async\\.wait_group\\s+(\\d+)", ptx)))
        copies = re.findall(r"cp\\.async\\.c[ag]\\.shared\\.global(?:\\.L2::\\w+)*\\s+\\[[^]]*\\],\\s*\\[[^]]*\\],\\s*(\\w+)", ptx)
        res.append([op, fn.__name__, len(re.findall(r"wgmma.mma_async.sync.aligned.m64n32k8.f32.tf32.tf32", ptx)),
                    "cp.async" in ptx, stack, k.metadata.shared, waits, xy, ptx.count("cp.async.commit_group"),
                    sorted(set(copies))])
print(json.dumps(res))
"""


def test_gluon_lowers_for_sm90():
    """The GLUON plans compile for sm_90 (a clean process: no interpreter): fn's reorder, the
    mix kernel, the Triton finish. The fn GEMM is tf32 wgmma m64n32k8 with A from registers (16
    a step: 4 streams x 4 k-steps), the operands come in by cp.async, no local memory, shared
    memory as the ring's depth says (2 stages: at 3, Triton 3.9 spills 8 B, 3.6 does not).
    XY_GROUP 2: a group's two steps unrolled (32 wgmma), two [128, 32] stream slots and two fn
    slots (112 KB: two CTAs an SM still), waits that leave two commit groups pending (fn(s + 1),
    the next group's streams)."""
    from kernel_templates._gluon import gluon

    if gluon is None:
        pytest.skip("this Triton has no Gluon")
    res = run_clean(_GL_LOWER)
    assert [(r[0], r[1]) for r in res] == [
        (op, name) for op in ("seam", "pre", "seam", "pre")
        for name in ("_fn_k_order_kernel", "_gl_mix_kernel", "_mhc_finish_kernel")]
    for op, name, n_wgmma, cp_async, stack, shared, waits, xy, commits, widths in res:
        assert stack == 0, (op, name, xy, stack)
        if name == "_gl_mix_kernel" and xy == 1:
            assert n_wgmma == 16 and cp_async and waits == ["0", "1"], (op, waits)
            assert shared <= 2 * 36 * 1024 + 1024, (op, shared)
        elif name == "_gl_mix_kernel":
            assert n_wgmma == 32 and cp_async and waits == ["0", "2"], (op, waits)
            assert shared <= 2 * (5 * 8192 + 4 * 4096) + 1024, (op, shared)
            # the prologue's two, then per group fn(s + 1) and the streams, fn(s + 2): 16-byte copies only
            assert commits == 5 and widths == ["0x10"], (op, commits, widths)
