"""`tune export` and `tune verify-pack`."""
from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from tuner.cli.common import CliError, DbOption, console, given_path

app = typer.Typer()


def _entries(n: int) -> str:
    return f"{n} entr{'y' if n == 1 else 'ies'}"


@app.command("export")
def export(out_: Annotated[str, typer.Option("--out", help="Pack folder to write, e.g. packs/nvidia-h200.")],
           db: DbOption = None,
           name: Annotated[Optional[str], typer.Option("--name", help="Pack name (default: the folder name).")] = None,
           gpu: Annotated[Optional[str], typer.Option("--gpu", help="Export this GPU's winners (default: newest).")] = None,
           kernel: Annotated[Optional[list[str]], typer.Option("--kernel", help="Only these kernels.")] = None,
           force: Annotated[bool, typer.Option("--force", help="Replace what --out holds even where that loses "
                                               "something: a pack of another GPU, kernels this export lacks, "
                                               "a folder of other files.")] = False) -> None:
    """Export the tuned winners of one environment as a versioned kernel pack (JSON only).

    An existing pack at --out is replaced (files it listed that the new one does not are
    removed) when it was made on the same GPU and the export carries all its kernels; with
    --kernel, a pack made in the same environment keeps its other kernels' tables."""
    from tuner import registry
    from tuner.pack import ExportError, export_pack
    from tuner.store import open_store

    out = given_path(out_, "--out")
    kernels = [registry.get(k).name for k in kernel] if kernel else None
    store = open_store(db, create=False)
    try:
        path = export_pack(store, out, name=name, gpu=gpu, kernels=kernels, force=force)
    except ExportError as e:
        raise CliError(str(e)) from None
    except OSError as e:  # the pack folder given cannot be made or written
        raise CliError(f"cannot write the pack to {out}: {e.strerror or e}") from None
    import json

    m = json.loads((path / "manifest.json").read_text())
    console.print(f"wrote {path}: " + ", ".join(f"{k} ({_entries(v['entries'])})" for k, v in m["kernels"].items())
                  + f" for {m['fingerprint'].get('gpu')}" + ("" if m["meaningful"] else " (interpreter times)"))
    for k, keys in m.get("left_out_outside_space", {}).items():
        console.print(f"[yellow]left out[/yellow] {k}: {len(keys)} winners tuned on an older source whose configs are "
                      f"outside today's search space (retune them: `tune {k.replace('_', '-')}`)")
    from tuner.pack import coverage
    from tuner.runtime import load_pack

    pack = load_pack(path, quiet=True)  # written just now: its grid coverage only, not verify-pack's checks again
    _print_coverage(pack, coverage(pack))


def _print_coverage(pack, cov: dict[str, tuple[int, list[str]]]) -> None:
    """The grid's workloads covered per kernel, then those without an entry (served by the
    nearest entry, or the default)."""
    from tuner.pack import coverage_line

    grid = "small grid" if pack.manifest.get("meaningful") is False else "default grid"
    console.print(f"{grid} covered: {coverage_line(cov)}", soft_wrap=True)
    for k, (_, miss) in cov.items():
        if miss:
            more = f" and {len(miss) - 3} more" if len(miss) > 3 else ""
            console.print(f"  {k} has no entry for {'; '.join(miss[:3])}{more} (`tune campaign --kernel "
                          f"{k.replace('_', '-')}` tunes them; one that cannot run on this GPU says why)", soft_wrap=True)


@app.command("verify-pack")
def verify(path_: Annotated[str, typer.Argument(help="Pack folder, or a folder of packs (each verified).")]) -> None:
    """Check a pack: manifest schema, checksums of every file, configs inside the search spaces.

    A folder of packs (packs/ with nvidia-h100/, nvidia-h200/, ...) has each of its packs
    checked; exit 2 names those that cannot be trusted, 1 when a config is outside its space."""
    from tuner.runtime import PackError, pack_dirs

    path = given_path(path_, "verify-pack")
    try:
        subs = pack_dirs(path)  # the packs a runtime chooses among (a symbolic link or too many: an error)
    except PackError as e:
        raise CliError(str(e)) from None
    if not subs:  # a pack, or no pack at all: verify_pack says which
        if _verify_one(path):
            raise typer.Exit(1)
        return
    broken, problems = [], False
    for sub in subs:
        try:
            problems |= _verify_one(sub)
        except CliError as e:
            broken.append(str(e))
    if broken:
        raise CliError(f"{len(broken)} of {len(subs)} packs in {path} cannot be trusted: " + "; ".join(broken))
    if problems:
        raise typer.Exit(1)


def _verify_one(path: Path) -> bool:
    """Verify one pack and print its report; True when a config is outside its space (a pack
    that cannot be trusted at all raises CliError)."""
    from tuner.pack import verify_pack
    from tuner.runtime import PackError

    try:
        report = verify_pack(path)
    except PackError as e:
        raise CliError(str(e)) from None
    m = report.pack.manifest
    console.print(f"{path}: schema {m['schema']}, {report.pack.name!r}, made on "
                  f"{(m.get('fingerprint') or {}).get('gpu', 'an unknown GPU')} "
                  f"({m.get('created')}); " + ", ".join(f"{k}: {_entries(len(t.entries))}" for k, t in report.pack.tables.items()),
                  soft_wrap=True)
    if report.problems:
        for p in report.problems:
            console.print(f"[red]problem:[/red] {p}")
        return True
    console.print("[green]ok[/green]: checksums match, every config is inside its search space")
    _print_coverage(report.pack, report.coverage)
    return False
