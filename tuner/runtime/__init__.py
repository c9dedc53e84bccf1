"""The drop-in runtime loader: gives a model runtime the tuned config for each shape.

Imports only the standard library, torch and triton (never optuna or sqlalchemy). A
pack is data (JSON) checked against its manifest's checksums; lookups are cached.

    from tuner import runtime
    pack = runtime.load_pack("packs/nvidia-h200")
    sel = pack.select("moe_routing", {"tokens": 64, "profile": "dsv3"})
    sel.config, sel.how          # {"BLOCK_T": 8, ...}, "exact" | "nearest" | "default"

``TUNER_PACK=/path/to/pack`` makes that pack active for every kernel call whose
``config`` is None; ``use_pack(path)`` does the same from code.

Errors: ``PackError`` for a pack that cannot be trusted; ``ValueError`` (one line, naming the
kernel) for a kernel name that is no family or a workload that is not one of the family's
(``select``, ``Pack.select``, ``warmup``); ``RuntimeError`` for ``warmup`` inside a CUDA graph capture.
"""
from __future__ import annotations

import hashlib
import importlib
import json
import logging
import math
import os
import re
import stat
import threading
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tuner.runtime.env import gpu_identity
from tuner.runtime.folder import Choice, choose
from tuner.runtime.target import Target
from tuner.runtime.workloads import families, short, workload_problem
from tuner.spec import log2_distance

__all__ = [
    "MANIFEST_SEAL",
    "PACK_SCHEMA",
    "Choice",
    "Pack",
    "PackError",
    "Selection",
    "Target",
    "active_pack",
    "gpu_identity",
    "load_pack",
    "manifest_digest",
    "pack_dirs",
    "register_check",
    "register_defaults",
    "register_warmup",
    "select",
    "sha256_file",
    "stats",
    "use_pack",
    "warmup",
]

log = logging.getLogger("tuner.runtime")

PACK_SCHEMA = 1
_DEFAULTS: dict[str, Callable[[dict[str, Any], Target], dict[str, Any]]] = {}
_CHECKS: dict[str, Callable[[dict[str, Any]], None]] = {}


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
    with _NO_PACK.lock:  # selections cached with an earlier heuristic are stale
        for key in [k for k in _NO_PACK.cache if k[0] == kernel]:
            del _NO_PACK.cache[key]


def register_check(kernel: str, fn: Callable[[dict[str, Any]], None]) -> None:
    """Kernel templates register their launcher's config check (raises ValueError or TypeError
    naming the knob): a pack's config it refuses is never launched, the default runs instead."""
    _CHECKS[kernel] = fn


def _default(kernel: str, workload: Mapping[str, Any], target: Target | None) -> Selection:
    fn = _DEFAULTS.get(kernel)
    if fn is None:
        _family(kernel)
        fn = _DEFAULTS[kernel]
    return Selection(dict(fn(dict(workload), target or Target.of())), "default", None)


def _family(kernel: str) -> None:
    """Make sure ``kernel``'s default heuristic is registered, importing ``kernel_templates.<kernel>``
    on demand (the family's module registers it); ValueError naming every family for a name that
    is none. An import error inside a family's own module propagates as it is."""
    if isinstance(kernel, str) and kernel in _DEFAULTS:
        return
    if isinstance(kernel, str) and _NAME.fullmatch(kernel):
        try:
            importlib.import_module(f"kernel_templates.{kernel}")
        except ModuleNotFoundError as e:
            if e.name not in ("kernel_templates", f"kernel_templates.{kernel}"):
                raise
    if not isinstance(kernel, str) or kernel not in _DEFAULTS:
        known = ", ".join(sorted(set(_DEFAULTS) | set(families()))) or "none"
        raise ValueError(f"unknown kernel {short(kernel, 64)}: not a kernel family (known: {known})") from None


def _check_workload(kernel: str, workload: Any) -> None:
    """Raise unless ``workload`` is one of ``kernel``'s: ValueError (one line, naming the kernel
    and what is wrong) for a kernel that is not a family, an axis missing, unknown or of the wrong
    type, or a value the family's workload refuses; TypeError for a workload that is not a dict.
    Run where a selection is first made (a cache miss), never on the cached path: a workload equal
    to one already selected (``3.0 == 3`` as dict keys compare) takes that selection unchecked."""
    _family(kernel)
    if not isinstance(workload, Mapping):
        raise TypeError(f"{kernel}: a workload is a dict of axis -> value, not {type(workload).__name__}") from None
    why = workload_problem(kernel, workload)
    if why:
        raise ValueError(f"{kernel} workload {short(dict(workload))}: {why}") from None


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


