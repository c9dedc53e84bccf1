"""The tree speaks of the product: the README's size and quickstart, links that resolve, and no
file that talks about how the work was organised."""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _tracked() -> list[Path]:
    out = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    return [ROOT / p for p in out.splitlines() if p.endswith((".md", ".py", ".sh", ".toml", ".cfg", ".txt"))]


def test_readme_is_under_12_kb_and_its_test_command_is_what_ci_runs():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.encode()) < 12 * 1024
    block = readme.split("```bash", 1)[1].split("```", 1)[0].strip().splitlines()
    assert len(block) == 2, "the quickstart is exactly two commands"
    ci = [ln for ln in (ROOT / ".ci" / "run").read_text().splitlines() if ln.strip() and not ln.startswith("#")]
    assert ci[-1].strip() == block[1].strip()
    assert "tune " in block[0]


def test_every_relative_link_in_the_docs_resolves():
    docs = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    missing = []
    for doc in docs:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", doc.read_text()):
            if "://" not in target and not (doc.parent / target).exists():
                missing.append(f"{doc.relative_to(ROOT)} -> {target}")
    assert not missing, missing


def test_no_tracked_file_speaks_of_sessions_or_run_numbers():
    pattern = re.compile(r"\b[Ss]essions? \d+|\b[Rr]uns? \d{2,}\b|device_runs?/|NOTES\.md")
    hits = [f"{p.relative_to(ROOT)}:{i}" for p in _tracked() if p.name != "test_docs.py" and p.exists()
            for i, line in enumerate(p.read_text(errors="replace").splitlines(), 1) if pattern.search(line)]
    assert not hits, hits
