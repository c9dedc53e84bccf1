"""Where the benchmarks write their raw results, and the one compact JSON per family behind the README table.

A benchmark writes ``<out>/<stem>-YYYYmmdd-HHMMSS.json`` (``RAW_OUT`` by default, ignored by git). To make a
run the family's published result, ``benchmarks/results/<family>.json``:

    python3 benchmarks/_results.py publish benchmarks/results/raw/mhc-20261205-033803.json --family mhc \\
        --command "python3 benchmarks/mhc.py --pack packs/nvidia-h200 --op seam ..." [--append] \\
        [--tuned-by "tune mhc ..."] [--note "how to read it"]

It keeps the GPU, date, commit (``git rev-parse --short HEAD`` unless ``--commit``) and command with the numbers,
rounded to four significant digits, without the per-round samples.
"""
from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
RAW_OUT = RESULTS / "raw"
"""Default ``--out`` of the benchmarks: raw, timestamped JSON (``results/.gitignore`` leaves it out)."""
DROPPED = frozenset({"rounds", "n", "meaningful"})
"""Keys of a raw result left out of a published one: per-round samples and sample counts."""


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


def compact(obj: Any) -> Any:
    """``obj`` without the ``DROPPED`` keys, floats to four significant digits."""
    if isinstance(obj, float):
        return float(f"{obj:.4g}")
    if isinstance(obj, dict):
        return {k: compact(v) for k, v in obj.items() if k not in DROPPED}
    if isinstance(obj, list):
        return [compact(v) for v in obj]
    return obj


def measurement(raw: dict[str, Any], command: str, commit: str, date: str | None = None,
                **notes: str) -> dict[str, Any]:
    """One published measurement from a benchmark's raw JSON: GPU, date (the raw ``created``, else ``date``),
    commit, command and pack first, ``notes`` (e.g. ``pack_tuned_by``, ``note``), then the software versions
    and the compacted numbers."""
    raw = dict(raw)
    gpu = raw.pop("gpu", None) or {}
    created = raw.pop("created", None)
    for key in ("benchmark", "kernel"):
        raw.pop(key, None)
    head = {"gpu": gpu.get("gpu") if isinstance(gpu, dict) else gpu, "date": (created or date or "")[:16],
            "commit": commit, "command": command, "pack": raw.pop("pack", None),
            **{k: v for k, v in notes.items() if v}, "software": gpu if isinstance(gpu, dict) else {}}
    return {**head, **compact(raw)}


def dumps(obj: Any, depth: int = 0) -> str:
    """JSON with containers indented down to depth 4 and one line a record below that (lists of records stay
    readable line by line in a diff)."""
    pad = " " * depth
    nested = isinstance(obj, (dict, list)) and depth < 4
    if isinstance(obj, dict) and nested and any(isinstance(v, (dict, list)) for v in obj.values()):
        items = [f"{pad} {json.dumps(k)}: {dumps(v, depth + 1).lstrip()}" for k, v in obj.items()]
        return pad + "{\n" + ",\n".join(items) + "\n" + pad + "}"
    if isinstance(obj, list) and obj and nested:
        items = [dumps(v, depth + 1) if isinstance(v, dict) and any(isinstance(x, list) for x in v.values())
                 else pad + " " + json.dumps(v, separators=(",", ":")) for v in obj]
        return pad + "[\n" + ",\n".join(items) + "\n" + pad + "]"
    return pad + json.dumps(obj, separators=(",", ":"))


def stamp_date(path: Path) -> str:
    """``YYYY-mm-ddTHH:MM`` of a raw result: from its name's ``-YYYYmmdd-HHMMSS`` stamp, else its mtime."""
    m = re.search(r"-(\d{8})-(\d{6})\.json$", path.name)
    if m:
        d, t = m.groups()
        return f"{d[:4]}-{d[4:6]}-{d[6:]}T{t[:2]}:{t[2:4]}"
    return time.strftime("%Y-%m-%dT%H:%M", time.localtime(path.stat().st_mtime))


def publish(raw_file: Path, family: str, command: str, commit: str | None = None, append: bool = False,
            results: Path = RESULTS, **notes: str) -> Path:
    """Write ``results/<family>.json`` with the measurement of ``raw_file`` (after the ones already there with
    ``append``, else alone); returns its path."""
    raw = json.loads(Path(raw_file).read_text())
    if not isinstance(raw, dict):
        raise ValueError(f"{raw_file}: not a benchmark's raw result (a JSON object)")
    if commit is None:
        r = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
        commit = r.stdout.strip() or "unknown"
    date = stamp_date(Path(raw_file))
    path = results / f"{family}.json"
    earlier = json.loads(path.read_text())["measurements"] if append and path.exists() else []
    doc = {"family": family, "measurements": earlier + [measurement(raw, command, commit, date, **notes)]}
    path.write_text(dumps(doc) + "\n")
    return path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Publish a benchmark's raw JSON as benchmarks/results/<family>.json.")
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("publish", help="write results/<family>.json from a raw result")
    p.add_argument("raw", type=Path)
    p.add_argument("--family", required=True)
    p.add_argument("--command", required=True, help="the command line that produced the raw result")
    p.add_argument("--commit", default=None, help="default: the checkout's HEAD")
    p.add_argument("--append", action="store_true", help="keep the measurements already published")
    p.add_argument("--tuned-by", default="", help="the tune commands that made the pack measured")
    p.add_argument("--note", default="", help="how to read the numbers (baselines, floors, L2)")
    a = ap.parse_args(argv)
    try:
        print(publish(a.raw, a.family, a.command, a.commit, a.append, pack_tuned_by=a.tuned_by, note=a.note))
    except (OSError, ValueError, KeyError) as e:
        print(f"_results: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
