"""Our inputs in the peers' layouts, in plain PyTorch (``benchmarks/peers.py``): each packer has an
unpacker, so a round trip says how much of our data a peer's format keeps (the CPU tests check them).

- DeepGEMM's paged MQA logits read a fused key cache: per 64-key page, 64 x 128 FP8 codes, then the
  64 fp32 key scales (``[pages, 64, 1, 132]`` uint8), and ``context_lens [B, next_n]``.
- FlashMLA's DeepSeek-V4 sparse decode (``kv_format="V4"``, 584 B a token): per 64-token page,
  64 x (448 FP8 codes + 64 bf16 values) then 64 x 8 scale bytes (7 UE8M0 scales, one per 64 codes,
  and a pad byte); each page padded to a multiple of 576 bytes. Indices are physical
  (``page * 64 + slot``, -1 unused).
- FlashMLA's dense FP8 decode: 576-wide FP8 entries (our 512 and 64 zeros) with one fp32 scale for
  the whole cache and one for q; here the scales are powers of two, so the dequantized values are
  exact in bf16.
- tile-kernels' Engram hash reads the n-gram token ids already built (``[T, 4]``: the compressed
  ids of the token and its three predecessors) and int32 table sizes and offsets.
"""
from __future__ import annotations

import torch

E4M3_MAX = 448.0
V4_NOPE, V4_ROPE, V4_TILE, V4_TILES = 448, 64, 64, 7
V4_BYTES = V4_NOPE + 2 * V4_ROPE + V4_TILES + 1  # 584
V4_PAGE_ALIGN = 576
DG_KEY = 128
DG_BYTES = DG_KEY + 4  # 132


# ----------------------------------------------------------------------------- helpers

def pow2_scale(amax: torch.Tensor, floor: float = 1e-4) -> torch.Tensor:
    """``2^ceil(log2(max(amax / 448, floor)))`` (fp32): a power-of-two scale that keeps every
    value of the block within E4M3's range (DeepSeek's UE8M0 rule)."""
    return torch.exp2(torch.ceil(torch.log2(torch.clamp(amax.float() / E4M3_MAX, min=floor))))


def max_abs_err(a: torch.Tensor, b: torch.Tensor) -> float:
    """``max |a - b|`` in float64 (0 for empty tensors): how far a format's round trip moved the values."""
    return float((a.double() - b.double()).abs().max()) if a.numel() else 0.0


# ----------------------------------------------------------------------------- DeepGEMM paged MQA logits

def deepgemm_fused_kv(k_cache: torch.Tensor, k_scales: torch.Tensor) -> torch.Tensor:
    """Our fp8 indexer keys ``[pages, PAGE, 128] float8_e4m3fn`` + ``[pages, PAGE] fp32`` -> DeepGEMM's
    fused cache ``[pages, PAGE, 1, 132] uint8`` (a page's codes, then its scales). Lossless."""
    P, page, d = k_cache.shape
    if d != DG_KEY or k_scales.shape != (P, page) or k_scales.dtype != torch.float32:
        raise ValueError(f"want keys [P, PAGE, {DG_KEY}] and fp32 scales [P, PAGE], got {tuple(k_cache.shape)}, "
                         f"{k_scales.dtype} {tuple(k_scales.shape)}")
    fused = torch.empty(P, page * DG_BYTES, dtype=torch.uint8, device=k_cache.device)
    fused[:, :page * d] = k_cache.reshape(P, page * d).view(torch.uint8)
    fused[:, page * d:] = k_scales.contiguous().view(torch.uint8).view(P, page * 4)
    return fused.view(P, page, 1, DG_BYTES)


