"""Where the benchmarks write their raw results: ``<out>/<stem>-YYYYmmdd-HHMMSS.json``."""
from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any


def raw_path(out: Path, stem: str) -> Path:
    """``out/<stem>-<local time>.json``, creating ``out`` (the file itself is not written)."""
    out.mkdir(parents=True, exist_ok=True)
    return out / f"{stem}-{time.strftime('%Y%m%d-%H%M%S')}.json"


def write_raw(path: Path, obj: Any) -> Path:
    """Write ``obj`` as indented JSON (what JSON cannot hold, as ``str``), replacing the file; returns ``path``."""
    path.write_text(json.dumps(obj, indent=1, default=str))
    return path


def save_raw(out: Path, stem: str, obj: Any) -> Path:
    """``write_raw(raw_path(out, stem), obj)``, printing ``raw results: <path>``."""
    path = write_raw(raw_path(out, stem), obj)
    print(f"raw results: {path}")
    return path


def target_lines(checks: list[tuple[str, bool, str]]) -> list[str]:
    """A benchmark's target checks ``(what, met, measured)`` as report lines: ``targets: k/n met``, then one line
    each (``ok`` or ``MISS``); none when there are no checks."""
    if not checks:
        return []
    lines = [f"targets: {sum(c[1] for c in checks)}/{len(checks)} met"]
    return lines + [f"  {'ok  ' if c[1] else 'MISS'} {c[0]} ({c[2]})" for c in checks]
