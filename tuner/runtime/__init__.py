"""The drop-in runtime loader: gives a model runtime the tuned config for each shape.

Imports only the standard library, torch and triton (never optuna or sqlalchemy). A
pack is data (JSON) checked against its manifest's checksums; lookups are cached.

    from tuner import runtime
    pack = runtime.load_pack("packs/nvidia-h200")
    sel = pack.select("moe_routing", {"tokens": 64, "profile": "dsv3"})
    sel.config, sel.how          # {"BLOCK_T": 8, ...}, "exact" | "nearest" | "default"

``TUNER_PACK=/path/to/pack`` makes that pack active for every kernel call whose
``config`` is None; ``use_pack(path)`` does the same from code.
"""
from __future__ import annotations

import hashlib
import json
import logging
import math
import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

from tuner.runtime.env import gpu_identity
from tuner.runtime.target import Target
from tuner.spec import log2_distance

__all__ = ["PackError", "Pack", "Selection", "load_pack", "use_pack", "active_pack", "select",
           "register_defaults", "gpu_identity", "Target", "PACK_SCHEMA", "sha256_file"]

log = logging.getLogger("tuner.runtime")

PACK_SCHEMA = 1
_DEFAULTS: dict[str, Callable[[dict[str, Any], Target], dict[str, Any]]] = {}


class PackError(Exception):
    """A pack that cannot be trusted: missing, corrupt, tampered, or of another schema."""


@dataclass(frozen=True)
class Selection:
    """The config to run and how it was found: ``exact``, ``nearest`` or ``default``."""

    config: dict[str, Any]
    how: str
    workload: dict[str, Any] | None = None
    """The pack entry's workload that supplied the config (None for defaults)."""


def register_defaults(kernel: str, fn: Callable[[dict[str, Any], Target], dict[str, Any]]) -> None:
    """Kernel templates register their default-config heuristic ((workload dict, target) -> config)."""
    _DEFAULTS[kernel] = fn


def _default(kernel: str, workload: Mapping[str, Any], target: Target | None) -> Selection:
    fn = _DEFAULTS.get(kernel)
    if fn is None:  # the family's module registers its heuristic when imported
        import importlib

        try:
            importlib.import_module(f"kernel_templates.{kernel}")
        except ImportError:
            pass
        fn = _DEFAULTS.get(kernel)
        if fn is None:
            raise KeyError(f"no kernel family {kernel!r} (known: {', '.join(sorted(_DEFAULTS)) or 'none'})")
    return Selection(dict(fn(dict(workload), target or Target.of())), "default", None)


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise PackError(f"{path}: not readable JSON ({e.__class__.__name__}: {e})") from None


@dataclass
class _KernelTable:
    categorical: tuple[str, ...]
    numeric: tuple[str, ...]
    exact: dict[tuple, dict[str, Any]]
    entries: list[dict[str, Any]]


def _table_key(table: _KernelTable, workload: Mapping[str, Any]) -> tuple:
    """A workload's key in ``table.exact``: its categorical axes as strings, then its numeric ones as floats."""
    return tuple(str(workload[a]) for a in table.categorical) + tuple(float(workload[a]) for a in table.numeric)


