"""NVFP4 / MXFP4 / FP8+UE8M0 formats: known values, round trips, Triton == PyTorch bit for bit."""
from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from kernel_templates import nvfp4 as F

E2M1 = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]


def same_bits(a: torch.Tensor, b: torch.Tensor) -> None:
    """Bit-identical floats, NaN anywhere counted equal to NaN at the same place."""
    assert a.shape == b.shape and a.dtype == b.dtype
    na, nb = torch.isnan(a), torch.isnan(b)
    assert torch.equal(na, nb), "NaN positions differ"
    ib = {torch.float32: torch.int32, torch.float16: torch.int16}[a.dtype]
    ne = (a.view(ib) != b.view(ib)) & ~na
    assert not ne.any(), f"{int(ne.sum())} differ, e.g. {a[ne][:3].tolist()} vs {b[ne][:3].tolist()}"


def rows_f32(draw_shape=(4, 64), lo=-1e3, hi=1e3):
    return arrays("float32", draw_shape, elements=st.floats(lo, hi, width=32, allow_subnormal=False))


# ---------------------------------------------------------------- E2M1 codes


def test_every_e2m1_code_decodes_to_its_value():
    codes = torch.arange(16, dtype=torch.uint8)
    want = torch.tensor(E2M1 + [-v for v in E2M1])
    same_bits(F.e2m1_decode(codes), want)
    assert F.e2m1_decode(torch.tensor([8])).item() == 0.0 and math.copysign(1, F.e2m1_decode(torch.tensor([8])).item()) < 0
    # every representable value encodes back to its own code
    assert torch.equal(F.e2m1_encode(want), codes)


@pytest.mark.parametrize("x, code", [
    (0.25, 0), (0.2500001, 1), (0.75, 2), (0.7499999, 1), (1.25, 2), (1.2500001, 3), (1.75, 4),
    (2.5, 4), (2.5000002, 5), (3.5, 6), (3.4999998, 5), (5.0, 6), (5.0000005, 7),
    (-0.25, 8), (-0.75, 10), (-2.5, 12), (-5.0, 14),
    (6.0, 7), (7.0, 7), (1e30, 7), (float("inf"), 7), (-1e30, 15), (-0.1, 8),
])
def test_e2m1_ties_to_even_and_saturation(x, code):
    assert F.e2m1_encode(torch.tensor([x], dtype=torch.float32)).item() == code


def test_pack_low_nibble_first():
    codes = torch.tensor([[1, 2, 3, 4, 15, 0]], dtype=torch.uint8)
    packed = F.pack_e2m1(codes)
    assert packed.tolist() == [[0x21, 0x43, 0x0F]]
    assert torch.equal(F.unpack_e2m1(packed), codes)


# ---------------------------------------------------------------- NVFP4 scale rule


@pytest.mark.parametrize("amax, scale", [
    (6.0, 1.0),            # exact
    (6.375, 1.0),          # amax/6 = 1.0625: tie between 1.0 and 1.125 -> even (1.0)
    (7.125, 1.25),         # amax/6 = 1.1875: tie between 1.125 and 1.25 -> even (1.25)
    (0.0, 2.0 ** -9),      # all-zero block: the 2^-9 clamp, never a zero scale
    (1e-6, 2.0 ** -9),     # below the clamp
    (6 * 448.0, 448.0),
    (1e6, 448.0),          # saturates at 448, codes at 6
])
def test_nvfp4_scale_rule(amax, scale):
    x = torch.zeros(1, 16)
    x[0, 3] = -amax
    x[0, 7] = amax / 3
    codes, scales = F.quantize_nvfp4(x)
    assert F.e4m3_bits_to_float(scales).item() == scale
    deq = F.dequantize_nvfp4(codes, scales)
    if amax == 0:
        assert not (F.unpack_e2m1(codes) & 7).any() and scales.item() == 0x01  # -0.0 keeps its sign bit
    if amax >= 6 * 448:
        assert deq[0, 3].item() == -6 * 448.0


