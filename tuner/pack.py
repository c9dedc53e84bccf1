"""Export winners from the store as a kernel pack, and check a pack against the registry.

A pack is a folder of JSON: ``manifest.json`` (schema, name, created, environment
fingerprint, kernels, the sha256 of every file, the source database and commit), beside it
``manifest.sha256`` (the sha256 of the canonical manifest), and one ``<kernel>.json`` per
family mapping workloads to configs with their measured times.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import select

from tuner import registry
from tuner.device import git_commit
from tuner.runtime import MANIFEST_SEAL, PACK_SCHEMA, Pack, PackError, load_pack, manifest_digest, sha256_file
from tuner.runtime.env import INTERPRETER_GPU
from tuner.runtime.target import Target, of_fingerprint
from tuner.spec import numeric_axes, workload_dict, workload_from_dict, workload_key
from tuner.store import Environment, Store, Winner
from tuner.store.models import utcnow
from tuner.store.db import redact_url
from tuner.study import predicted_winners


class ExportError(Exception):
    """Nothing (or nothing unambiguous) to export."""


def _pick_environment(store: Store, gpu: str | None) -> Environment:
    """``gpu``'s newest environment with winners; without ``gpu`` the newest GPU one (an
    interpreter run on a CPU machine, e.g. the quickstart's, does not displace the GPU
    winners), the interpreter's only where the database holds nothing else."""
    with store.session() as s:
        q = select(Environment).join(Winner, Winner.environment_id == Environment.id)
        if gpu:
            q = q.where(Environment.gpu == gpu)
        envs = s.scalars(q.order_by(Environment.id.desc())).unique().all()
    env = next((e for e in envs if e.gpu != INTERPRETER_GPU), envs[0] if envs else None)
    if env is None:
        raise ExportError(f"no tuned winners in the database{f' for GPU {gpu!r}' if gpu else ''}; run `tune <kernel>` first")
    return env


def _replaced_pack(out: Path, env: Environment, kernels: set[str], left_out: set[str], force: bool,
                   merge: bool) -> tuple[list[str], dict[str, tuple[str, str, dict[str, Any]]]]:
    """What ``out`` holds before an export of ``env``'s ``kernels`` writes there: the file
    names of the pack it replaces ([] for a new or empty folder), and with ``merge`` (an
    export of chosen kernels) the tables of its other kernels to keep: (file, sha256, manifest
    info) each, where the pack was made in this very environment. Refuses (``ExportError``)
    what would lose something, unless ``force``: a folder of other files, a pack made on
    another GPU, a pack with kernels this export neither carries nor keeps."""
    if not out.is_dir() or not any(out.iterdir()):
        return [], {}
    try:
        old = json.loads((out / "manifest.json").read_text())
        old_files = [f for f in old["files"] if Path(f).name == f]
        old_fp, old_kernels = old.get("fingerprint") or {}, dict(old["kernels"])
        old_gpu = old_fp.get("gpu")
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        if force:
            return [], {}
        raise ExportError(f"{out} is a folder of other files, not a kernel pack: give a new or empty folder "
                          "(or --force to write the pack among them)") from None
    if not force and old_gpu != env.gpu:
        raise ExportError(f"{out} holds a pack made on {old_gpu or 'an unknown GPU'}, these winners are "
                          f"{env.gpu}'s: give another folder (or --force to replace it)")
    keep: dict[str, tuple[str, str, dict[str, Any]]] = {}
    lacking = set(old_kernels) - kernels
    if merge and old_fp == env.fingerprint:  # the same environment: its other tables stay as they are
        for kname in lacking - left_out:
            info = old_kernels[kname]
            fname = info.get("file") if isinstance(info, dict) else None
            digest = old["files"].get(fname) if fname in old_files else None
            if digest and (out / fname).is_file() and sha256_file(out / fname) == digest:
                keep[kname] = (fname, digest, info)
    lacking -= set(keep)
    if not force and lacking:
        why = ("every winner's config is outside today's search space: retune them"
               if lacking <= left_out else "not tuned in this environment, or left out by --kernel and the pack "
               "was made in another environment")
        raise ExportError(f"{out} holds {', '.join(sorted(lacking))} too, which this export lacks ({why}): "
                          "exporting would drop them (--force drops them)")
    return old_files, keep


