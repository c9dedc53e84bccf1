"""Block-scaled low-precision formats: NVFP4, MXFP4 and FP8 E4M3 + UE8M0, in PyTorch and Triton.

Formats:

- ``nvfp4``: E2M1 codes, two per byte (element 2i in the LOW nibble), one FP8 E4M3 scale
  per 16 elements, stored as its uint8 bit pattern. DeepSeek-V4.1 rule (no global scale):
  ``s = e4m3(clamp(amax/6, 2^-9, 448))``, ``code = RNE_e2m1(x / s)`` (ties to even,
  saturating at 6). Optional per-tensor fp32 ``global_scale`` g: ``x = e2m1 * s * g``.
  ``rounding="engine"`` reproduces the serving engines' quantizers (vLLM, FlashInfer,
  TensorRT-LLM) bit for bit: ``s = e4m3(min(gs * (amax * fl(1/6)), 448))`` with no lower
  clamp (a zero scale zeroes the block), ``code = RNE_e2m1(x * fl(1 / (s * fl(1/gs))))``,
  gs = fl(1/g) (1 without g). docs/formats.md compares the two.
- ``mxfp4``: the same E2M1 packing with one UE8M0 scale (a power of two, byte = exponent +
  127) per 32 elements. Scale rule (DeepGEMM's ``ceil_to_ue8m0``): ``2^ceil(log2(amax/6))``,
  so no element saturates.
- ``fp8``: FP8 E4M3 values (``torch.float8_e4m3fn``) with one UE8M0 scale per 32:
  ``2^ceil(log2(amax/448))``.

UE8M0 byte 0 is 2^-127 and 255 is NaN (OCP MX); E4M3 0x7F/0xFF are NaN; E2M1 has no
inf/NaN. All-zero blocks get the smallest scale (2^-9 for nvfp4, 2^-127 for UE8M0).

Triton helpers (``@triton.jit``, callable from any kernel; all decode exactly, by integer
bit manipulation then a bitcast, so they agree bit for bit with the PyTorch functions on
the interpreter, sm_90 and sm_100):

- ``e2m1_to_f32(code)``: int tensor of 4-bit codes (0..15, any int dtype) -> fp32.
- ``e4m3_bits_to_f32(b)``: uint8 E4M3 bit patterns -> fp32 (0x7F/0xFF -> NaN).
- ``ue8m0_to_f32(s)``: uint8 UE8M0 exponents -> fp32 (0 -> 2^-127, 255 -> NaN).
- ``e2m1x2_unpack_f32(packed)``: ``[R, C]`` uint8 -> ``[R, 2C]`` fp32, low nibble first.
- ``nvfp4_tile_to_f32(packed, scales)``: ``[R, C]`` u8 + ``[R, C//8]`` E4M3 bits -> ``[R, 2C]``.
- ``mxfp4_tile_to_f32(packed, scales)``: ``[R, C]`` u8 + ``[R, C//16]`` UE8M0 -> ``[R, 2C]``.
- ``fp8_ue8m0_tile_to_f32(vals, scales)``: ``[R, D]`` fp8e4nv (or any float) + ``[R, D//32]``.
- ``nvfp4_tile_to_f16_scaled(packed, scales)``: fast path, ``[R, 2C]`` fp16 equal to the
  exact value times 2^-14 (every product of an E2M1 code and an E4M3 scale is a multiple
  of 2^-10 below 2688, so after the 2^-14 shift it is an exact fp16, subnormals included);
  callers fold 2^14 back into a later fp32 multiply. A few integer ops a pair of elements
  and one fp16 multiply an element, against ~8 ops an element for the generic decode.
- ``nvfp4_quantize_tile(x)``: ``[R, D]`` fp32 -> (``[R, D//2]`` u8 codes, ``[R, D//16]`` E4M3
  bits), the DeepSeek-V4.1 rule with ``div_rn`` (Triton's default fast division rounds
  ties the wrong way); ``nvfp4_quantize_tile_g(x, g, rg, HAS_G, ENGINE)`` with a global
  scale and either rounding.
"""
from __future__ import annotations

from typing import Any

import torch
import triton
import triton.language as tl

from kernel_templates._host import cdiv

