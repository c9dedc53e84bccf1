"""Integer helpers for the launchers' host code.

``triton.cdiv`` and ``triton.next_power_of_2`` are ``ConstexprFunction`` objects: callable
from Python, but each call goes through the constexpr wrapper (~2 us on the host, measured
with Triton 3.6 and 3.9). A launcher makes 5-20 such calls to size its grid and constexprs,
which was most of an eager ``moe_routing`` call's Python time. These are the same
functions as plain Python (same results for every int, tested against Triton's).
Not for ``@triton.jit`` code: kernels use ``tl.cdiv`` and constexpr arithmetic.
Also the SM count the launchers size persistent grids by (one cached device query), the
launchers' knob checks and the data checks of a paged cache.
"""
from __future__ import annotations

import functools
import os
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


CHECK_INPUTS_ENV = "TUNER_CHECK_INPUTS"
"""Set to 1 to check a paged cache's ``seq_lens`` and ``block_table`` values on a GPU too (each
call then waits for the GPU once)."""


def check_paged(block_table: torch.Tensor, seq_lens: torch.Tensor, pages: int, page: int, *,
                clamp: bool = False) -> None:
    """ValueError where a sequence is longer than its row of ``block_table`` holds
    (``block_table.shape[1] * page``) or negative, or a page one of its tokens lives in is not
    in ``[0, pages)``: a kernel would read outside the cache. ``clamp``: the kernel clamps
    ``seq_lens`` to ``[0, block_table.shape[1] * page]`` itself, so only the pages are checked.
    Reading the values costs a host-device sync, so on a GPU this runs only with
    ``TUNER_CHECK_INPUTS=1`` and never while a CUDA graph is captured; tensors on the CPU (the
    interpreter, where such a read is a crash of the whole process) are always checked."""
    if seq_lens.device.type != "cpu":
        if os.environ.get(CHECK_INPUTS_ENV, "0") in ("", "0") or \
                (seq_lens.is_cuda and torch.cuda.is_current_stream_capturing()):
            return
    if seq_lens.numel() == 0:
        return
    width = block_table.shape[1]
    lens = seq_lens.long()
    if clamp:
        lens = lens.clamp(0, width * page)
    elif int(lens.min()) < 0 or int(lens.max()) > width * page:
        raise ValueError(f"seq_lens must lie in [0, {width * page}] (block_table.shape[1] x page size "
                         f"{width} x {page}), got {int(lens.min())}..{int(lens.max())}")
    used = torch.arange(width, device=lens.device)[None, :] < (lens[:, None] + page - 1) // page
    bad = used & ((block_table < 0) | (block_table >= pages))
    if bool(bad.any()):
        b, j = (int(v) for v in bad.nonzero()[0])
        raise ValueError(f"block_table[{b}, {j}] = {int(block_table[b, j])}: a page that sequence {b} uses "
                         f"must lie in [0, {pages})")
