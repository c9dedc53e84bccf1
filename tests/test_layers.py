"""Dependencies point one way: runtime <- kernel_templates <- search_spaces <- tuner (study,
store, cli). One walk over every import statement (top level and inside functions) of the
three packages fails on a violation, naming the file, the line and the import."""
from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

KERNEL_FACING = ("tuner.spec", "tuner.verify", "tuner.lowering", "tuner.runtime")
"""The part of ``tuner`` kernel templates may import."""
TUNING_ONLY = ("optuna", "sqlalchemy", "alembic", "typer", "rich")
"""Libraries of tuning, storage and the CLI: never in the runtime's import graph."""


def _imports(path: Path) -> list[tuple[int, str]]:
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module in ("tuner", "kernel_templates"):  # from tuner import runtime: tuner.runtime
                out += [(node.lineno, f"{node.module}.{a.name}") for a in node.names]
            else:
                out.append((node.lineno, node.module))
    return out


def _under(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def _violations(folder: str, allowed) -> list[str]:
    bad = []
    for path in sorted((ROOT / folder).rglob("*.py")):
        for line, name in _imports(path):
            why = allowed(path, name)
            if why:
                bad.append(f"{path.relative_to(ROOT)}:{line}: imports {name} ({why})")
    return bad


def test_kernel_templates_import_only_the_kernel_facing_part_of_tuner():
    def allowed(path, name):
        if _under(name, ("tuner",)) and name != "tuner" and not _under(name, KERNEL_FACING):
            return "kernels import only " + ", ".join(KERNEL_FACING)
        if _under(name, ("search_spaces",) + TUNING_ONLY):
            return "a kernel never depends on its search space or on tuning libraries"
        return None

    assert _violations("kernel_templates", allowed) == []


def test_runtime_imports_no_tuning_storage_or_cli_code():
    def allowed(path, name):
        if _under(name, TUNING_ONLY):
            return "the runtime loader must not need tuning dependencies"
        if _under(name, ("tuner",)) and not _under(name, ("tuner.runtime", "tuner.spec")):
            return "the runtime imports only itself and tuner.spec"
        if _under(name, ("search_spaces",)):
            return "the runtime never needs a search space"
        return None

    assert _violations("tuner/runtime", allowed) == []


def test_search_spaces_import_no_study_store_or_cli():
    def allowed(path, name):
        if _under(name, ("tuner",)) and not _under(name, KERNEL_FACING + ("tuner.space",)):
            return "search spaces import kernels, tuner.space and the kernel-facing part of tuner"
        if _under(name, ("optuna", "sqlalchemy", "alembic", "typer", "rich")):
            return "a search space is declarations, not tuning code"
        return None

    assert _violations("search_spaces", allowed) == []


def test_a_model_runtime_loads_every_kernel_without_tuning_libraries():
    """What a serving process imports (the runtime and the five families) pulls in none of the
    tuning, storage or CLI libraries: checked in a fresh interpreter."""
    code = ("import sys, os; os.environ['TRITON_INTERPRET'] = '1'\n"
            "import tuner.runtime, kernel_templates.engram, kernel_templates.mhc, kernel_templates.moe_routing, "
            "kernel_templates.nvfp4_attention, kernel_templates.sparse_mqa\n"
            f"bad = sorted(m for m in sys.modules if m.split('.')[0] in {TUNING_ONLY!r} or m.startswith('tuner.') "
            "and not m.startswith(('tuner.runtime', 'tuner.spec', 'tuner.verify', 'tuner.lowering')))\n"
            "print(bad); sys.exit(1 if bad else 0)")
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr[-2000:]


def test_the_installed_triton_is_a_supported_one():
    """pyproject names the Triton releases this is tested with; CI must run one of them."""
    import re

    import triton
    from packaging.specifiers import SpecifierSet
    from packaging.version import Version

    spec = re.search(r'"triton([^"]+)"', (ROOT / "pyproject.toml").read_text()).group(1)
    assert Version(triton.__version__.split("+")[0]) in SpecifierSet(spec), (triton.__version__, spec)
