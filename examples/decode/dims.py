"""The shapes of the decode step: DeepSeek-V4.1-Flash's (``REAL``) and an interpreter-sized twin (``TINY``).

Where each number of ``REAL`` comes from (the model profiles the families serve; their modules hold
the same numbers as code):

- ``hidden`` 5120, 4 mHC streams: profile ``dsv41-flash`` (mHC n=4, D=5120);
  ``search_spaces/mhc.py`` tunes the seam, pre and post at D = 5120.
- ``heads`` 64, ``latent`` 512, one KV head, NVFP4 global KV (288 B an entry), FP8 SWA window
  ``swa`` 128: ``kernel_templates.nvfp4_attention`` and profile ``dsv41-flash`` (64 heads at TP1; 16 at
  TP4 is ``--heads 16``); ``page`` 64: the attention's PAGE in {64, 256} and the indexer's 64.
- ``idx_heads`` 32 x 128, MXFP4 keys (68 B), ``idx_topk`` 512: profile ``dsv41-flash``,
  ``kernel_templates.sparse_mqa.PROFILES["dsv41-flash"]``.
- ``experts`` 384, ``top_k`` 6, sqrtsoftplus + bias, scale 1.5, one group:
  ``kernel_templates.moe_routing.PROFILES["dsv41-flash"]``.
- Engram: orders 2, 3, 4 x 8 heads (24 rows a token), 256 FP8 values + 8 UE8M0 scales a row:
  ``kernel_templates.engram``. ``engram_rows`` 8M: the tables the engram benchmark and grid use
  (``search_spaces/engram.py``); a real V4.1 layer's ~384M rows (~101 GB) fit no GPU here.
- Not in the profiles (plain PyTorch around the tuned kernels, sized so the step's time and memory
  stay on them): ``rank`` 1536, the low-rank q and output projections (DeepSeek-V3's
  ``q_lora_rank``); ``expert_dim`` 128, the routed experts' width; ``layers`` 2 (the per-layer
  work is the model's; the count multiplies it).
- Batch and context: the benchmarks' GPU points (batch 1, 16, 64; context 32K and 128K) and the
  families' default grids (``search_spaces/nvfp4_attention.py``: sparse mode at 128K).
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from kernel_templates.moe_routing import PROFILES as MOE_PROFILES

MOE_PROFILE = "dsv41-flash"
INDEX_PROFILE = "dsv41-flash"  # the sparse_mqa profile: MXFP4 keys


@dataclass(frozen=True)
class Dims:
    """Every size of the step; ``batch`` sequences of ``context`` tokens decode one token each."""

    hidden: int
    heads: int
    latent: int
    rank: int
    swa: int
    page: int
    idx_heads: int
    idx_topk: int
    experts: int
    top_k: int
    expert_dim: int
    engram_rows: int
    layers: int
    batch: int
    context: int

    @property
    def routing(self) -> dict:
        """``moe_routing`` keyword arguments: the V4.1-Flash profile's scoring with this top-k."""
        p = MOE_PROFILES[MOE_PROFILE]
        return {"top_k": self.top_k, "n_group": p["n_group"], "topk_group": p["topk_group"], "scoring": p["scoring"],
                    "routed_scaling_factor": p["routed_scaling_factor"], "renormalize": p["renormalize"]}

    def problems(self) -> list[str]:
        """What makes these sizes unrunnable (empty when they run)."""
        out = []
        for name in ("hidden", "heads", "latent", "rank", "swa", "page", "idx_heads", "idx_topk", "experts", "top_k",
                     "expert_dim", "engram_rows", "layers", "batch", "context"):
            if getattr(self, name) < 1:
                out.append(f"{name} must be >= 1, got {getattr(self, name)}")
        if out:
            return out
        if self.latent < 32 or self.latent & (self.latent - 1):
            out.append(f"latent {self.latent} must be a power of two >= 32")
        if self.page < 16 or self.page & (self.page - 1):
            out.append(f"page {self.page} must be a power of two >= 16")
        if self.top_k > self.experts:
            out.append(f"top_k {self.top_k} is more than the {self.experts} experts")
        if self.idx_topk > 4096:
            out.append(f"idx_topk {self.idx_topk} is more than the indexer's 4096")
        if self.context < 2:
            out.append(f"context {self.context} must be >= 2 (the new token and one before it)")
        if self.engram_rows < 2136:
            out.append(f"engram_rows {self.engram_rows} must be >= 2136 (24 distinct prime sub-tables)")
        return out


REAL = Dims(hidden=5120, heads=64, latent=512, rank=1536, swa=128, page=64, idx_heads=32, idx_topk=512,
            experts=384, top_k=6, expert_dim=128, engram_rows=8 << 20, layers=2, batch=1, context=32768)

TINY = Dims(hidden=64, heads=16, latent=64, rank=32, swa=16, page=64, idx_heads=4, idx_topk=32, experts=16, top_k=2,
            expert_dim=16, engram_rows=4096, layers=2, batch=2, context=200)
"""Interpreter-sized: every kernel still takes its real code path (sparse attention over the
indexer's top-k plus the SWA window, a partly filled last page, the prefetch a layer ahead)."""


def sized(base: Dims, **changes: int | None) -> Dims:
    """``base`` with the given fields changed (None leaves a field as it is)."""
    return replace(base, **{k: v for k, v in changes.items() if v is not None})
