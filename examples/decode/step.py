"""One decode step of the layer stack, written once against a kernel backend (``examples.decode.kernels``).

Per layer (T = batch tokens, one a sequence):

1. Engram: the token ids hash to 24 rows a layer (``engram_hash``); the lookup of layer l + 1 is
   submitted to the prefetcher's side stream while layer l runs (layer 0's before the stack),
   and layer l waits on its own. The embeddings pass a sigmoid gate into the attention input.
2. mHC pre (layer 0; later layers get it from the previous seam): residual streams -> ``u``.
3. The new token's KV latent goes into the paged NVFP4 cache through ``quantize_nvfp4`` and into
   the FP8 SWA window, its MXFP4 indexer key into the indexer cache (position ``seq_len - 1``).
4. Sparse MQA indexer: scores over the indexer cache and its exact top-k.
5. NVFP4 sparse decode attention over the top-k global entries + the SWA window + the sink.
6. mHC post (attention output into the residual), mHC pre for the MoE sublayer.
7. MoE routing, then the routed experts in plain PyTorch (weights gathered per (token, slot)).
8. mHC seam: post of the MoE output fused with the next layer's pre (the last layer: post).

``layer`` is pure tensor code plus kernel calls: ``torch.compile(fullgraph=True)`` takes it whole
when the backend calls ``torch.ops.tuner.*``. The Engram submit / wait between layers stays eager.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from examples.decode.dims import Dims
from examples.decode.model import ENGRAM_D, ENGRAM_ROWS, Layer, MhcParams, Model
from kernel_templates.nvfp4 import quantize_fp8_ue8m0, quantize_mxfp4
from kernel_templates.sparse_mqa import D_INDEX

LayerFn = Callable[..., tuple[Any, ...]]


def experts(x: torch.Tensor, topk_ids: torch.Tensor, topk_weights: torch.Tensor, w13: torch.Tensor,
            w2: torch.Tensor) -> torch.Tensor:
    """Routed experts, plain PyTorch: SwiGLU of each (token, slot)'s expert, weighted sum over the slots.

    Each (token, slot) gathers its expert's weights (``T * k`` of them, what a decode batch reads
    anyway), so the computation has static shapes, no host sync, and captures in a CUDA graph."""
    T, k = topk_ids.shape
    idx = topk_ids.reshape(-1).long()
    xa = x.repeat_interleave(k, dim=0)[:, None, :]                      # [T*k, 1, D]
    h = torch.bmm(xa, w13.index_select(0, idx))[:, 0]                   # [T*k, 2F]
    a, b = h.float().chunk(2, dim=-1)
    h = (torch.nn.functional.silu(a) * b).to(x.dtype)[:, None, :]
    o = torch.bmm(h, w2.index_select(0, idx))[:, 0]                     # [T*k, D]
    return (o.float().view(T, k, -1) * topk_weights[..., None]).sum(1).to(x.dtype)


def _write_caches(k: Any, L: Layer, dims: Dims, block_table: torch.Tensor, seq_lens: torch.Tensor,
                  c: torch.Tensor, key: torch.Tensor) -> None:
    """The new token's KV latent ``c [B, latent]`` and indexer key ``key [B, 128]`` at position ``seq_len - 1``."""
    pos = seq_lens.long() - 1
    page = block_table.gather(1, (pos // dims.page)[:, None]).squeeze(1).long()
    slot = pos % dims.page
    codes, scales = k.quantize_nvfp4(c)
    L.kv_codes[page, slot] = codes
    L.kv_scales[page, slot] = scales
    c8, s8 = quantize_fp8_ue8m0(c)
    rows = torch.arange(c.shape[0], device=c.device)
    w = pos % dims.swa
    L.swa_kv.view(torch.uint8)[rows, w] = c8.view(torch.uint8)
    L.swa_scales[rows, w] = s8
    kc, ks = quantize_mxfp4(key)
    L.k_cache[page, slot] = kc
    L.k_scales[page, slot] = ks


def layer(k: Any, L: Layer, nxt: MhcParams | None, dims: Dims, block_table: torch.Tensor, seq_lens: torch.Tensor,
          X: torch.Tensor, u: torch.Tensor, post: torch.Tensor, comb: torch.Tensor, e: torch.Tensor
          ) -> tuple[Any, ...]:
    """Steps 1 (the gate) to 8 of one layer; returns ``(X, u, post, comb)`` for the next layer
    (``u``, ``post``, ``comb`` are None after the last)."""
    B, D, H, C = X.shape[0], dims.hidden, dims.heads, dims.latent
    # Engram: a sigmoid gate on the agreement of the embeddings' projection with u
    g = e.reshape(B, ENGRAM_ROWS * ENGRAM_D) @ L.we
    gate = torch.sigmoid((u.float() * g.float()).sum(-1, keepdim=True) * D ** -0.5)
    h = (u.float() + gate * g.float()).to(torch.bfloat16)
    ql = h @ L.wq_a
    q = (ql @ L.wq_b).view(B, H, C)
    _write_caches(k, L, dims, block_table, seq_lens, (h @ L.wkv).float(), (h @ L.wki).float())
    qi = (ql @ L.wqi).float().view(B, 1, dims.idx_heads, D_INDEX).clamp(-448, 448).to(torch.float8_e4m3fn)
    wi = (h.float() @ L.wwi).view(B, 1, dims.idx_heads) * (dims.idx_heads ** -0.5 * D_INDEX ** -0.5)
    topk = k.mqa_topk(qi, wi, L.k_cache, L.k_scales, block_table, seq_lens, dims.idx_topk)
    att = k.attention(q, L.kv_codes, L.kv_scales, block_table, seq_lens, L.swa_kv, L.swa_scales, L.sink, topk[:, 0])
    y = (att.reshape(B, H * C) @ L.wo_a) @ L.wo_b
    X = k.mhc_post(X, y, post, comb)
    u, post, comb = k.mhc_pre(X, L.mhc_moe)
    routing = k.moe_routing(u.float() @ L.router, L.router_bias, dims.routing)
    y = experts(u, routing.topk_ids, routing.topk_weights, L.w13, L.w2)
    if nxt is None:
        return k.mhc_post(X, y, post, comb), None, None, None
    return k.mhc_seam(X, y, post, comb, nxt)


def decode_step(model: Model, k: Any, layer_fn: LayerFn = layer) -> torch.Tensor:
    """One decode step through the stack with backend ``k``: the residual streams ``[B, 4, D]``
    bf16 after the last layer. ``layer_fn`` is ``layer`` or a compiled ``layer``."""
    layers, d = model.layers, model.dims
    rows = [k.engram_hash(model.tokens, L.engram_params)[:, -1:] for L in layers]  # [B, 1, 24]
    pending = {0: k.engram_submit(layers[0].engram, rows[0])}
    X = model.X0
    u, post, comb = k.mhc_pre(X, layers[0].mhc_attn)
    for i, L in enumerate(layers):
        if hasattr(k, "layer"):
            k.layer = i
        if i + 1 < len(layers):  # the next layer's lookup, a layer ahead of its use
            pending[i + 1] = k.engram_submit(layers[i + 1].engram, rows[i + 1])
        e = pending.pop(i).wait()
        nxt = layers[i + 1].mhc_attn if i + 1 < len(layers) else None
        X, u, post, comb = layer_fn(k, L, nxt, d, model.block_table, model.seq_lens, X, u, post, comb, e)
    return X


def agreement(out: torch.Tensor, ref: torch.Tensor) -> float:
    """The largest ``|out - ref|`` of a sequence over that sequence's ``max |ref|`` (0 is identical)."""
    diff = (out.float() - ref.float()).abs().flatten(1).amax(1)
    scale = ref.float().abs().flatten(1).amax(1).clamp(min=1e-30)
    return float((diff / scale).max())
