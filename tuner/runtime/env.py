"""The identity of the GPU and software this process runs on (torch/triton only)."""
from __future__ import annotations

import functools
import platform
import threading
from typing import Any


INTERPRETER_GPU = "cpu-interpreter"
"""The GPU name of results measured through the interpreter (correct, not timed meaningfully)."""

_COUNTERS: dict[tuple, Any] = {}
_COUNTERS_LOCK = threading.Lock()


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
        with _COUNTERS_LOCK:  # two threads on one stream must share one buffer, not make two
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
