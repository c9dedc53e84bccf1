"""The PyTorch side of the indexer: the float64 reference (the specification), the
eager baseline a user would write first, and the scores of chosen keys for ``verify``."""
from __future__ import annotations

from typing import Any

import torch

from kernel_templates.nvfp4 import dequantize_mxfp4


def _dequant_rows(k_rows: torch.Tensor, s_rows: torch.Tensor, k_format: str) -> tuple[torch.Tensor, torch.Tensor]:
    """Gathered cache rows -> (keys [n, 128] float64, per-key scale [n] float64)."""
    if k_format == "fp8":
        return k_rows.view(torch.float8_e4m3fn).double(), s_rows.double()
    return dequantize_mxfp4(k_rows, s_rows).double(), torch.ones(k_rows.shape[0], dtype=torch.float64,
                                                                  device=k_rows.device)


def visible(seq_lens: torch.Tensor, next_n: int) -> torch.Tensor:
    """``[B, next_n]`` keys each query token sees: ``seq_len - next_n + i + 1`` (>= 0)."""
    i = torch.arange(next_n, device=seq_lens.device)
    return (seq_lens.long()[:, None] - next_n + i[None, :] + 1).clamp(min=0)


def topk_of_logits(logits: torch.Tensor, k: int) -> torch.Tensor:
    """The top-k order of the spec on logits ``[..., N]``: descending, lower index first on
    equal scores, -1 where a row has fewer than ``k`` finite (visible) entries."""
    v, i = torch.sort(logits, dim=-1, descending=True, stable=True)
    return torch.where(torch.isfinite(v), i, -1)[..., :k].to(torch.int32)


def reference(q: torch.Tensor, weights: torch.Tensor, k_cache: torch.Tensor, k_scales: torch.Tensor,
              block_table: torch.Tensor, seq_lens: torch.Tensor, *, top_k: int, k_format: str = "fp8",
              return_logits: bool = False) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """The specification in float64, one sequence at a time.

    The order is an explicit stable sort of the fp32-rounded scores (descending; equal
    scores keep ascending index order). Returns ``topk_idx [B, next_n, top_k] int32`` and,
    with ``return_logits``, the fp32 logits ``[B, next_n, max_pages * PAGE]`` (-inf where not seen).
    """
    B, T, H, D = q.shape
    page = k_cache.shape[1]
    max_len = block_table.shape[1] * page
    dev = q.device
    idx_out = torch.full((B, T, top_k), -1, dtype=torch.int32, device=dev)
    logits = torch.full((B, T, max_len), float("-inf"), dtype=torch.float32, device=dev)
    vis = visible(seq_lens, T).clamp(max=max_len)
    for b in range(B):
        n = int(vis[b].max()) if T else 0
        if n == 0:
            continue
        pos = torch.arange(n, device=dev)
        pages = block_table[b].long()[pos // page]
        k, ks = _dequant_rows(k_cache[pages, pos % page], k_scales[pages, pos % page], k_format)
        dots = torch.relu(q[b].double() @ k.t())                              # [T, H, n]
        score = ((dots * weights[b].double()[..., None]).sum(1) * ks).float()  # [T, n]
        score = score + 0.0  # -0.0 -> +0.0: one score
        for t in range(T):
            nt = int(vis[b, t])
            if nt == 0:
                continue
            logits[b, t, :nt] = score[t, :nt]
            order = topk_of_logits(score[t, :nt], top_k)
            idx_out[b, t, :order.numel()] = order
    return (idx_out, logits) if return_logits else idx_out


def torch_eager(q, weights, k_cache, k_scales, block_table, seq_lens, *, top_k, k_format="fp8",
                return_logits=False, chunk_elems: int = 2**27):
    """What a user writes first: per chunk of keys, gather and dequantize to fp32, einsum
    with q, relu, weighted head sum, key scale into a logits buffer; causal mask;
    ``torch.topk``. Chunked so the ``[B, next_n, H, chunk]`` products stay under
    ``chunk_elems`` floats at 512K; no host syncs, so it can be captured in a CUDA graph."""
    B, T, H, D = q.shape
    page = k_cache.shape[1]
    max_pages = block_table.shape[1]
    max_len = max_pages * page
    qf = q.float()
    logits = torch.empty(B, T, max_len, dtype=torch.float32, device=q.device)
    pages_per_chunk = max(1, chunk_elems // (B * max(T * H, D) * page))
    kc = k_cache.view(torch.uint8)
    for p0 in range(0, max_pages, pages_per_chunk):
        pg = block_table[:, p0:p0 + pages_per_chunk].long()
        n = pg.shape[1] * page
        if k_format == "fp8":
            k = kc[pg].view(torch.float8_e4m3fn).float().view(B, n, D)
            ks = k_scales[pg].view(B, 1, n)
        else:
            k = dequantize_mxfp4(kc[pg], k_scales[pg]).view(B, n, D)
            ks = None
        s = torch.relu(torch.einsum("bthd,bnd->bthn", qf, k))
        sc = torch.einsum("bthn,bth->btn", s, weights)
        logits[:, :, p0 * page:p0 * page + n] = sc if ks is None else sc * ks
    vis = visible(seq_lens, T)
    logits.masked_fill_(torch.arange(max_len, device=q.device)[None, None, :] >= vis[..., None], float("-inf"))
    kk = min(top_k, max_len)
    vals, idx = torch.topk(logits, kk, dim=-1)
    idx = torch.where(vals == float("-inf"), -1, idx).to(torch.int32)
    if kk < top_k:
        idx = torch.cat([idx, idx.new_full((B, T, top_k - kk), -1)], dim=-1)
    return (idx, logits) if return_logits else idx


def scores_at(inputs: dict[str, Any], b: int, t: int, idx: torch.Tensor) -> torch.Tensor:
    """Float64 scores of sequence ``b``, token ``t`` at key indices ``idx`` (all >= 0)."""
    page = inputs["k_cache"].shape[1]
    i = idx.long()
    pages = inputs["block_table"][b].long()[i // page]
    k, ks = _dequant_rows(inputs["k_cache"][pages, i % page], inputs["k_scales"][pages, i % page],
                          inputs["k_format"])
    dots = torch.relu(inputs["q"][b, t].double() @ k.t())
    return (dots * inputs["weights"][b, t].double()[:, None]).sum(0) * ks
