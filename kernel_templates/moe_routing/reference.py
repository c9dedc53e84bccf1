"""MoE routing in plain PyTorch, the specification (fp32 scores, exact tie rule)."""
from __future__ import annotations

from typing import NamedTuple

import torch
import torch.nn.functional as F

from kernel_templates._host import cdiv

SCORINGS = ("sigmoid", "sqrtsoftplus", "softmax")


class MoeRouting(NamedTuple):
    """Routing result: top-k per token and the align triple grouped GEMMs read."""

    topk_weights: torch.Tensor      # [T, k] fp32
    topk_ids: torch.Tensor          # [T, k] int32, global expert ids
    sorted_token_ids: torch.Tensor  # [T*k + E*(block_m-1)] int32, pad value T*k
    expert_ids: torch.Tensor        # [cdiv(len(sorted_token_ids), block_m)] int32, -1 past the end / not local
    num_tokens_post_pad: torch.Tensor  # [1] int32


def _scores(logits: torch.Tensor, scoring: str) -> torch.Tensor:
    x = logits.float()
    if scoring == "sigmoid":
        return torch.sigmoid(x)
    if scoring == "sqrtsoftplus":
        return torch.sqrt(F.softplus(x, beta=1.0, threshold=20.0))
    if scoring == "softmax":
        return torch.softmax(x, dim=-1)
    raise ValueError(f"unknown scoring {scoring!r} (want one of {SCORINGS})")


def _stable_topk_desc(x: torch.Tensor, k: int) -> torch.Tensor:
    """Indices of the k largest along the last dim; ties: lower index first."""
    return torch.sort(x, dim=-1, descending=True, stable=True).indices[..., :k]


def reference_topk(logits: torch.Tensor, bias: torch.Tensor | None, *, top_k: int, n_group: int = 1,
                   topk_group: int = 1, scoring: str = "sigmoid", routed_scaling_factor: float = 1.0,
                   renormalize: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """Grouped top-k in fp32 with the exact tie rule (the specification)."""
    s0 = _scores(logits, scoring)
    s = s0 + bias.float() if bias is not None else s0
    T, E = s.shape
    if n_group > 1:
        g = s.view(T, n_group, E // n_group)
        if bias is not None:
            top2 = torch.sort(g, dim=-1, descending=True).values[..., :2]
            gscore = top2[..., 0] + top2[..., 1]
        else:
            gscore = g.amax(dim=-1)
        keep = torch.zeros(T, n_group, dtype=torch.bool, device=s.device)
        keep.scatter_(1, _stable_topk_desc(gscore, topk_group), True)
        s = s.masked_fill(~keep.repeat_interleave(E // n_group, dim=1), float("-inf"))
    ids = _stable_topk_desc(s, top_k)
    w = s0.gather(1, ids)
    if renormalize:
        w = w / w.sum(dim=-1, keepdim=True)
    return w * routed_scaling_factor, ids.to(torch.int32)


def reference_align(topk_ids: torch.Tensor, num_experts: int, block_m: int,
                    expert_map: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``moe_align_block_size`` as a pure function of ``topk_ids``: capturable, no host syncs.

    Returns ``(sorted_token_ids, expert_ids, num_tokens_post_pad)``; the layout is over
    GLOBAL experts; ``expert_map`` only renames ``expert_ids`` (-1 = not local).
    """
    flat = topk_ids.reshape(-1).long()
    n = flat.numel()
    dev = flat.device
    # scatter_add, not bincount: bincount syncs with the host on CUDA (not capturable)
    counts = torch.zeros(num_experts, dtype=torch.long, device=dev).scatter_add_(0, flat, torch.ones_like(flat))
    padded = (counts + block_m - 1) // block_m * block_m
    off_incl = torch.cumsum(padded, 0)
    off = off_incl - padded
    order = torch.sort(flat, stable=True).indices            # flat indices grouped by expert, increasing
    sorted_e = flat[order]
    first = torch.cumsum(counts, 0) - counts                 # start of each expert in `order`
    pos = off[sorted_e] + torch.arange(n, device=dev) - first[sorted_e]
    length = n + num_experts * (block_m - 1)
    sorted_ids = torch.full((length,), n, dtype=torch.int32, device=dev)
    sorted_ids[pos] = order.to(torch.int32)
    starts = torch.arange(cdiv(length, block_m), device=dev) * block_m
    total = off_incl[-1:]
    eids = torch.searchsorted(off_incl, starts, right=True)  # experts whose padded end <= block start
    eids = torch.where(starts < total, eids, -1)
    if expert_map is not None:
        eids = torch.where(eids >= 0, expert_map.long()[eids.clamp(min=0, max=num_experts - 1)], -1)
    return sorted_ids, eids.to(torch.int32), total.to(torch.int32)


def reference(logits: torch.Tensor, bias: torch.Tensor | None, *, top_k: int, n_group: int = 1,
              topk_group: int = 1, scoring: str = "sigmoid", routed_scaling_factor: float = 1.0,
              renormalize: bool = True, block_m: int = 64, expert_map: torch.Tensor | None = None) -> MoeRouting:
    """The whole step in plain PyTorch (fp32 scores, exact tie rule)."""
    w, ids = reference_topk(logits, bias, top_k=top_k, n_group=n_group, topk_group=topk_group, scoring=scoring,
                            routed_scaling_factor=routed_scaling_factor, renormalize=renormalize)
    return MoeRouting(w, ids, *reference_align(ids, logits.shape[1], block_m, expert_map))