__all__ = [
    "E2M1_VALUES", "NVFP4_BLOCK", "MX_BLOCK", "SCALE_MIN_NVFP4",
    "quantize_nvfp4", "dequantize_nvfp4", "quantize_mxfp4", "dequantize_mxfp4",
    "quantize_fp8_ue8m0", "dequantize_fp8_ue8m0", "e2m1_encode", "e2m1_decode",
    "pack_e2m1", "unpack_e2m1", "e4m3_bits_to_float", "ue8m0_to_float",
    "dequantize_triton", "quantize_nvfp4_triton",
    "e2m1_to_f32", "e4m3_bits_to_f32", "ue8m0_to_f32", "e2m1x2_unpack_f32", "nvfp4_tile_to_f32",
    "mxfp4_tile_to_f32", "fp8_ue8m0_tile_to_f32", "nvfp4_tile_to_f16_scaled", "nvfp4_quantize_tile",
    "nvfp4_quantize_tile_g", "ROUNDINGS", "RCP6",
]

NVFP4_BLOCK = 16
MX_BLOCK = 32
SCALE_MIN_NVFP4 = 2.0 ** -9  # smallest positive E4M3 (a subnormal): scales never round to zero
E4M3_MAX = 448.0
E2M1_MAX = 6.0
E2M1_VALUES = torch.tensor([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0,
                            -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0], dtype=torch.float32)
F16_SHIFT = 2.0 ** 14  # nvfp4_tile_to_f16_scaled returns value / F16_SHIFT
ROUNDINGS = ("exact", "engine")
"""``quantize_nvfp4`` roundings: ``exact`` divides by the scale (the DeepSeek-V4.1 rule);
``engine`` multiplies by its fp32 reciprocal, as vLLM / FlashInfer / TensorRT-LLM do."""
RCP6 = 0.1666666716337204  # fl32(1/6) (0x3E2AAAAB): the engines' rcp.approx.ftz(6.0f)


# --------------------------------------------------------------------------- PyTorch


def e2m1_encode(y: torch.Tensor) -> torch.Tensor:
    """fp32 -> E2M1 codes (uint8, 0..15), round to nearest even, saturating at +-6.

    The sign of zero is kept (``-0.1`` -> code 8), as the hardware conversion does.
    """
    a = y.float().abs()
    # Midpoints of 0, .5, 1, 1.5, 2, 3, 4, 6: ties go to the even code (mantissa bit 0),
    # hence '>' where the lower neighbour is even and '>=' where the upper one is.
    code = ((a > 0.25).to(torch.uint8) + (a >= 0.75) + (a > 1.25) + (a >= 1.75)
            + (a > 2.5) + (a >= 3.5) + (a > 5.0)).to(torch.uint8)
    return code | (torch.signbit(y).to(torch.uint8) << 3)


def e2m1_decode(code: torch.Tensor) -> torch.Tensor:
    """E2M1 codes (any int dtype, 0..15) -> fp32."""
    return E2M1_VALUES.to(code.device)[code.long()]


def pack_e2m1(codes: torch.Tensor) -> torch.Tensor:
    """``[..., D]`` codes -> ``[..., D/2]`` uint8, element 2i in the low nibble."""
    c = codes.to(torch.uint8)
    return c[..., 0::2] | (c[..., 1::2] << 4)


def unpack_e2m1(packed: torch.Tensor) -> torch.Tensor:
    """``[..., C]`` uint8 -> ``[..., 2C]`` codes, inverse of :func:`pack_e2m1`."""
    return torch.stack([packed & 15, packed >> 4], dim=-1).flatten(-2)


def e4m3_bits_to_float(bits: torch.Tensor) -> torch.Tensor:
    """uint8 E4M3 bit patterns -> fp32 (exact; 0x7F and 0xFF are NaN)."""
    return bits.to(torch.uint8).view(torch.float8_e4m3fn).float()


def ue8m0_to_float(s: torch.Tensor) -> torch.Tensor:
    """uint8 UE8M0 exponents -> fp32 powers of two: 0 -> 2^-127, 255 -> NaN (OCP MX)."""
    b = s.to(torch.int32)
    bits = torch.where(b == 0, torch.full_like(b, 0x00400000), b << 23)
    bits = torch.where(b == 255, torch.full_like(b, 0x7FC00000), bits)
    return bits.view(torch.float32)


def _ceil_log2_ue8m0(v: torch.Tensor) -> torch.Tensor:
    """UE8M0 byte of ``2^ceil(log2(v))`` for v >= 0, computed exactly, clamped to [0, 254]."""
    m, e = torch.frexp(v.float())  # v = m * 2^e, m in [0.5, 1)
    k = torch.where(m == 0.5, e - 1, e)  # exact powers of two do not round up
    k = torch.where(v > 0, k, torch.full_like(k, -127))
    return (k.clamp(-127, 127) + 127).to(torch.uint8)


