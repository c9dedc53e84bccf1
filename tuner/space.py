"""Typed search-space parameters sharing one interface, so search code never
special-cases a parameter kind.

A search space is a ``Space``: an ordered mapping from a kernel's constexpr / launch name
(``BLOCK_T``, ``num_warps``, ...) to a parameter. Optuna sees every parameter under its
exact name, so its own tables, ours and the packs all use the same keys.

A parameter added to a space after configs were tuned can say what those configs ran as
(``absent=``: the value the launcher uses when the key is missing); ``Space.complete``
fills it in, so winners tuned on the older source stay loadable instead of being left out.
Declare it only where those winners still stand: nvfp4_attention's D_CHUNKS has none, because
its pre-D_CHUNKS winners are old defaults (D_CHUNKS 1) that today's default beats (H64 B=16
128K: 2150.9 us stored against 1569 us for today's D_CHUNKS 4, H200 run 27).
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any, Iterator, Mapping


@dataclass(frozen=True)
class Choice:
    """One of a fixed list of values (ints, strings, bools)."""

    choices: tuple[Any, ...]
    absent: Any = None  # what a config without this parameter ran as (None: such a config is invalid)

    def values(self) -> tuple[Any, ...]:
        return self.choices

    def suggest(self, trial: Any, name: str) -> Any:
        return trial.suggest_categorical(name, list(self.choices))


@dataclass(frozen=True)
class Pow2:
    """A power of two in [lo, hi]. Sampled as an ordered categorical."""

    lo: int
    hi: int
    absent: Any = None

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
    absent: Any = None

    def values(self) -> tuple[int, ...]:
        return tuple(range(self.lo, self.hi + 1, self.step))

    def suggest(self, trial: Any, name: str) -> int:
        return trial.suggest_int(name, self.lo, self.hi, step=self.step)


@dataclass(frozen=True)
class Bool:
    """True or False."""

    absent: Any = None

    def values(self) -> tuple[bool, ...]:
        return (False, True)

    def suggest(self, trial: Any, name: str) -> bool:
        return trial.suggest_categorical(name, [False, True])


Param = Choice | Pow2 | IntRange | Bool


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

    def complete(self, config: Mapping[str, Any]) -> dict[str, Any]:
        """``config`` with every missing parameter that declares an ``absent`` value filled
        with it (a config tuned before the parameter existed, as the launcher runs it)."""
        return {**{n: p.absent for n, p in self.items() if n not in config and p.absent is not None}, **config}

    def legal(self, name: str, value: Any) -> bool:
        """``value`` is one of parameter ``name``'s values, of its type (``True`` is not 1)."""
        return any(_same_kind(value, c) and value == c for c in self[name].values())

    def contains(self, config: Mapping[str, Any]) -> bool:
        """True when ``config`` names exactly this space's parameters with legal values."""
        return set(config) == set(self) and all(self.legal(n, config[n]) for n in self)
