"""Kernel name -> its KernelSpec and search space, discovered from the two folders.

A family is `kernel_templates/<k>` (a module, or a package whose ``__init__`` exports the
API) exporting ``SPEC`` plus `search_spaces/<k>.py` exporting ``SPACE``, ``constraints``,
``WORKLOADS`` and ``SMALL_WORKLOADS``. Modules of `kernel_templates` without a ``SPEC``
(shared helpers such as ``nvfp4``) are skipped.
"""
from __future__ import annotations

import ast
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
from tuner.runtime.target import Target
from tuner.space import Space
from tuner.spec import KernelSpec

log = logging.getLogger(__name__)

CONSTRAINTS_REFUSAL = "refused by the search space's constraints"
"""``Kernel.refusal`` of a config in the space, as it runs, that the constraints reject."""


class UnknownKernel(KeyError):
    """No family of that name."""

    def __str__(self) -> str:
        return str(self.args[0])


@dataclass(frozen=True)
class Kernel:
    """One tunable family: its contract, its search space and its default grids."""

    spec: KernelSpec
    space: Space
    constraints: Callable[[dict[str, Any], Any, Target], bool]
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

    def canonical(self, config: dict[str, Any], workload: Any, target: Target) -> dict[str, Any]:
        """``config`` as it runs on ``target`` (``Space.canonical``: knobs that do not apply
        pinned, values snapped). The study evaluates a draw in this form, so a draw that
        differs from a measured config only there is a duplicate, not a rejection."""
        return self.space.canonical(config, workload, target)

    def admits(self, config: dict[str, Any], workload: Any, target: Target) -> bool:
        """A study would measure ``config``: in the space, canonical, and within the constraints."""
        return self.refusal(config, workload, target) is None

    def refusal(self, config: dict[str, Any], workload: Any, target: Target) -> str | None:
        """Why a study would not measure ``config`` (completed) for ``workload`` on ``target``:
        outside the space, evaluated as another config (its canonical form), or refused by the
        constraints; None when it would. ``tune --try`` and ``benchmarks/config_sweep.py`` say it."""
        if not self.space.contains(config):
            bad = [f"{n}={config[n]!r}" for n in config if n in self.space and not self.space.legal(n, config[n])]
            bad += [f"{n} unknown" for n in config if n not in self.space]
            bad += [f"{n} missing" for n in self.space if n not in config]
            return "outside the search space" + (f" ({', '.join(bad)})" if bad else "")
        canon = self.canonical(config, workload, target)
        if canon != config:
            moved = ", ".join(f"{n} {config[n]!r} -> {canon[n]!r}" for n in config if canon.get(n) != config[n])
            return f"the search space evaluates it as another config ({moved})"
        if not self.constraints(config, workload, target):
            return CONSTRAINTS_REFUSAL
        return None

    def default_config(self, workload: Any, target: Target) -> dict[str, Any]:
        """The template's default for ``workload`` on ``target``."""
        return dict(self.spec.default_config(workload, target))

    def feasible(self, workload: Any) -> str | None:
        """Why ``workload`` cannot run here (e.g. memory), or None when it can."""
        fn = getattr(self.template, "feasible", None)
        return fn(workload) if fn else None

    def modules(self) -> list[ModuleType]:
        """The modules whose code makes this family's behaviour: the template (every module of
        its package), the search space, and the shared ``kernel_templates`` modules they import
        (format helpers, Gluon shims)."""
        mods = [self.template]
        if hasattr(self.template, "__path__"):
            for info in sorted(pkgutil.walk_packages(self.template.__path__, self.template.__name__ + "."),
                               key=lambda i: i.name):
                mods.append(importlib.import_module(info.name))
        mods.append(self.space_module)
        own = {m.__name__ for m in mods}
        shared = sorted({n for m in mods for n in _kernel_imports(inspect.getsource(m))} - own)
        return mods + [importlib.import_module(n) for n in shared]

    @functools.cached_property
    def source_hash(self) -> str:
        """The tuning key of the family's code (first 16 hex of a sha256): ``code_digest`` of
        each of ``modules()``, so comments, docstrings and formatting never move it."""
        h = hashlib.sha256()
        for mod in self.modules():
            h.update(mod.__name__.encode() + b"\0" + code_digest(inspect.getsource(mod)).encode() + b"\0")
        return h.hexdigest()[:16]


def _kernel_imports(source: str) -> set[str]:
    """The ``kernel_templates`` modules that ``source`` imports (``from kernel_templates.x import
    y``, ``import kernel_templates.x``, ``from kernel_templates import x``)."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module == "kernel_templates":
                out |= {f"kernel_templates.{a.name}" for a in node.names}
            elif node.module.startswith("kernel_templates."):
                out.add(node.module)
        elif isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.startswith("kernel_templates.")}
    return out


def _strip_docstrings(tree: ast.AST) -> ast.AST:
    """``tree`` without its string-only expression statements (docstrings of modules, classes
    and functions, and the attribute docstrings after an assignment): they never run."""
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list):
            kept = [n for n in body if not (isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant)
                                            and isinstance(n.value.value, str))]
            node.body = kept or [ast.Pass()]
    return tree


def code_digest(source: str) -> str:
    """sha256 of what ``source`` does: its syntax tree without docstrings or positions.
    Comments, blank lines, formatting and prose never reach it; any change to the code does.
    The same under every Python (3.10+) that parses ``source`` to the same tree."""
    return hashlib.sha256(_canonical(_strip_docstrings(ast.parse(source))).encode()).hexdigest()


def _canonical(node: Any) -> str:
    """``node`` written out field by field, fields that are None or empty left out. Not
    ``ast.dump``: its text differs between Pythons for the same code (3.12 writes every def's
    ``type_params=[]``, 3.13 leaves empty fields out), which made the key depend on the Python
    that computed it."""
    if isinstance(node, ast.AST):
        fields = ((f, getattr(node, f, None)) for f in node._fields)
        return type(node).__name__ + "(" + ",".join(
            f"{f}={_canonical(v)}" for f, v in fields if v is not None and v != []) + ")"
    if isinstance(node, list):
        return "[" + ",".join(_canonical(x) for x in node) + "]"
    return repr(node)


def legacy_source_hash(kernel: "Kernel") -> str:
    """The tuning key as it was computed before ``code_digest``: the raw source text of the
    template module, the search space and the dependencies. Kept so stored entries of code
    that did not change can be carried over to today's key (``tuner.store`` migration 0003)."""
    if hasattr(kernel.template, "__path__"):
        return ""  # a package never had a text key
    h = hashlib.sha256()
    for mod in (kernel.template, kernel.space_module):
        h.update(inspect.getsource(mod).encode())
    for dep in getattr(kernel.template, "SOURCE_DEPENDENCIES", ()):
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
