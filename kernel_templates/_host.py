"""Integer helpers for the launchers' host code.

``triton.cdiv`` and ``triton.next_power_of_2`` are ``ConstexprFunction`` objects: callable
from Python, but each call goes through the constexpr wrapper (~2 us on the host, measured
with Triton 3.6 and 3.9). A launcher makes 5-20 such calls to size its grid and constexprs,
which was most of an eager ``moe_routing`` call's Python time. These are the same
functions as plain Python (same results for every int, tested against Triton's).
Not for ``@triton.jit`` code: kernels use ``tl.cdiv`` and constexpr arithmetic.
Also the SM count the launchers size persistent grids by (one cached device query).
"""
from __future__ import annotations

import functools
from typing import Any

import torch


def cdiv(x: int, y: int) -> int:
    """``triton.cdiv``: ``(x + y - 1) // y``."""
    return (x + y - 1) // y


def next_power_of_2(n: int) -> int:
    """``triton.next_power_of_2``: the smallest power of two >= n (0 for n <= 0, as Triton's)."""
    return 1 << (n - 1).bit_length() if n > 0 else 0


@functools.lru_cache(maxsize=None)
def sm_count(device: Any, fallback: int) -> int:
    """SMs of a CUDA ``device``; ``fallback`` for any other (CPU under the interpreter, meta)."""
    d = torch.device(device)
    return torch.cuda.get_device_properties(d).multi_processor_count if d.type == "cuda" else fallback
