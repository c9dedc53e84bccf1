"""Signatures for compiling a template ahead of time (``tune lower``), from launch arguments.

Imported by kernel templates' ``lower_signatures``: torch and the standard library only.
"""
from __future__ import annotations

import inspect
from typing import Any, Mapping

import torch

_TRITON_TYPES = {torch.float32: "fp32", torch.float16: "fp16", torch.bfloat16: "bf16", torch.uint8: "u8",
                 torch.int8: "i8", torch.int16: "i16", torch.int32: "i32", torch.int64: "i64", torch.float8_e4m3fn: "fp8e4nv",
                 torch.float8_e5m2: "fp8e5"}


def constexpr_names(kern: Any) -> set[str]:
    """The ``tl.constexpr`` parameters of a jit kernel (also under the interpreter)."""
    fn = getattr(kern, "fn", kern)
    return {n for n, p in inspect.signature(fn).parameters.items() if "constexpr" in str(p.annotation)}


class Signature(dict):
    """A launch's signature (parameter -> type string) and what else the JIT takes from the
    launch: ``attrs``, its specialization of the argument values (``specialize``), and
    ``options``, the launch options the arguments carry (``num_warps``, ``num_stages``,
    ``maxnreg``). A plain dict to every caller that only wants the types."""

    attrs: dict[tuple[int], list[list[Any]]]
    options: dict[str, Any]


_LAUNCH_OPTIONS = ("num_warps", "num_stages", "maxnreg")


def signature(kern: Any, args: Mapping[str, Any]) -> tuple[Signature, dict[str, Any]]:
    """(signature, constexprs) of one launch: tensors (meta tensors will do) become
    pointers of their dtype, floats fp32, other scalars i32; constexprs keep their value
    (a defaulted parameter the launch leaves out, its default, as the JIT does). The
    signature also carries the JIT's specialization of the values (``attrs``; ints equal
    to 1 become constexprs, as ``specialize`` says) and the launch options in ``args``."""
    sig, cx = _types(kern, args)
    sig.attrs = specialize(kern, args, sig, cx)
    sig.options = {k: args[k] for k in _LAUNCH_OPTIONS if args.get(k) is not None}
    return sig, cx


def _types(kern: Any, args: Mapping[str, Any]) -> tuple[Signature, dict[str, Any]]:
    cx_names = constexpr_names(kern)
    sig = Signature()
    cx: dict[str, Any] = {}
    for name, prm in inspect.signature(getattr(kern, "fn", kern)).parameters.items():
        v = args[name] if name in args or prm.default is inspect.Parameter.empty else prm.default
        if name in cx_names:
            sig[name], cx[name] = "constexpr", v
        elif isinstance(v, torch.Tensor):
            sig[name] = "*" + _TRITON_TYPES[v.dtype]
        elif hasattr(v, "block_shape") and hasattr(v, "layout") and hasattr(v, "base"):
            sig[name] = _descriptor_type(v)
        elif isinstance(v, float):
            sig[name] = "fp32"
        else:
            sig[name] = "i32"
    return sig, cx


def _descriptor_type(desc: Any) -> str:
    """The JIT's type string of a Gluon TMA descriptor argument (Triton >= 3.7 has it as
    ``__mangle__``; for 3.5-3.6, whose specialization is native, an equivalent string: it
    writes the block shape with spaces, which parses the same)."""
    if hasattr(desc, "__mangle__"):
        return desc.__mangle__()
    block = ",".join(map(str, desc.block_shape))
    return f"tensordesc<{_TRITON_TYPES[desc.base.dtype]}[{block}],{desc.layout!r}>"


def _param_names(kern: Any) -> list[str]:
    return list(inspect.signature(getattr(kern, "fn", kern)).parameters)


def pointer_alignment(kern: Any, sig: Mapping[str, str]) -> dict[tuple[int], list[list[Any]]]:
    """``attrs`` saying every pointer argument is 16-byte aligned, as torch allocations are
    at launch; without it a lowering understates vector widths."""
    names = _param_names(kern)
    return {(names.index(n),): [["tt.divisibility", 16]] for n, t in sig.items() if t.startswith("*")}


def specialize(kern: Any, args: Mapping[str, Any], sig: dict[str, str],
               cx: dict[str, Any]) -> dict[tuple[int], list[list[Any]]]:
    """Specialize as the JIT does from real launch values: pointers and ints divisible by
    16 get ``tt.divisibility`` 16 (returned as ``attrs``); ints equal to 1 become
    constexprs (``sig`` and ``cx`` are updated in place)."""
    attrs: dict[tuple[int], list[list[Any]]] = {}
    for i, name in enumerate(_param_names(kern)):
        if sig[name] == "constexpr" or name not in args:  # not passed: its default (none is an int to specialize)
            continue
        v = args[name]
        if isinstance(v, torch.Tensor) or (type(v) is int and v % 16 == 0):
            attrs[(i,)] = [["tt.divisibility", 16]]
        elif type(v) is int and v == 1:
            sig[name], cx[name] = "constexpr", 1
    return attrs
