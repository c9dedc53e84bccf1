"""The kernel contract: what every `kernel_templates/<name>.py` exports.

Plain frozen dataclasses and a few helpers over workload dataclasses. This module is
imported by kernel templates and by the runtime loader, so it imports nothing heavy.
"""
from __future__ import annotations

import dataclasses
import json
import math
import typing
import zlib
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

Config = dict[str, Any]
"""A candidate configuration: keys are exactly the kernel's constexpr / launch names
plus ``num_warps`` and ``num_stages``. No alias layer anywhere."""

STATUSES = ("ok", "pruned", "compile_error", "out_of_resources", "mismatch", "timeout", "crashed")


def config_key(config: Mapping[str, Any]) -> str:
    """A config's key in the database and in lookups: its JSON with sorted keys."""
    return json.dumps(config, sort_keys=True)


def input_seed(workload_key: str, seed: int = 0) -> int:
    """The seed of a workload's inputs, stable across processes (``hash`` of a str is not):
    the same inputs for every trial and revalidation of one workload."""
    return seed * 100_003 + zlib.crc32(workload_key.encode()) % 100_000


def log2_distance(a: Mapping[str, Any], b: Mapping[str, Any], axes: typing.Iterable[str]) -> float:
    """Squared distance of two workloads in log2 space over the numeric ``axes`` (values below 1
    count as 1): what "nearest tuned workload" means everywhere."""
    return sum((math.log2(max(float(a[x]), 1.0)) - math.log2(max(float(b[x]), 1.0))) ** 2 for x in axes)


def workload_dict(workload: Any) -> dict[str, Any]:
    """The workload's axes as a plain dict (field order kept)."""
    return {f.name: getattr(workload, f.name) for f in dataclasses.fields(workload)}


def workload_key(workload: Any) -> str:
    """Stable string key for the database and packs: ``axis=value`` joined by ``,``."""
    return ",".join(f"{k}={v}" for k, v in workload_dict(workload).items())


def value_sort_key(value: Any) -> tuple:
    """Sorts one axis' values: numbers numerically (before), the rest as text."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return (0, float(value), "")
    return (1, 0.0, str(value))


def workload_sort_key(workload: Mapping[str, Any]) -> tuple:
    """Sorts workloads (their values, in axis order) by ``value_sort_key``."""
    return tuple(value_sort_key(v) for v in workload.values())


def canonical_workload(cls: type, values: Mapping[str, Any]) -> dict[str, Any]:
    """``values`` as the database keys a workload of class ``cls`` (``workload_key``): its
    axes in field order, each coerced to its field's type, an axis added since with a default
    filled in, then any other keys as given. A pack file's workloads (JSON with sorted keys)
    and winners stored before an axis existed so join the series of their tune history."""
    hints = typing.get_type_hints(cls)
    out: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if f.name in values:
            try:
                out[f.name] = hints[f.name](values[f.name])
            except (TypeError, ValueError):
                out[f.name] = values[f.name]
        elif f.default is not dataclasses.MISSING:
            out[f.name] = f.default
    return {**out, **{k: v for k, v in values.items() if k not in out}}


def workload_from_dict(cls: type, values: Mapping[str, Any]) -> Any:
    """Build a workload of ``cls`` from a dict, coercing each value to its field's type."""
    hints = typing.get_type_hints(cls)
    kwargs = {}
    for f in dataclasses.fields(cls):
        if f.name not in values:
            raise KeyError(f"workload {cls.__name__} needs axis {f.name!r}")
        kwargs[f.name] = hints[f.name](values[f.name])
    return cls(**kwargs)


def numeric_axes(cls: type) -> list[str]:
    """Names of the workload fields that are numbers (nearest-neighbour axes)."""
    hints = typing.get_type_hints(cls)
    return [f.name for f in dataclasses.fields(cls) if hints[f.name] in (int, float)]


@dataclass(frozen=True)
class KernelSpec:
    """Everything the framework needs to tune, verify and time one kernel family.

    ``make_inputs(workload, device, seed)`` returns the keyword arguments (tensors and
    scalars) shared by ``reference``, ``launch`` and every baseline. ``launch(config=...,
    **inputs)`` runs the Triton kernel(s) with one candidate configuration.
    ``verify(out, ref, inputs)`` raises ``AssertionError`` with a one-line reason when
    the kernel's outputs are wrong.
    """

    name: str
    workload: type
    make_inputs: Callable[[Any, str, int], dict[str, Any]]
    reference: Callable[..., Any]
    launch: Callable[..., Any]
    default_config: Callable[[Any, Any], Config]
    """``default_config(workload, target)``: the heuristic for a ``tuner.runtime.target.Target``."""
    cost: Callable[[Any], tuple[float, float]]
    verify: Callable[[Any, Any, dict[str, Any]], None]
    baselines: Mapping[str, Callable[..., Any]] = field(default_factory=dict)
    launch_bound: bool = False
    """Time with CUDA-graph replay: the kernel is short enough that launch gaps matter."""
    cold_l2: bool = True
    """Flush the L2 before each timed call: the inputs come from HBM in a real step (a KV
    cache, a weight). False where a producer kernel has just written them (router logits)."""
    description: str = ""


@dataclass(frozen=True)
class TrialResult:
    """What one candidate did in the worker. Times in microseconds."""

    status: str
    median_us: float | None = None
    p20_us: float | None = None
    p80_us: float | None = None
    error: str | None = None
    meaningful: bool = True
    """False when timed through the Triton interpreter: correctness is real, time is not."""
    phases: Mapping[str, float] | None = None
    """Seconds the trial spent in each phase (``tuner.cost.PHASES``); None where not measured."""

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"unknown trial status {self.status!r}")
