"""Tolerances and the error rule, with messages that show the worst elements.

Rule (DESIGN.md): ``|kernel - ref| <= 2*|eager_same_dtype - ref| + atol`` where a
lower-precision eager exists, else a fixed dtype-aware bound ``atol + rtol*|ref|``.
"""
from __future__ import annotations

import torch


def _worst(diff: torch.Tensor, out: torch.Tensor, ref: torch.Tensor, n: int = 3) -> str:
    flat = diff.flatten()
    k = min(n, flat.numel())
    idx = torch.topk(flat.nan_to_num(float("inf")), k).indices
    parts = []
    for i in idx.tolist():
        pos = tuple(int(x) for x in torch.unravel_index(torch.tensor(i), diff.shape))
        parts.append(f"{pos}: got {out.flatten()[i].item():.6g} want {ref.flatten()[i].item():.6g}")
    return "; ".join(parts)


def assert_close(name: str, out: torch.Tensor, ref: torch.Tensor, *, atol: float, rtol: float = 0.0,
                 eager: torch.Tensor | None = None) -> None:
    """Raise ``AssertionError`` naming the worst elements when ``out`` is off ``ref``.

    With ``eager`` (the same math in the kernel's own low precision), the bound per
    element is ``2*|eager - ref| + atol``; else ``atol + rtol*|ref|``.
    """
    if out.shape != ref.shape:
        raise AssertionError(f"{name}: shape {tuple(out.shape)} != {tuple(ref.shape)}")
    o, r = out.double(), ref.double()
    if torch.isnan(o).any() and not torch.isnan(r).any():
        raise AssertionError(f"{name}: NaN in output")
    diff = (o - r).abs()
    diff = torch.where(torch.isinf(o) & torch.isinf(r) & (o == r), torch.zeros_like(diff), diff)
    if eager is not None:
        bound = 2 * (eager.double() - r).abs() + atol
    else:
        bound = atol + rtol * r.abs()
    bad = ~(diff <= bound)
    if bad.any():
        n = int(bad.sum())
        raise AssertionError(f"{name}: {n}/{diff.numel()} elements off; worst {_worst(diff * bad, o, r)}")


def assert_equal(name: str, out: torch.Tensor, ref: torch.Tensor) -> None:
    """Exact equality (integer outputs, layouts), naming the first differences."""
    if out.shape != ref.shape:
        raise AssertionError(f"{name}: shape {tuple(out.shape)} != {tuple(ref.shape)}")
    ne = out.cpu() != ref.cpu()
    if ne.any():
        idx = ne.nonzero()[:3].tolist()
        shown = "; ".join(f"{tuple(i)}: got {out.cpu()[tuple(i)].item()} want {ref.cpu()[tuple(i)].item()}" for i in idx)
        raise AssertionError(f"{name}: {int(ne.sum())}/{ne.numel()} differ; first {shown}")
