"""Signatures for compiling a template ahead of time (``tune lower``), from launch arguments.

Imported by kernel templates' ``lower_signatures``: torch and the standard library only.
"""
from __future__ import annotations

import inspect
from typing import Any, Mapping

import torch

_TRITON_TYPES = {torch.float32: "fp32", torch.float16: "fp16", torch.bfloat16: "bf16", torch.uint8: "u8",
                 torch.int8: "i8", torch.int32: "i32", torch.int64: "i64", torch.float8_e4m3fn: "fp8e4nv",
                 torch.float8_e5m2: "fp8e5"}


def constexpr_names(kern: Any) -> set[str]:
    """The ``tl.constexpr`` parameters of a jit kernel (also under the interpreter)."""
    fn = getattr(kern, "fn", kern)
    return {n for n, p in inspect.signature(fn).parameters.items() if "constexpr" in str(p.annotation)}


def signature(kern: Any, args: Mapping[str, Any]) -> tuple[dict[str, str], dict[str, Any]]:
    """(signature, constexprs) of one launch: tensors (meta tensors will do) become
    pointers of their dtype, floats fp32, other scalars i32; constexprs keep their value."""
    cx_names = constexpr_names(kern)
    sig: dict[str, str] = {}
    cx: dict[str, Any] = {}
    for name in inspect.signature(getattr(kern, "fn", kern)).parameters:
        v = args[name]
        if name in cx_names:
            sig[name], cx[name] = "constexpr", v
        elif isinstance(v, torch.Tensor):
            sig[name] = "*" + _TRITON_TYPES[v.dtype]
        elif isinstance(v, float):
            sig[name] = "fp32"
        else:
            sig[name] = "i32"
    return sig, cx
