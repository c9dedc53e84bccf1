"""Engram in plain PyTorch, the specification: the hash and the lookup."""
from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from kernel_templates.engram.hashing import N_MAX, ORDERS
from kernel_templates.engram.table import D
from kernel_templates.nvfp4 import dequantize_fp8_ue8m0

if TYPE_CHECKING:
    from kernel_templates.engram.table import EngramTable


def _classes(comp: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """``comp[ids]`` as int64, with compressed class 0 for an id outside ``[0, V)``."""
    ok = (ids >= 0) & (ids < comp.shape[0])
    return torch.where(ok, comp.long()[torch.where(ok, ids, 0)], 0)


def reference_hash(tokens: torch.Tensor, comp: torch.Tensor, multipliers: torch.Tensor, primes: torch.Tensor,
                   offsets: torch.Tensor, *, pad_id: int) -> torch.Tensor:
    """``rows [B, L, 24] int64``: column ``(n-2)*8 + h`` is order n, head h; ids outside
    ``[0, V)`` hash as class 0."""
    c = _classes(comp, tokens.long())                   # [B, L]
    B, L = c.shape
    cpad = _classes(comp, torch.tensor(pad_id, device=c.device))
    mix = torch.zeros(B, L, dtype=torch.long, device=c.device)
    cols = []
    for k in range(N_MAX):
        shifted = torch.cat([cpad.expand(B, min(k, L)), c[:, :max(L - k, 0)]], dim=1) if k else c
        mix = mix ^ (shifted * multipliers[k].long())
        n = k + 1
        if n in ORDERS:
            cols.append(mix[..., None] % primes[n - 2].long() + offsets[n - 2].long())
    return torch.cat(cols, dim=-1)


def reference(table: "EngramTable", rows: torch.Tensor) -> torch.Tensor:
    """Gather + dequant in fp32: ``[..., 256]`` (values exact; bf16 holds them exactly too)."""
    g = table.gather_packed(rows.reshape(-1))
    x = dequantize_fp8_ue8m0(g[:, :D], g[:, D:], torch.float32)
    return x.reshape(*rows.shape, D).to(rows.device)
