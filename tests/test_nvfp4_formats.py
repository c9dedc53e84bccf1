"""NVFP4 interoperability: the exact (DeepSeek-V4.1) and engine (vLLM / FlashInfer / TensorRT-LLM)
roundings of ``quantize_nvfp4`` against a written-down vector set, against an independent
re-implementation of each formula here (numpy float32, table lookups), Triton == PyTorch in each
mode, and the share of exact-tie elements the engines' reciprocal moves (docs/formats.md)."""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import DEVICE
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from kernel_templates import nvfp4 as F

VECTORS = json.loads((Path(__file__).parent / "fixtures" / "nvfp4_vectors.json").read_text())["vectors"]
f32 = np.float32


def _value(v) -> float:
    if isinstance(v, str) and v.lstrip("-").lower().startswith("0x"):
        return float.fromhex(v)
    return float(v)


def _rows(vectors) -> torch.Tensor:
    x = torch.tensor([[_value(v) for v in vec["x"]] for vec in vectors], dtype=torch.float64)
    assert torch.equal(x.float().double().nan_to_num(), x.nan_to_num()), "every vector value is an fp32 number"
    return x.float()


# --------------------------------------------------------------------- the vector set


def test_the_vector_set_is_well_formed():
    assert len(VECTORS) >= 12 and len({v["name"] for v in VECTORS}) == len(VECTORS)
    for vec in VECTORS:
        assert len(vec["x"]) == 16 and vec["why"]
        for mode in F.ROUNDINGS:
            assert 0 <= vec[mode]["scale"] <= 0x7F and len(vec[mode]["codes"]) == 16
    # it covers what it says: exact ties, both roundings disagreeing, zero / subnormal / saturated
    # scales, NaN and inf
    differ = [v["name"] for v in VECTORS if v["exact"] != v["engine"]]
    assert len(differ) >= 4
    assert {v["engine"]["scale"] for v in VECTORS} >= {0x00, 0x03, 0x7E, 0x7F}


@pytest.mark.parametrize("rounding", F.ROUNDINGS)
@pytest.mark.parametrize("quantize", [F.quantize_nvfp4, F.quantize_nvfp4_triton], ids=["torch", "triton"])
def test_vector_set(quantize, rounding):
    wrong = []
    for g in sorted({v.get("global_scale") for v in VECTORS}, key=lambda g: g or 0):
        vecs = [v for v in VECTORS if v.get("global_scale") == g]
        codes, scales = quantize(_rows(vecs).to(DEVICE), g, rounding=rounding)
        for vec, c, s in zip(vecs, F.unpack_e2m1(codes).tolist(), scales[:, 0].tolist()):
            want = vec[rounding]
            if c != want["codes"] or s != want["scale"]:
                wrong.append(f"{vec['name']}: scale 0x{s:02X} codes {c}, want 0x{want['scale']:02X} {want['codes']}")
    assert not wrong, "\n".join(wrong)


# --------------------------------------------------------------------- an independent re-implementation

E4M3_POS = np.array([0.0] + [float(m) * 2.0**-9 if e == 0 else (1 + m / 8) * 2.0 ** (e - 7)
                             for b in range(1, 0x7F) for e, m in [(b >> 3, b & 7)]], dtype=np.float32)
"""Byte b's value at index b (0..126): increasing, so rounding is a search."""


def _e4m3_byte(v: np.ndarray) -> np.ndarray:
    """Round non-negative fp32 values in [0, 448] to E4M3: nearest, ties to the even byte."""
    hi = np.clip(np.searchsorted(E4M3_POS, v), 1, len(E4M3_POS) - 1)
    lo = hi - 1
    dl, dh = v - E4M3_POS[lo], E4M3_POS[hi] - v
    return np.where((dh < dl) | ((dh == dl) & (hi % 2 == 0)), hi, lo).astype(np.uint8)


def _e2m1_code(y: np.ndarray) -> np.ndarray:
    """The engines' test reference's intervals (ties to even), then the sign bit."""
    a = np.abs(y)
    code = np.select([a <= 0.25, a < 0.75, a <= 1.25, a < 1.75, a <= 2.5, a < 3.5, a <= 5.0], range(7), 7)
    return (code | (np.signbit(y) << 3)).astype(np.uint8)