MANIFEST_SEAL = "manifest.sha256"
"""Beside ``manifest.json``: the sha256 of the canonical manifest (``manifest_digest``), so the
manifest's own fields (checksums, GPU fingerprint) are covered too."""

# What a pack may hold: a server reads it, so every limit is explicit.
MAX_MANIFEST_BYTES = 1 << 20
MAX_TABLE_BYTES = 16 << 20     # the shipped tables are ~10 KB each
MAX_ENTRIES = 100_000
MAX_KERNELS = 32               # kernel tables of one pack (five families today)
MAX_PACK_BYTES = 64 << 20      # all of a pack's tables together
MAX_DEPTH = 8                  # object/array nesting: a table is entries -> entry -> workload/config
MAX_INT = 2**53                # beyond it JSON numbers are not exact anywhere
MAX_STR = 256
MAX_WORKLOAD_INT = 2**40       # a workload axis (tokens, context, table rows)
MAX_CONFIG_INT = 2**31 - 1     # a knob
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")


def canonical_json(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False).encode()


def manifest_digest(manifest: Mapping[str, Any]) -> str:
    """The sha256 of the canonical form of a manifest (what ``manifest.sha256`` records)."""
    return hashlib.sha256(canonical_json(manifest)).hexdigest()


def _read_file(path: Path, limit: int) -> bytes:
    """The bytes of a regular file of the pack, read once (no symlink followed, no FIFO or
    device opened, at most ``limit`` bytes)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as e:
        if os.path.islink(path):
            raise PackError(f"{path}: a symbolic link (a pack holds its own files only)") from None
        raise PackError(f"{path}: cannot open ({e.strerror})") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise PackError(f"{path}: not a regular file")
        if st.st_size > limit:
            raise PackError(f"{path}: {st.st_size} bytes, more than a pack file may hold ({limit})")
        with os.fdopen(fd, "rb", closefd=False) as f:
            data = f.read(limit + 1)
    finally:
        os.close(fd)
    if len(data) > limit:
        raise PackError(f"{path}: more than {limit} bytes")
    return data


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number a pack may hold")


def _finite(text: str) -> float:
    v = float(text)
    if not math.isfinite(v):
        raise ValueError(f"{text[:20]} overflows a float")
    return v


def _bounded_int(text: str) -> int:
    if len(text) > 17 or abs(int(text)) > MAX_INT:
        raise ValueError(f"integer {text[:20]}{'...' if len(text) > 20 else ''} out of range")
    return int(text)


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            raise ValueError(f"duplicate key {k[:40]!r}")
        out[k] = v
    return out


def _depth(value: Any) -> int:
    deepest, todo = 0, [(value, 1)]
    while todo:
        v, d = todo.pop()
        if isinstance(v, (dict, list)):
            deepest = max(deepest, d)
            if d <= MAX_DEPTH:
                todo.extend((x, d + 1) for x in (v.values() if isinstance(v, dict) else v))
    return deepest


def parse_json(data: bytes, where: Path) -> Any:
    """JSON a server can trust: UTF-8, no NaN / Infinity / overflowing floats, integers within
    2**53, no duplicate keys, nesting at most ``MAX_DEPTH``; else ``PackError`` (one line)."""
    try:
        value = json.loads(data.decode("utf-8"), object_pairs_hook=_unique_keys, parse_constant=_no_constant,
                           parse_float=_finite, parse_int=_bounded_int)
    except RecursionError:
        raise PackError(f"{where}: JSON nested too deeply") from None
    except (UnicodeDecodeError, ValueError) as e:  # JSONDecodeError is a ValueError
        raise PackError(f"{where}: not valid pack JSON ({str(e).splitlines()[0][:200]})") from None
    if _depth(value) > MAX_DEPTH:
        raise PackError(f"{where}: JSON nested deeper than {MAX_DEPTH} levels")
    return value


def _read_json(path: Path, limit: int = MAX_TABLE_BYTES) -> Any:
    return parse_json(_read_file(path, limit), path)


def _scalar(value: Any, lo: int, hi: int) -> str | None:
    """Why ``value`` is not a scalar a pack entry may hold (None when it is)."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int):
        return None if lo <= value <= hi else f"{value} out of range [{lo}, {hi}]"
    if isinstance(value, float):
        return None if math.isfinite(value) and abs(value) <= hi else f"{value} out of range"
    if isinstance(value, str):
        return None if len(value) <= MAX_STR else f"a string of {len(value)} characters"
    return f"a {type(value).__name__}, not a number, string or boolean"


