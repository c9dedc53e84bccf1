"""The PyTorch side of NVFP4 decode attention: the fp32 reference (the specification)
and the eager baseline a user would write (dequantize, then SDPA)."""
from __future__ import annotations

import torch

from kernel_templates.nvfp4 import dequantize_fp8_ue8m0, dequantize_nvfp4


def _dequant_entries(kv_dtype: str, codes: torch.Tensor, scales: torch.Tensor | None) -> torch.Tensor:
    if kv_dtype == "nvfp4":
        return dequantize_nvfp4(codes, scales)
    if kv_dtype == "fp8":
        return dequantize_fp8_ue8m0(codes, scales)
    return codes.float()


def reference(q: torch.Tensor, kv_codes: torch.Tensor, kv_scales: torch.Tensor | None, block_table: torch.Tensor,
              seq_lens: torch.Tensor, swa_kv: torch.Tensor, swa_scales: torch.Tensor, sink: torch.Tensor, *,
              sm_scale: float | None = None, topk_idx: torch.Tensor | None = None, kv_dtype: str = "nvfp4"
              ) -> torch.Tensor:
    """The specification in fp32, one sequence at a time: ``[B, H, D]`` fp32."""
    B, H, D = q.shape
    page = kv_codes.shape[1]
    tau = D ** -0.5 if sm_scale is None else sm_scale
    W = swa_kv.shape[1]
    out = torch.empty(B, H, D, dtype=torch.float32, device=q.device)
    for b in range(B):
        n = int(seq_lens[b])
        if n == 0:  # nothing but the sink, whose value is zero
            out[b] = 0.0
            continue
        if topk_idx is not None:
            idx = topk_idx[b].long()
            idx = idx[(idx >= 0) & (idx < n)]
        else:
            idx = torch.arange(n, device=q.device)
        pages = block_table[b].long()[idx // page]
        slots = idx % page
        c = _dequant_entries(kv_dtype, kv_codes[pages, slots], None if kv_scales is None else kv_scales[pages, slots])
        nw = min(n, W)
        sw = dequantize_fp8_ue8m0(swa_kv[b, :nw], swa_scales[b, :nw])
        ent = torch.cat([c, sw], dim=0)  # [n_att, D]
        logits = tau * (q[b].float() @ ent.t())  # [H, n_att]
        full = torch.cat([logits, sink.float()[:, None]], dim=1)
        p = torch.softmax(full, dim=1)[:, :-1]
        out[b] = p @ ent
    return out


def torch_eager(q, kv_codes, kv_scales, block_table, seq_lens, swa_kv, swa_scales, sink, *, sm_scale=None,
                topk_idx=None, kv_dtype="nvfp4", chunk_bytes: int = 2**32) -> torch.Tensor:
    """What a user would write: dequantize the whole cache to BF16 (every call: the timed
    baseline includes it; with ``kv_dtype="bf16"`` there is nothing to dequantize), gather each
    sequence's entries, append the SWA window and a zero "sink" key whose logit comes
    from the mask, then ``F.scaled_dot_product_attention`` (MQA via ``enable_gqa``).
    With a 512-wide head and a float mask SDPA takes its math path, which expands K/V
    over the heads; sequences go through it in groups of at most ``chunk_bytes`` of that
    expansion (whole batches ran out of the H200's memory from B=16 at 128K).
    No host syncs, so it can be captured in a CUDA graph."""
    if kv_dtype == "nvfp4":
        cache = dequantize_nvfp4(kv_codes, kv_scales, dtype=torch.bfloat16)
    elif kv_dtype == "fp8":
        cache = dequantize_fp8_ue8m0(kv_codes, kv_scales, dtype=torch.bfloat16)
    else:
        cache = kv_codes
    B, H, D = q.shape
    per_seq = H * (block_table.shape[1] * kv_codes.shape[1] + swa_kv.shape[1] + 1) * D * 2
    step = max(1, min(B, chunk_bytes // per_seq))
    outs = []
    for i in range(0, B, step):
        j = slice(i, i + step)
        outs.append(_sdpa_dequantized(q[j], cache, block_table[j], seq_lens[j], swa_kv[j], swa_scales[j], sink,
                                      sm_scale, None if topk_idx is None else topk_idx[j]))
    return outs[0] if len(outs) == 1 else torch.cat(outs)


def _sdpa_dequantized(q, cache, block_table, seq_lens, swa_kv, swa_scales, sink, sm_scale, topk_idx) -> torch.Tensor:
    B, H, D = q.shape
    tau = D ** -0.5 if sm_scale is None else sm_scale
    dense = cache[block_table.long()].reshape(B, -1, D)  # [B, max_pages*PAGE, D]
    if topk_idx is not None:
        idx = topk_idx.long()
        valid_g = (idx >= 0) & (idx < seq_lens[:, None])
        glob = torch.gather(dense, 1, idx.clamp(min=0)[..., None].expand(-1, -1, D))
    else:
        glob = dense
        valid_g = torch.arange(dense.shape[1], device=q.device)[None, :] < seq_lens[:, None]
    W = swa_kv.shape[1]
    swa = dequantize_fp8_ue8m0(swa_kv, swa_scales, dtype=torch.bfloat16)
    valid_w = torch.arange(W, device=q.device)[None, :] < seq_lens.clamp(max=W)[:, None]
    kv = torch.cat([torch.zeros(B, 1, D, dtype=torch.bfloat16, device=q.device), glob, swa], dim=1)
    valid = torch.cat([valid_g, valid_w], dim=1)
    base = torch.zeros(valid.shape, dtype=torch.bfloat16, device=q.device).masked_fill(~valid, float("-inf"))
    mask = torch.cat([sink.to(torch.bfloat16)[None, :, None, None].expand(B, H, 1, 1),
                      base[:, None, None, :].expand(B, H, 1, base.shape[1])], dim=-1)
    o = torch.nn.functional.scaled_dot_product_attention(q[:, :, None, :], kv[:, None], kv[:, None], attn_mask=mask,
                                                         scale=tau, enable_gqa=True)
    return o[:, :, 0, :]