def engine_formula(x: np.ndarray, g: float | None = None) -> tuple[np.ndarray, np.ndarray]:
    """vLLM's cvt_warp_fp16_to_fp4 in fp32 numpy with IEEE reciprocals: blocks of 16 ->
    (scale bytes [n], codes [n, 16])."""
    xb = x.reshape(-1, 16).astype(np.float32)
    gs = f32(1) if g is None else f32(1) / f32(g)
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        sf = np.max(np.abs(xb), axis=1) * (f32(1) / f32(6))
        if g is not None:
            sf = gs * sf
        s = _e4m3_byte(np.minimum(sf, f32(448)))
        d = E4M3_POS[s] * (f32(1) / gs) if g is not None else E4M3_POS[s]
        out = np.where(s != 0, f32(1) / np.where(s != 0, d, f32(1)), f32(0)).astype(np.float32)
        codes = _e2m1_code(xb * out[:, None])
    nan = np.isnan(xb).any(axis=1)
    return np.where(nan, 0x7F, s).astype(np.uint8), np.where(nan[:, None], 0, codes).astype(np.uint8)


def exact_formula(x: np.ndarray, g: float | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The DeepSeek-V4.1 rule in fp32 numpy: x / g, s = e4m3(clamp(amax / 6, 2^-9, 448)), x / s."""
    xb = x.reshape(-1, 16).astype(np.float32)
    if g is not None:
        xb = xb / f32(g)
    with np.errstate(invalid="ignore"):
        s = _e4m3_byte(np.clip(np.max(np.abs(xb), axis=1) / f32(6), f32(2.0**-9), f32(448)))
        codes = _e2m1_code(xb / E4M3_POS[s][:, None])
    nan = np.isnan(xb).any(axis=1)
    return np.where(nan, 0x7F, s).astype(np.uint8), np.where(nan[:, None], 0, codes).astype(np.uint8)


FORMULA = {"exact": exact_formula, "engine": engine_formula}


def _hard_rows(seed: int) -> torch.Tensor:
    """bf16-valued N(0, 1) rows with the cases that tell the formulas apart mixed in: exact ties
    at every scale mantissa, zero / tiny / huge blocks, NaN and infinities."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(96, 64, generator=g).to(torch.bfloat16).float()
    mids = torch.tensor([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0])
    for i in range(32):  # block 0 of row i: amax 6 * s, ties times s for the 8 mantissas of E4M3 in turn
        s = (1 + (i % 8) / 8) * 2.0 ** (i // 8 - 2)
        x[i, :16] = torch.cat([torch.tensor([6.0]), mids, -mids, torch.tensor([0.0])]) * s
    x[32, :16], x[33, :16], x[34, :16] = 0.0, -0.0, 1e-3 * x[34, :16]
    x[35, :16] *= 1e5
    x[36, 3], x[37, 5], x[38, 7] = float("nan"), float("inf"), float("-inf")
    x[39, :16] = torch.tensor([7.1249995, 3.0, 2.8125] + [0.0] * 13)  # the scale edge
    x[40:48] *= torch.logspace(-12, 3, 8, base=2.0)[:, None]  # subnormal to saturated scales
    return x


@pytest.mark.parametrize("g", [None, 0.25, 3.0, 0.37])
@pytest.mark.parametrize("rounding", F.ROUNDINGS)
def test_both_roundings_match_an_independent_re_implementation(rounding, g):
    x = _hard_rows(1)
    want_s, want_c = FORMULA[rounding](x.numpy(), g)
    codes, scales = F.quantize_nvfp4(x, g, rounding=rounding)
    assert np.array_equal(scales.reshape(-1).numpy(), want_s)
    assert np.array_equal(F.unpack_e2m1(codes).reshape(-1, 16).numpy(), want_c)
    if g in (None, 3.0):  # the Triton twin, bit for bit
        c_t, s_t = F.quantize_nvfp4_triton(x.to(DEVICE), g, rounding=rounding)
        assert torch.equal(c_t.cpu(), codes) and torch.equal(s_t.cpu(), scales)


@pytest.mark.parametrize("rounding", F.ROUNDINGS)
@settings(max_examples=6, deadline=None)
@given(x=arrays("float32", (3, 32), elements=st.floats(-3000, 3000, width=32)),
       g=st.one_of(st.none(), st.floats(2.0**-10, 2.0**10, width=32)),
       mult=st.sampled_from([1.0, 2.0**-12, 1.875, 1e4]))
def test_triton_matches_torch_in_each_rounding(rounding, x, g, mult):
    x = torch.from_numpy(x) * mult
    a = F.quantize_nvfp4(x, g, rounding=rounding)
    b = F.quantize_nvfp4_triton(x.to(DEVICE), g, rounding=rounding)
    assert torch.equal(a[0], b[0].cpu()) and torch.equal(a[1], b[1].cpu())


def test_bad_rounding_and_global_scale_are_refused():
    x = torch.ones(2, 16, device=DEVICE)
    for q in (F.quantize_nvfp4, F.quantize_nvfp4_triton):
        with pytest.raises(ValueError, match="rounding must be one of"):
            q(x, rounding="nearest")
    for g, err in ((0.0, ValueError), (-1.0, ValueError), (float("inf"), ValueError), ("2", TypeError),
                   (torch.ones(2), ValueError)):
        with pytest.raises(err, match="global_scale"):
            F.quantize_nvfp4_triton(x, g)


def test_the_engines_codes_dequantize_like_ours():
    """Engine-rounded codes are valid NVFP4: the same dequantizer reads them, each element within
    one code step (and never further from x than the other rounding's neighbour)."""
    x = _hard_rows(2)[48:]
    c_e, s_e = F.quantize_nvfp4(x, rounding="engine")
    c_x, s_x = F.quantize_nvfp4(x)
    assert torch.equal(s_e, s_x)  # bf16 inputs never reach the scale edge
    d_e, d_x = F.dequantize_nvfp4(c_e, s_e), F.dequantize_nvfp4(c_x, s_x)
    step = F.e4m3_bits_to_float(s_x).repeat_interleave(16, dim=-1) * 2  # the widest E2M1 gap is 2 (4 -> 6)
    assert ((d_e - d_x).abs() <= step).all()
    assert ((d_e - x).abs() - (d_x - x).abs()).max() <= 0  # where they differ, x sat exactly between


# --------------------------------------------------------------------- how often the engines' rounding differs


def tie_share(x: torch.Tensor) -> dict[str, float]:
    """On ``x``: the share of elements on an exact E2M1 midpoint of their block's scale, and the
    share of all elements and of those ties whose engine code differs from the exact one."""
    c_x, s_x = F.quantize_nvfp4(x)
    c_e, s_e = F.quantize_nvfp4(x, rounding="engine")
    y = x.reshape(*x.shape[:-1], -1, 16) / F.e4m3_bits_to_float(s_x)[..., None]
    tie = torch.zeros_like(y, dtype=torch.bool)
    for m in (0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0):
        tie |= y.abs() == m
    tie = tie.flatten(-2)
    moved = F.unpack_e2m1(c_x) != F.unpack_e2m1(c_e)
    return {"scales_moved": float((s_x != s_e).float().mean()), "ties": float(tie.float().mean()),
            "moved": float(moved.float().mean()), "moved_of_ties": float((moved & tie).sum() / tie.sum()),
            "moved_off_ties": float((moved & ~tie).sum())}


def test_share_of_exact_ties_the_engines_move():
    """bf16 N(0, 1) (a KV latent as engines store it): ~1.2% of elements are exact ties, and the
    reciprocal moves ~4% of those one code (only under scales with mantissa 1.875): ~0.05% of all
    elements. Nothing off a tie moves, and no scale does. docs/formats.md quotes these numbers."""
    x = torch.randn(1024, 512, generator=torch.Generator().manual_seed(0)).to(torch.bfloat16).float()
    r = tie_share(x)
    assert r["scales_moved"] == 0 and r["moved_off_ties"] == 0
    assert 0.005 < r["ties"] < 0.03
    assert 0.02 < r["moved_of_ties"] < 0.08
    assert 1e-4 < r["moved"] < 1e-3
    assert math.isclose(r["moved"], r["moved_of_ties"] * r["ties"], rel_tol=1e-6)


@pytest.mark.gpu
def test_the_engines_approximate_reciprocal_is_the_ieee_one_where_they_use_it():
    """``rcp.approx.ftz.f32`` (the engines' ``reciprocal_approximate_ftz``) of 6 and of every positive
    E4M3 scale is the correctly rounded reciprocal: without a global scale the engines' kernel computes
    exactly what ``rounding="engine"`` does. Also counts where it is not, over random fp32 values."""
    import triton
    import triton.language as tl

    @triton.jit
    def rcp_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + i, mask=i < n, other=1.0)
        y = tl.inline_asm_elementwise("rcp.approx.ftz.f32 $0, $1;", "=f,f", [x], dtype=tl.float32, is_pure=True,
                                      pack=1)
        tl.store(y_ptr + i, y, mask=i < n)

    def rcp(x: torch.Tensor) -> torch.Tensor:
        y = torch.empty_like(x)
        rcp_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)
        return y

    scales = torch.cat([torch.tensor([6.0]), torch.from_numpy(E4M3_POS[1:])]).to(DEVICE)
    assert torch.equal(rcp(scales), 1.0 / scales)
    r = torch.rand(1 << 22, generator=torch.Generator().manual_seed(0)).to(DEVICE) + 1.0  # [1, 2): every binade alike
    off = (rcp(r) != 1.0 / r).float().mean().item()
    print(f"rcp.approx.ftz.f32 differs from the IEEE reciprocal on {off:.2%} of fp32 values in [1, 2)")