def test_nvfp4_known_block():
    x = torch.tensor([[0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0]])
    codes, scales = F.quantize_nvfp4(x * 0.25)  # amax 1.5 -> s = 0.25 exactly
    assert scales.item() == 0x28  # E4M3 0.25: exponent 5 (2^-2), mantissa 0
    assert F.unpack_e2m1(codes).tolist() == [list(range(16))]
    assert torch.equal(F.dequantize_nvfp4(codes, scales), x * 0.25)
    assert F.dequantize_nvfp4(codes, scales, dtype=torch.bfloat16).dtype == torch.bfloat16


@settings(max_examples=60, deadline=None)
@given(rows_f32((3, 48), -3000, 3000), st.floats(1e-6, 1e4))
def test_nvfp4_round_trip_properties(x, mult):
    x = torch.from_numpy(x) * mult
    codes, scales = F.quantize_nvfp4(x)
    assert codes.shape == (3, 24) and scales.shape == (3, 3) and codes.dtype == scales.dtype == torch.uint8
    s = F.e4m3_bits_to_float(scales)
    assert (s >= 2.0 ** -9).all() and (s <= 448).all()
    deq = F.dequantize_nvfp4(codes, scales)
    # each element's code is a nearest E2M1 grid point to x / s (within the +-6 saturation)
    y = (x.reshape(3, 3, 16) / s[..., None]).clamp(-6, 6)
    grid = torch.tensor(E2M1 + [-v for v in E2M1[1:]])
    best = (y[..., None] - grid).abs().amin(-1)
    got = (y - deq.reshape(3, 3, 16) / s[..., None]).abs()
    assert (got <= best).all()
    # idempotent where the block scale was not rounded (amax / 6 is an E4M3 value): then
    # quantizing the dequantized values gives the same bits. Where it was rounded the rule
    # is not idempotent (see the next test).
    c2, s2 = F.quantize_nvfp4(deq)
    exact = (x.reshape(3, 3, 16).abs().amax(-1) / 6 == s)
    assert torch.equal(s2[exact], scales[exact])
    deq2 = F.dequantize_nvfp4(c2, s2).reshape(3, 3, 16)
    assert torch.equal(deq2[exact], deq.reshape(3, 3, 16)[exact])
    # bf16 dequantization is exact
    assert torch.equal(F.dequantize_nvfp4(codes, scales, dtype=torch.bfloat16).float(), deq)


def test_nvfp4_requantization_changes_a_rounded_up_scale():
    """Found by hypothesis: amax 0.01758 -> amax / 6 = 1.5 * 2^-9 rounds (to even) up to
    2 * 2^-9; the element's code is then 4 (4.5 -> 4), so the dequantized block's amax / 6
    is 1.33 * 2^-9, which rounds down to 2^-9, and requantizing saturates that element at
    6 * 2^-9. The DeepSeek-V4.1 rule is not idempotent; this pins the behaviour down."""
    x = torch.zeros(1, 16)
    x[0, 0] = 1758 * 1e-5
    codes, scales = F.quantize_nvfp4(x)
    assert scales.item() == 2 and F.unpack_e2m1(codes)[0, 0].item() == 6  # code 6 is E2M1 4.0
    deq = F.dequantize_nvfp4(codes, scales)
    assert deq[0, 0].item() == 4.0 * 2 * 2.0 ** -9
    c2, s2 = F.quantize_nvfp4(deq)
    assert s2.item() == 1 and F.dequantize_nvfp4(c2, s2)[0, 0].item() == 6.0 * 2.0 ** -9


@settings(max_examples=30, deadline=None)
@given(rows_f32((2, 32), -100, 100), st.floats(1e-3, 1e3))
def test_nvfp4_global_scale(x, g):
    x = torch.from_numpy(x)
    codes, scales = F.quantize_nvfp4(x, global_scale=g)
    c0, s0 = F.quantize_nvfp4(x / torch.tensor(g, dtype=torch.float32))
    assert torch.equal(codes, c0) and torch.equal(scales, s0)
    deq = F.dequantize_nvfp4(codes, scales, global_scale=g)
    assert torch.equal(deq, F.dequantize_nvfp4(codes, scales) * torch.tensor(g, dtype=torch.float32))