_TIMES = ("median_us", "p20_us", "p80_us", "default_median_us", "floor_us", "noise")


def _entry_problem(e: Any, cat: tuple[str, ...], num: tuple[str, ...]) -> str | None:
    """Why a table entry cannot be served (its shape and value types and ranges, checked the
    same for every family; what a knob's value means is its launcher's to check)."""
    if not isinstance(e, dict):
        return "not a JSON object"
    w, cfg = e.get("workload"), e.get("config")
    if not isinstance(w, dict) or not isinstance(cfg, dict):
        return "its workload or config is not a JSON object"
    if set(w) != set(cat) | set(num):
        return f"workload axes {sorted(w)[:8]} are not the table's ({', '.join(cat + num)})"
    for a in cat:
        if not isinstance(w[a], str) or not 0 < len(w[a]) <= 64:
            return f"workload axis {a!r} is not a short string"
    for a in num:
        v = w[a]
        if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= MAX_WORKLOAD_INT:
            return f"workload axis {a!r} = {str(v)[:40]} is not an integer in [1, {MAX_WORKLOAD_INT}]"
    if not cfg or len(cfg) > 64:
        return f"a config of {len(cfg)} knobs"
    for k, v in cfg.items():
        if not _NAME.fullmatch(k):
            return f"knob name {k[:40]!r} is not an identifier"
        why = _scalar(v, -MAX_CONFIG_INT, MAX_CONFIG_INT)
        if why:
            return f"knob {k} is {why}"
    for t in _TIMES:
        v = e.get(t)
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v < 1e12):
            return f"{t} = {str(v)[:40]} is not a time"
    if not isinstance(e.get("is_default", False), bool):
        return "is_default is not a boolean"
    return None


@dataclass
class _KernelTable:
    categorical: tuple[str, ...]
    numeric: tuple[str, ...]
    exact: dict[tuple, dict[str, Any]]
    entries: list[dict[str, Any]]


def _table_key(table: _KernelTable, workload: Mapping[str, Any]) -> tuple:
    """A workload's key in ``table.exact``: its categorical axes as strings, then its numeric ones as floats."""
    return tuple(str(workload[a]) for a in table.categorical) + tuple(float(workload[a]) for a in table.numeric)


class _Tally:
    """Selections cached and counted, safe from many threads: one lock around the cache writes,
    the counters and the one-time warnings (a lookup itself runs outside it)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.cache: dict[tuple, Selection] = {}
        self.counters: dict[str, Counter] = {}
        self.cold: Counter = Counter()
        self.warned: set[str] = set()

    def remember(self, key: tuple, sel: Selection, kernel: str, workload: Mapping[str, Any], owner: str) -> Selection:
        """Cache ``sel`` (the first one cached for ``key`` wins); a selection first made while a
        CUDA graph is being captured is counted ``cold`` and warned about once per kernel."""
        capturing = _capturing()
        with self.lock:
            sel = self.cache.setdefault(key, sel)
            if capturing:
                self.cold[kernel] += 1
        if capturing:
            self.warn_once(f"{kernel} cold", f"{owner}: {kernel} at {dict(workload)} was first selected inside a CUDA "
                                             "graph capture; a kernel not compiled before compiles during the capture. "
                                             "Call tuner.runtime.warmup(...) (or run the step once) before capturing.")
        return sel

    def count(self, kernel: str, how: str) -> None:
        with self.lock:
            c = self.counters.get(kernel)
            if c is None:
                c = self.counters[kernel] = Counter()
            c[how] += 1

    def warn_once(self, key: str, msg: str) -> None:
        with self.lock:
            if key in self.warned:
                return
            self.warned.add(key)
        log.warning(msg)

    def stats(self) -> dict[str, dict[str, int]]:
        with self.lock:
            return {k: {h: c[h] for h in ("exact", "nearest", "default")} for k, c in self.counters.items()}


def _capturing() -> bool:
    """A CUDA graph is being captured on this thread's current stream (no CUDA initialised: no)."""
    import torch

    return torch.cuda.is_initialized() and torch.cuda.is_current_stream_capturing()


