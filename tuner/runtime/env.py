"""The identity of the GPU and software this process runs on (torch/triton only)."""
from __future__ import annotations

import contextlib
import functools
import os
import platform
from contextvars import ContextVar
from typing import Any, Iterator


INTERPRETER_GPU = "cpu-interpreter"
"""The GPU name of results measured through the interpreter (correct, not timed meaningfully)."""

_JUDGING: ContextVar[bool] = ContextVar("judging", default=False)


def interpreting() -> bool:
    """True when kernels run through Triton's CPU interpreter (TRITON_INTERPRET=1), except
    while configs are judged for a GPU target (``judging_for``)."""
    return not _JUDGING.get() and os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


_ASSUMED_CC: ContextVar[int | None] = ContextVar("assumed_cc", default=None)


@contextlib.contextmanager
def assume_target(cc: int | None) -> Iterator[None]:
    """Judge target-dependent search-space constraints for compute capability ``cc`` (e.g.
    90) instead of this machine's GPU: a pack made on an H200, verified on a laptop."""
    token = _ASSUMED_CC.set(cc)
    try:
        yield
    finally:
        _ASSUMED_CC.reset(token)


@contextlib.contextmanager
def judging_for(cc: int | None) -> Iterator[None]:
    """Judge configs as a GPU of compute capability ``cc`` would run them, with nothing run
    here: ``assume_target(cc)``, and ``interpreting()`` False in this context (the environment
    is left alone), so the constraints that keep interpreted runs feasible (one program at a
    time, its SM count) do not apply. ``verify-pack`` and ``--preflight`` judge this way.
    Launch nothing inside, and import the templates before (their import-time choices)."""
    token = _JUDGING.set(True)
    try:
        with assume_target(cc):
            yield
    finally:
        _JUDGING.reset(token)


def assumed_target_cc() -> int | None:
    """The compute capability set by ``assume_target``, None outside it."""
    return _ASSUMED_CC.get()


def target_cc() -> int:
    """Compute capability (e.g. 90, 100) of the visible GPU, or the one ``assume_target``
    names; 0 under the interpreter or without a GPU."""
    assumed = _ASSUMED_CC.get()
    if assumed is not None:
        return assumed
    import torch

    if interpreting() or not torch.cuda.is_available():
        return 0
    major, minor = torch.cuda.get_device_capability()
    return 10 * major + minor


_COUNTERS: dict[tuple, Any] = {}


def stream_counters(owner: str, device: Any, n: int) -> Any:
    """``n`` int32 counters for ``owner``'s in-kernel synchronisation on ``device``, one
    buffer per (owner, device, current stream), zeroed once: every launch must leave them
    zero again. Launches on one stream run in order, so they never share counters while
    running; two streams (two-batch overlap) get two buffers. Never reallocated: a CUDA
    graph captured with it keeps a valid pointer (callers allocate their largest size)."""
    import torch

    device = torch.device(device)
    key = (owner, device, torch.cuda.current_stream(device).cuda_stream if device.type == "cuda" else 0)
    buf = _COUNTERS.get(key)
    if buf is None:
        buf = _COUNTERS[key] = torch.zeros(n, dtype=torch.int32, device=device)
    if buf.numel() != n:
        raise ValueError(f"{owner}: counters of {buf.numel()} ints here, {n} asked for (one size per owner)")
    return buf


@functools.lru_cache(maxsize=None)
def gpu_identity() -> dict[str, Any]:
    """GPU name, compute capability, SM count, memory and the software versions.

    Without a GPU (or under the interpreter) the GPU is ``cpu-interpreter``: results
    measured there are correct but their times are not meaningful.
    """
    import torch
    import triton

    ident: dict[str, Any] = {
        "torch": torch.__version__.split("+")[0],
        "triton": triton.__version__,
        "cuda": torch.version.cuda or "",
        "python": platform.python_version(),
    }
    from tuner.runtime.target import Target

    if not Target.of().interpret:
        p = torch.cuda.get_device_properties(0)
        ident.update(gpu=p.name, cc=f"{p.major}.{p.minor}", sms=p.multi_processor_count,
                     memory_gb=round(p.total_memory / 2**30, 1),
                     driver=_driver_version())
    else:
        ident.update(gpu=INTERPRETER_GPU, cc="", sms=0, memory_gb=0, driver="")
    return ident


def _driver_version() -> str:
    try:
        import ctypes

        lib = ctypes.CDLL("libcuda.so.1")
        v = ctypes.c_int()
        lib.cuDriverGetVersion(ctypes.byref(v))
        return f"{v.value // 1000}.{(v.value % 1000) // 10}"
    except OSError:
        return ""
