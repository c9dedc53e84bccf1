"""The pure parts of ``benchmarks/peers.py``: which shapes each family compares, which peer timing
pairs with which of ours, loading a peer package (its exact error where it fails), and the
tables, the closing note and the JSON built from the measurements. No GPU here."""
from __future__ import annotations

import importlib
import statistics
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

FAMILIES = ("sparse_mqa", "attention", "mhc", "engram", "moe_routing")

PEER_PACKAGES = {
    "deep_gemm": "sgl-deep-gemm 0.1.5 (DeepGEMM)",
    "flash_mla": "sgl-flash-mla 1.0.0 (FlashMLA)",
    "tile_kernels": "tile-kernels 1.0.0 with tilelang 0.1.9 (DeepSeek TileKernels)",
}
"""Module -> the distribution that provides it (``pip install -e '.[peers]'``)."""


# ----------------------------------------------------------------------------- shapes

def _grid(**axes: Iterable[Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [{}]
    for name, values in axes.items():
        out = [dict(s, **{name: v}) for s in out for v in values]
    return out


K = 1024


def shapes(family: str, quick: bool = False) -> list[dict[str, Any]]:
    """The shapes ``family`` is compared at (``quick``: a corner of each grid, for a first run).

    - sparse_mqa: dsv32 (FP8 keys, 64 heads, top-2048), one query token, contexts 8K-512K, batch 1-64
      (DeepGEMM's paged MQA logits take FP8 keys on sm_90; MXFP4 keys only on sm_100).
    - attention: 64 heads (FlashMLA's decode kernels take 64 or 128) and 16 (TP4; FlashMLA's dense
      FP8 kernel only), batch 1-64, contexts 8K-128K, dense and sparse (top-512).
    - mhc: pre, post and seam, T 1-8192, D 4096 / 5120 / 7168.
    - engram: the hash of T tokens (24 rows a token), T 1-16384.
    - moe_routing: dsv3 (8 groups, top-8 of 256) and dsv41-flash (top-6 of 384), T 1-4096.
    """
    if family == "sparse_mqa":
        return _grid(profile=["dsv32"], next_n=[1], context=[8 * K, 128 * K] if quick else [8 * K, 32 * K, 128 * K, 512 * K],
                     batch=[1, 32] if quick else [1, 8, 32, 64])
    if family == "attention":
        out = _grid(heads=[64], mode=["dense", "sparse"], context=[32 * K] if quick else [8 * K, 32 * K, 128 * K],
                    batch=[16] if quick else [1, 16, 64])
        return out + _grid(heads=[16], mode=["dense"], context=[32 * K] if quick else [32 * K, 128 * K],
                           batch=[16] if quick else [16, 64])
    if family == "mhc":
        return _grid(op=["pre", "post", "seam"], dim=[5120] if quick else [4096, 5120, 7168],
                     tokens=[1, 1024] if quick else [1, 64, 256, 1024, 4096, 8192])
    if family == "engram":
        return _grid(tokens=[1, 4096] if quick else [1, 64, 256, 4096, 16384])
    if family == "moe_routing":
        return _grid(profile=["dsv3", "dsv41-flash"], tokens=[1, 256] if quick else [1, 16, 64, 256, 1024, 4096])
    raise ValueError(f"unknown family {family!r} (known: {', '.join(FAMILIES)})")


def shape_key(shape: dict[str, Any]) -> str:
    """``{"batch": 1, "context": 8192}`` -> ``"batch=1 context=8K"`` (contexts in K where whole)."""
    def fmt(k: str, v: Any) -> str:
        if k == "context" and isinstance(v, int) and v % K == 0:
            return f"{k}={v // K}K"
        return f"{k}={v}"
    return " ".join(fmt(k, v) for k, v in shape.items())


def select(shape_list: list[dict[str, Any]], filters: dict[str, set[str]]) -> list[dict[str, Any]]:
    """The shapes whose every filtered axis (``{"batch": {"1", "32"}}``) holds one of the given
    values (compared as strings; a context also as ``8K``). Axes a shape lacks do not filter it."""
    def keep(s: dict[str, Any]) -> bool:
        for axis, want in filters.items():
            if axis in s and str(s[axis]) not in want and shape_key({axis: s[axis]}).split("=")[1] not in want:
                return False
        return True
    return [s for s in shape_list if keep(s)]


# ----------------------------------------------------------------------------- peers

def describe(e: BaseException) -> str:
    """``Type: message``, then each exception it was raised from (``torch.ops.load_library`` wraps the
    loader's own message, e.g. the missing symbol, in a generic one)."""
    parts, seen = [], set()
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        parts.append(f"{type(e).__name__}: {e}".strip())
        e = e.__cause__ or e.__context__
    return " <- ".join(parts)


_PROBE = """import sys
try:
    import {module}
except BaseException as e:
    parts, seen = [], set()
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        parts.append(f"{{type(e).__name__}}: {{e}}".strip())
        e = e.__cause__ or e.__context__
    print(" <- ".join(parts).replace(chr(10), " "), file=sys.stderr)
    sys.exit(1)
"""


BIND_NOW = frozenset({"deep_gemm"})
"""Peers whose extension is opened lazily (DeepGEMM's, by tvm_ffi with RTLD_LAZY): the probe resolves every
symbol at the import (``LD_BIND_NOW``), else a missing one would end the benchmark at its first call."""


def probe_import(module: str, timeout: float = 600.0) -> str | None:
    """Import ``module`` in a child Python first: None where it imports, else the last line it printed.
    A compiled extension built for another Python or torch can kill the process that loads it (the
    dynamic loader's "symbol lookup error"), which no ``except`` catches; the child takes that."""
    import os
    import subprocess
    import sys

    env = dict(os.environ, LD_BIND_NOW="1") if module in BIND_NOW else None
    try:
        r = subprocess.run([sys.executable, "-c", _PROBE.format(module=module)], check=False, capture_output=True, text=True,
                           timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return f"importing {module} took more than {timeout:.0f} s"
    if r.returncode == 0:
        return None
    lines = [ln for ln in (r.stderr or r.stdout).strip().splitlines() if ln.strip()]
    last = lines[-1].strip() if lines else ""
    return f"import {module} exited with status {r.returncode}: {last}" if last else f"import {module} exited with status {r.returncode}"


def load_peer(module: str, importer: Callable[[str], Any] = importlib.import_module,
              probe: Callable[[str], str | None] | None = None) -> tuple[Any, str | None]:
    """``(module, None)``, or ``(None, the exact error)`` where importing it fails (not installed, a
    compiled extension that does not load with this torch, no GPU...): never dropped in silence.
    ``probe`` (``probe_import``) tries the import in a child process first."""
    if probe is not None:
        err = probe(module)
        if err is not None:
            return None, err
    try:
        return importer(module), None
    except BaseException as e:  # an extension's import may raise anything, SystemExit included
        if isinstance(e, KeyboardInterrupt):
            raise
        return None, describe(e)


# ----------------------------------------------------------------------------- measurements

def summarize(times_us: list[float]) -> dict[str, float]:
    """Per-round medians of one candidate -> ``{median_us, min_us, max_us}`` over the rounds."""
    if not times_us:
        raise ValueError("no rounds to summarize")
    return {"median_us": statistics.median(times_us), "min_us": min(times_us), "max_us": max(times_us)}


def ratio(peer_us: float | None, ours_us: float | None) -> float | None:
    """``peer / ours``: above 1 ours is faster. None where either time is missing or not positive."""
    if not peer_us or not ours_us or peer_us <= 0 or ours_us <= 0:
        return None
    return peer_us / ours_us


@dataclass(frozen=True)
class Pair:
    """One table row per shape: a peer timing against one of ours. ``note`` says where the two do
    different work (e.g. the peer leaves out the align layout)."""

    peer: str
    ours: str
    note: str = ""


def candidate(status: str, times_us: list[float] | None = None, error: str | None = None,
              **extra: Any) -> dict[str, Any]:
    """One measured candidate: ``status`` ok / mismatch (disagrees with the reference; never timed) /
    error (raised) / unavailable (the peer did not load) / unsupported (the peer has no kernel for
    the shape), its interleaved round medians and summary, and the first line of the error."""
    out: dict[str, Any] = {"status": status, **extra}
    if times_us:
        out["rounds_us"] = list(times_us)
        out.update(summarize(times_us))
    if error:
        out["error"] = error.strip().splitlines()[0][:300] if error.strip() else error
    return out


def pair_rows(family: str, shape: dict[str, Any], cands: dict[str, dict[str, Any]], pairs: list[Pair]
              ) -> list[dict[str, Any]]:
    """The table rows of one shape: every pair whose two candidates were measured or failed (a pair
    naming a candidate the shape does not have is left out); ratio where both were timed."""
    rows = []
    for p in pairs:
        if p.peer not in cands or p.ours not in cands:
            continue
        a, b = cands[p.peer], cands[p.ours]
        row = {"family": family, "shape": dict(shape), "shape_key": shape_key(shape), "peer": p.peer, "ours": p.ours,
               "peer_status": a["status"], "ours_status": b["status"],
               "peer_us": a.get("median_us"), "ours_us": b.get("median_us"),
               "ratio": ratio(a.get("median_us"), b.get("median_us")), "note": p.note}
        for side, c in (("peer", a), ("ours", b)):
            for k in ("error", "kv_bytes", "agreement"):
                if k in c:
                    row[f"{side}_{k}"] = c[k]
        rows.append(row)
    return rows


def _us(v: float | None) -> str:
    return f"{v:.1f}" if v is not None else "-"


def table(family: str, rows: list[dict[str, Any]], gpu: str) -> list[str]:
    """One family's rows as printable lines: peer, shape, peer us, ours, ours us, ratio (ours faster
    > 1), each side's agreement with the reference; a row that was not timed says why."""
    head = f"{family} on {gpu}: ratio = peer us / ours us (> 1: ours faster); agreement with our reference"
    if not rows:
        return [head, "  (no rows)"]
    wp = max(len(r["peer"]) for r in rows)
    ws = max(len(r["shape_key"]) for r in rows)
    wo = max(len(r["ours"]) for r in rows)
    lines = [head, f"{'peer':{wp}}  {'shape':{ws}}  {'peer us':>9}  {'ours':{wo}}  {'ours us':>9}  {'ratio':>6}  agreement"]
    for r in rows:
        agree = f"peer {r['peer_status']}, ours {r['ours_status']}"
        rt = f"{r['ratio']:.2f}" if r["ratio"] is not None else "-"
        line = f"{r['peer']:{wp}}  {r['shape_key']:{ws}}  {_us(r['peer_us']):>9}  {r['ours']:{wo}}  {_us(r['ours_us']):>9}  {rt:>6}  {agree}"
        why = r.get("peer_error") if r["peer_status"] != "ok" else r.get("ours_error") if r["ours_status"] != "ok" else None
        if why:
            line += f": {why[:120]}"
        lines.append(line)
    notes = sorted({(r["peer"], r["ours"], r["note"]) for r in rows if r["note"]})
    lines += [f"  note {p} vs {o}: {n}" for p, o, n in notes]
    return lines


def slower(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every row where ours is slower than the peer (ratio < 1), slowest first."""
    return sorted((r for r in rows if r["ratio"] is not None and r["ratio"] < 1), key=lambda r: r["ratio"])


def closing_note(rows: list[dict[str, Any]], reasons: dict[tuple[str, str, str], str] | None = None) -> list[str]:
    """The closing note: every shape where ours is slower and, where measured, why (``reasons`` by
    (family, shape_key, ours))."""
    bad = slower(rows)
    if not bad:
        return ["ours is not slower than a peer at any timed shape"]
    lines = [f"ours is slower at {len(bad)} timed row(s):"]
    for r in bad:
        why = (reasons or {}).get((r["family"], r["shape_key"], r["ours"]), "no breakdown measured")
        lines.append(f"  {r['family']} {r['shape_key']}: {r['ours']} {r['ours_us']:.1f} us vs {r['peer']} "
                     f"{r['peer_us']:.1f} us ({r['ratio']:.2f}x); {why}")
    return lines


def best_peer(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The README's "vs best peer" of one family: per (shape, ours) the fastest timed peer, then the
    range of ``ratio`` against it over the shapes; None where nothing was timed."""
    best: dict[tuple[str, str], dict[str, Any]] = {}
    for r in rows:
        if r["ratio"] is None:
            continue
        k = (r["shape_key"], r["ours"])
        if k not in best or r["peer_us"] < best[k]["peer_us"]:
            best[k] = r
    if not best:
        return {"ratio_min": None, "ratio_max": None, "rows": 0}
    rs = [r["ratio"] for r in best.values()]
    worst = min(best.values(), key=lambda r: r["ratio"])
    return {"ratio_min": min(rs), "ratio_max": max(rs), "rows": len(rs),
            "worst": f"{worst['shape_key']} {worst['ours']} vs {worst['peer']}"}


def report(gpu: dict[str, Any], peers: dict[str, str | None], families: dict[str, dict[str, Any]],
           **meta: Any) -> dict[str, Any]:
    """The JSON written: the GPU, each peer package's load status (None = loaded, else its error), per
    family the candidates measured at each shape and the table rows, the closing note and the
    README's "vs best peer" summary."""
    rows = [r for f in families.values() for r in f.get("rows", [])]
    return {"benchmark": "peers", "gpu": gpu, **meta,
            "peers": {m: {"package": PEER_PACKAGES.get(m, m), "loaded": err is None, "error": err}
                      for m, err in peers.items()},
            "families": families, "slower": slower(rows),
            "best_peer": {f: best_peer(v.get("rows", [])) for f, v in families.items()}}