@dataclass
class Pack:
    """A loaded, verified kernel pack."""

    path: Path
    manifest: dict[str, Any]
    tables: dict[str, _KernelTable]
    usable: bool = True
    """False when the pack was made on another GPU: every select falls back to defaults."""
    counters: dict[str, Counter] = field(default_factory=dict)
    _cache: dict[tuple, Selection] = field(default_factory=dict, repr=False)
    _warned: set = field(default_factory=set, repr=False)

    @property
    def name(self) -> str:
        return self.manifest.get("name", self.path.name)

    def __repr__(self) -> str:
        n = sum(len(t.entries) for t in self.tables.values())
        return (f"Pack({self.name!r}, {str(self.path)!r}, {n} entries over {len(self.tables)} kernels, "
                f"{'usable' if self.usable else 'made for another GPU: defaults'})")

    def select(self, kernel: str, workload: Mapping[str, Any], target: Target | None = None) -> Selection:
        """The config for ``kernel`` at ``workload`` (a dict of axis -> value) on ``target``
        (None: the device at hand), whose defaults fill what the pack lacks. Cached."""
        target = target or Target.of()
        key = (kernel, tuple(workload.items()), target)
        sel = self._cache.get(key)
        if sel is None:
            sel = self._cache[key] = self._lookup(kernel, workload, target)
        c = self.counters.get(kernel)
        if c is None:
            c = self.counters[kernel] = Counter()
        c[sel.how] += 1
        return sel

    def entry(self, kernel: str, workload: Mapping[str, Any]) -> dict[str, Any] | None:
        """The pack's own entry for exactly ``workload`` (``config``, ``workload``, times), on
        whichever GPU it was made (``select`` is what to run here); None without one."""
        table = self.tables.get(kernel)
        if table is None:
            return None
        try:
            return table.exact.get(_table_key(table, workload))
        except (KeyError, TypeError, ValueError):
            return None

    def _lookup(self, kernel: str, workload: Mapping[str, Any], target: Target) -> Selection:
        table = self.tables.get(kernel)
        if not self.usable:
            return _default(kernel, workload, target)
        if table is None:
            self._warn_once(kernel, f"pack {self.name!r} has no entries for kernel {kernel!r}; using defaults")
            return _default(kernel, workload, target)
        try:
            key = _table_key(table, workload)
        except (KeyError, TypeError, ValueError):
            self._warn_once(kernel, f"workload {dict(workload)} does not name the axes of {kernel!r} "
                                    f"({', '.join(table.categorical + table.numeric)}); using defaults")
            return _default(kernel, workload, target)
        ckey, nkey = key[:len(table.categorical)], key[len(table.categorical):]
        hit = table.exact.get(key)
        if hit is not None:
            return Selection(dict(hit["config"]), "exact", hit["workload"])
        best, best_d = None, math.inf
        for e in table.entries:
            if tuple(str(e["workload"][a]) for a in table.categorical) != ckey:
                continue
            d = log2_distance(e["workload"], workload, table.numeric)
            if d < best_d:
                best, best_d = e, d
        if best is None or best.get("is_default"):
            # Where the tuner kept the default, the default heuristic is what was learnt:
            # this workload's own default, not a config sized for another shape (engram
            # host_thp T=4096 ran 2.6x slower on the T=256 default than on its own).
            return _default(kernel, workload, target)
        return Selection(dict(best["config"]), "nearest", best["workload"])

    def _warn_once(self, key: str, msg: str) -> None:
        if key not in self._warned:
            self._warned.add(key)
            log.warning(msg)

    def stats(self) -> dict[str, dict[str, int]]:
        """Per-kernel counts of exact / nearest / default selections so far."""
        return {k: {h: c[h] for h in ("exact", "nearest", "default")} for k, c in self.counters.items()}


