"""Kernels as PyTorch custom ops: ``torch.ops.tuner.<function>``.

A kernel family declares each public function as an op with ``register_op``: its schema, the
function to run (the plain Python API, which takes its config from the active pack) and a
fake implementation that gives the outputs' shapes and dtypes from the inputs' alone. Through
the op, ``torch.compile(fullgraph=True)`` keeps the call in its graph (the op is opaque to it,
the fake stands in while tracing) and a CUDA graph captures the launches the function makes;
the config is chosen from host-side shapes, with no device sync.

Triton's interpreter runs one launch at a time in a process (it patches ``triton.language``
for the launch in progress and keeps the program id in one global), so under
``TRITON_INTERPRET=1`` the ops serialise their calls on ``INTERPRETER_LOCK``; on a GPU calls
from several threads run concurrently.

Imports only the standard library, torch and the runtime.
"""
from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import torch

from tuner.runtime.target import _interpreting

__all__ = ["INTERPRETER_LOCK", "NAMESPACE", "register_op", "registered_ops"]

NAMESPACE = "tuner"
INTERPRETER_LOCK = threading.RLock()
"""Held by an op's call while kernels run through Triton's interpreter."""

_OPS: dict[str, Any] = {}
_REGISTERING = threading.Lock()


def register_op(name: str, schema: str, impl: Callable[..., Any], fake: Callable[..., Any]) -> Any:
    """Define the custom op ``tuner::<name>`` (``torch.ops.tuner.<name>``) running ``impl`` and
    described by ``fake`` while tracing; ``schema`` is its signature in PyTorch's schema
    language (``"(Tensor x, *, int k=1) -> (Tensor, Tensor)"``). Outputs are new tensors,
    never views of the inputs, and nothing is mutated. Registering a name again returns the
    op already defined (a module imported twice). Returns the op (``torch.ops.tuner.<name>``)."""
    with _REGISTERING:
        op = _OPS.get(name)
        if op is not None:
            return op

        def run(*args: Any, **kwargs: Any) -> Any:
            if _interpreting():
                with INTERPRETER_LOCK:
                    return impl(*args, **kwargs)
            return impl(*args, **kwargs)

        run.__name__ = run.__qualname__ = name
        run.__doc__ = impl.__doc__
        defined = torch.library.custom_op(f"{NAMESPACE}::{name}", run, mutates_args=(), schema=schema)
        defined.register_fake(fake)
        op = _OPS[name] = getattr(getattr(torch.ops, NAMESPACE), name)
        return op


def registered_ops() -> dict[str, Any]:
    """The ops registered so far, by name (``torch.ops.tuner.<name>`` for each)."""
    with _REGISTERING:
        return dict(_OPS)