@dataclass
class Pack:
    """A loaded, verified kernel pack. Its ``select`` is safe from many threads."""

    path: Path
    manifest: dict[str, Any]
    tables: dict[str, _KernelTable]
    usable: bool = True
    """False when the pack was made on another GPU: every select falls back to defaults."""
    chosen: Choice | None = None
    """Where the pack came from a folder of packs: which one and why (None: loaded by its own path)."""
    _tally: _Tally = field(default_factory=_Tally, repr=False)

    @property
    def name(self) -> str:
        return self.manifest.get("name", self.path.name)

    @property
    def counters(self) -> dict[str, Counter]:
        """Per kernel, a Counter of how its selections were found (``stats()`` is the copy to read)."""
        return self._tally.counters

    def __repr__(self) -> str:
        n = sum(len(t.entries) for t in self.tables.values())
        return (f"Pack({self.name!r}, {str(self.path)!r}, {n} entries over {len(self.tables)} kernels, "
                f"{'usable' if self.usable else 'made for another GPU: defaults'})")

    def select(self, kernel: str, workload: Mapping[str, Any], target: Target | None = None, *,
               count: bool = True) -> Selection:
        """The config for ``kernel`` at ``workload`` (a dict of axis -> value) on ``target``
        (None: the device at hand), whose defaults fill what the pack lacks: the entry for this
        workload, else the nearest tuned one (same categorical axes), else the default. Never
        tunes, never raises for a shape outside the pack's grid; cached (host-side shapes only,
        no device sync) and counted (``stats()``) unless ``count`` is False.

        Raises ValueError (one line, naming the kernel and what is wrong) for a kernel that is not
        a family (the message lists them) or a workload that is not one of its: an axis missing,
        unknown or of the wrong type, a value the family refuses; TypeError for a workload that is
        not a dict. Checked once per distinct workload, where its selection is first made."""
        target = target or Target.of()
        try:
            key = (kernel, tuple(workload.items()), target)
            sel = self._tally.cache.get(key)
        except (AttributeError, TypeError):  # not a dict, or a value that is no axis' (unhashable)
            _check_workload(kernel, workload)
            raise
        if sel is None:
            _check_workload(kernel, workload)  # once per distinct workload: a miss, never a cached call
            sel = self._tally.remember(key, self._resolve(kernel, workload, target), kernel, workload,
                                       f"pack {self.name!r}")
        if count:
            self._tally.count(kernel, sel.how)
        return sel

    def _resolve(self, kernel: str, workload: Mapping[str, Any], target: Target) -> Selection:
        sel = self._lookup(kernel, workload, target)
        check = _CHECKS.get(kernel)
        if check is not None and sel.how != "default":
            try:
                check(dict(sel.config))
            except (ValueError, TypeError) as e:  # a pack's config its launcher refuses
                self._warn_once(f"{kernel} check", f"pack {self.name!r}: a {kernel} config is refused by its "
                                                   f"launcher ({e}); using defaults there")
                sel = _default(kernel, workload, target)
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
        ckey = key[:len(table.categorical)]
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
        self._tally.warn_once(key, msg)

    def stats(self) -> dict[str, dict[str, int]]:
        """Per-kernel counts of exact / nearest / default selections so far."""
        return self._tally.stats()

    def cold(self) -> dict[str, int]:
        """Per kernel, the selections first made inside a CUDA graph capture (none after a warmup)."""
        with self._tally.lock:
            return dict(self._tally.cold)


MAX_PACKS = 64
"""Packs a folder of packs may hold."""


