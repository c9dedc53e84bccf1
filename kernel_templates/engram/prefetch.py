"""The Engram prefetcher: lookups on a side stream, overlapping the layers before their consumer.

Ids depend only on token ids, so the lookup for a layer can start as soon as the tokens
are known; the consumer waits on an event (``PrefetchHandle.wait``), never the host.
"""
from __future__ import annotations

from typing import Any

import torch

from kernel_templates.engram.lookup import launch, stage, unstage, workload_of
from kernel_templates.engram.table import EngramTable
from tuner import runtime
from tuner.runtime.target import Target

# A host-table prefetch runs as PREFETCH_CLUSTERS programs, each a cluster of two CTAs
# (NUM_CTAS=2) on a pair of SMs. The layers it hides behind run cluster-launched GEMMs: the
# overlap benchmark's is 64 clusters of 2 CTAs (128 of the H200's 132 SMs) that fill every
# register of their SMs. A lookup CTA on an SM breaks that SM's pair, and with 64 of the 66
# pairs needed, any broken pairs beyond two push clusters into a second wave. Measured on an
# H200 (docs/performance.md): 16 single-CTA programs (1/8 of the SMs) hid 54% of the lookup,
# 4 programs 53%, 132 one-warp programs 0-4%; two 2-CTA clusters (two whole pairs) hid
# 84-87%. Alone such a prefetch is slower (T=256: ~70 us on 4 SMs vs ~47 us on 16): the
# price of not stretching the layer beside it.
PREFETCH_CLUSTERS = 2
# STREAM in the prefetch tile: its reads evict-first, its output streaming, so that the lookup's
# bytes do not displace the layer's in the L2. Paired with the plain tile at T=4096 it hid as much
# or more (89.2 vs 78.3%, 87.8 vs 86.2%, 83.2 vs 83.1%); T=256 host_split overlap went 91.1% ->
# 95.8 / 95.9% (the spread between processes is as large).
PREFETCH_TILE = dict(ROWS=128, VEC=8, DEDUP=False, CHUNK_ROWS=0, STREAM=True, num_warps=32, num_stages=3, NUM_CTAS=2)
# STAGE: the prefetch copies the rows' bytes into HBM as they are (264 B a row written instead of the 512
# of bf16) and ``wait()`` dequantizes them on the consumer's stream (``stage`` / ``unstage``). Beside the
# layer's GEMMs the lookup's bf16 writes are what costs most (a write-only kernel from the same four SMs
# slows the layer 35-52%; the staged copy's own span grows 1-7% against the tile's 10-22%). Measured in
# two processes on an H200: host_split T=4096 hid 91.1 / 91.0% staged against 87.5 / 87.0% (exposed 183
# vs 214-223 us, the dequant included); host T=4096 91.4 vs 92.2% (exposed 186 vs 161 us) and every
# T=256 less (the ~2-4 us dequant is all exposed: host_split 84.6 vs 91.7%). So host_split stages from
# T=4096 (24 rows a token) on; the others, and shorter lookups, do not.
STAGE_PLACEMENTS = ("host_split",)
STAGE_MIN_ROWS = 4096 * 24
# The priority of the prefetcher's own side stream (CUDA: lower is higher). High priority
# (-1) hid no more than normal on an H200: 16 one-CTA programs 57% vs 54%, two clusters at
# T=256 91.6 / 91.5% vs 91.1 / 91.4% (host_split / host, five rounds each).
PREFETCH_PRIORITY = 0


def prefetch_config(config: dict[str, Any], placement: str = "host", clusters: int = PREFETCH_CLUSTERS,
                    target: Target | None = None, rows: int = 0) -> dict[str, Any]:
    """The launch config of a prefetched lookup of ``rows`` rows of a table at ``placement``,
    from the pack's ``config`` for its shape. Host tables (PCIe-bound): ``clusters`` programs
    of two CTAs each, 128-row tiles, 32 warps (``PREFETCH_TILE``; see PREFETCH_CLUSTERS for
    why), on ``target``'s SMs (None: the GPU at hand), staged (``STAGE``) where
    ``STAGE_PLACEMENTS`` and ``STAGE_MIN_ROWS`` say. HBM tables keep the pack's config: their
    gathers need every SM's bytes in flight (T=4096: 24.1 us with 2112 programs, several
    times that with 16)."""
    if placement == "hbm":
        return dict(config)
    if clusters < 1:
        raise ValueError(f"clusters must be >= 1, got {clusters}")
    sms = (target or Target.of()).sms
    staged = placement in STAGE_PLACEMENTS and rows >= STAGE_MIN_ROWS
    return dict(config, **PREFETCH_TILE, GRID_SM_FRAC=clusters / sms, STAGE=staged)


