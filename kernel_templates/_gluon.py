"""Triton's Gluon (explicit layouts), where the installed Triton has it.

Shared by the templates with a Gluon kernel (``nvfp4_attention``'s and ``mhc``'s ``GLUON``
configs, ``sparse_mqa``'s ``SCORE_GLUON``). Without Gluon every name is None, ``gluon_jit``
turns a kernel into None, and configs that ask for a Gluon kernel are refused by their
launcher and search space (``SCORE_GLUON``: the launcher scores with the Triton kernel).
"""
from __future__ import annotations

from tuner.runtime.target import Target

try:  # Gluon: Triton >= 3.5
    from triton.experimental import gluon
    from triton.experimental.gluon import language as gl
    from triton.experimental.gluon.language.nvidia import hopper
    from triton.experimental.gluon.language.nvidia.ampere import async_copy
    from triton.experimental.gluon.language.nvidia.hopper import mbarrier, tma
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor
    # cp.async into shared memory: async_copy_global_to_shared up to Triton 3.6, async_load later
    async_load = getattr(async_copy, "async_load", None) or async_copy.async_copy_global_to_shared
    # a TMA load into shared memory (tma.*: the same renaming)
    tma_load = getattr(tma, "async_load", None) or tma.async_copy_global_to_shared
    gluon_jit = gluon.jit
    # a host-side helper the kernels call with constexpr arguments (layouts built from tile sizes)
    gl_constexpr_function = getattr(gluon, "constexpr_function", lambda fn: fn)
    # a CTA-wide barrier: gl.thread_barrier in Triton 3.5-3.6, gl.barrier from 3.7 on
    cta_barrier = gl.thread_barrier if hasattr(gl, "thread_barrier") else gl.barrier
except ImportError:  # pragma: no cover - old Triton
    gluon = gl = hopper = async_copy = async_load = cta_barrier = mbarrier = tma = tma_load = TensorDescriptor = None

    def gluon_jit(fn):
        return None

    def gl_constexpr_function(fn):
        return fn


def gluon_available(target: Target) -> bool:
    """Gluon kernels can be built for ``target``: Triton has Gluon and the target is a GPU
    (the interpreter cannot run them)."""
    return gluon is not None and not target.interpret


def gluon_on_hopper(target: Target) -> bool:
    """``target`` is an sm_90 GPU and Gluon kernels can be built for it: where a ``GLUON``
    default applies."""
    return gluon_available(target) and 90 <= target.cc < 100