def load_pack(path: str | os.PathLike, *, allow_other_gpu: bool = False, gpu: Mapping[str, Any] | None = None,
              quiet: bool = False) -> Pack:
    """Load and verify a pack, or the pack of a folder of packs that serves this GPU; raise
    ``PackError`` if it cannot be trusted.

    A pack made on another GPU loads, warns once, and selects defaults (unless
    ``allow_other_gpu`` and the compute capability matches). Other software versions on
    the same GPU are used with one warning suggesting ``tune revalidate``.

    A folder of packs (subfolders each holding a pack: ``packs/`` with ``nvidia-h200/``,
    ``nvidia-h100/``) gives the pack made on this GPU, else the nearest by compute capability
    with one warning (``folder.choose``; its configs run where the compute capability is the
    same, else defaults). Every pack's manifest is verified before one is chosen; the chosen
    pack says which and why (``Pack.chosen``, ``stats()``). ``gpu``: the GPU to choose and
    grade for, as ``gpu_identity()``'s fields (None: this process's). ``quiet``: the warnings
    about the GPU (made on another one, the folder's nearest) logged at debug level only, for
    callers that run none of the pack's kernels here (verify, export, revalidate, a report).
    """
    try:
        return _load(Path(path), allow_other_gpu, dict(gpu) if gpu is not None else gpu_identity(),
                     logging.DEBUG if quiet else logging.WARNING)
    except PackError:
        raise
    except Exception as e:  # noqa: BLE001 - whatever a crafted pack trips, the caller gets one PackError
        raise PackError(f"{path}: cannot load the pack ({type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''})") from None


def _load(root: Path, allow_other_gpu: bool, here: dict[str, Any], level: int = logging.WARNING) -> Pack:
    dirs = pack_dirs(root)
    if dirs is None:
        pack = _load_pack(root)
        msg = _grade(pack, allow_other_gpu, here)
        if msg:
            log.log(level, msg)
        return pack
    if not dirs:
        raise PackError(f"{root}: no manifest.json (not a kernel pack, nor a folder of packs)")
    packs = {d.name: _manifest(d) for d in dirs}
    choice = choose(packs, here)
    pack = _load_pack(root / choice.name)
    pack.chosen = choice
    _grade(pack, choice.runs_configs, here)  # one warning below says it all
    if choice.how != "gpu":
        log.log(level, "%s: %s", root, choice.reason)
    else:
        log.info("%s: %s", root, choice.reason)
    return pack


def pack_dirs(root: Path) -> list[Path] | None:
    """The packs of the folder of packs ``root`` by name (its subfolders holding a manifest.json;
    a symbolic link among them, or more than ``MAX_PACKS``, is a ``PackError``); None where
    ``root`` is itself a pack or no folder, [] where it holds no pack."""
    if (root / "manifest.json").exists() or (root / "manifest.json").is_symlink() or not root.is_dir():
        return None
    try:
        subs = sorted(os.scandir(root), key=lambda d: d.name)
    except OSError as e:
        raise PackError(f"{root}: cannot list the folder ({e.strerror})") from None
    found: list[Path] = []
    for d in subs:
        if not (Path(d.path) / "manifest.json").exists() and not (Path(d.path) / "manifest.json").is_symlink():
            continue  # not a pack (a README, an unrelated folder)
        if d.is_symlink() or not d.is_dir(follow_symlinks=False):
            raise PackError(f"{root}: {d.name!r} is a symbolic link (a folder of packs holds its own packs only)")
        if len(found) == MAX_PACKS:
            raise PackError(f"{root}: more than {MAX_PACKS} packs")
        found.append(Path(d.path))
    return found


def _manifest(root: Path) -> dict[str, Any]:
    """The pack's manifest, checked: a JSON object of our schema, sealed by ``manifest.sha256``
    where the pack has one."""
    mpath = root / "manifest.json"
    if not mpath.is_file() and not mpath.is_symlink():
        raise PackError(f"{root}: no manifest.json (not a kernel pack, nor a folder of packs)")
    manifest = _read_json(mpath, MAX_MANIFEST_BYTES)
    if not isinstance(manifest, dict):
        raise PackError(f"{mpath}: manifest is not a JSON object")
    schema = manifest.get("schema")
    if type(schema) is not int or schema != PACK_SCHEMA:  # (true == 1 in Python)
        raise PackError(f"{mpath}: pack schema {str(schema)[:40]!r} is not supported (want {PACK_SCHEMA})")
    if not isinstance(manifest.get("fingerprint") or {}, dict):
        raise PackError(f"{mpath}: manifest's 'fingerprint' is not a JSON object")
    if not isinstance(manifest.get("name", ""), str) or len(manifest.get("name", "")) > MAX_STR:
        raise PackError(f"{mpath}: manifest's 'name' is not a short string")
    seal = root / MANIFEST_SEAL
    if not seal.exists() and not seal.is_symlink():
        raise PackError(f"{root}: no {MANIFEST_SEAL}: the manifest is not covered by a checksum (export the pack "
                        "again with `tune export`)")
    if _read_file(seal, 256).decode("ascii", "replace").strip() != manifest_digest(manifest):
        raise PackError(f"{root}: {MANIFEST_SEAL} does not match manifest.json (corrupt or tampered)")
    return manifest