def load_pack(path: str | os.PathLike, *, allow_other_gpu: bool = False) -> Pack:
    """Load and verify a pack folder; raise ``PackError`` if it cannot be trusted.

    A pack made on another GPU loads, warns once, and selects defaults (unless
    ``allow_other_gpu`` and the compute capability matches). Other software versions on
    the same GPU are used with one warning suggesting ``tune revalidate``.
    """
    root = Path(path)
    mpath = root / "manifest.json"
    if not mpath.is_file():
        raise PackError(f"{root}: no manifest.json (not a kernel pack)")
    manifest = _read_json(mpath)
    if not isinstance(manifest, dict):
        raise PackError(f"{mpath}: manifest is not a JSON object")
    if manifest.get("schema") != PACK_SCHEMA:
        raise PackError(f"{mpath}: pack schema {manifest.get('schema')!r} is not supported (want {PACK_SCHEMA})")
    files = manifest.get("files")
    kernels = manifest.get("kernels")
    if not isinstance(files, dict) or not isinstance(kernels, dict):
        raise PackError(f"{mpath}: manifest lacks 'files' or 'kernels'")
    if not isinstance(manifest.get("fingerprint") or {}, dict):
        raise PackError(f"{mpath}: manifest's 'fingerprint' is not a JSON object")
    for name, digest in files.items():
        fpath = root / name
        if Path(name).name != name:
            raise PackError(f"{root}: {name!r} in the manifest is not a file name of the pack's folder")
        if not fpath.is_file():
            raise PackError(f"{root}: file {name!r} listed in the manifest is missing")
        if sha256_file(fpath) != digest:
            raise PackError(f"{root}: checksum mismatch for {name} (corrupt or tampered)")
    tables: dict[str, _KernelTable] = {}
    for kernel, info in kernels.items():
        fname = info.get("file") if isinstance(info, dict) else None
        if fname not in files:
            raise PackError(f"{mpath}: kernel {kernel!r} names a file not covered by checksums")
        data = _read_json(root / fname)
        try:
            cat = tuple(data["categorical_axes"])
            num = tuple(data["numeric_axes"])
            entries = list(data["entries"])
            if not all(isinstance(e["config"], dict) and isinstance(e["workload"], dict) for e in entries):
                raise TypeError("an entry's config or workload is not a JSON object")
            exact = {tuple(str(e["workload"][a]) for a in cat) + tuple(float(e["workload"][a]) for a in num): e
                     for e in entries}
        except (KeyError, TypeError, ValueError) as e:
            raise PackError(f"{root / fname}: malformed kernel table ({e})") from None
        tables[kernel] = _KernelTable(cat, num, exact, entries)
    pack = Pack(root, manifest, tables)
    _grade(pack, allow_other_gpu)
    return pack


def _grade(pack: Pack, allow_other_gpu: bool) -> None:
    made = pack.manifest.get("fingerprint", {}) or {}
    here = gpu_identity()
    if made.get("gpu") == here["gpu"]:
        changed = [k for k in ("driver", "cuda", "torch", "triton") if made.get(k) != here.get(k)]
        if changed:
            log.warning("pack %r was tuned with other %s; using it. Run `tune revalidate` to re-check it here.",
                        pack.name, "/".join(changed))
        return
    if allow_other_gpu and made.get("cc") and made.get("cc") == here.get("cc"):
        log.warning("pack %r was tuned on %s, this is %s (same arch); using it as allowed.",
                    pack.name, made.get("gpu"), here["gpu"])
        return
    pack.usable = False
    log.warning("pack %r was tuned on %s, this is %s; using default configs.",
                pack.name, made.get("gpu", "an unknown GPU"), here["gpu"])


_ACTIVE: Pack | None = None
_ACTIVE_FROM_ENV = False


def use_pack(pack: str | os.PathLike | Pack | None) -> Pack | None:
    """Make ``pack`` (a path or a loaded Pack) the one kernel calls use; None clears it."""
    global _ACTIVE, _ACTIVE_FROM_ENV
    if not isinstance(pack, (str, os.PathLike, Pack, type(None))):
        raise TypeError(f"use_pack takes a pack folder's path, a loaded Pack or None, not {type(pack).__name__}")
    _ACTIVE = load_pack(pack) if isinstance(pack, (str, os.PathLike)) else pack
    _ACTIVE_FROM_ENV = True  # an explicit choice overrides TUNER_PACK
    return _ACTIVE


def active_pack() -> Pack | None:
    """The pack in use: set by ``use_pack``, else loaded once from ``TUNER_PACK``.

    A bad ``TUNER_PACK`` logs one warning and leaves no pack active (defaults run).
    """
    global _ACTIVE, _ACTIVE_FROM_ENV
    if not _ACTIVE_FROM_ENV:
        _ACTIVE_FROM_ENV = True
        env = os.environ.get("TUNER_PACK")
        if env:
            try:
                _ACTIVE = load_pack(env)
            except PackError as e:
                log.warning("TUNER_PACK ignored: %s", e)
    return _ACTIVE


def select(kernel: str, workload: Mapping[str, Any], target: Target | None = None) -> Selection:
    """Select through the active pack, or the kernel's default for ``target`` (None: the
    device at hand) when none is active."""
    pack = _ACTIVE if _ACTIVE_FROM_ENV else active_pack()
    if pack is None:
        return _default(kernel, workload, target)
    return pack.select(kernel, workload, target)
