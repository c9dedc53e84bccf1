"""The GPU (or interpreter) a config is planned, judged and launched for.

A ``Target`` is a plain value passed to defaults, search-space constraints and launch
planning: the device a tensor lives on (``Target.of``), or one named on the command line
(``Target.named("sm_100")``: a pack made on an H200 judged on a laptop). Nothing reads a
global switch: the same process can judge configs for sm_100 while running kernels through
the interpreter.
"""
from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from typing import Any


class NoBackend(RuntimeError):
    """Kernels asked to run where nothing can run them (CPU tensors, no interpreter)."""


@dataclass(frozen=True)
class Target:
    """What planning needs to know of the machine that runs a kernel."""

    name: str
    """``sm_90``, ``sm_100``, ... or ``interpreter``."""
    cc: int
    """Compute capability as major * 10 + minor (90, 100); 0 for the interpreter."""
    sms: int
    """Streaming multiprocessors: persistent grids and split factors are sized by it."""
    smem: int
    """Shared memory one block may use (bytes, the opt-in maximum)."""
    interpret: bool = False
    """Kernels run through Triton's CPU interpreter: one program at a time, so no grid-wide
    barrier and no Gluon; times are not meaningful."""

    @staticmethod
    def named(name: str) -> "Target":
        """A target by name (``sm_90``, ``sm_90a``, ``sm_100``, ``sm_100a``, ``sm_120``,
        ``interpreter``); ValueError naming the known ones otherwise."""
        try:
            return NAMED[name]
        except KeyError:
            raise ValueError(f"unknown target {name!r} (known: {', '.join(NAMED)})") from None

    @staticmethod
    def of(device: Any = None) -> "Target":
        """The target that runs kernels on ``device`` (a torch device, string or tensor; None:
        the current CUDA device if any): that GPU's properties, or the interpreter for a CPU
        tensor, under ``TRITON_INTERPRET=1``, or where no GPU is visible."""
        if device is not None and hasattr(device, "device"):
            device = device.device
        if _interpreting():
            return INTERPRETER
        import torch

        if device is None:
            if not torch.cuda.is_available():
                return INTERPRETER
            device = torch.device("cuda", torch.cuda.current_device())
        device = torch.device(device)
        if device.type != "cuda":
            if device.type == "meta":
                return INTERPRETER  # shapes only (fake tensors): nothing launches
            raise NoBackend(f"tensors on {device.type!r}: the kernels run on a CUDA GPU; without one, set "
                            "TRITON_INTERPRET=1 before importing them (Triton's CPU interpreter: correct, slow)")
        return _cuda_target(device.index if device.index is not None else torch.cuda.current_device())


def _interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


@functools.lru_cache(maxsize=None)
def _cuda_target(index: int) -> Target:
    import torch

    p = torch.cuda.get_device_properties(index)
    smem = getattr(p, "shared_memory_per_block_optin", 0) or 48 * 1024
    return Target(f"sm_{p.major}{p.minor}", 10 * p.major + p.minor, p.multi_processor_count, smem)


def of_fingerprint(fp: dict[str, Any]) -> Target:
    """The target an environment fingerprint (or a pack's) recorded: its compute capability
    and SM count (``"9.0"``, 132 -> sm_90 with 132 SMs); the interpreter where it names no GPU."""
    try:
        major, minor = str(fp.get("cc")).split(".")
        named = Target.named(f"sm_{int(major)}{int(minor)}")
    except ValueError:
        return INTERPRETER
    sms = fp.get("sms")
    if isinstance(sms, int) and not isinstance(sms, bool) and 0 < sms < 100_000:
        return Target(named.name, named.cc, sms, named.smem)
    return named


INTERPRETER = Target("interpreter", 0, 4, 227 * 1024, interpret=True)
"""Triton's interpreter: four 'SMs' keep interpreted grids (and tests) small."""

NAMED: dict[str, Target] = {
    "sm_90": Target("sm_90", 90, 132, 227 * 1024),      # H100 SXM / H200
    "sm_90a": Target("sm_90", 90, 132, 227 * 1024),
    "sm_100": Target("sm_100", 100, 148, 227 * 1024),   # B200
    "sm_100a": Target("sm_100", 100, 148, 227 * 1024),
    "sm_120": Target("sm_120", 120, 170, 99 * 1024),    # RTX 50 series
    "interpreter": INTERPRETER,
}
