"""What a workload of a kernel family is, for the runtime's one-line errors: the families
``kernel_templates`` ships (found without importing them) and each family's axes, from its
module's ``SPEC.workload``. Standard library only; a family is read once it is imported."""
from __future__ import annotations

import dataclasses
import importlib.util
import numbers
import pkgutil
import sys
import typing
from collections.abc import Mapping
from typing import Any


def families() -> list[str]:
    """The kernel families ``kernel_templates`` ships (its public packages), found without
    importing any of them (the family's import registers its defaults when first selected)."""
    try:
        spec = importlib.util.find_spec("kernel_templates")
    except (ImportError, ValueError):
        return []
    if spec is None or not spec.submodule_search_locations:
        return []
    return sorted(m.name for m in pkgutil.iter_modules(spec.submodule_search_locations)
                  if m.ispkg and not m.name.startswith("_"))


_AXES: dict[str, tuple[type, dict[str, Any], frozenset[str]]] = {}
"""Per family: its workload class, axis -> type (None: unchecked), the axes without a default."""


def axes_of(kernel: str) -> tuple[type, dict[str, Any], frozenset[str]] | None:
    """The axes of ``kernel``'s workload (its module's ``SPEC.workload``); None for a kernel
    registered from outside ``kernel_templates`` (its workloads go unchecked)."""
    axes = _AXES.get(kernel)
    if axes is not None:
        return axes
    cls = getattr(getattr(sys.modules.get(f"kernel_templates.{kernel}"), "SPEC", None), "workload", None)
    if not (isinstance(cls, type) and dataclasses.is_dataclass(cls)):
        return None
    try:
        hints = typing.get_type_hints(cls)
    except Exception:  # noqa: BLE001 - an annotation that does not resolve: that axis goes unchecked
        hints = {}
    fields = dataclasses.fields(cls)
    axes = (cls, {f.name: hints.get(f.name) for f in fields},
            frozenset(f.name for f in fields
                      if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING))
    _AXES[kernel] = axes
    return axes


def short(value: Any, n: int = 120) -> str:
    r = repr(value)
    return r if len(r) <= n else r[:n - 3] + "..."


_TYPE_NAMES = {int: "an integer", float: "a number", str: "a string"}


def _type_ok(value: Any, t: Any) -> bool:
    if t is int:
        return isinstance(value, numbers.Integral) and not isinstance(value, bool)
    if t is float:
        return isinstance(value, numbers.Real) and not isinstance(value, bool)
    if t is str:
        return isinstance(value, str)
    return True  # another annotation: the workload class checks it, if it does


def workload_problem(kernel: str, workload: Mapping[str, Any]) -> str | None:
    """Why ``workload`` is not one of the family ``kernel``'s (an axis missing, unknown or of the
    wrong type, a value its workload class refuses), None when it is or cannot be told."""
    axes = axes_of(kernel)
    if axes is None:
        return None
    cls, types, required = axes
    names = f"{kernel}'s axes: {', '.join(types)}"
    missing = [a for a in types if a in required and a not in workload]
    if missing:
        return f"axis {', '.join(map(repr, missing))} missing ({names})"
    unknown = [a for a in workload if a not in types]
    if unknown:
        return f"{', '.join(short(a, 40) for a in unknown)} not an axis of {kernel} ({names})"
    for a, v in workload.items():
        t = types[a]
        if not _type_ok(v, t):
            return f"axis {a!r} is {short(v, 40)} ({type(v).__name__}), not {_TYPE_NAMES[t]}"
    try:
        cls(**workload)  # the family's own checks (a profile it does not know, say)
    except (TypeError, ValueError) as e:
        return str(e).splitlines()[0][:200] if str(e) else type(e).__name__
    return None