def export_pack(store: Store, out: Path, *, name: str | None = None, gpu: str | None = None,
                kernels: list[str] | None = None, force: bool = False) -> Path:
    """Write the winners of one environment (the newest, or ``gpu``'s) as a pack at ``out``,
    replacing the pack there (its files the new one does not list are removed); what would
    lose something is refused unless ``force`` (``_replaced_pack``)."""
    env = _pick_environment(store, gpu)
    with store.session() as s:
        rows = s.scalars(select(Winner).where(Winner.environment_id == env.id).order_by(Winner.updated)).all()
        guessed = predicted_winners(s, rows)
    by_kernel: dict[str, dict[str, Winner]] = {}
    for r in rows:  # newest row per (kernel, workload) wins when the source changed in between
        if kernels and r.kernel not in kernels:
            continue
        by_kernel.setdefault(r.kernel, {})[r.workload_key] = r
    # A winner tuned on an older source is carried as the study carries it: knobs the space no
    # longer has dropped (their removed variants were off in it), the rest as measured. One whose
    # config today's space does not run as it is (a value dropped, a knob added) is left out and
    # named in the manifest; its shape is then served like any shape the pack lacks: by the
    # nearest entry, or the default where that entry's default won. Each entry says how it was
    # obtained: ``tuned`` on today's source, ``predicted`` on it (its neighbours' agreed winner measured
    # against the default only: a campaign searches it further first), or ``carried`` from an earlier
    # one (stale: re-tune).
    left_out: dict[str, list[str]] = {}
    configs: dict[tuple[str, str], dict[str, Any]] = {}
    target = of_fingerprint(env.fingerprint or {})
    for kname, entries in by_kernel.items():
        k = registry.kernels().get(kname)
        for key, w in list(entries.items()):
            cfg = dict(w.config)
            if k is not None and w.source_hash != k.source_hash:
                cfg = {n: v for n, v in cfg.items() if n in k.space}
                try:
                    wl = workload_from_dict(k.spec.workload, w.workload)
                    if k.space.contains(cfg) and k.canonical(cfg, wl, target) != cfg:
                        cfg = {}  # it would run as another config: not what was measured
                except (KeyError, TypeError, ValueError):
                    cfg = {}
            if k is not None and not k.space.contains(cfg):
                left_out.setdefault(kname, []).append(key)
                del entries[key]
            else:
                configs[kname, key] = cfg
    by_kernel = {kname: entries for kname, entries in by_kernel.items() if entries}
    if not by_kernel and left_out:
        raise ExportError("every winner's config is outside today's search spaces (tuned on an older source): "
                          f"retune {', '.join(sorted(left_out))}")
    if not by_kernel:
        raise ExportError("no winners for the requested kernels")
    old_files, keep = _replaced_pack(out, env, {k for k in by_kernel if registry.kernels().get(k)}, set(left_out),
                                     force, merge=bool(kernels))
    out.mkdir(parents=True, exist_ok=True)
    files: dict[str, str] = {}
    kinfo: dict[str, Any] = {}
    meaningful = True
    for kname, entries in sorted(by_kernel.items()):
        k = registry.kernels().get(kname)
        if k is None:
            continue
        num = numeric_axes(k.spec.workload)
        cat = [a for a in entries[next(iter(entries))].workload if a not in num]
        table = {
            "schema": PACK_SCHEMA, "kernel": kname, "categorical_axes": cat, "numeric_axes": num,
            "entries": [{"workload": w.workload, "config": configs[kname, key], "median_us": w.median_us,
                         "p20_us": w.p20_us,
                         "p80_us": w.p80_us, "default_median_us": w.default_median_us, "floor_us": w.floor_us,
                         "noise": w.noise, "is_default": w.is_default, "source_hash": w.source_hash,
                         "obtained": "carried" if w.source_hash != k.source_hash
                         else "predicted" if w.id in guessed else "tuned"}
                        for key, w in sorted(entries.items())],
        }
        meaningful &= all(w.meaningful for w in entries.values())
        fname = f"{kname}.json"
        (out / fname).write_text(json.dumps(table, indent=1, sort_keys=True) + "\n")
        files[fname] = sha256_file(out / fname)
        kinfo[kname] = {"file": fname, "entries": len(entries),
                        "source_hashes": sorted({w.source_hash for w in entries.values()}),
                        "current_source_hash": k.source_hash,
                        "left_out_outside_space": sorted(left_out.get(kname, []))}
    for kname, (fname, digest, info) in sorted(keep.items()):  # export --kernel: the pack's other tables stay
        files[fname], kinfo[kname] = digest, info
    manifest = {
        "schema": PACK_SCHEMA, "name": name or out.name, "created": utcnow().isoformat() + "Z",
        "left_out_outside_space": {kname: sorted(keys) for kname, keys in sorted(left_out.items())},
        "fingerprint": env.fingerprint, "meaningful": meaningful, "kernels": kinfo, "files": files,
        "source": {"database": redact_url(store.url), "commit": git_commit()},
    }
    if not meaningful:
        manifest["note"] = "times measured through the Triton interpreter: correct configs, not GPU results"
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    (out / MANIFEST_SEAL).write_text(manifest_digest(manifest) + "\n")  # the manifest's own fields, covered
    for fname in set(old_files) - set(files) - {"manifest.json", MANIFEST_SEAL}:  # the replaced pack's, no longer listed
        (out / fname).unlink(missing_ok=True)
    return out