def _real_tensor(name: str, x: Any) -> None:
    """TypeError / ValueError for what is no real tensor of at least one dimension."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if x.is_complex() or x.dtype == torch.bool:
        raise TypeError(f"{name} must be a real number tensor, got {x.dtype}")
    if x.dim() < 1:
        raise ValueError(f"{name} must have at least one dimension (the quantized rows), got a 0-d tensor")


def _blocks(x: torch.Tensor, block: int) -> torch.Tensor:
    _real_tensor("x", x)
    if x.shape[-1] % block:
        raise ValueError(f"last dimension {x.shape[-1]} must be a multiple of {block}")
    return x.float().reshape(*x.shape[:-1], x.shape[-1] // block, block)


def _check_rounding(rounding: Any) -> None:
    if rounding not in ROUNDINGS:
        raise ValueError(f"rounding must be one of {ROUNDINGS}, got {rounding!r}")


def quantize_nvfp4(x: torch.Tensor, global_scale: float | torch.Tensor | None = None, *,
                   rounding: str = "exact") -> tuple[torch.Tensor, torch.Tensor]:
    """Quantize ``x [..., D]`` (D % 16 == 0) to NVFP4.

    Returns ``codes [..., D/2] uint8`` (element 2i in the low nibble) and
    ``scales [..., D/16] uint8`` (E4M3 bit patterns). ``rounding="exact"``:
    ``s = e4m3(clamp(amax/6, 2^-9, 448))``, ``code = RNE_e2m1(x / s)``; with ``global_scale``
    g, ``x / g`` is quantized instead (dequantize with the same g). ``rounding="engine"``: the
    serving engines' arithmetic, ``s = e4m3(min(gs * (amax * fl(1/6)), 448))`` (a zero scale
    gives zero codes), ``code = RNE_e2m1(x * fl(1 / (s * fl(1/gs))))`` with gs = fl(1/g), 1
    without g. Both: a block holding a NaN gets scale 0x7F (NaN) and codes 0; +-inf saturates
    to +-6 under scale 448. docs/formats.md has the details.
    """
    _check_rounding(rounding)
    xb = _blocks(x, NVFP4_BLOCK)
    g = None if global_scale is None else torch.as_tensor(global_scale, dtype=torch.float32, device=x.device)
    if rounding == "exact":
        if g is not None:
            xb = xb / g
        amax = xb.abs().amax(dim=-1, keepdim=True)
        s8 = (amax / E2M1_MAX).clamp(SCALE_MIN_NVFP4, E4M3_MAX).to(torch.float8_e4m3fn).view(torch.uint8)
        codes = e2m1_encode(xb / e4m3_bits_to_float(s8))
    else:
        sf = xb.abs().amax(dim=-1, keepdim=True) * torch.tensor(RCP6, dtype=torch.float32, device=x.device)
        if g is not None:
            gs = 1.0 / g
            sf = gs * sf
        s8 = sf.clamp(max=E4M3_MAX).to(torch.float8_e4m3fn).view(torch.uint8)
        s = e4m3_bits_to_float(s8)
        d = s * (1.0 / gs) if g is not None else s
        codes = e2m1_encode(xb * torch.where(s != 0, 1.0 / d, torch.zeros_like(d)))
    nan = xb.isnan().any(dim=-1, keepdim=True)  # a block holding a NaN: scale NaN (0x7F), codes 0
    s8, codes = torch.where(nan, 0x7F, s8).to(torch.uint8), torch.where(nan, 0, codes).to(torch.uint8)
    return pack_e2m1(codes.flatten(-2)), s8.squeeze(-1)


def _check_codes(codes: Any, scales: Any, block: int) -> None:
    """TypeError / ValueError unless ``codes [..., D/2]`` and ``scales [..., D/block]`` are uint8 tensors of
    matching rows and D a multiple of ``block``."""
    for name, t in (("codes", codes), ("scales", scales)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
        if t.dtype != torch.uint8 or t.dim() < 1:
            raise ValueError(f"{name} must be uint8 [..., n], got {t.dtype} {tuple(t.shape)}")
    d = 2 * codes.shape[-1]
    if d % block or tuple(scales.shape) != (*codes.shape[:-1], d // block):
        raise ValueError(f"codes {tuple(codes.shape)} hold rows of {d} values: scales must be "
                         f"{(*codes.shape[:-1], d // block) if d % block == 0 else '...'} "
                         f"(one a {block} values, D a multiple of {block}), got {tuple(scales.shape)}")


def dequantize_nvfp4(codes: torch.Tensor, scales: torch.Tensor, global_scale: float | torch.Tensor | None = None,
                     dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """NVFP4 codes ``[..., D/2]`` + E4M3 scale bits ``[..., D/16]`` -> ``[..., D]`` of ``dtype``.

    ``e2m1 * s`` is exact in fp32 and in bf16; ``* g`` (if given) rounds once in fp32.
    """
    _check_codes(codes, scales, NVFP4_BLOCK)
    v = e2m1_decode(unpack_e2m1(codes))
    v = (v.reshape(*v.shape[:-1], -1, NVFP4_BLOCK) * e4m3_bits_to_float(scales)[..., None]).flatten(-2)
    if global_scale is not None:
        v = v * torch.as_tensor(global_scale, dtype=torch.float32, device=v.device)
    return v.to(dtype)


def quantize_mxfp4(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Quantize ``x [..., D]`` (D % 32 == 0) to MXFP4: ``codes [..., D/2] uint8`` and
    ``scales [..., D/32] uint8`` (UE8M0, ``2^ceil(log2(amax/6))``)."""
    xb = _blocks(x, MX_BLOCK)
    s = _ceil_log2_ue8m0(xb.abs().amax(dim=-1, keepdim=True) / E2M1_MAX)
    codes = e2m1_encode(xb / ue8m0_to_float(s))
    return pack_e2m1(codes.flatten(-2)), s.squeeze(-1)


