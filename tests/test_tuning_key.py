"""The tuning key (``Kernel.source_hash``) follows code, not prose, and old keys carry over."""
from __future__ import annotations

import sqlite3
import textwrap

import pytest

from tuner import registry
from tuner.registry import code_digest

BASE = textwrap.dedent('''
    """Module docstring."""
    import math

    SCALE = 2  # a comment
    """An attribute docstring."""


    def f(x):
        """What f does."""
        # a comment
        return math.sqrt(x) * SCALE


    class K:
        """A class."""

        def g(self):
            return 1
''')


@pytest.mark.parametrize("edit", [
    lambda s: s.replace('"""What f does."""', '"""What f does, said at length\n    over two lines."""'),
    lambda s: s.replace("# a comment", "# another comment, longer"),
    lambda s: s.replace('"""Module docstring."""', ""),
    lambda s: s.replace('    """A class."""\n', ""),
    lambda s: s.replace('"""An attribute docstring."""', '"""Another."""'),
    lambda s: s.replace("return math.sqrt(x) * SCALE", "return (math.sqrt(x)\n            * SCALE)"),
    lambda s: s + "\n\n# trailing comment\n",
])
def test_prose_and_formatting_keep_the_key(edit):
    assert code_digest(edit(BASE)) == code_digest(BASE)


@pytest.mark.parametrize("edit", [
    lambda s: s.replace("SCALE = 2", "SCALE = 3"),
    lambda s: s.replace("math.sqrt(x) * SCALE", "math.sqrt(x) + SCALE"),
    lambda s: s.replace("return 1", "return 2"),
    lambda s: s.replace("def g(self)", "def h(self)"),
    lambda s: s.replace("import math", "import cmath as math"),
])
def test_code_edits_move_the_key(edit):
    assert code_digest(edit(BASE)) != code_digest(BASE)


def test_every_family_has_a_key_over_its_whole_package():
    """Each family's key covers all of its modules (a package's every file) and its space."""
    ks = registry.kernels()
    assert set(ks) == {"engram", "mhc", "moe_routing", "nvfp4_attention", "sparse_mqa"}
    for k in ks.values():
        mods = {m.__name__ for m in k.modules()}
        assert k.template.__name__ in mods and k.space_module.__name__ in mods
        assert "kernel_templates._host" in mods  # shared helpers the family imports count too
        if hasattr(k.template, "__path__"):
            assert len(mods) > 2, mods  # the package's implementation modules too
        assert len(k.source_hash) == 16
    assert len({k.source_hash for k in ks.values()}) == len(ks)


def test_carry_over_moves_entries_of_unchanged_code_only(tmp_path):
    """Migration 0003: rows stored under the old (text) key of the code installed now move to the
    new key (runs, winners, revalidations, Optuna's study names); other keys stay as they were."""
    import importlib

    import sqlalchemy as sa

    from tuner.store import open_store

    mig = importlib.import_module("tuner.store.migrations.versions.0003_code_hash")
    db = tmp_path / "r.db"
    store = open_store(str(db))
    con = sqlite3.connect(db)
    con.execute("INSERT INTO tuner_environments (id, fingerprint_hash, gpu, cc, fingerprint, created) "
                "VALUES (1, 'fp', 'g', '9.0', '{}', '2026-01-01')")
    for i, h in enumerate(("old-key", "older-key")):
        con.execute("INSERT INTO tuner_runs (id, kind, kernel, environment_id, source_hash, git_commit, settings, status, started) "
                    f"VALUES ({i + 1}, 'tune', 'moe_routing', 1, '{h}', '', '{{}}', 'done', '2026-01-01')")
    con.execute("CREATE TABLE studies (study_id INTEGER PRIMARY KEY, study_name TEXT)")
    con.execute("INSERT INTO studies VALUES (1, 'moe_routing|tokens=1,profile=dsv3|fp|old-key'),"
                " (2, 'moe_routing|tokens=2,profile=dsv3|fp|older-key')")
    con.commit()
    with store.engine.begin() as conn:
        n = mig.carry_over(conn, {"moe_routing": ("old-key", "new-key")})
    assert n == 2
    assert [r[0] for r in con.execute("SELECT source_hash FROM tuner_runs ORDER BY id")] == ["new-key", "older-key"]
    assert [r[0] for r in con.execute("SELECT study_name FROM studies ORDER BY study_id")] == [
        "moe_routing|tokens=1,profile=dsv3|fp|new-key", "moe_routing|tokens=2,profile=dsv3|fp|older-key"]
    _ = sa