def split_deepgemm_fused_kv(fused: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``deepgemm_fused_kv``'s inverse: ``(keys float8_e4m3fn [P, PAGE, 128], scales fp32 [P, PAGE])``."""
    P, page = fused.shape[:2]
    flat = fused.reshape(P, page * DG_BYTES)
    keys = flat[:, :page * DG_KEY].contiguous().view(torch.float8_e4m3fn).view(P, page, DG_KEY)
    scales = flat[:, page * DG_KEY:].contiguous().view(torch.float32).view(P, page)
    return keys, scales


def context_lens_2d(seq_lens: torch.Tensor, next_n: int) -> torch.Tensor:
    """``[B, next_n] int32``: the keys query ``i`` sees, ``seq_len - next_n + i + 1`` (our causal rule)."""
    i = torch.arange(next_n, device=seq_lens.device)
    return (seq_lens.long()[:, None] - next_n + 1 + i[None, :]).clamp(min=0).to(torch.int32).contiguous()


def mask_logits(logits: torch.Tensor, context_lens: torch.Tensor) -> torch.Tensor:
    """DeepGEMM's logits ``[B * next_n, N]`` -> ``[B, next_n, N]`` with -inf past each query's visible
    keys (the kernel leaves those entries unwritten)."""
    B, n = context_lens.shape
    out = logits.reshape(B, n, -1)
    pos = torch.arange(out.shape[-1], device=logits.device)
    return out.masked_fill(pos[None, None, :] >= context_lens[..., None].long(), float("-inf"))


def topk_from_logits(logits: torch.Tensor, k: int) -> torch.Tensor:
    """``torch.topk`` of masked logits ``[..., N]`` -> int32 indices, -1 where the score is -inf."""
    kk = min(k, logits.shape[-1])
    vals, idx = torch.topk(logits, kk, dim=-1)
    idx = torch.where(vals == float("-inf"), -1, idx).to(torch.int32)
    if kk < k:
        idx = torch.cat([idx, idx.new_full((*idx.shape[:-1], k - kk), -1)], dim=-1)
    return idx


# ----------------------------------------------------------------------------- FlashMLA, DeepSeek-V4 format

def v4_page_stride(page: int) -> int:
    """Bytes between two pages of a V4 cache: ``page * 584`` rounded up to a multiple of 576."""
    return -(-page * V4_BYTES // V4_PAGE_ALIGN) * V4_PAGE_ALIGN


def pack_v4(latent: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
    """Latents ``[pages, PAGE, 512]`` (any float dtype) -> FlashMLA's V4 cache ``[pages, PAGE, 1, 584]``
    uint8 (a strided view of padded pages): dims 0..447 as E4M3 with one power-of-two scale per 64,
    dims 448..511 as bf16. ``out``: the padded pages ``[pages, v4_page_stride(PAGE)] uint8`` to write
    (a slice of a larger cache, for packing one in chunks)."""
    P, page, d = latent.shape
    if d != V4_NOPE + V4_ROPE:
        raise ValueError(f"V4 entries are {V4_NOPE + V4_ROPE} wide, got {d}")
    x = latent.float()
    nope = x[..., :V4_NOPE].reshape(P, page, V4_TILES, V4_TILE)
    scale = pow2_scale(nope.abs().amax(-1))                                       # [P, page, 7]
    codes = (nope / scale[..., None]).clamp(-E4M3_MAX, E4M3_MAX).to(torch.float8_e4m3fn)
    stride = v4_page_stride(page)
    if out is not None and (out.shape != (P, stride) or out.dtype != torch.uint8 or out.stride(1) != 1):
        raise ValueError(f"out must be uint8 [{P}, {stride}], got {out.dtype} {tuple(out.shape)}")
    buf = torch.zeros(P, stride, dtype=torch.uint8, device=latent.device) if out is None else out
    body = buf[:, :page * (V4_NOPE + 2 * V4_ROPE)].view(P, page, V4_NOPE + 2 * V4_ROPE)
    body[..., :V4_NOPE] = codes.view(torch.uint8).reshape(P, page, V4_NOPE)
    body[..., V4_NOPE:] = x[..., V4_NOPE:].to(torch.bfloat16).contiguous().view(torch.uint8)
    sc = buf[:, page * (V4_NOPE + 2 * V4_ROPE):page * V4_BYTES].view(P, page, 8)
    sc[..., :V4_TILES] = (torch.log2(scale).round() + 127).to(torch.uint8)
    return buf[:, :page * V4_BYTES].view(P, page, 1, V4_BYTES)


def unpack_v4(cache: torch.Tensor) -> torch.Tensor:
    """``pack_v4``'s inverse: ``[pages, PAGE, 512]`` fp32, exactly the values the V4 format holds."""
    P, page = cache.shape[:2]
    flat = torch.as_strided(cache.view(torch.uint8), (P, page * V4_BYTES), (cache.stride(0), 1))
    body = flat[:, :page * (V4_NOPE + 2 * V4_ROPE)].reshape(P, page, V4_NOPE + 2 * V4_ROPE)
    codes = body[..., :V4_NOPE].contiguous().view(torch.float8_e4m3fn).float().view(P, page, V4_TILES, V4_TILE)
    rope = body[..., V4_NOPE:].contiguous().view(torch.bfloat16).float()
    sc = flat[:, page * (V4_NOPE + 2 * V4_ROPE):].reshape(P, page, 8)[..., :V4_TILES]
    nope = codes * torch.exp2(sc.float() - 127.0)[..., None]
    return torch.cat([nope.view(P, page, V4_NOPE), rope], dim=-1)


def physical_indices(topk_idx: torch.Tensor, block_table: torch.Tensor, page: int) -> torch.Tensor:
    """Logical entry indices ``[B, K]`` (-1 unused) -> FlashMLA's ``[B, 1, K] int32``
    ``block_table[b, i // page] * page + i % page`` (-1 kept)."""
    idx = topk_idx.long()
    bad = idx < 0
    i = idx.clamp(min=0)
    phys = torch.gather(block_table.long(), 1, i // page) * page + i % page
    return torch.where(bad, -1, phys).to(torch.int32).unsqueeze(1).contiguous()


def window_as_extra_cache(window: torch.Tensor, page: int = 64) -> tuple[torch.Tensor, torch.Tensor]:
    """The SWA window ``[B, W, 512]`` (dequantized, W a multiple of ``page``) -> a V4 extra cache of
    ``B * W / page`` pages (sequence ``b``'s window in pages ``b * W/page ...``) and its indices
    ``[B, 1, W] int32`` (every entry)."""
    B, W, d = window.shape
    if W % page:
        raise ValueError(f"window {W} must be a multiple of the page {page}")
    cache = pack_v4(window.reshape(B * W // page, page, d))
    idx = torch.arange(B * W, dtype=torch.int32, device=window.device).view(B, 1, W)
    return cache, idx


# ----------------------------------------------------------------------------- FlashMLA, dense FP8 (d 576)

DENSE_FP8_D = 576


def pow2_fp8(x: torch.Tensor, width: int | None = None, scale: torch.Tensor | None = None
             ) -> tuple[torch.Tensor, torch.Tensor]:
    """``x [..., d]`` -> (E4M3 codes ``[..., width]`` with the columns past ``d`` zero, one fp32 scale
    ``[1]``, a power of two): FlashMLA's per-tensor ``descale`` for its dense FP8 kernel. ``scale``:
    the one to use (a cache converted in chunks shares the scale of its largest value)."""
    d = x.shape[-1]
    width = width or d
    s = pow2_scale(x.abs().amax().reshape(1), floor=2.0 ** -126) if scale is None else scale.float().reshape(1)
    codes = torch.zeros(*x.shape[:-1], width, dtype=torch.float8_e4m3fn, device=x.device)
    codes[..., :d] = (x.float() / s).clamp(-E4M3_MAX, E4M3_MAX).to(torch.float8_e4m3fn)
    return codes, s


def unpow2_fp8(codes: torch.Tensor, scale: torch.Tensor, d: int) -> torch.Tensor:
    """``pow2_fp8``'s inverse (the first ``d`` columns), fp32."""
    return codes[..., :d].float() * scale


def append_pages(cache: torch.Tensor, block_table: torch.Tensor, extra: torch.Tensor
                 ) -> tuple[torch.Tensor, torch.Tensor]:
    """A paged cache ``[P, PAGE, ...]`` and ``extra [B, n * PAGE, ...]`` entries to append to each
    sequence -> ``(cache with B * n more pages, block_table [B, max_pages + n])``: sequence ``b``'s
    extra entries follow its own pages (the SWA window after the global entries)."""
    P, page = cache.shape[:2]
    B, m = extra.shape[:2]
    if m % page:
        raise ValueError(f"{m} extra entries are not whole pages of {page}")
    n = m // page
    more = extra.reshape(B * n, page, *extra.shape[2:]).to(cache.dtype)
    new = torch.arange(P, P + B * n, dtype=block_table.dtype, device=block_table.device).view(B, n)
    return torch.cat([cache, more]), torch.cat([block_table, new], dim=1).contiguous()


# ----------------------------------------------------------------------------- tile-kernels Engram hash

def ngram_ids(tokens: torch.Tensor, comp: torch.Tensor, pad_id: int, n_max: int = 4) -> torch.Tensor:
    """Token ids ``[B, L]`` -> ``[B * L, n_max] int32``: column ``k`` the compressed id of token
    ``t - k`` of the same row (``comp[pad_id]`` before the row start; ids outside ``[0, V)`` as
    class 0), what tile-kernels' ``engram_hash`` reads."""
    B, L = tokens.shape
    V = comp.shape[0]
    ok = (tokens >= 0) & (tokens < V)
    c = torch.where(ok, comp[tokens.clamp(0, V - 1)].long(), 0)
    pad = comp[pad_id].long()
    cols = [c]
    for k in range(1, n_max):
        cols.append(torch.cat([pad.expand(B, min(k, L)), c[:, :max(0, L - k)]], dim=1))
    return torch.stack(cols, dim=-1).reshape(B * L, n_max).to(torch.int32).contiguous()


def tk_hash_params(multipliers: torch.Tensor, primes: torch.Tensor, offsets: torch.Tensor
                   ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Our one-layer hash inputs (``multipliers [4]``, ``primes`` and ``offsets [3, 8]`` int64) ->
    tile-kernels' ``(multipliers [1, 4] int64, vocab_sizes [1, 3, 8] int32, offsets [1, 24] int32)``."""
    if int(primes.max()) >= 2**31 or int((offsets + primes).max()) >= 2**31:
        raise ValueError("tile-kernels' engram_hash takes int32 table sizes and offsets")
    return (multipliers.reshape(1, -1).contiguous(), primes.to(torch.int32).reshape(1, *primes.shape).contiguous(),
            offsets.to(torch.int32).reshape(1, -1).contiguous())