class PrefetchHandle:
    """One lookup in flight: ``wait()`` makes the current stream wait for it and returns the output.

    A staged lookup (``finish`` given) holds the staged rows; its first ``wait()`` runs
    ``finish`` (the dequant, ``unstage``) on the current stream and records a new event after
    it, so a later ``wait()``, on any stream, waits for the dequant and returns the same output.
    """

    def __init__(self, out: torch.Tensor | None, event: Any | None, keep: tuple[Any, ...] = (),
                 finish: Any | None = None, device: torch.device | None = None) -> None:
        self._out = out
        self._event = event
        self._keep = keep
        self._finish = finish
        self._device = device if device is not None else (out.device if out is not None else None)

    def ready(self) -> bool:
        """True when the side stream's part has finished (never blocks); a staged lookup's
        dequant runs at ``wait()`` on the consumer's stream, after which this covers it too."""
        return self._event is None or self._event.query()

    def wait(self) -> torch.Tensor:
        """Order the current stream after the lookup (no host sync) and return ``[..., 256]`` bf16."""
        cur = None
        if self._event is not None:
            cur = torch.cuda.current_stream(self._device)
            cur.wait_event(self._event)
            for t in (self._out, *self._keep[1:]):
                if t is not None:
                    t.record_stream(cur)  # the allocator must not recycle them while cur uses them
        if self._finish is not None:
            self._out, self._finish = self._finish(), None
            self._keep = self._keep[:1]  # the staged rows: recorded on cur above, freed once it is done
            if cur is not None:
                self._event = torch.cuda.Event()
                self._event.record(cur)  # a later wait(), on any stream, orders after the dequant
        return self._out


class EngramPrefetcher:
    """Runs lookups on a side stream so they overlap the layers before their consumer.

    ``submit(rows)`` orders the side stream after the current one (the rows were made
    there), launches the lookup into a fresh output and records an event; each handle
    owns its buffer, so several may be in flight. Without CUDA it runs synchronously.
    A staged config (``STAGE``, host_split from ``STAGE_MIN_ROWS`` rows by default) copies
    the rows' bytes on the side stream and dequantizes them at the handle's ``wait()``.
    With ``config=None`` each lookup runs with ``prefetch_config`` of the pack's config for
    its shape (host tables: ``clusters`` two-CTA clusters); a given ``config`` runs as is.
    Without a given ``stream`` it makes its own at ``priority`` (``PREFETCH_PRIORITY``).
    """

    def __init__(self, table: EngramTable, *, config: dict[str, Any] | None = None,
                 stream: Any | None = None, clusters: int = PREFETCH_CLUSTERS,
                 priority: int = PREFETCH_PRIORITY) -> None:
        self.table = table
        self.config = config
        self.clusters = clusters
        self.target = Target.of(table.device)
        cuda = table.device.type == "cuda" and not self.target.interpret
        self.stream = (stream or torch.cuda.Stream(table.device, priority=priority)) if cuda else None

    def submit(self, rows: torch.Tensor) -> PrefetchHandle:
        """Start the lookup of ``rows`` on the side stream; returns its handle."""
        cfg = self.config or prefetch_config(
            runtime.select("engram", workload_of(self.table, rows), self.target).config, self.table.placement,
            self.clusters, self.target, rows=rows.numel())
        if cfg.get("STAGE"):
            return self._submit_staged(cfg, rows)
        out, ev = self._on_side(lambda: launch(config=cfg, table=self.table, rows=rows), rows)
        return PrefetchHandle(out, ev, (rows,))

    def _submit_staged(self, cfg: dict[str, Any], rows: torch.Tensor) -> PrefetchHandle:
        """STAGE: the side stream copies the rows' bytes into HBM; ``wait()`` dequantizes them on
        the consumer's stream with the pack's config for an HBM table of this shape."""
        hbm = runtime.select("engram", dict(workload_of(self.table, rows), placement="hbm"), self.target).config
        shape = tuple(rows.shape)
        (vals, scales), ev = self._on_side(lambda: stage(cfg, self.table, rows), rows)
        return PrefetchHandle(None, ev, (rows, vals, scales), finish=lambda: unstage(hbm, vals, scales, shape),
                              device=self.table.device)

    def _on_side(self, work: Any, rows: torch.Tensor) -> tuple[Any, Any | None]:
        """``work()`` on the side stream, ordered after the current one (the rows were made there):
        its result and the event recorded after it. Without CUDA it runs here, with no event."""
        if self.stream is None:
            return work(), None
        self.stream.wait_stream(torch.cuda.current_stream(self.table.device))
        with torch.cuda.stream(self.stream):
            result = work()
            ev = torch.cuda.Event()
            ev.record(self.stream)
        rows.record_stream(self.stream)  # freed by the caller on its stream: not reused before we read it
        return result, ev
