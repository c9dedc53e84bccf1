"""Floor time of a workload from its bytes and flops and the GPU's measured ceilings."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Ceilings:
    hbm_bytes_per_s: float
    """Achievable HBM bandwidth (device-to-device copy, read + write counted)."""
    flops_per_s: float
    """Dense bf16 matrix rate."""


# Measured on an H200 (2026-11-29):
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


def measure_ceilings(*, reps: int = 50, matmul: bool = False) -> dict[str, float]:
    """Measure this GPU's ceilings in the calling benchmark's own run (never quote a ratio
    against numbers from another day): device-to-device copy bandwidth counting bytes read
    plus written, optionally the bf16 8192^3 matmul rate, and the empty-launch floors."""
    import torch

    from tuner.timing import bench, empty_launch_floor

    n = 1 << 30  # 1 GiB each way, far beyond any L2
    src = torch.empty(n, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    t = bench(lambda: dst.copy_(src), reps=max(20, reps // 2), flush_l2=False)
    out = {"hbm_bytes_per_s": 2 * n / (t.median_us * 1e-6)}
    del src, dst
    if matmul:
        a = torch.randn(8192, 8192, dtype=torch.bfloat16, device="cuda")
        b = torch.randn_like(a)
        t_mm = bench(lambda: a @ b, reps=max(10, reps // 5), flush_l2=False)
        out["bf16_flops_per_s"] = 2 * 8192**3 / (t_mm.median_us * 1e-6)
        del a, b
    torch.cuda.empty_cache()
    out["launch_graph_us"] = empty_launch_floor(graph=True).median_us
    out["empty_launch_us"] = empty_launch_floor(graph=False).median_us
    return out
