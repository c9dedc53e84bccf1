"""Environment fingerprint: GPU, driver, CUDA, torch, triton and package versions."""
from __future__ import annotations

import hashlib
import json
import subprocess
from importlib import metadata
from pathlib import Path
from typing import Any

from tuner.runtime.env import gpu_identity

_PACKAGES = ("optuna", "sqlalchemy", "numpy", "tuner")


def fingerprint() -> dict[str, Any]:
    """The environment results are keyed by (template hashes are kept per run)."""
    fp = dict(gpu_identity())
    for p in _PACKAGES:
        try:
            fp[p] = metadata.version(p)
        except metadata.PackageNotFoundError:
            fp[p] = ""
    from tuner.timing import TIMING_METHOD

    if TIMING_METHOD != 2:  # (method 2's environments predate the key: their fingerprints stay as they were)
        fp["timing"] = TIMING_METHOD
    return fp


def fingerprint_hash(fp: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(fp, sort_keys=True).encode()).hexdigest()[:16]


def git_commit() -> str:
    """The commit of the checkout the code runs from ('' outside git)."""
    try:
        out = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], capture_output=True, text=True,
                             cwd=Path(__file__).resolve().parent, timeout=5)
        return out.stdout.strip() if out.returncode == 0 else ""
    except (OSError, subprocess.TimeoutExpired):
        return ""
