"""Typed search-space parameters sharing one interface, so search code never
special-cases a parameter kind.

A search space is a ``Space``: an ordered mapping from a kernel's constexpr / launch name
(``BLOCK_T``, ``num_warps``, ...) to a parameter. Optuna sees every parameter under its
exact name, so its own tables, ours and the packs all use the same keys.

Which knob matters when is declared here and nowhere else: a parameter's ``when(config,
workload, target)`` says where it applies (elsewhere it is pinned to ``off``), and its
``snap(value, config, workload, target)`` maps a value to the one that runs the same
(a block larger than the tokens is the tokens' block). ``Space.canonical`` applies both;
a draw that differs from a measured config only there is a duplicate, not a new trial.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Mapping

Cond = Callable[[Mapping[str, Any], Any, Any], bool]
"""``when(config, workload, target)``: the parameter applies to this config."""
Snap = Callable[[Any, Mapping[str, Any], Any, Any], Any]
"""``snap(value, config, workload, target)``: the value that runs the same as ``value`` here."""


@dataclass(frozen=True)
class Choice:
    """One of a fixed list of values (ints, strings, bools)."""

    choices: tuple[Any, ...]
    when: Cond | None = None
    off: Any = None
    snap: Snap | None = None

    def values(self) -> tuple[Any, ...]:
        return self.choices

    def suggest(self, trial: Any, name: str) -> Any:
        return trial.suggest_categorical(name, list(self.choices))


@dataclass(frozen=True)
class Pow2:
    """A power of two in [lo, hi]. Sampled as an ordered categorical."""

    lo: int
    hi: int
    when: Cond | None = None
    off: Any = None
    snap: Snap | None = None

    def __post_init__(self) -> None:
        for v in (self.lo, self.hi):
            if v < 1 or v & (v - 1):
                raise ValueError(f"Pow2 bounds must be powers of two, got {v}")
        if self.lo > self.hi:
            raise ValueError("Pow2 needs lo <= hi")

    def values(self) -> tuple[int, ...]:
        out, v = [], self.lo
        while v <= self.hi:
            out.append(v)
            v *= 2
        return tuple(out)

    def suggest(self, trial: Any, name: str) -> int:
        return trial.suggest_categorical(name, list(self.values()))


@dataclass(frozen=True)
class IntRange:
    """An integer in [lo, hi] with a step."""

    lo: int
    hi: int
    step: int = 1
    when: Cond | None = None
    off: Any = None
    snap: Snap | None = None

    def values(self) -> tuple[int, ...]:
        return tuple(range(self.lo, self.hi + 1, self.step))

    def suggest(self, trial: Any, name: str) -> int:
        return trial.suggest_int(name, self.lo, self.hi, step=self.step)


@dataclass(frozen=True)
class Bool:
    """True or False."""

    when: Cond | None = None
    off: Any = False
    snap: Snap | None = None

    def values(self) -> tuple[bool, ...]:
        return (False, True)

    def suggest(self, trial: Any, name: str) -> bool:
        return trial.suggest_categorical(name, [False, True])


Param = Choice | Pow2 | IntRange | Bool


def off_value(p: Param) -> Any:
    """The value a parameter is pinned to where its ``when`` fails: ``off``, else its first value."""
    return p.off if p.off is not None else p.values()[0]


def _same_kind(value: Any, choice: Any) -> bool:
    """A value of the choice's type: a bool is no int (``0 == False``), an int no float kernel
    constexpr (``2.0 == 2`` compiles another kernel, or none); a float choice takes an int."""
    if isinstance(choice, float) and not isinstance(value, bool):
        return isinstance(value, (int, float))
    return type(value) is type(choice)


class Space(dict):
    """Ordered ``name -> Param``; names are the kernel's own."""

    def suggest(self, trial: Any) -> dict[str, Any]:
        """Draw one config from an Optuna trial."""
        return {name: p.suggest(trial, name) for name, p in self.items()}

    def grid(self) -> Iterator[dict[str, Any]]:
        """Every config of the cartesian product, in a stable order."""
        names = list(self)
        for combo in itertools.product(*(self[n].values() for n in names)):
            yield dict(zip(names, combo))

    def size(self) -> int:
        n = 1
        for p in self.values():
            n *= len(p.values())
        return n

    def canonical(self, config: Mapping[str, Any], workload: Any, target: Any) -> dict[str, Any]:
        """``config`` as it runs on ``target`` for ``workload``: each parameter whose ``when``
        fails pinned to its ``off`` value, the others through their ``snap``, in declaration
        order (a ``when`` sees the earlier parameters already canonical). Keys outside the
        space are kept as given (``contains`` tells them)."""
        c = dict(config)
        for name, p in self.items():
            if name not in c:
                continue
            if p.when is not None and not p.when(c, workload, target):
                c[name] = off_value(p)
            elif p.snap is not None:
                c[name] = p.snap(c[name], c, workload, target)
        return c

    def legal(self, name: str, value: Any) -> bool:
        """``value`` is one of parameter ``name``'s values, of its type (``True`` is not 1)."""
        return any(_same_kind(value, c) and value == c for c in self[name].values())

    def contains(self, config: Mapping[str, Any]) -> bool:
        """True when ``config`` names exactly this space's parameters with legal values."""
        return set(config) == set(self) and all(self.legal(n, config[n]) for n in self)
