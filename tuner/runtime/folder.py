"""Which pack of a folder of packs serves the GPU at hand.

A folder of packs (``packs/``: ``nvidia-h200/``, ``nvidia-h100/``, ... each a pack with its
manifest) serves every GPU kind from one path: the pack made on this GPU is chosen, else the
nearest by compute capability. A pack made on another GPU of the same compute capability runs
its configs (the same architecture compiles and runs them); one of another architecture loads
but selects defaults (its configs may use instructions or shared memory this GPU lacks).

Pure functions over manifests and the GPU's identity (``gpu_identity()``'s fields), so a
device can be faked in tests; reading and verifying the packs is the loader's.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["Choice", "choose", "compute_capability"]

SOFTWARE = ("driver", "cuda", "torch", "triton")


@dataclass(frozen=True)
class Choice:
    """The pack chosen in a folder and why."""

    name: str
    """The chosen pack's subfolder."""
    how: str
    """``gpu`` (made on this GPU), ``arch`` (another GPU of this compute capability: its configs
    run) or ``other`` (the nearest compute capability, another architecture: defaults run)."""
    reason: str
    """One sentence for the log and ``runtime.stats()``."""

    @property
    def runs_configs(self) -> bool:
        """The chosen pack's configs run here (else it loads for its stats and defaults run)."""
        return self.how in ("gpu", "arch")


def compute_capability(value: Any) -> int | None:
    """``"9.0"`` -> 90 (as ``Target.cc``); None where there is none (the interpreter) or it is malformed."""
    try:
        major, minor = str(value).split(".")
        cc = 10 * int(major) + int(minor)
    except ValueError:
        return None
    return cc if 0 < cc < 1000 else None


def _num(value: Any) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0.0


def choose(manifests: Mapping[str, Mapping[str, Any]], here: Mapping[str, Any]) -> Choice:
    """The pack of ``manifests`` (subfolder name -> manifest) that serves the GPU ``here``.

    The packs made on this GPU (same name) first, the one whose driver / CUDA / torch / Triton
    match most winning, then the newest; else the nearest compute capability (then the nearest
    SM count and memory size, then the name). ValueError when ``manifests`` is empty.
    """
    if not manifests:
        raise ValueError("no packs to choose from")
    fps = {n: (m.get("fingerprint") or {}) for n, m in manifests.items()}
    gpu = here.get("gpu", "")
    same = [n for n, fp in fps.items() if fp.get("gpu") == gpu]
    if same:
        def closeness(n: str) -> tuple:
            fp = fps[n]
            return (-sum(fp.get(k) == here.get(k) for k in SOFTWARE), _negated(manifests[n].get("created")), n)

        name = min(same, key=closeness)
        return Choice(name, "gpu", f"pack {name!r} was made on {gpu}, the GPU at hand")
    cc_here = compute_capability(here.get("cc"))

    def distance(n: str) -> tuple:
        fp = fps[n]
        cc = compute_capability(fp.get("cc"))
        cc_gap = abs(cc - cc_here) if cc is not None and cc_here is not None else float("inf")
        return (cc_gap, abs(_num(fp.get("sms")) - _num(here.get("sms"))),
                abs(_num(fp.get("memory_gb")) - _num(here.get("memory_gb"))), n)

    name = min(fps, key=distance)
    made, cc = fps[name].get("gpu", "an unknown GPU"), compute_capability(fps[name].get("cc"))
    where = f"this is {gpu or 'an unknown GPU'}" + (f" (compute capability {here.get('cc')})" if cc_here else "")
    if cc is not None and cc == cc_here:
        return Choice(name, "arch", f"no pack was made on {gpu}; pack {name!r}, made on {made} of the same compute "
                                    f"capability {fps[name].get('cc')}, runs its configs here")
    return Choice(name, "other", f"no pack was made on {gpu or 'this device'} nor on its architecture; the nearest, "
                                 f"{name!r}, was made on {made} (compute capability {fps[name].get('cc') or 'none'}), "
                                 f"{where}: default configs run")


def _negated(created: Any) -> tuple:
    """Sorts ISO timestamps newest first (missing last)."""
    if not isinstance(created, str):
        return (1,)
    return (0, tuple(-ord(c) for c in created))
