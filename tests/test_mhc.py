"""mHC kernels against the float64 reference, through the interpreter on the CPU."""
from __future__ import annotations

import os

import pytest

from tuner import lowering
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kernel_templates import mhc
from search_spaces.mhc import SPACE, SMALL_WORKLOADS, WORKLOADS, constraints, smem_estimate
from conftest import run_clean


def _run(op: str, T: int, D: int, device: str, seed: int = 0, config: dict | None = None):
    wl = mhc.Workload(op, T, D)
    inputs = mhc.make_inputs(wl, device, seed)
    out = mhc.launch(config=config or mhc.default_config(wl), **inputs)
    return inputs, out


def _assert_doubly_stochastic(comb: torch.Tensor) -> None:
    one = torch.ones(comb.shape[:2], device=comb.device)
    assert torch.allclose(comb.sum(-1), one, atol=1e-3), (comb.sum(-1) - 1).abs().max()
    assert torch.allclose(comb.sum(-2), one, atol=1e-3), (comb.sum(-2) - 1).abs().max()


@pytest.mark.parametrize("op", mhc.OPS)
@pytest.mark.parametrize("T", [1, 3, 37])
@pytest.mark.parametrize("D", [48, 80])
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
    # BLOCK_D 256 at 4 warps needed 238848 B of shared memory on an H200 (> 232448):
    # the config must pass the constraints, which now model that.
    cfg = dict(BLOCK_T=16, BLOCK_D=64, SPLIT_K=4, DOT_PRECISION="ieee", SYNC=0, num_warps=8, num_stages=2)
    if op == "post":
        cfg.update(BLOCK_T=4, BLOCK_D=256, SPLIT_K=1, DOT_PRECISION="fma", num_warps=4)
    assert constraints(cfg, mhc.Workload(op, 3, 4096))
    inputs, out = _run(op, 3, 4096, device, seed=7, config=cfg)
    mhc.verify(out, mhc.reference(**inputs), inputs)


CONFIGS = [
    dict(BLOCK_T=16, BLOCK_D=16, SPLIT_K=1, DOT_PRECISION="tf32", SYNC=0, num_warps=4, num_stages=2),  # fused
    dict(BLOCK_T=16, BLOCK_D=32, SPLIT_K=2, DOT_PRECISION="ieee", SYNC=0, num_warps=4, num_stages=2),  # split, last chunk short
    dict(BLOCK_T=4, BLOCK_D=16, SPLIT_K=2, DOT_PRECISION="fma", SYNC=0, num_warps=2, num_stages=1),   # tiny token blocks
    dict(BLOCK_T=64, BLOCK_D=32, SPLIT_K=1, DOT_PRECISION="tf32x3", SYNC=0, num_warps=8, num_stages=3),  # block > T, D tail
    dict(BLOCK_T=16, BLOCK_D=32, SPLIT_K=2, DOT_PRECISION="bf16x2", SYNC=0, num_warps=4, num_stages=2),  # fn as hi + lo bf16
    dict(BLOCK_T=64, BLOCK_D=16, SPLIT_K=1, DOT_PRECISION="bf16x2", SYNC=0, num_warps=4, num_stages=2),
    # one launch: the last program of a block finishes it / the block's programs wait for each other
    dict(BLOCK_T=16, BLOCK_D=16, SPLIT_K=2, DOT_PRECISION="tf32", SYNC=1, num_warps=4, num_stages=2),
    dict(BLOCK_T=16, BLOCK_D=32, SPLIT_K=2, DOT_PRECISION="ieee", SYNC=2, num_warps=4, num_stages=2),
    dict(BLOCK_T=4, BLOCK_D=16, SPLIT_K=2, DOT_PRECISION="fma", SYNC=2, num_warps=2, num_stages=1),
]


@pytest.mark.parametrize("config", CONFIGS,
                         ids=lambda c: f"T{c['BLOCK_T']}-D{c['BLOCK_D']}-K{c['SPLIT_K']}-{c['DOT_PRECISION']}-S{c['SYNC']}")
@pytest.mark.parametrize("op", ["pre", "seam"])
def test_configs(op, config, device):
    # Only configs the tuner could pick: on a GPU an unpruned one may not even launch
    # (SYNC 1 / 2 are kept out of tuning, see search_spaces/mhc.py, but must stay correct).
    assert constraints(dict(config, SYNC=0), mhc.Workload(op, 37, 80)), (op, config)
    assert constraints(config, mhc.Workload(op, 37, 80)) == (config["SYNC"] == 0)
    inputs, out = _run(op, 37, 80, device, seed=3, config=config)
    mhc.verify(out, mhc.reference(**inputs), inputs)


@pytest.mark.parametrize("sync", [1, 2])
@pytest.mark.parametrize("op", ["pre", "seam"])
def test_one_launch_split(op, sync, device):
    """SYNC 1 / 2 with several programs per token block and several blocks (last block
    partial) match the reference and the two-launch split bit for bit (same partials,
    same summation order), and leave the counters zero for the next call."""
    wl = mhc.Workload(op, 21, 128)
    inputs = mhc.make_inputs(wl, device, 11)
    base = dict(BLOCK_T=4, BLOCK_D=16, SPLIT_K=8, DOT_PRECISION="fma", SYNC=0, num_warps=2, num_stages=1)
    cfg = dict(base, SYNC=sync)
    assert constraints(base, wl) and not constraints(cfg, wl)  # tested, not tuned
    out = mhc.launch(config=cfg, **inputs)
    mhc.verify(out, mhc.reference(**inputs), inputs)
    two = mhc.launch(config=base, **inputs)
    for a, b in zip(out, two):
        assert torch.equal(a, b)
    assert not mhc._sync_scratch(inputs["X"].device, 2 + 3 * 6).any()
    again = mhc.launch(config=cfg, **inputs)  # a second call starts from clean counters
    for a, b in zip(again, out):
        assert torch.equal(a, b)