def dequantize_mxfp4(codes: torch.Tensor, scales: torch.Tensor, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """MXFP4 codes ``[..., D/2]`` + UE8M0 scales ``[..., D/32]`` -> ``[..., D]`` of ``dtype``."""
    _check_codes(codes, scales, MX_BLOCK)
    v = e2m1_decode(unpack_e2m1(codes))
    return (v.reshape(*v.shape[:-1], -1, MX_BLOCK) * ue8m0_to_float(scales)[..., None]).flatten(-2).to(dtype)


def quantize_fp8_ue8m0(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Quantize ``x [..., D]`` (D % 32 == 0) to FP8 E4M3 ``[..., D] float8_e4m3fn`` with
    UE8M0 scales ``[..., D/32] uint8`` (``2^ceil(log2(amax/448))``, DeepGEMM's rule)."""
    xb = _blocks(x, MX_BLOCK)
    s = _ceil_log2_ue8m0(xb.abs().amax(dim=-1, keepdim=True) / E4M3_MAX)
    # Dividing by a power of two is exact; the clamp only guards the cast (448 is the max).
    y = (xb / ue8m0_to_float(s)).clamp(-E4M3_MAX, E4M3_MAX)
    return y.flatten(-2).to(torch.float8_e4m3fn), s.squeeze(-1)


def dequantize_fp8_ue8m0(codes: torch.Tensor, scales: torch.Tensor, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """FP8 E4M3 ``[..., D]`` (float8_e4m3fn or its uint8 bits) + UE8M0 ``[..., D/32]`` -> ``dtype``."""
    v = e4m3_bits_to_float(codes.view(torch.uint8)) if codes.dtype != torch.float8_e4m3fn else codes.float()
    return (v.reshape(*v.shape[:-1], -1, MX_BLOCK) * ue8m0_to_float(scales)[..., None]).flatten(-2).to(dtype)


# --------------------------------------------------------------------------- Triton helpers


@triton.jit
def e2m1_to_f32(code):
    """4-bit E2M1 codes (int tensor, 0..15) -> fp32, exactly: bit 3 sign, bits 2-1 exponent, bit 0 mantissa."""
    c = code.to(tl.int32)
    e = (c >> 1) & 3
    m = c & 1
    # normal: 2^(e-1) * (1 + m/2) -> fp32 exponent field 126 + e, mantissa top bit m;
    # e == 0: 0.5 * m -> 0.5 (0x3F000000) or 0.
    bits = tl.where(e == 0, m * 0x3F000000, ((126 + e) << 23) | (m << 22))
    bits = bits | ((c & 8) << 28)
    return bits.to(tl.float32, bitcast=True)


@triton.jit
def e4m3_bits_to_f32(b):
    """uint8 E4M3 bit patterns -> fp32, exactly (0x7F / 0xFF -> NaN)."""
    c = b.to(tl.int32) & 0xFF
    e = (c >> 3) & 15
    m = c & 7
    normal = (((e + 120) << 23) | (m << 20)).to(tl.float32, bitcast=True)
    sub = m.to(tl.float32) * 0.001953125  # m * 2^-9: exact
    mag = tl.where(e == 0, sub, normal)
    mag = tl.where((c & 0x7F) == 0x7F, float("nan"), mag)
    return tl.where((c & 0x80) != 0, -mag, mag)


@triton.jit
def ue8m0_to_f32(s):
    """uint8 UE8M0 exponents -> fp32 2^(s-127), exactly (0 -> 2^-127 subnormal, 255 -> NaN)."""
    c = s.to(tl.int32) & 0xFF
    bits = tl.where(c == 0, 0x00400000, c << 23)
    bits = tl.where(c == 255, 0x7FC00000, bits)
    return bits.to(tl.float32, bitcast=True)


@triton.jit
def e2m1x2_unpack_f32(packed):
    """``[R, C]`` uint8 (two E2M1 codes each, low nibble first) -> ``[R, 2C]`` fp32."""
    p = packed.to(tl.int32) & 0xFF
    lo = e2m1_to_f32(p & 15)
    hi = e2m1_to_f32(p >> 4)
    R: tl.constexpr = packed.shape[0]
    C: tl.constexpr = packed.shape[1]
    return tl.reshape(tl.join(lo, hi), (R, 2 * C))


@triton.jit
def _apply_block_scale(vals, scale, GROUP: tl.constexpr):
    R: tl.constexpr = vals.shape[0]
    N: tl.constexpr = vals.shape[1]
    v = tl.reshape(vals, (R, N // GROUP, GROUP)) * scale[:, :, None]
    return tl.reshape(v, (R, N))


@triton.jit
def nvfp4_tile_to_f32(packed, scales):
    """NVFP4 tile: ``[R, C]`` uint8 codes + ``[R, C//8]`` E4M3 scale bits -> ``[R, 2C]`` fp32 (exact)."""
    return _apply_block_scale(e2m1x2_unpack_f32(packed), e4m3_bits_to_f32(scales), 16)


@triton.jit
def mxfp4_tile_to_f32(packed, scales):
    """MXFP4 tile: ``[R, C]`` uint8 codes + ``[R, C//16]`` UE8M0 scales -> ``[R, 2C]`` fp32 (exact)."""
    return _apply_block_scale(e2m1x2_unpack_f32(packed), ue8m0_to_f32(scales), 32)


@triton.jit
def fp8_ue8m0_tile_to_f32(vals, scales):
    """FP8 + UE8M0 tile: ``[R, D]`` fp8e4nv (or any float) + ``[R, D//32]`` uint8 -> ``[R, D]`` fp32."""
    return _apply_block_scale(vals.to(tl.float32), ue8m0_to_f32(scales), 32)


@triton.jit
def nvfp4_tile_to_f16_scaled(packed, scales):
    """NVFP4 tile -> ``[R, 2C]`` fp16 equal to the exact value * 2^-14 (see module docstring).

    An E2M1 nibble ``s e1 e0 m`` placed at fp16 bits 15 and 11..9 reads as e2m1 * 2^-14
    (e == 0 lands on fp16 subnormals, which are exact), so no per-element branch is needed.
    The placement runs on 32-bit words that hold both nibbles of a byte: ``t = x * 0x1001``
    puts the low nibble at bits 0-3 and the high one at bits 16-19, then two shifted masks
    make an fp16 pair per word (one multiply, two shifts, two logic ops per two elements).

    Tried and dropped (measured A/B on an H200, in nvfp4 decode attention): the block scales
    by the hardware E4M3 -> fp16 conversion and each pair scaled by one ``mul.rn.f16x2``:
    26% fewer SASS instructions per tile but no faster at 16 heads and 42% slower at 64 (more
    spills in the loop); that kernel is not issue-bound.
    """
    t = (packed.to(tl.uint32) & 0xFF) * 0x1001
    w = ((t << 9) & 0x0E000E00) | ((t << 12) & 0x80008000)
    R: tl.constexpr = packed.shape[0]
    C: tl.constexpr = packed.shape[1]
    v = tl.reshape(tl.join(w.to(tl.uint16), (w >> 16).to(tl.uint16)), (R, 2 * C)).to(tl.float16, bitcast=True)
    s = e4m3_bits_to_f32(scales).to(tl.float16)  # every E4M3 value is an exact fp16
    return tl.reshape(tl.reshape(v, (R, C // 8, 16)) * s[:, :, None], (R, 2 * C))


@triton.jit
def _e2m1_encode_f32(y):
    a = tl.abs(y)
    code = ((a > 0.25).to(tl.int32) + (a >= 0.75).to(tl.int32) + (a > 1.25).to(tl.int32)
            + (a >= 1.75).to(tl.int32) + (a > 2.5).to(tl.int32) + (a >= 3.5).to(tl.int32)
            + (a > 5.0).to(tl.int32))
    sign = (y.to(tl.int32, bitcast=True) >> 31) & 1
    return code | (sign << 3)


@triton.jit
def _f32_to_e4m3_bits(s):
    """Positive fp32 in [2^-9, 448] -> E4M3 bits (int32), round to nearest even.

    Done on integers because the interpreter's fp8 cast does not round ties to even.
    """
    bits = s.to(tl.int32, bitcast=True)
    # normal range: keep 3 mantissa bits, RNE on the 20 dropped ones; a carry bumps the exponent
    r = (bits + 0x7FFFF + ((bits >> 20) & 1)) >> 20
    normal = r - ((127 - 7) << 3)
    # subnormal range (< 2^-6): m * 2^-9 with m = RNE(s * 512); m == 8 is 2^-6, bits 0x08 too
    y = s * 512.0
    sub = ((y + 8388608.0) - 8388608.0).to(tl.int32)  # adding 2^23 rounds to an integer, ties to even
    return tl.where(s < 0.015625, sub, normal)


@triton.jit
def nvfp4_quantize_tile(x):
    """``[R, D]`` fp32 -> (``[R, D//2]`` uint8 codes, ``[R, D//16]`` uint8 E4M3 scales), the V4.1 rule."""
    return nvfp4_quantize_tile_g(x, 1.0, 1.0, False, False)


@triton.jit
def nvfp4_quantize_tile_g(x, g, rg, HAS_G: tl.constexpr, ENGINE: tl.constexpr):
    """``nvfp4_quantize_tile`` with a global scale and the rounding of ``quantize_nvfp4``.

    ``ENGINE`` False: ``g`` divides ``x`` first (``HAS_G``), then the V4.1 rule. ``ENGINE`` True:
    ``g`` is the engines' multiplier gs and ``rg`` its fp32 reciprocal; the scale's E4M3 rounding
    takes ``gs * (amax * fl(1/6))`` with no lower clamp, the codes ``x * (1 / (s * rg))``.
    Every product is one fp32 rounding (no add to fuse into an FMA) and the reciprocals use
    ``div_rn``, so the interpreter and the GPU give the PyTorch bits."""
    R: tl.constexpr = x.shape[0]
    D: tl.constexpr = x.shape[1]
    xb = tl.reshape(x, (R, D // 16, 16))
    nan = tl.max((xb != xb).to(tl.int32), axis=2) > 0  # as quantize_nvfp4: a NaN block is scale 0x7F, codes 0
    if ENGINE:
        sf = tl.max(tl.abs(xb), axis=2) * 0.1666666716337204  # RCP6
        if HAS_G:
            sf = g * sf
        s8 = _f32_to_e4m3_bits(tl.minimum(sf, 448.0))
        d = e4m3_bits_to_f32(s8)
        if HAS_G:
            d = d * rg
        zero = s8 == 0  # a zero scale zeroes the block (no 1/0)
        r = tl.where(zero, 0.0, tl.math.div_rn(tl.full(d.shape, 1.0, tl.float32), tl.where(zero, 1.0, d)))
        y = xb * tl.broadcast_to(r[:, :, None], xb.shape)
    else:
        if HAS_G:
            xb = tl.math.div_rn(xb, tl.full(xb.shape, g, tl.float32))
        amax = tl.max(tl.abs(xb), axis=2)
        s = tl.math.div_rn(amax, tl.full(amax.shape, 6.0, tl.float32))
        s = tl.minimum(tl.maximum(s, 0.001953125), 448.0)
        s8 = _f32_to_e4m3_bits(s)
        sf = e4m3_bits_to_f32(s8)
        y = tl.math.div_rn(xb, tl.broadcast_to(sf[:, :, None], xb.shape))
    s8 = tl.where(nan, 0x7F, s8)
    codes = tl.reshape(tl.where(nan[:, :, None], 0, _e2m1_encode_f32(y)), (R, D // 2, 2))
    lo, hi = tl.split(codes)
    return (lo | (hi << 4)).to(tl.uint8), s8.to(tl.uint8)


# Row-wise kernels over 2-D views, used by the tests and by users who dequantize or
# quantize caches on the GPU.

_FMT_NVFP4, _FMT_MXFP4, _FMT_FP8 = 0, 1, 2


@triton.jit
def _dequant_rows_kernel(codes_ptr, scales_ptr, out_ptr, rows, g,
                         stride_c, stride_s, stride_o,
                         D: tl.constexpr, FMT: tl.constexpr, BLOCK_R: tl.constexpr, HAS_G: tl.constexpr):
    pid = tl.program_id(0)
    r = pid * BLOCK_R + tl.arange(0, BLOCK_R)
    rm = r < rows
    if FMT == 2:
        NS: tl.constexpr = D // 32
        dc = tl.arange(0, D)
        ds = tl.arange(0, NS)
        c = tl.load(codes_ptr + r[:, None] * stride_c + dc[None, :], mask=rm[:, None])  # masked rows unused
        s = tl.load(scales_ptr + r[:, None] * stride_s + ds[None, :], mask=rm[:, None], other=127)
        v = fp8_ue8m0_tile_to_f32(c, s)
    else:
        NS: tl.constexpr = D // 16 if FMT == 0 else D // 32
        dc = tl.arange(0, D // 2)
        ds = tl.arange(0, NS)
        c = tl.load(codes_ptr + r[:, None] * stride_c + dc[None, :], mask=rm[:, None], other=0)
        s = tl.load(scales_ptr + r[:, None] * stride_s + ds[None, :], mask=rm[:, None], other=0)
        if FMT == 0:
            v = nvfp4_tile_to_f32(c, s)
        else:
            v = mxfp4_tile_to_f32(c, s)
    if HAS_G:
        v = v * g
    do = tl.arange(0, D)
    tl.store(out_ptr + r[:, None] * stride_o + do[None, :], v, mask=rm[:, None])


@triton.jit
def _dequant_f16_rows_kernel(codes_ptr, scales_ptr, out_ptr, rows, stride_c, stride_s, stride_o,
                             D: tl.constexpr, BLOCK_R: tl.constexpr):
    pid = tl.program_id(0)
    r = pid * BLOCK_R + tl.arange(0, BLOCK_R)
    rm = r < rows
    c = tl.load(codes_ptr + r[:, None] * stride_c + tl.arange(0, D // 2)[None, :], mask=rm[:, None], other=0)
    s = tl.load(scales_ptr + r[:, None] * stride_s + tl.arange(0, D // 16)[None, :], mask=rm[:, None], other=0)
    v = nvfp4_tile_to_f16_scaled(c, s)
    tl.store(out_ptr + r[:, None] * stride_o + tl.arange(0, D)[None, :], v, mask=rm[:, None])


@triton.jit
def _quant_rows_kernel(x_ptr, codes_ptr, scales_ptr, rows, g, rg, stride_x, stride_c, stride_s,
                       D: tl.constexpr, BLOCK_R: tl.constexpr, HAS_G: tl.constexpr, ENGINE: tl.constexpr):
    pid = tl.program_id(0)
    r = pid * BLOCK_R + tl.arange(0, BLOCK_R)
    rm = r < rows
    x = tl.load(x_ptr + r[:, None] * stride_x + tl.arange(0, D)[None, :], mask=rm[:, None], other=0.0)
    codes, scales = nvfp4_quantize_tile_g(x.to(tl.float32), g, rg, HAS_G, ENGINE)
    tl.store(codes_ptr + r[:, None] * stride_c + tl.arange(0, D // 2)[None, :], codes, mask=rm[:, None])
    tl.store(scales_ptr + r[:, None] * stride_s + tl.arange(0, D // 16)[None, :], scales, mask=rm[:, None])


def _rows(t: torch.Tensor) -> torch.Tensor:
    return t.reshape(-1, t.shape[-1]).contiguous()


def dequantize_triton(fmt: str, codes: torch.Tensor, scales: torch.Tensor,
                      global_scale: float | None = None, *, f16_scaled: bool = False) -> torch.Tensor:
    """Dequantize with the Triton helpers to fp32 (``fmt`` in nvfp4, mxfp4, fp8).

    D must be a power of two (a Triton block). ``f16_scaled`` (nvfp4 only, no global
    scale) returns the fp16 fast-path values, i.e. the exact values times 2^-14.
    """
    fmts = {"nvfp4": _FMT_NVFP4, "mxfp4": _FMT_MXFP4, "fp8": _FMT_FP8}
    if fmt not in fmts:
        raise ValueError(f"fmt must be one of {sorted(fmts)}, got {fmt!r}")
    _real_tensor("codes", codes)
    _real_tensor("scales", scales)
    ok = (torch.uint8, torch.float8_e4m3fn) if fmt == "fp8" else (torch.uint8,)
    if codes.dtype not in ok:
        raise TypeError(f"codes must be {' or '.join(map(str, ok))} for {fmt}, got {codes.dtype}")
    if scales.dtype != torch.uint8:
        raise TypeError(f"scales must be uint8 ({'E4M3' if fmt == 'nvfp4' else 'UE8M0'} bits), got {scales.dtype}")
    D = codes.shape[-1] * (1 if fmt == "fp8" else 2)
    blk = NVFP4_BLOCK if fmt == "nvfp4" else MX_BLOCK
    if D < blk or D & (D - 1):
        raise ValueError(f"row length {D} must be a power of two >= {blk}")
    want = (*codes.shape[:-1], D // blk)
    if tuple(scales.shape) != want:
        raise ValueError(f"scales must have shape {list(want)} for codes {list(codes.shape)}, got {list(scales.shape)}")
    c2 = _rows(codes)
    if fmt == "fp8" and c2.dtype == torch.uint8:
        c2 = c2.view(torch.float8_e4m3fn)  # the hardware E4M3 conversion, not the bit decoder
    s2 = _rows(scales)
    rows = c2.shape[0]
    BLOCK_R = 16
    if f16_scaled:
        if fmt != "nvfp4" or global_scale is not None:
            raise ValueError("f16_scaled is only for nvfp4 without a global scale")
        out = torch.empty(rows, D, dtype=torch.float16, device=codes.device)
        _dequant_f16_rows_kernel[(cdiv(rows, BLOCK_R),)](
            c2, s2, out, rows, c2.stride(0), s2.stride(0), out.stride(0), D=D, BLOCK_R=BLOCK_R)
    else:
        out = torch.empty(rows, D, dtype=torch.float32, device=codes.device)
        _dequant_rows_kernel[(cdiv(rows, BLOCK_R),)](
            c2, s2, out, rows, float(global_scale or 1.0), c2.stride(0), s2.stride(0), out.stride(0),
            D=D, FMT=fmts[fmt], BLOCK_R=BLOCK_R, HAS_G=global_scale is not None)
    return out.reshape(*codes.shape[:-1], D)


def _global_scale_value(global_scale: float | torch.Tensor | None) -> float | None:
    """A global scale as a Python float holding an fp32 value (a tensor is read once: a host sync)."""
    if global_scale is None:
        return None
    if isinstance(global_scale, torch.Tensor):
        if global_scale.numel() != 1:
            raise ValueError(f"global_scale must be one number, got a tensor of shape {list(global_scale.shape)}")
        global_scale = global_scale.item()
    if isinstance(global_scale, bool) or not isinstance(global_scale, (int, float)):
        raise TypeError(f"global_scale must be a number, got {type(global_scale).__name__}")
    g = float(torch.tensor(global_scale, dtype=torch.float32))
    if not (g > 0 and g != float("inf")):
        raise ValueError(f"global_scale must be a positive finite number, got {global_scale!r}")
    return g


def quantize_nvfp4_triton(x: torch.Tensor, global_scale: float | torch.Tensor | None = None, *,
                          rounding: str = "exact") -> tuple[torch.Tensor, torch.Tensor]:
    """The Triton quantizer; bit-identical to :func:`quantize_nvfp4` with the same ``global_scale``
    and ``rounding`` (NaN and infinities included). D must be a power of two >= 16."""
    _check_rounding(rounding)
    _real_tensor("x", x)
    D = x.shape[-1]
    if D % 16 or D & (D - 1):
        raise ValueError(f"last dimension {D} must be a power of two >= 16")
    g = _global_scale_value(global_scale)
    engine = rounding == "engine"
    gk, rgk = 1.0, 1.0
    if g is not None:
        if engine:  # the engines' multiplier gs = fl(1/g) and its fp32 reciprocal, as quantize_nvfp4 makes them
            gs = torch.tensor(1.0) / torch.tensor(g, dtype=torch.float32)
            gk, rgk = float(gs), float(torch.tensor(1.0) / gs)
        else:
            gk = g
    x2 = _rows(x.float())
    rows = x2.shape[0]
    codes = torch.empty(rows, D // 2, dtype=torch.uint8, device=x.device)
    scales = torch.empty(rows, D // 16, dtype=torch.uint8, device=x.device)
    BLOCK_R = 16
    if rows:
        _quant_rows_kernel[(cdiv(rows, BLOCK_R),)](x2, codes, scales, rows, gk, rgk, x2.stride(0), codes.stride(0),
                                                   scales.stride(0), D=D, BLOCK_R=BLOCK_R, HAS_G=g is not None,
                                                   ENGINE=engine)
    return codes.reshape(*x.shape[:-1], D // 2), scales.reshape(*x.shape[:-1], D // 16)
