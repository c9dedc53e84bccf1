"""The layer stack's random weights and its caches: what a decode step reads and writes.

Every sequence holds ``context`` tokens, the last of them the one being decoded: the step
writes its entries at position ``context - 1`` (the NVFP4 global KV through
``quantize_nvfp4``, the MXFP4 indexer key, the FP8 SWA window slot) before reading, so steps
are repeatable (a CUDA graph replays the same step). Caches are filled from a pool of at most
64K distinct random entries quantized once and tiled over the pages (as the families'
``make_inputs`` do), so 100+ GB of cache would be built in seconds; pages are shuffled.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import torch

from examples.decode.dims import Dims
from kernel_templates.engram import EngramTable, make_params, zipf_tokens
from kernel_templates.nvfp4 import quantize_fp8_ue8m0, quantize_mxfp4, quantize_nvfp4
from kernel_templates.sparse_mqa import D_INDEX

N_STREAMS = 4
N_MIX = 24
ENGRAM_ROWS, ENGRAM_D = 24, 256
POOL = 65536


@dataclass
class MhcParams:
    """One sublayer's mHC parameters (``fn [24, 4D] fp32``, ``scale [3]``, ``base [24]``, ``norm_w [D]``)."""

    fn: torch.Tensor
    scale: torch.Tensor
    base: torch.Tensor
    norm_w: torch.Tensor

    def args(self) -> tuple[torch.Tensor, ...]:
        return self.fn, self.scale, self.base, self.norm_w


@dataclass
class Layer:
    """One layer: attention sublayer (Engram gate, projections, indexer, sink), MoE sublayer, caches."""

    mhc_attn: MhcParams
    mhc_moe: MhcParams
    wq_a: torch.Tensor      # [D, R] bf16: the shared q latent
    wq_b: torch.Tensor      # [R, H * latent] bf16
    wkv: torch.Tensor       # [D, latent] bf16: the new token's KV latent
    wo_a: torch.Tensor      # [H * latent, R] bf16
    wo_b: torch.Tensor      # [R, D] bf16
    sink: torch.Tensor      # [H] fp32
    wqi: torch.Tensor       # [R, H_I * 128] bf16: indexer queries
    wwi: torch.Tensor       # [D, H_I] fp32: indexer head weights
    wki: torch.Tensor       # [D, 128] bf16: the new token's indexer key
    we: torch.Tensor        # [24 * 256, D] bf16: Engram embeddings -> hidden
    router: torch.Tensor    # [D, E] fp32
    router_bias: torch.Tensor  # [E] fp32
    w13: torch.Tensor       # [E, D, 2F] bf16: gate and up projections
    w2: torch.Tensor        # [E, F, D] bf16
    engram: EngramTable
    engram_params: dict[str, Any]
    kv_codes: torch.Tensor  # [pages, PAGE, latent / 2] uint8 (NVFP4)
    kv_scales: torch.Tensor  # [pages, PAGE, latent / 16] uint8 (E4M3)
    swa_kv: torch.Tensor    # [B, W, latent] float8_e4m3fn
    swa_scales: torch.Tensor  # [B, W, latent / 32] uint8 (UE8M0)
    k_cache: torch.Tensor   # [pages, PAGE, 64] uint8 (MXFP4 indexer keys)
    k_scales: torch.Tensor  # [pages, PAGE, 4] uint8


@dataclass
class Model:
    """The stack, the page table shared by both caches, the sequences' lengths and token history."""

    dims: Dims
    layers: list[Layer]
    block_table: torch.Tensor  # [B, pages per sequence] int32
    seq_lens: torch.Tensor     # [B] int32, all = context
    tokens: torch.Tensor       # [B, 4] int64: the last 4 tokens (the Engram n-grams' lookback), the last decoded now
    X0: torch.Tensor           # [B, 4, D] bf16: the decoded token's residual streams entering layer 0
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def device(self) -> torch.device:
        return self.X0.device

    def close(self) -> None:
        for layer in self.layers:
            layer.engram.close()


def _mhc(D: int, rn) -> MhcParams:
    """As ``kernel_templates.mhc.make_inputs``: mix ~ N(0, 1), comb logits biased to the identity."""
    base = 0.5 * rn(N_MIX)
    base[8:] += torch.eye(4).flatten()
    return MhcParams(rn(N_MIX, 4 * D) / math.sqrt(4 * D), torch.tensor([0.8, 1.1, 0.5]) * (1 + 0.1 * rn(3)), base,
                     (1 + 0.1 * rn(D)).to(torch.bfloat16))


