"""Floor time of a workload from its bytes and flops and the GPU's measured ceilings."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Ceilings:
    hbm_bytes_per_s: float
    """Achievable HBM bandwidth (device-to-device copy, read + write counted)."""
    flops_per_s: float
    """Dense bf16 matrix rate."""


# Measured on the device machine (KERNELS.md, "Measured H200 ceilings", 2026-11-29):
# 4.23 TB/s copy, ~790 TFLOP/s bf16 at 8192^3. Datasheet values are leads, not ceilings.
MEASURED: dict[str, Ceilings] = {
    "NVIDIA H200": Ceilings(4.23e12, 790e12),
}


def floor_us(bytes_: float, flops: float, gpu: str) -> float | None:
    """max(bytes / bandwidth, flops / peak) in microseconds, or None for an unknown GPU."""
    c = MEASURED.get(gpu)
    if c is None:
        return None
    return max(bytes_ / c.hbm_bytes_per_s, flops / c.flops_per_s) * 1e6
