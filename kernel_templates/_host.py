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


def check_knobs(family: str, config: Any, knobs: dict[str, tuple]) -> None:
    """ValueError (TypeError for a config that is no dict) naming the first knob of ``config``
    missing or of the wrong type or range, before anything is launched. ``knobs`` maps each
    knob to ``("pow2", lo, hi)``, ``("int", lo, hi)``, ``("bool",)`` or ``("in", values)``."""
    if not isinstance(config, dict):
        raise TypeError(f"{family}: config must be a dict of knobs, got {type(config).__name__}")
    missing = [k for k in knobs if k not in config]
    if missing:
        raise ValueError(f"{family}: config lacks {missing} (keys: {list(knobs)})")
    for k, (kind, *arg) in knobs.items():
        v = config[k]
        if kind == "bool":
            if not isinstance(v, bool):
                raise ValueError(f"{family}: {k} must be a bool, got {v!r}")
        elif kind == "in":
            if type(v) not in (int, str) or v not in arg[0]:
                raise ValueError(f"{family}: {k} must be one of {tuple(arg[0])}, got {v!r}")
        elif type(v) is not int or not arg[0] <= v <= arg[1] or kind == "pow2" and v & (v - 1):
            what = "a power of two" if kind == "pow2" else "an int"
            raise ValueError(f"{family}: {k} must be {what} in [{arg[0]}, {arg[1]}], got {v!r}")