def test_odd_lengths_rejected():
    with pytest.raises(ValueError, match="multiple of 16"):
        F.quantize_nvfp4(torch.randn(2, 24))
    with pytest.raises(ValueError, match="multiple of 32"):
        F.quantize_mxfp4(torch.randn(2, 48))


# ---------------------------------------------------------------- UE8M0 formats


def test_ue8m0_matches_torch_e8m0():
    b = torch.arange(256, dtype=torch.uint8)
    same_bits(F.ue8m0_to_float(b), b.view(torch.float8_e8m0fnu).float())
    assert F.ue8m0_to_float(torch.tensor([0], dtype=torch.uint8)).item() == 2.0 ** -127


@pytest.mark.parametrize("amax, byte", [(6.0, 127), (6.000001, 128), (3.0, 126), (12.0, 128), (0.0, 0), (1e30, 225)])
def test_mxfp4_scale_rule(amax, byte):
    x = torch.zeros(1, 32)
    x[0, 5] = amax
    _, scales = F.quantize_mxfp4(x)
    assert scales.item() == byte


@pytest.mark.parametrize("amax, byte", [(448.0, 127), (448.1, 128), (224.0, 126), (1.0, 119), (0.0, 0)])
def test_fp8_scale_rule(amax, byte):
    x = torch.zeros(1, 32)
    x[0, 0] = -amax
    codes, scales = F.quantize_fp8_ue8m0(x)
    assert scales.item() == byte and codes.dtype == torch.float8_e4m3fn
    assert F.dequantize_fp8_ue8m0(codes, scales)[0, 0].item() == pytest.approx(-amax, rel=2 ** -4)


@settings(max_examples=40, deadline=None)
@given(rows_f32((2, 64), -1e4, 1e4), st.floats(1e-4, 1e3))
def test_mx_formats_round_trip(x, mult):
    x = torch.from_numpy(x) * mult
    codes, scales = F.quantize_mxfp4(x)
    sc = F.ue8m0_to_float(scales)[..., None]
    y = x.reshape(2, 2, 32) / sc
    assert (y.abs() <= 6).all(), "the ceil rule never saturates"
    deq = F.dequantize_mxfp4(codes, scales).reshape(2, 2, 32)
    grid = torch.tensor(E2M1 + [-v for v in E2M1[1:]])
    assert ((y - deq / sc).abs() <= (y[..., None] - grid).abs().amin(-1)).all()
    c8, s8 = F.quantize_fp8_ue8m0(x)
    d8 = F.dequantize_fp8_ue8m0(c8, s8)
    assert torch.equal(d8, F.dequantize_fp8_ue8m0(c8.view(torch.uint8), s8))
    # relative to the block's amax, plus half the format's smallest step (E4M3 subnormal
    # 2^-9 at the smallest UE8M0 scale 2^-127): float32 denormals below it flush to 0
    bound = x.reshape(2, 2, 32).abs().amax(-1, keepdim=True).expand(2, 2, 32).reshape(2, 64) / 8 + 2.0 ** -137
    assert ((d8 - x).abs() <= bound).all()


# ---------------------------------------------------------------- Triton == PyTorch