def _pooled(n_rows: int, width: int, g: torch.Generator, device: torch.device, quantize) -> tuple[Any, torch.Tensor]:
    """``quantize`` of ``min(n_rows, POOL)`` N(0, 1) rows, and ``n_rows`` picks among them."""
    n_pool = min(n_rows, POOL)
    parts = quantize(torch.randn(n_pool, width, generator=g).to(device))
    pick = torch.randint(0, n_pool, (n_rows,), generator=g).to(device)
    return parts, pick


def build(dims: Dims, device: str | torch.device, seed: int = 0) -> Model:
    """Random weights (scaled so activations stay O(1)) and filled caches for ``dims`` on ``device``."""
    problems = dims.problems()
    if problems:
        raise ValueError("; ".join(problems))
    dev = torch.device(device)
    g = torch.Generator().manual_seed(seed)

    def rn(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=g)

    def w(*shape: int, fan_in: int | None = None, dtype=torch.bfloat16) -> torch.Tensor:
        # generated on the device (a 384-expert layer is ~1.5 GB): seeded from the CPU generator
        gd = torch.Generator(device=dev).manual_seed(int(torch.randint(0, 2**62, (1,), generator=g)))
        t = torch.randn(*shape, generator=gd, device=dev, dtype=torch.float32)
        return (t * (fan_in or shape[-2]) ** -0.5).to(dtype)

    d = dims
    B, D, H, C, R = d.batch, d.hidden, d.heads, d.latent, d.rank
    pages_per_seq = -(-d.context // d.page)
    n_pages = B * pages_per_seq
    n_rows = n_pages * d.page
    block_table = torch.randperm(n_pages, generator=g).to(torch.int32).view(B, pages_per_seq).to(dev)
    layers = []
    for li in range(d.layers):
        (kc, ks), pick = _pooled(n_rows, C, g, dev, quantize_nvfp4)
        (ic, iscale), ipick = _pooled(n_rows, D_INDEX, g, dev, quantize_mxfp4)
        swa_kv, swa_scales = quantize_fp8_ue8m0(rn(B, d.swa, C).to(dev))
        table = EngramTable(d.engram_rows, "hbm", dev).fill_random_(seed * 1000 + li)
        layers.append(Layer(
            mhc_attn=MhcParams(*(t.to(dev) for t in _mhc(D, rn).args())),
            mhc_moe=MhcParams(*(t.to(dev) for t in _mhc(D, rn).args())),
            wq_a=w(D, R), wq_b=w(R, H * C), wkv=w(D, C), wo_a=w(H * C, R), wo_b=w(R, D),
            sink=(1.0 + rn(H)).to(dev), wqi=w(R, d.idx_heads * D_INDEX), wwi=w(D, d.idx_heads, dtype=torch.float32),
            wki=w(D, D_INDEX), we=w(ENGRAM_ROWS * ENGRAM_D, D),
            router=w(D, d.experts, dtype=torch.float32), router_bias=(0.1 * rn(d.experts)).to(dev),
            w13=w(d.experts, D, 2 * d.expert_dim), w2=w(d.experts, d.expert_dim, D),
            engram=table, engram_params=make_params(d.engram_rows, seed * 1000 + li, device=dev),
            kv_codes=kc[pick].view(n_pages, d.page, C // 2), kv_scales=ks[pick].view(n_pages, d.page, C // 16),
            swa_kv=swa_kv, swa_scales=swa_scales,
            k_cache=ic[ipick].view(n_pages, d.page, D_INDEX // 2),
            k_scales=iscale[ipick].view(n_pages, d.page, D_INDEX // 32)))
        del kc, ks, pick, ic, iscale, ipick
    seq_lens = torch.full((B,), d.context, dtype=torch.int32, device=dev)
    tokens = zipf_tokens((B, 4), seed).to(dev)
    X0 = rn(B, N_STREAMS, D).to(torch.bfloat16).to(dev)
    return Model(d, layers, block_table, seq_lens, tokens, X0)


def memory_bytes(dims: Dims) -> int:
    """Device bytes ``build`` allocates (weights, caches, Engram tables), for a clear refusal up front."""
    d = dims
    D, C, R, E, F = d.hidden, d.latent, d.rank, d.experts, d.expert_dim
    rows = d.batch * -(-d.context // d.page) * d.page
    bf = 2
    weights = bf * (D * R + R * d.heads * C + D * C + d.heads * C * R + R * D + R * d.idx_heads * D_INDEX
                    + D * D_INDEX + ENGRAM_ROWS * ENGRAM_D * D + E * D * 3 * F) + 4 * (D * d.idx_heads + D * E)
    caches = rows * (C // 2 + C // 16 + D_INDEX // 2 + D_INDEX // 32) + d.batch * d.swa * (C + C // 32)
    return d.layers * (weights + caches + d.engram_rows * (ENGRAM_D + 8) + 2 * N_MIX * 4 * D * 4)