def test_finish_launch_tiles(device, monkeypatch):
    """The split-K finish launch tiles D on its own (``finish_tiles``): chunks of whole
    U_BLOCK_D tiles covering D once, never narrower than the first launch's BLOCK_D (or D); with
    two chunks, the last one and its last tile short, u equals the reference and the
    one-launch SYNC 1 path's (whose u pass steps by BLOCK_D) bit for bit."""
    for T in (1, 37, 1024, 4096):
        for D in (48, 336, 4096, 5120):
            for bt, nw, bd in ((16, 4, 32), (64, 4, 16), (4, 1, 256), (16, 1, 16)):
                rows, ubd, chunk = mhc.finish_tiles(T, D, bt, nw, bd)
                n = -(-D // chunk)
                assert chunk % ubd == 0 and min(bd, 1 << (D - 1).bit_length()) <= ubd <= 256 and (n - 1) * chunk < D <= n * chunk, (T, D, bt, nw, bd)
                assert rows == min(bt, mhc.FINISH_ROWS)
    assert mhc.finish_tiles(4096, 5120, 64, 4, 32) == (16, 256, 2560)  # GLUON's 64 x 32: 512-byte row pieces
    assert mhc.finish_tiles(37, 336, 16, 1, 16, sms=2) == (16, 64, 192)
    monkeypatch.setattr(mhc, "_sm_count", lambda dev: 2)  # 2 chunks of 3 tiles, the second 2.25
    wl = mhc.Workload("seam", 37, 336)
    inputs = mhc.make_inputs(wl, device, 5)
    base = dict(BLOCK_T=16, BLOCK_D=16, SPLIT_K=4, DOT_PRECISION="fma", SYNC=0, num_warps=1, num_stages=1)
    out = mhc.launch(config=base, **inputs)
    mhc.verify(out, mhc.reference(**inputs), inputs)
    for a, b in zip(out, mhc.launch(config=dict(base, SYNC=1), **inputs)):
        assert torch.equal(a, b)
    # a 32-token first launch: the finish takes 16-row tiles of its own (3 of them, the last short)
    wide = dict(base, BLOCK_T=32)
    out = mhc.launch(config=wide, **inputs)
    mhc.verify(out, mhc.reference(**inputs), inputs)
    for a, b in zip(out, mhc.launch(config=dict(wide, SYNC=1), **inputs)):
        assert torch.equal(a, b)


def test_zero_tokens_split_k(device):
    """T = 0 with a split-K config (the pack's choice at tokens=0): empty outputs, no
    error from planning the finish launch (finish_tiles divided by the token blocks)."""
    inp = mhc.make_inputs(mhc.Workload("seam", 0, 64), device, 0)
    cfg = dict(BLOCK_T=16, BLOCK_D=16, SPLIT_K=4, DOT_PRECISION="fma", SYNC=0, num_warps=1, num_stages=1)
    outs = mhc.launch(config=cfg, **inp)
    assert [tuple(o.shape) for o in outs] == [(0, 4, 64), (0, 64), (0, 4), (0, 4, 4)]
    assert mhc.finish_tiles(0, 64, 16, 1, 16) == (16, 64, 64)


def test_sync_scratch_never_regrows():
    """One counter buffer per (device, stream) at its largest size: a larger grid never
    replaces it (graphs captured earlier keep a valid pointer); past the cap, a clear error."""
    dev = torch.device("cpu")
    a = mhc._sync_scratch(dev, 2 + 3 * 6)
    assert a.numel() == mhc._SYNC_INTS and mhc._sync_scratch(dev, mhc._SYNC_INTS) is a
    with pytest.raises(ValueError, match="SYNC 0"):
        mhc._sync_scratch(dev, mhc._SYNC_INTS + 3)


def test_constraints_reject_oversized_shared_memory():
    """On the H200 (Triton 3.6) the seam at 64 x 64, tf32x3, 8 warps, 3 stages needed
    245760 B of shared memory (> 232448): the estimate alone must prune it."""
    cfg = dict(BLOCK_T=64, BLOCK_D=64, SPLIT_K=1, DOT_PRECISION="tf32x3", SYNC=0, num_warps=8, num_stages=3)
    assert smem_estimate(cfg, "seam") >= 245760
    assert not constraints(cfg, mhc.Workload("seam", 37, 80))


def test_post_configs(device):
    for cfg in (dict(BLOCK_T=1, BLOCK_D=16, SPLIT_K=1, DOT_PRECISION="fma", SYNC=0, num_warps=1, num_stages=1),
                dict(BLOCK_T=8, BLOCK_D=128, SPLIT_K=1, DOT_PRECISION="fma", SYNC=0, num_warps=4, num_stages=1)):
        inputs, out = _run("post", 37, 80, device, seed=5, config=cfg)
        mhc.verify(out, mhc.reference(**inputs), inputs)


# `device` is a constant per session, so sharing it across examples is safe.
@settings(max_examples=8, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(T=st.integers(1, 40), D16=st.integers(1, 6), seed=st.integers(0, 2**16), split=st.sampled_from([1, 2]),
       sync=st.sampled_from([0, 1, 2]))
def test_seam_is_post_then_pre(T, D16, seed, split, sync, device):
    """The fused seam equals post followed by pre, and its comb is doubly stochastic."""
    D = 16 * D16
    inputs = mhc.make_inputs(mhc.Workload("seam", T, D), device, seed)
    cfg = dict(BLOCK_T=16, BLOCK_D=16, SPLIT_K=min(split, D16), DOT_PRECISION="ieee", SYNC=sync, num_warps=4,
               num_stages=2)
    Xn, u, post, comb = mhc.mhc_seam(inputs["X"], inputs["y"], inputs["post"], inputs["comb"], inputs["fn"],
                                     inputs["scale"], inputs["base"], inputs["norm_w"], config=cfg)
    Xn2 = mhc.mhc_post(inputs["X"], inputs["y"], inputs["post"], inputs["comb"],
                       config=dict(cfg, SPLIT_K=1, DOT_PRECISION="fma"))
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


def test_default_plans_for_an_assumed_target():
    """``assume_target`` decides whether a default takes the Gluon kernel, here as in a
    process without the interpreter: the search space and the default agree on sm_90."""
    from kernel_templates._gluon import gluon
    from tuner.runtime.env import assume_target, interpreting

    if gluon is None:
        pytest.skip("this Triton has no Gluon")
    wl = mhc.Workload("seam", 1024, 5120)
    with assume_target(90):
        cfg = mhc.default_config(wl)
        assert cfg["GLUON"] and constraints(cfg, wl), cfg
    with assume_target(100):
        assert not mhc.default_config(wl)["GLUON"]
    if interpreting():  # nothing assumed: the interpreter runs no Gluon kernel
        assert not mhc.default_config(wl)["GLUON"]


def test_bad_inputs_raise(device):
    inputs = mhc.make_inputs(mhc.Workload("seam", 2, 32), device, 0)
    cfg = mhc.default_config(mhc.Workload("seam", 2, 32))
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
    names = set()
    for kern in (mhc._mhc_pre_kernel, mhc._mhc_seam_kernel, mhc._mhc_finish_kernel, mhc._mhc_post_kernel,
                 mhc._gl_mix_kernel, mhc._gl_defer_kernel):
        names |= lowering.constexpr_names(kern)
    # PHASE is the launcher's (the interpreter's two-launch form of SYNC 2), U_BLOCK_D the
    # finish launch's own tiling (finish_tiles), SEAM the op, STAGES the Gluon kernel's
    # num_stages (a launch option it has no pipeliner for): not config keys. GLUON picks
    # the kernel; PERSIST and DEFER_LAG size SYNC 3's grid and lag (defer_grid); LAUNCH_PDL sets the
    # GLUON launches' PDL (and launch_pdl).
    assert (names - {"PHASE", "U_BLOCK_D", "SEAM", "STAGES", "PDL"}) | {
        "num_warps", "num_stages", "GLUON", "PERSIST", "DEFER_LAG", "LAUNCH_PDL"} == set(SPACE)
    for wl in WORKLOADS + SMALL_WORKLOADS:
        cfg = mhc.default_config(wl)
        assert SPACE.contains(cfg) and constraints(cfg, wl), (wl, cfg)


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
done = []
for op, T, fused in (("seam", 64, False), ("seam", 8192, False), ("seam", 8192, True), ("pre", 1, False),
                     ("post", 64, False)):
    wl = mhc.Workload(op, T, 5120)
    cfg = mhc.default_config(wl)
    if fused:  # no default uses the single fused launch now; the tuner may pick it
        cfg = dict(cfg, SPLIT_K=1)
    for fn, sig, cx in mhc.lower_signatures(wl, cfg):
        for cc in (90, 100):
            k = triton.compile(ASTSource(fn=fn, signature=sig, constexprs=cx), target=GPUTarget("cuda", cc, 32),
                               options={"num_warps": cfg["num_warps"], "num_stages": cfg["num_stages"]})
            done.append([op, T, cfg["SPLIT_K"], fn.__name__, cc, bool(k.asm.get("cubin") or k.asm.get("ptx"))])
print(json.dumps(done))
"""


def test_lowers_for_hopper_and_blackwell():
    """`tune lower mhc --target sm_90|sm_100`: split, fused and post launches all compile.
    In a clean process: the interpreter swaps jit functions for uncompilable wrappers."""
    done = run_clean(_LOWER)
    assert all(d[-1] for d in done)
    kernels = {(d[3], d[4]) for d in done}
    assert kernels == {(k, cc) for cc in (90, 100) for k in ("_mhc_seam_kernel", "_mhc_finish_kernel",
                                                              "_mhc_pre_kernel", "_mhc_post_kernel")}
    assert any(d[2] == 1 and d[3] == "_mhc_seam_kernel" for d in done)  # the fused single-launch path


_SM90 = """
import json, triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from kernel_templates import mhc
from search_spaces.mhc import WORKLOADS
seen = {}
for wl in WORKLOADS:
    cfg = mhc.default_config(wl)
    for fn, sig, cx in mhc.lower_signatures(wl, cfg):
        # As the JIT specializes on the GPU: pointers and 16-divisible ints get
        # tt.divisibility 16 (it changes vector widths, so shared memory), ints == 1 become
        # constexprs: the signature carries that (lowering.signature).
        attrs = sig.attrs
        key = (fn.__name__, str(sorted(sig.items())), str(sorted(cx.items())), str(sorted(attrs)),
               cfg["num_warps"], cfg["num_stages"])
        if key not in seen:
            k = triton.compile(ASTSource(fn=fn, signature=sig, constexprs=cx, attrs=attrs),
                               target=GPUTarget("cuda", 90, 32),
                               options={"num_warps": cfg["num_warps"], "num_stages": cfg["num_stages"]})
            seen[key] = [wl.op, wl.tokens, wl.dim, fn.__name__, cfg, k.metadata.shared]
print(json.dumps(list(seen.values())))
"""


def test_default_configs_fit_sm90():
    """Every default config of the GPU grid compiles for sm_90 within the 232448 B of
    shared memory a block may have on an H100 / H200, and under the constraints' estimate
    (calibrated with Triton 3.6, whose sm_90 layouts take more shared memory than 3.9's).
    Identical compiles (same constexprs and specialization) are done once."""
    done = run_clean(_SM90)
    assert {d[0] for d in done} == set(mhc.OPS)
    for op, T, D, name, cfg, shared in done:
        assert shared <= 232448, (op, T, D, name, cfg, shared)
        if name in ("_mhc_seam_kernel", "_mhc_pre_kernel"):
            assert shared <= smem_estimate(cfg, op), (op, T, D, name, cfg, shared, smem_estimate(cfg, op))


@pytest.mark.gpu
@pytest.mark.parametrize("op", mhc.OPS)
@pytest.mark.parametrize("T", [1, 256, 4096])
def test_gpu_model_shapes(op, T, device):
    wl = mhc.Workload(op, T, 5120)
    inputs = mhc.make_inputs(wl, device, 0)
    mhc.verify(mhc.launch(config=mhc.default_config(wl), **inputs), mhc.reference(**inputs), inputs)


# ----------------------------------------------------------------------------- GLUON (sm_90)

GL_CASES = [  # op, T, D, SPLIT_K, SYNC, stages: token tails, one block, many blocks, model widths
    ("seam", 1, 256, 2, 0, 2), ("seam", 37, 512, 4, 2, 3), ("seam", 200, 1024, 8, 2, 3), ("seam", 130, 256, 8, 0, 4),
    ("pre", 100, 256, 8, 0, 3), ("pre", 64, 512, 2, 2, 2), ("seam", 1024, 5120, 16, 2, 3),
    ("seam", 1024, 5120, 32, 2, 3), ("seam", 4096, 5120, 4, 0, 3), ("seam", 4096, 7168, 8, 2, 3),
    ("pre", 1024, 4096, 16, 2, 3), ("seam", 1000, 5120, 40, 2, 2), ("seam", 4096, 5120, 20, 2, 2),
    ("seam", 1000, 5120, 20, 0, 2),  # an even SPLIT_K that is no power of two, through the finish launch
]


def _gl_config(op: str, T: int, D: int, sk: int, sync: int, stages: int) -> dict:
    return dict(mhc.default_config(mhc.Workload(op, T, D)), GLUON=True, SPLIT_K=sk, SYNC=sync, num_stages=stages,
                **mhc.GL_FIXED)


@pytest.mark.gpu
@pytest.mark.parametrize("op, T, D, sk, sync, stages", GL_CASES)
def test_gpu_gluon(op, T, D, sk, sync, stages, device):
    """The Gluon mix kernel (register-A tf32 wgmma, fn's K axis permuted) against the
    reference, with its finish launch (SYNC 0) or in one pass (SYNC 2); a second call
    finds the one-pass counters zero again."""
    wl = mhc.Workload(op, T, D)
    cfg = _gl_config(op, T, D, sk, sync, stages)
    # the search space keeps 64-token blocks from tiny T, and the one pass from tuning (slower)
    assert constraints(dict(cfg, SYNC=0), wl) or T < 16, cfg
    inputs = mhc.make_inputs(wl, device, T + D)
    ref = mhc.reference(**inputs)
    out = mhc.launch(config=cfg, **inputs)
    mhc.verify(out, ref, inputs)
    _assert_doubly_stochastic(out[-1])
    again = mhc.launch(config=cfg, **inputs)
    mhc.verify(again, ref, inputs)
    if sync == 2:
        assert not mhc._sync_scratch(inputs["X"].device, 2 + 3 * 4096).any()


GL_XY_CASES = [  # op, T, D, SPLIT_K, SYNC: token tails, a single group, the one pass, model widths
    ("seam", 37, 512, 4, 0), ("pre", 100, 256, 4, 0), ("seam", 200, 1024, 8, 2), ("seam", 1000, 5120, 8, 0),
    ("seam", 4096, 5120, 4, 0), ("pre", 1024, 4096, 16, 0), ("seam", 256, 7168, 28, 0),
]


@pytest.mark.gpu
@pytest.mark.parametrize("op, T, D, sk, sync", GL_XY_CASES)
def test_gpu_gluon_xy_group(op, T, D, sk, sync, device):
    """XY_GROUP 2 (two steps' stream copies together, 128 bytes a row) against the reference,
    and bit for bit against XY_GROUP 1 with the finish launch (the same sums in the same order)."""
    wl = mhc.Workload(op, T, D)
    cfg = dict(_gl_config(op, T, D, sk, sync, 2), XY_GROUP=2)
    assert mhc.gluon_config_error(cfg, D) is None, cfg
    inputs = mhc.make_inputs(wl, device, T + D)
    out = mhc.launch(config=cfg, **inputs)
    mhc.verify(out, mhc.reference(**inputs), inputs)
    if sync == 0:
        one = mhc.launch(config=dict(cfg, XY_GROUP=1), **inputs)
        assert all(torch.equal(a, b) for a, b in zip(out, one))


GL_DEFER_CASES = [  # op, T, D, SPLIT_K, XY_GROUP, PERSIST, DEFER_LAG, SMs: token tails, lag SPLIT_K only
    # (waits), a grid of 2-6 programs taking many tickets each, model widths, a lag past every item
    ("seam", 37, 512, 4, 1, 1, 0, 132), ("seam", 200, 1024, 8, 2, 2, 0, 3), ("pre", 100, 256, 4, 2, 1, 100, 2),
    ("seam", 1000, 5120, 20, 2, 2, 100, 132), ("seam", 4096, 5120, 40, 2, 2, 50, 132),
    ("seam", 4096, 7168, 28, 2, 1, 200, 132), ("pre", 1024, 4096, 16, 2, 2, 100, 132),
    ("seam", 8192, 5120, 20, 2, 2, 100, 132), ("seam", 300, 512, 2, 1, 2, 100, 6),
]


@pytest.mark.gpu
@pytest.mark.parametrize("op, T, D, sk, xy, persist, lag, sms", GL_DEFER_CASES)
def test_gpu_gluon_defer(op, T, D, sk, xy, persist, lag, sms, device, monkeypatch):
    """SYNC 3 (persistent programs: mix item i, then the u pass of item i - lag) against the
    reference, call after call (its counters left zero), on grids far smaller than the items."""
    monkeypatch.setattr(mhc, "_sm_count", lambda dev: sms)
    wl = mhc.Workload(op, T, D)
    cfg = dict(_gl_config(op, T, D, sk, 3, 2), XY_GROUP=xy, PERSIST=persist, DEFER_LAG=lag)
    assert mhc.gluon_config_error(cfg, D) is None, cfg
    inputs = mhc.make_inputs(wl, device, T + D + sk)
    ref = mhc.reference(**inputs)
    for _ in range(2):
        out = mhc.launch(config=cfg, **inputs)
        mhc.verify(out, ref, inputs)
        _assert_doubly_stochastic(out[-1])
        assert not mhc._sync_scratch(inputs["X"].device, 2 + 3 * 4096).any()


def _defer_protocol(T: int, sk: int, grid: int, lag: int, resident: int, seed: int) -> list[int]:
    """A step-by-step model of ``_gl_defer_kernel``'s tickets and counters: ``grid`` programs, at
    most ``resident`` running at once, interleaved at random between the kernel's atomics and
    waits. Asserts each item is mixed once and its u pass runs once, after all its block's
    items were mixed; returns the counters left behind (all zero after a sound launch). Raises
    ``TimeoutError`` when no program can make progress (a deadlock)."""
    import random

    rnd = random.Random(seed)
    n_tb = -(-T // 64)
    n_items = n_tb * sk
    S = [0] * (2 + 3 * n_tb)  # ticket, leave count, then arrive / ready / depart a block
    mixed: list[int] = []
    upass: list[int] = []

    def program():
        i = S[0]
        S[0] += 1
        yield
        while i < n_items + lag:
            nxt = S[0]  # the next ticket, taken while item i's copies are in flight
            S[0] += 1
            yield
            j = i - lag
            if j >= 0:
                ub = j // sk
                while S[2 + n_tb + ub] == 0:  # _gl_wait_ready
                    yield "wait"
                assert all(ub * sk + k in mixed for k in range(sk)), (j, ub)
                upass.append(j)
                yield
                S[2 + 2 * n_tb + ub] += 1  # _gl_depart: the last re-zeroes the block
                if S[2 + 2 * n_tb + ub] == sk:
                    S[2 + ub] = S[2 + n_tb + ub] = S[2 + 2 * n_tb + ub] = 0
                yield
            if i < n_items:
                mixed.append(i)
                yield
                b = i // sk
                S[2 + b] += 1  # _gl_arrive: the last combines, then sets ready
                if S[2 + b] == sk:
                    yield
                    S[2 + n_tb + b] = 1
                yield
            i = nxt
        S[1] += 1  # _gl_leave
        if S[1] == grid:
            S[0] = S[1] = 0

    pending, live, idle = [program() for _ in range(grid)], [], 0
    while pending or live:
        while pending and len(live) < resident:
            live.append(pending.pop())
        g = rnd.choice(live)
        try:
            idle = idle + 1 if next(g) == "wait" else 0
        except StopIteration:
            live.remove(g)
            idle = 0
        if idle > 50 * len(live) + 1000:
            raise TimeoutError(f"no progress: T={T} SPLIT_K={sk} grid={grid} lag={lag}")
    assert sorted(mixed) == list(range(n_items)) and sorted(upass) == list(range(n_items))
    return S


def test_defer_protocol_model_finishes_and_leaves_zero():
    """SYNC 3's protocol (the model above), with ``defer_grid``'s grid and lag over token tails,
    SPLIT_K values, lags and tiny SM counts, fewer programs resident than launched, random
    interleavings: no deadlock, every item mixed and u-passed once in order of its block, the
    counters zero for the next call. A lag below SPLIT_K deadlocks the model (its teeth): a
    ticket's u pass would wait on its own block's later items."""
    import random

    rnd = random.Random(5)
    for seed in range(250):
        T, sk = rnd.randint(1, 600), rnd.choice((2, 4, 6, 10, 20))
        config = {"PERSIST": rnd.choice((1, 2)), "DEFER_LAG": rnd.choice((0, 50, 100, 200))}
        grid, lag = mhc.defer_grid(-(-T // 64) * sk, sk, config, sms=rnd.randint(1, 12))
        assert not any(_defer_protocol(T, sk, grid, lag, rnd.randint(1, grid), seed))
    with pytest.raises(TimeoutError):
        _defer_protocol(64, 4, 1, 3, 1, 0)


def test_defer_grid_and_keys():
    """SYNC 3's grid (PERSIST programs an SM, at most one an item) and lag (DEFER_LAG percent
    of it plus SPLIT_K); its keys are refused off SYNC 3 and pinned there by the space."""
    import search_spaces.mhc as S

    assert mhc.defer_grid(1280, 20, {}, 132) == (264, 264 + 20)
    assert mhc.defer_grid(1280, 20, {"PERSIST": 1, "DEFER_LAG": 50}, 132) == (132, 66 + 20)
    assert mhc.defer_grid(16, 8, {"DEFER_LAG": 200}, 132) == (16, 32 + 8)
    cfg = _gl_config("seam", 4096, 5120, 20, 3, 2)
    assert mhc.gluon_config_error(dict(cfg, XY_GROUP=2, PERSIST=1, DEFER_LAG=200), 5120) is None
    assert "SYNC 3's" in mhc.gluon_config_error(dict(cfg, SYNC=0, PERSIST=1), 5120)
    assert "SYNC 3's" in mhc.gluon_config_error(dict(cfg, SYNC=2, DEFER_LAG=50), 5120)
    assert mhc.gluon_config_error(dict(cfg, SYNC=0, PERSIST=2, DEFER_LAG=100), 5120) is None  # absent values
    wl = mhc.Workload("seam", 64, 256)
    with pytest.raises(ValueError, match="SYNC 3 .* GLUON"):
        mhc.launch(config=dict(mhc.default_config(wl), SPLIT_K=2, SYNC=3), **mhc.make_inputs(wl, "cpu", 0))
    tri = S.SPACE.complete(dict(mhc.default_config(wl), GLUON=False, SYNC=3, PERSIST=1))
    assert S.canonical(tri, wl)["SYNC"] == 0 and S.canonical(tri, wl)["PERSIST"] == 2


def test_launch_pdl_refused_where_it_cannot_run():
    """LAUNCH_PDL sets the GLUON launches' PDL; a Triton config (or post) is refused with one
    line, and the space pins it off there."""
    import search_spaces.mhc as S

    wl = mhc.Workload("seam", 3, 64)
    inputs = mhc.make_inputs(wl, "cpu", 0)
    with pytest.raises(ValueError, match="LAUNCH_PDL applies to the GLUON"):
        mhc.launch(config=dict(mhc.default_config(wl), LAUNCH_PDL=True), **inputs)
    tri = S.SPACE.complete(dict(mhc.default_config(wl), GLUON=False, LAUNCH_PDL=True))
    assert S.canonical(tri, wl)["LAUNCH_PDL"] is False


@pytest.mark.gpu
@pytest.mark.parametrize("sync, sk", [(0, 4), (3, 20)])
def test_gpu_gluon_launch_pdl(sync, sk, device):
    """LAUNCH_PDL on the GPU (each GLUON launch a programmatic dependent launch of the one
    before): the finish launch (SYNC 0) gives the same bits as without it, the persistent
    pass (SYNC 3) the reference's values, call after call."""
    wl = mhc.Workload("seam", 4096, 5120)
    cfg = dict(_gl_config("seam", 4096, 5120, sk, sync, 2), XY_GROUP=2)
    inputs = mhc.make_inputs(wl, device, 11)
    ref = mhc.reference(**inputs)
    plain = mhc.launch(config=cfg, **inputs)
    for _ in range(3):
        out = mhc.launch(config=dict(cfg, LAUNCH_PDL=True), **inputs)
        mhc.verify(out, ref, inputs)
        if sync == 0:
            assert all(torch.equal(a, b) for a, b in zip(out, plain))


def test_xy_group_refused_where_it_cannot_run():
    """XY_GROUP 2 needs 2 stages and whole groups of steps; other values are refused."""
    cfg = _gl_config("seam", 64, 5120, 16, 0, 2)
    assert mhc.gluon_config_error(dict(cfg, XY_GROUP=2), 5120) is None
    assert "XY_GROUP" in mhc.gluon_config_error(dict(cfg, XY_GROUP=2, num_stages=3), 5120)
    assert "XY_GROUP" in mhc.gluon_config_error(dict(cfg, XY_GROUP=2, SPLIT_K=32), 5120)  # 5 steps
    assert "XY_GROUP" in mhc.gluon_config_error(dict(cfg, XY_GROUP=4), 5120)
    wl = mhc.Workload("seam", 3, 64)
    inputs = mhc.make_inputs(wl, "cpu", 0)
    with pytest.raises(ValueError, match="XY_GROUP applies to the GLUON"):  # a Triton config would ignore it
        mhc.launch(config=dict(mhc.default_config(wl), XY_GROUP=2), **inputs)


def test_fn_k_order(device):
    """fn in the GLUON kernel's K order: in each 32-column block, position 4 m + q holds
    column 8 q + m (the columns a thread's registers hold, as the tf32 A fragment reads them)."""
    fn = torch.randn(24, 4 * 96, device=device)
    want = fn.view(24, -1, 4, 8).transpose(-1, -2).reshape(24, -1)
    assert torch.equal(mhc.fn_k_order(fn), want)
    p = torch.arange(32)
    assert torch.equal(want[:, :32], fn[:, 8 * (p % 4) + p // 4])
    # the one pass's launch also zero-fills its partial rows (more values than its programs' one pass covers)
    out, part = torch.empty_like(fn), torch.full((24 * 2 * 1024 + 77,), float("nan"), device=device)
    kern, grid, args = mhc._fn_k_order_launch(fn, out, part)
    kern[grid](**args)
    assert torch.equal(out, want) and not part.any()


def test_gluon_in_the_search_space(monkeypatch):
    """GLUON is drawn only where it runs (sm_90 with Gluon, not for post), with its tile fixed
    and SYNC 0; the launcher refuses it under the interpreter with one line."""
    import search_spaces.mhc as S

    wl = mhc.Workload("seam", 1024, 5120)
    cfg = _gl_config("seam", 1024, 5120, 16, 0, 3)
    monkeypatch.setattr(S, "target_cc", lambda: 90)
    monkeypatch.setattr(S, "gluon_available", lambda **_: True)
    assert S.constraints(cfg, wl)
    assert not S.constraints(dict(cfg, SYNC=1), wl) and not S.constraints(dict(cfg, SYNC=2), wl)
    assert S.constraints(dict(cfg, SYNC=3), wl) and S.constraints(dict(cfg, SYNC=3, PERSIST=1, DEFER_LAG=50), wl)
    assert not S.constraints(dict(cfg, PERSIST=1), wl), "PERSIST: SYNC 3's"
    assert not S.constraints(dict(cfg, BLOCK_D=16), wl)  # the tile is fixed
    assert not S.constraints(dict(cfg, SPLIT_K=1), wl)  # partials need a split
    assert not S.constraints(dict(cfg, SPLIT_K=64), wl)  # 5120 / 64 is not whole 32-column steps
    assert not S.constraints(dict(cfg, num_stages=1), wl)
    assert not S.constraints(_gl_config("post", 64, 5120, 1, 0, 2), mhc.Workload("post", 64, 5120))
    assert S.canonical(dict(cfg, num_warps=8, BLOCK_T=16), wl) == cfg
    xy = dict(cfg, XY_GROUP=2, num_stages=2)  # SPLIT_K 16 at D = 5120: 10 steps a split, 5 groups
    assert S.constraints(xy, wl) and not S.constraints(dict(xy, num_stages=3), wl)
    assert not S.constraints(dict(xy, SPLIT_K=32), wl), "5 steps a split: no whole groups"
    # even factors that are no power of two: the GLUON kernel's (8 / 4 / 2 steps at D = 5120), as the
    # persistent one pass's tries ask (session 26's run 145 tries would have been refused under Pow2)
    for sk in (10, 20, 40, 80):
        assert S.SPACE.contains(dict(xy, SPLIT_K=sk)) and S.constraints(dict(xy, SPLIT_K=sk, SYNC=3), wl), sk
    assert not S.constraints(dict(xy, SPLIT_K=14), wl), "5120 / 14 is not whole 32-column steps"
    w7 = mhc.Workload("seam", 4096, 7168)
    assert all(S.constraints(dict(xy, SPLIT_K=sk, SYNC=3), w7) for sk in (28, 56, 112))
    w8 = mhc.Workload("seam", 8192, 5120)  # 128 token blocks x 40: SYNC 0's partial rows past the cap, not SYNC 3's
    assert S.constraints(dict(xy, SPLIT_K=40, SYNC=3), w8) and not S.constraints(dict(xy, SPLIT_K=40), w8)
    # SYNC 3's PERSIST 2 only where two programs' rings fit an SM (review of session 26's kernel)
    assert [mhc.gl_resident(dict(cfg, XY_GROUP=x, num_stages=n)) for x, n in ((1, 2), (1, 3), (1, 4), (2, 2))] == [
        3, 2, 1, 2]
    d3 = dict(cfg, SYNC=3, XY_GROUP=1, num_stages=4)
    assert not S.constraints(dict(d3, PERSIST=2), wl) and S.constraints(dict(d3, PERSIST=1), wl)
    assert S.constraints(dict(d3, num_stages=3, PERSIST=2), wl) and S.constraints(dict(xy, SYNC=3, PERSIST=2), wl)
    tri = S.SPACE.complete(dict(mhc.default_config(wl), GLUON=False, BLOCK_T=64, BLOCK_D=16, num_stages=3))
    assert S.constraints(tri, wl) and not S.constraints(dict(tri, XY_GROUP=2), wl), "XY_GROUP: the Gluon kernel's"
    for sk, pow2 in ((20, 16), (112, 64), (10, 8), (16, 16)):  # the Triton kernels: powers of two
        assert S.canonical(dict(tri, SPLIT_K=sk), wl)["SPLIT_K"] == pow2
    assert not S.constraints(dict(tri, SPLIT_K=20), wl)
    for T, D in ((1024, 5120), (4096, 5120), (8192, 4096), (1024, 7168), (65536, 5120)):
        g = mhc.gluon_default(T, D)
        assert S.SPACE.contains(g) and S.constraints(g, mhc.Workload("seam", T, D)), (T, D, g)
    assert [mhc.gluon_default(T, 5120)["SPLIT_K"] for T in (1024, 4096, 8192)] == [8, 4, 2]  # runs 58-59
    assert [mhc.gluon_default(256, D)["SPLIT_K"] for D in (4096, 5120, 7168)] == [32, 32, 32]  # runs 114, 118-119
    monkeypatch.setattr(mhc, "gluon_on_hopper", lambda: True)
    assert mhc.default_config(mhc.Workload("seam", 256, 7168)) == mhc.gluon_default(256, 7168)
    assert not mhc.default_config(mhc.Workload("pre", 256, 7168))["GLUON"]  # pre below 1024: not measured
    assert not mhc.default_config(mhc.Workload("seam", 64, 5120))["GLUON"]
    assert mhc.default_config(mhc.Workload("pre", 1024, 5120))["GLUON"]
    monkeypatch.setattr(mhc, "gluon_on_hopper", lambda: False)
    for T, D in ((256, 4096), (256, 7168), (512, 5120), (1000, 7168)):
        g = mhc.gluon_default(T, D)
        assert S.SPACE.contains(g) and S.constraints(g, mhc.Workload("seam", T, D)), (T, D, g)
    monkeypatch.setattr(S, "target_cc", lambda: 100)
    assert not S.constraints(cfg, wl)
    assert S.SPACE.complete(mhc.default_config(wl))["GLUON"] is False
    if os.environ.get("TRITON_INTERPRET", "0") not in ("", "0"):
        inputs = mhc.make_inputs(mhc.Workload("seam", 3, 256), "cpu", 0)
        with pytest.raises(ValueError, match="GLUON kernels do not run under TRITON_INTERPRET"):
            mhc.launch(config=_gl_config("seam", 3, 256, 2, 0, 2), **inputs)


_GL_LOWER = """
import json, os, re, subprocess, tempfile, torch, triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from triton.experimental.gluon._runtime import GluonASTSource
from kernel_templates import mhc
from tuner import lowering
BIN = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "cuobjdump")
m = lambda *s, dt=torch.float32: torch.empty(*s, dtype=dt, device="meta")
bf = torch.bfloat16
res = []
for op, T, sk, sync, xy, pdl in (("seam", 4096, 4, 0, 1, False), ("seam", 1024, 16, 2, 1, False),
                                 ("pre", 256, 8, 2, 1, False), ("seam", 4096, 4, 0, 2, True),
                                 ("seam", 1024, 16, 2, 2, False), ("pre", 4096, 4, 0, 2, False),
                                 ("seam", 4096, 20, 3, 2, True), ("pre", 1024, 16, 3, 2, False)):
    cfg = dict(mhc.default_config(mhc.Workload(op, T, 5120)), GLUON=True, SPLIT_K=sk, SYNC=sync, num_stages=2,
               XY_GROUP=xy, LAUNCH_PDL=pdl, **mhc.GL_FIXED)
    plan, _ = mhc._plan(op, m(T, 4, 5120, dt=bf), m(T, 5120, dt=bf), m(T, 4), m(T, 4, 4), m(24, 4 * 5120), m(3),
                        m(24), m(5120, dt=bf), 1e-6, 20, cfg)
    for fn, _grid, args in plan:
        sig, cx = lowering.signature(fn, args)
        attrs = sig.attrs
        src = (GluonASTSource if fn.is_gluon() else ASTSource)(fn=fn, signature=sig, constexprs=cx, attrs=attrs)
        k = triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": 4, "num_stages": 2})
        with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
            f.write(k.asm["cubin"])
            f.flush()
            use = subprocess.run([BIN, "--dump-resource-usage", f.name], capture_output=True, text=True).stdout
        stack = int(re.search(r"STACK:(\\d+)", use).group(1))
        ptx = k.asm["ptx"]
        waits = sorted(set(re.findall(r"cp\\.async\\.wait_group\\s+(\\d+)", ptx)))
        copies = re.findall(r"cp\\.async\\.c[ag]\\.shared\\.global(?:\\.L2::\\w+)*\\s+\\[[^]]*\\],\\s*\\[[^]]*\\],\\s*(\\w+)", ptx)
        res.append([op, sync, fn.__name__, len(re.findall(r"wgmma.mma_async.sync.aligned.m64n32k8.f32.tf32.tf32", ptx)),
                    "cp.async" in ptx, stack, k.metadata.shared, waits, xy, ptx.count("cp.async.commit_group"),
                    sorted(set(copies)), pdl, [g in ptx for g in ("griddepcontrol.wait", "griddepcontrol.launch")]])
print(json.dumps(res))
"""


def test_gluon_lowers_for_sm90():
    """The GLUON plans compile for sm_90 (a clean process: no interpreter): the fn GEMM is
    tf32 wgmma m64n32k8 with A from registers (16 a step: 4 streams x 4 k-steps), the
    operands come in by cp.async, no local memory (but SYNC 3's seam, below), shared memory as the ring's depth says (2
    stages, the default: at 3, Triton 3.9 spills 8 B, 3.6 does not). XY_GROUP 2: a group's two
    steps unrolled (32 wgmma), two [128, 32] stream slots and two fn slots (112 KB: two CTAs an SM
    still), waits that leave two commit groups pending (fn(s + 1), the next group's streams)."""
    res = run_clean(_GL_LOWER)
    assert [(r[0], r[2]) for r in res] == [
        ("seam", "_fn_k_order_kernel"), ("seam", "_gl_mix_kernel"), ("seam", "_mhc_finish_kernel"),
        ("seam", "_fn_k_order_kernel"), ("seam", "_gl_mix_kernel"), ("pre", "_fn_k_order_kernel"),
        ("pre", "_gl_mix_kernel"),
        ("seam", "_fn_k_order_kernel"), ("seam", "_gl_mix_kernel"), ("seam", "_mhc_finish_kernel"),
        ("seam", "_fn_k_order_kernel"), ("seam", "_gl_mix_kernel"), ("pre", "_fn_k_order_kernel"),
        ("pre", "_gl_mix_kernel"), ("pre", "_mhc_finish_kernel"),
        ("seam", "_fn_k_order_kernel"), ("seam", "_gl_defer_kernel"), ("pre", "_fn_k_order_kernel"),
        ("pre", "_gl_defer_kernel")]
    for op, sync, name, n_wgmma, cp_async, stack, shared, waits, xy, commits, widths, pdl, gdc in res:
        # LAUNCH_PDL: fn's reorder lets the next launch start, the mix kernel waits for it and lets the
        # finish start, the finish and the persistent kernel wait; nothing of it without the knob
        want = {"_fn_k_order_kernel": [False, True], "_gl_mix_kernel": [True, True], "_mhc_finish_kernel": [True, False],
                "_gl_defer_kernel": [True, False]}[name] if pdl else [False, False]
        assert gdc == want, (op, sync, name, pdl, gdc)
        # SYNC 3's seam at XY_GROUP 2 (255 registers) keeps ~22 loop-invariant values in local
        # memory (88 B, Triton 3.6; reloaded a few times an item, not a step)
        assert stack <= (128 if (name, op) == ("_gl_defer_kernel", "seam") else 0), (op, sync, name, xy, stack)
        if name == "_gl_mix_kernel" and xy == 1:
            assert n_wgmma == 16 and cp_async and waits == ["0", "1"], (op, sync, waits)
            assert shared <= 2 * 36 * 1024 + 1024, (op, sync, shared)
        elif name in ("_gl_mix_kernel", "_gl_defer_kernel"):
            assert n_wgmma == 32 and cp_async and waits == ["0", "2"], (op, sync, waits)
            assert shared <= 2 * (5 * 8192 + 4 * 4096) + 1024, (op, sync, shared)
            # the prologue's two, then per group fn(s + 1) and the streams, fn(s + 2): 16-byte copies only
            assert commits == 5 and widths == ["0x10"], (op, sync, commits, widths)