@pytest.mark.filterwarnings("ignore:overflow encountered")
def test_triton_decoders_all_bytes():
    allb = torch.arange(256, dtype=torch.uint8)
    # NVFP4: every packed byte under scale 1.0, and every scale byte under codes 0..15
    codes = allb.reshape(32, 8)
    ones = torch.full((32, 1), 0x38, dtype=torch.uint8)
    same_bits(F.dequantize_triton("nvfp4", codes, ones), F.dequantize_nvfp4(codes, ones))
    codes16 = F.pack_e2m1(torch.arange(16, dtype=torch.uint8)).expand(256, 8).contiguous()
    scales = allb.reshape(256, 1)
    same_bits(F.dequantize_triton("nvfp4", codes16, scales), F.dequantize_nvfp4(codes16, scales))
    same_bits(F.dequantize_triton("nvfp4", codes16, scales, global_scale=0.37),
              F.dequantize_nvfp4(codes16, scales, global_scale=0.37))
    # fp16 fast path: exact value times 2^-14 for every code and every finite scale
    finite = scales[(scales & 0x7F) != 0x7F].reshape(-1, 1)
    c_f = codes16[: finite.shape[0]]
    fast = F.dequantize_triton("nvfp4", c_f, finite, f16_scaled=True)
    same_bits(fast.float() * F.F16_SHIFT, F.dequantize_nvfp4(c_f, finite))
    # MXFP4: every UE8M0 byte
    c32 = torch.cat([codes16, codes16], dim=1)
    same_bits(F.dequantize_triton("mxfp4", c32, scales), F.dequantize_mxfp4(c32, scales))
    # FP8: every E4M3 byte under scales 2^0, 2^-127 and 2^127 (and NaN 255)
    e4 = allb.reshape(8, 32).repeat(4, 1)
    s8 = torch.tensor([127, 0, 254, 255] * 8, dtype=torch.uint8).reshape(32, 1)
    same_bits(F.dequantize_triton("fp8", e4, s8), F.dequantize_fp8_ue8m0(e4, s8))


@pytest.mark.parametrize("fmt", ["nvfp4", "mxfp4", "fp8"])
@settings(max_examples=8, deadline=None)
@given(x=rows_f32((5, 64), -500, 500))
def test_triton_dequant_bit_identical(fmt, x):
    x = torch.from_numpy(x)
    q = {"nvfp4": F.quantize_nvfp4, "mxfp4": F.quantize_mxfp4, "fp8": F.quantize_fp8_ue8m0}[fmt]
    dq = {"nvfp4": F.dequantize_nvfp4, "mxfp4": F.dequantize_mxfp4, "fp8": F.dequantize_fp8_ue8m0}[fmt]
    codes, scales = q(x)
    same_bits(F.dequantize_triton(fmt, codes, scales), dq(codes, scales))


@settings(max_examples=10, deadline=None)
@given(x=rows_f32((7, 32), -3000, 3000), mult=st.sampled_from([1.0, 1e-3, 0.5 / 6, 6.375 / 6]))
def test_triton_quantize_bit_identical(x, mult):
    x = torch.from_numpy(x) * mult
    x[0, :16] = 0.0           # an all-zero block
    x[1, :16] = 6.375 * mult  # scale exactly at an E4M3 tie
    x[2, :4] = torch.tensor([0.25, 0.75, 2.5, 5.0])  # E2M1 ties
    x[2, 4:16] = 1.0
    c_t, s_t = F.quantize_nvfp4_triton(x)
    c_r, s_r = F.quantize_nvfp4(x)
    assert torch.equal(s_t, s_r)
    assert torch.equal(c_t, c_r)


def test_triton_quantize_scale_ties_exhaustive():
    # every positive E4M3 value and every midpoint between neighbours (ties, subnormals
    # included) as amax/6: the integer RNE in Triton must match torch's cast
    pos = F.e4m3_bits_to_float(torch.arange(1, 0x7F, dtype=torch.uint8))
    mids = (pos[1:] + pos[:-1]) / 2
    t = torch.cat([pos, mids, mids * (1 + 2.0 ** -20), mids * (1 - 2.0 ** -20)])
    x = torch.zeros(t.numel(), 16)
    x[:, 0] = t * 6
    x[:, 1] = -t * 2.5
    c_t, s_t = F.quantize_nvfp4_triton(x)
    c_r, s_r = F.quantize_nvfp4(x)
    assert torch.equal(s_t, s_r) and torch.equal(c_t, c_r)