@dataclass
class PackReport:
    pack: Pack
    problems: list[str]
    coverage: dict[str, tuple[int, list[str]]] = field(default_factory=dict)
    """Per kernel of the pack: the size of its grid and the keys of the grid's workloads
    without an entry (the default grid; the small one for a pack of interpreter times)."""


def verify_pack(path: Path) -> PackReport:
    """Load (checksums, schema) and check every entry's config against the kernel's space.
    A folder of packs: the pack a runtime here would choose (``tuner.runtime.pack_dirs`` lists them all)."""
    pack = load_pack(path, quiet=True)  # verified, not run: "made on another GPU" is no news
    problems: list[str] = []
    _check_entries(pack, pack_target(pack), problems)
    return PackReport(pack, problems, coverage(pack))


def coverage(pack: Pack) -> dict[str, tuple[int, list[str]]]:
    """Per known kernel of ``pack``: its grid's size and the workloads the pack has no entry
    for, by key (the default grid; the small one for a pack of interpreter times)."""
    small = pack.manifest.get("meaningful") is False
    out: dict[str, tuple[int, list[str]]] = {}
    for kname, table in pack.tables.items():
        k = registry.kernels().get(kname)
        if k is None:
            continue
        have = {json.dumps(e["workload"], sort_keys=True) for e in table.entries if isinstance(e.get("workload"), dict)}
        grid = k.small_workloads if small else k.workloads
        out[kname] = (len(grid), [workload_key(w) for w in grid
                                  if json.dumps(workload_dict(w), sort_keys=True) not in have])
    return out


def coverage_line(cov: dict[str, tuple[int, list[str]]]) -> str:
    """``coverage``'s count per kernel: ``engram 48/48, nvfp4_attention 134/138, ...``"""
    return ", ".join(f"{k} {n - len(miss)}/{n}" for k, (n, miss) in cov.items())


def pack_target(pack: Pack) -> Target:
    """The target the pack was made for (``of_fingerprint``): target-dependent constraints are
    judged for that GPU, not for the verifying machine."""
    return of_fingerprint(pack.manifest.get("fingerprint") or {})


def categorical_values(k: Any) -> dict[str, set[str]]:
    """Per categorical (string) workload axis of a family, the values its grids use (the
    profiles, ops, formats a template knows)."""
    out: dict[str, set[str]] = {}
    for w in [*k.workloads, *k.small_workloads]:
        for a, v in workload_dict(w).items():
            if isinstance(v, str):
                out.setdefault(a, set()).add(v)
    return out


def _check_entries(pack: Pack, target: Target, problems: list[str]) -> None:
    for kname, table in pack.tables.items():
        k = registry.kernels().get(kname)
        if k is None:
            problems.append(f"{kname}: unknown kernel")
            continue
        known = categorical_values(k)
        for e in table.entries:
            try:
                w = workload_from_dict(k.spec.workload, e["workload"])
            except (KeyError, TypeError, ValueError) as ex:
                problems.append(f"{kname} {e.get('workload')}: bad workload ({ex})")
                continue
            odd = [f"{a}={v!r}" for a, v in e["workload"].items() if a in known and v not in known[a]]
            if odd:
                problems.append(f"{kname} {e['workload']}: bad workload ({', '.join(odd)}: none of the "
                                f"family's values)")
                continue
            cfg = e["config"]
            why = k.refusal(cfg, w, target)
            if why is not None:
                problems.append(f"{kname} {e['workload']}: config {cfg} is {why}" if why.startswith("outside")
                                else f"{kname} {e['workload']}: config {cfg}: {why}")


__all__ = ["ExportError", "PackError", "PackReport", "coverage", "coverage_line", "export_pack", "verify_pack"]
