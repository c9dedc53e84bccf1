"""Kernel name -> its KernelSpec and search space, discovered from the two folders.

A family is `kernel_templates/<k>.py` exporting ``SPEC`` plus `search_spaces/<k>.py`
exporting ``SPACE``, ``constraints``, ``WORKLOADS`` and ``SMALL_WORKLOADS``. Modules of
`kernel_templates` without a ``SPEC`` (shared helpers such as ``nvfp4``) are skipped.
"""
from __future__ import annotations

import functools
import hashlib
import importlib
import inspect
import logging
import pkgutil
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Callable

import kernel_templates
import search_spaces
from tuner.space import Space
from tuner.spec import KernelSpec

log = logging.getLogger(__name__)


class UnknownKernel(KeyError):
    """No family of that name."""

    def __str__(self) -> str:
        return str(self.args[0])


@dataclass(frozen=True)
class Kernel:
    """One tunable family: its contract, its search space and its default grids."""

    spec: KernelSpec
    space: Space
    constraints: Callable[[dict[str, Any], Any], bool]
    workloads: tuple[Any, ...]
    small_workloads: tuple[Any, ...]
    template: ModuleType
    space_module: ModuleType

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def cli_name(self) -> str:
        return self.spec.name.replace("_", "-")

    def canonical(self, config: dict[str, Any], workload: Any) -> dict[str, Any]:
        """``config`` with the knobs its own choices make irrelevant (another top-k path's,
        say) at the values the search space pins them to: the space module's optional
        ``canonical(config, workload)``. The study evaluates a draw in this form, so a draw
        that differs from a measured config only there is a duplicate, not a rejection.
        Configs the constraints admit come back unchanged."""
        fn = getattr(self.space_module, "canonical", None)
        return fn(config, workload) if fn else dict(config)

    def refusal(self, config: dict[str, Any], workload: Any) -> str | None:
        """Why a study would not measure ``config`` (completed) for ``workload``: outside the
        space, evaluated as another config (its canonical form), or refused by the constraints;
        None when it would. ``tune --try`` and ``benchmarks/config_sweep.py`` say it."""
        if not self.space.contains(config):
            bad = [f"{n}={config[n]!r}" for n in config if n in self.space and not self.space.legal(n, config[n])]
            return "outside the search space" + (f" ({', '.join(bad)})" if bad else "")
        canon = self.canonical(config, workload)
        if canon != config:
            moved = ", ".join(f"{n} {config[n]!r} -> {canon[n]!r}" for n in config if canon.get(n) != config[n])
            return f"the search space evaluates it as another config ({moved})"
        if not self.constraints(config, workload):
            return "refused by the search space's constraints"
        return None

    def default_config(self, workload: Any) -> dict[str, Any]:
        """The template's default for ``workload``, completed with the space's ``absent`` values as
        stored and exported configs are: a knob newer than the heuristic runs as that value (an
        uncompleted default fell outside the space and was never measured: session 22)."""
        return self.space.complete(self.spec.default_config(workload))

    def feasible(self, workload: Any) -> str | None:
        """Why ``workload`` cannot run here (e.g. memory), or None when it can."""
        fn = getattr(self.template, "feasible", None)
        return fn(workload) if fn else None

    @functools.cached_property
    def source_hash(self) -> str:
        """sha256 over the template's and the search space's source (first 16 hex)."""
        h = hashlib.sha256()
        for mod in (self.template, self.space_module):
            h.update(inspect.getsource(mod).encode())
        for dep in getattr(self.template, "SOURCE_DEPENDENCIES", ()):
            h.update(inspect.getsource(importlib.import_module(dep)).encode())
        return h.hexdigest()[:16]


@functools.lru_cache(maxsize=1)
def kernels() -> dict[str, Kernel]:
    """All families, by name, in alphabetical order."""
    found: dict[str, Kernel] = {}
    for info in sorted(pkgutil.iter_modules(search_spaces.__path__), key=lambda i: i.name):
        try:
            tmpl = importlib.import_module(f"kernel_templates.{info.name}")
            spec = getattr(tmpl, "SPEC", None)
            if not isinstance(spec, KernelSpec):
                continue
            sp = importlib.import_module(f"search_spaces.{info.name}")
        except Exception as e:  # noqa: BLE001 - one broken family must not take the tool down
            log.warning("kernel family %r is unavailable: %s: %s", info.name, type(e).__name__, e)
            continue
        found[spec.name] = Kernel(spec, sp.SPACE, sp.constraints, tuple(sp.WORKLOADS),
                                  tuple(sp.SMALL_WORKLOADS), tmpl, sp)
    return found


def get(name: str) -> Kernel:
    """The family called ``name`` (``moe_routing`` or its CLI spelling ``moe-routing``)."""
    ks = kernels()
    key = name.replace("-", "_")
    if key not in ks:
        raise UnknownKernel(f"unknown kernel {name!r} (known: {', '.join(ks) or 'none'})")
    return ks[key]


_ = kernel_templates  # the package whose modules are the templates