def _load_pack(root: Path) -> Pack:
    manifest = _manifest(root)
    mpath = root / "manifest.json"
    files = manifest.get("files")
    kernels = manifest.get("kernels")
    if not isinstance(files, dict) or not isinstance(kernels, dict):
        raise PackError(f"{mpath}: manifest lacks 'files' or 'kernels'")
    if len(kernels) > MAX_KERNELS or len(files) > MAX_KERNELS:
        raise PackError(f"{mpath}: more than {MAX_KERNELS} kernels or files")
    blobs: dict[str, bytes] = {}
    total = 0
    for name, digest in files.items():
        if not isinstance(name, str) or Path(name).name != name or name in ("manifest.json", MANIFEST_SEAL) \
                or not name.endswith(".json"):
            raise PackError(f"{root}: {str(name)[:80]!r} in the manifest is not a file name of the pack's folder (a .json table)")
        fpath = root / name
        if not fpath.exists() and not fpath.is_symlink():
            raise PackError(f"{root}: file {name!r} listed in the manifest is missing")
        data = _read_file(fpath, MAX_TABLE_BYTES)
        total += len(data)
        if total > MAX_PACK_BYTES:
            raise PackError(f"{root}: tables of more than {MAX_PACK_BYTES >> 20} MB in all")
        if hashlib.sha256(data).hexdigest() != digest:  # the bytes checked are the bytes parsed
            raise PackError(f"{root}: checksum mismatch for {name} (corrupt or tampered)")
        blobs[name] = data
    tables: dict[str, _KernelTable] = {}
    used: set[str] = set()
    for kernel, info in kernels.items():
        fname = info.get("file") if isinstance(info, dict) else None
        if not _NAME.fullmatch(kernel):
            raise PackError(f"{mpath}: {kernel[:64]!r} is not a kernel name")
        if not isinstance(fname, str) or fname not in blobs:
            raise PackError(f"{mpath}: kernel {str(kernel)[:64]!r} names a file not covered by checksums")
        if fname in used:  # each table is read once
            raise PackError(f"{mpath}: {fname} is named by more than one kernel")
        used.add(fname)
        where = root / fname
        data = parse_json(blobs[fname], where)
        if not isinstance(data, dict):
            raise PackError(f"{where}: a kernel table is a JSON object")
        cat, num, entries = data.get("categorical_axes"), data.get("numeric_axes"), data.get("entries")
        if not (isinstance(cat, list) and isinstance(num, list) and isinstance(entries, list)) \
                or not all(isinstance(a, str) and _NAME.fullmatch(a) for a in cat + num) or len(cat + num) > 16:
            raise PackError(f"{where}: malformed kernel table (categorical_axes, numeric_axes, entries)")
        if len(entries) > MAX_ENTRIES:
            raise PackError(f"{where}: {len(entries)} entries, more than a table may hold ({MAX_ENTRIES})")
        cat, num = tuple(cat), tuple(num)
        for i, e in enumerate(entries):
            why = _entry_problem(e, cat, num)
            if why:
                raise PackError(f"{where}: entry {i}: {why}")
        exact = {tuple(str(e["workload"][a]) for a in cat) + tuple(float(e["workload"][a]) for a in num): e
                 for e in entries}
        tables[kernel] = _KernelTable(cat, num, exact, entries)
    return Pack(root, manifest, tables)


def _grade(pack: Pack, allow_other_gpu: bool, here: Mapping[str, Any]) -> str | None:
    """Mark ``pack`` unusable where it was made on another GPU (unless ``allow_other_gpu`` and
    the compute capability is the same); the warning to log, if any."""
    made = pack.manifest.get("fingerprint", {}) or {}
    if made.get("gpu") == here.get("gpu"):
        changed = [k for k in ("driver", "cuda", "torch", "triton") if made.get(k) != here.get(k)]
        if changed:
            return (f"pack {pack.name!r} was tuned with other {'/'.join(changed)}; using it. Run `tune revalidate` "
                    "to re-check it here.")
        return None
    if allow_other_gpu and made.get("cc") and made.get("cc") == here.get("cc"):
        return (f"pack {pack.name!r} was tuned on {made.get('gpu')}, this is {here.get('gpu')} (same arch); using it "
                "as allowed.")
    pack.usable = False
    return (f"pack {pack.name!r} was tuned on {made.get('gpu', 'an unknown GPU')}, this is {here.get('gpu')}; using "
            "default configs.")