def test_legacy_key_is_the_text_hash_of_a_single_module_family():
    """``legacy_source_hash`` reproduces the old text key (what the stored entries carry) for a
    family that is one module; a package never had one."""
    import hashlib
    import inspect

    for k in registry.kernels().values():
        legacy = registry.legacy_source_hash(k)
        if hasattr(k.template, "__path__"):
            assert legacy == ""
            continue
        h = hashlib.sha256()
        for mod in (k.template, k.space_module):
            h.update(inspect.getsource(mod).encode())
        for dep in getattr(k.template, "SOURCE_DEPENDENCIES", ()):
            h.update(inspect.getsource(importlib_import(dep)).encode())
        assert legacy == h.hexdigest()[:16] != k.source_hash


def importlib_import(name):
    import importlib

    return importlib.import_module(name)


def test_the_key_is_the_same_whatever_fields_a_python_writes_empty():
    """3.12 gave every def an empty ``type_params`` and 3.13's ``ast.dump`` leaves empty fields
    out: the digest sees the same tree either way (it once followed the Python that computed it)."""
    import ast

    tree = ast.parse(BASE)
    plain = registry._canonical(tree)
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            node.type_params = []
    assert registry._canonical(tree) == plain
    assert "type_params" not in plain and "returns" not in plain


def test_migration_0005_reads_the_old_key_as_every_python_wrote_it(tmp_path):
    """The old key (``ast.dump``) is reproduced for the Python running the test, under every
    family's real modules; rows under an old key of today's code move, others stay."""
    import ast
    import importlib
    import inspect
    import sys

    mig = importlib.import_module("tuner.store.migrations.versions.0005_portable_code_hash")
    style = (3, 10) if sys.version_info[:2] == (3, 11) else sys.version_info[:2]
    for k in registry.kernels().values():
        for mod in k.modules():
            tree = registry._strip_docstrings(ast.parse(inspect.getsource(mod)))
            assert mig.dump_as(tree, style) == ast.dump(tree), mod.__name__
    k = registry.get("moe_routing")
    olds = {mig.old_key(k, s) for s in mig.STYLES}
    assert len(olds) == 3 and k.source_hash not in olds

    from tuner.store import open_store
    from tuner.store.db import upgrade

    db = tmp_path / "r.db"
    store = open_store(str(db))
    con = sqlite3.connect(db)
    con.execute("INSERT INTO tuner_environments (id, fingerprint_hash, gpu, cc, fingerprint, created) "
                "VALUES (1, 'fp', 'g', '9.0', '{}', '2026-01-01')")
    for i, h in enumerate([*sorted(olds), "older-key"]):
        con.execute("INSERT INTO tuner_runs (id, kind, kernel, environment_id, source_hash, git_commit, settings, "
                    f"status, started) VALUES ({i + 1}, 'tune', 'moe_routing', 1, '{h}', '', '{{}}', 'done', "
                    "'2026-01-01')")
    con.execute("UPDATE tuner_alembic_version SET version_num = '0004'")
    con.commit()
    upgrade(store.engine)
    assert [r[0] for r in con.execute("SELECT source_hash FROM tuner_runs ORDER BY id")] == [
        k.source_hash] * 3 + ["older-key"]