_ACTIVE: Pack | None = None
_ACTIVE_FROM_ENV = False
_ACTIVE_LOCK = threading.Lock()
_NO_PACK = _Tally()
"""Selections made with no pack active: the defaults, cached and counted as a pack's are."""


def use_pack(pack: str | os.PathLike | Pack | None) -> Pack | None:
    """Make ``pack`` (a pack's path, a folder of packs, a loaded Pack) the one kernel calls use;
    None clears it."""
    global _ACTIVE, _ACTIVE_FROM_ENV
    if not isinstance(pack, (str, os.PathLike, Pack, type(None))):
        raise TypeError(f"use_pack takes a pack folder's path, a loaded Pack or None, not {type(pack).__name__}")
    loaded = load_pack(pack) if isinstance(pack, (str, os.PathLike)) else pack
    with _ACTIVE_LOCK:
        _ACTIVE = loaded
        _ACTIVE_FROM_ENV = True  # an explicit choice overrides TUNER_PACK
    return loaded


def active_pack() -> Pack | None:
    """The pack in use: set by ``use_pack``, else loaded once from ``TUNER_PACK`` (a pack or a
    folder of packs), by whichever thread asks first while the others wait for it.

    A bad ``TUNER_PACK`` logs one warning and leaves no pack active (defaults run).
    """
    global _ACTIVE, _ACTIVE_FROM_ENV
    if not _ACTIVE_FROM_ENV:
        with _ACTIVE_LOCK:
            if not _ACTIVE_FROM_ENV:
                loaded, env = None, os.environ.get("TUNER_PACK")
                if env:
                    try:
                        loaded = load_pack(env)
                    except Exception as e:  # noqa: BLE001 - a server runs on with defaults, whatever the pack is
                        log.warning("TUNER_PACK ignored: %s", e)
                _ACTIVE, _ACTIVE_FROM_ENV = loaded, True
    return _ACTIVE


def select(kernel: str, workload: Mapping[str, Any], target: Target | None = None, *, count: bool = True
           ) -> Selection:
    """Select through the active pack, or the kernel's default for ``target`` (None: the
    device at hand) when none is active; cached and counted either way (``stats()``). Raises as
    ``Pack.select`` does for a kernel that is not a family or a workload that is not one of its."""
    pack = _ACTIVE if _ACTIVE_FROM_ENV else active_pack()
    if pack is not None:
        return pack.select(kernel, workload, target, count=count)
    target = target or Target.of()
    try:
        key = (kernel, tuple(workload.items()), target)
        sel = _NO_PACK.cache.get(key)
    except (AttributeError, TypeError):  # not a dict, or a value that is no axis' (unhashable)
        _check_workload(kernel, workload)
        raise
    if sel is None:
        _check_workload(kernel, workload)  # once per distinct workload: a miss, never a cached call
        sel = _NO_PACK.remember(key, _default(kernel, workload, target), kernel, workload, "no pack")
    if count:
        _NO_PACK.count(kernel, sel.how)
    return sel


def stats() -> dict[str, Any]:
    """What runs: the active pack (``pack``: its name, ``path``, ``usable``, and where it came
    from a folder of packs, ``chosen``: why that one) and, per kernel, how many selections were
    exact / nearest / default (``kernels``) and first made inside a CUDA graph capture
    (``cold``). With no pack active, the defaults' counts."""
    pack = _ACTIVE if _ACTIVE_FROM_ENV else active_pack()
    if pack is None:
        with _NO_PACK.lock:
            cold = dict(_NO_PACK.cold)
        return {"pack": None, "path": None, "usable": False, "chosen": "no pack active: default configs",
                "kernels": _NO_PACK.stats(), "cold": cold}
    return {"pack": pack.name, "path": str(pack.path), "usable": pack.usable,
            "chosen": pack.chosen.reason if pack.chosen else f"loaded from {pack.path}",
            "kernels": pack.stats(), "cold": pack.cold()}


from tuner.runtime.warm import register_warmup, warmup
