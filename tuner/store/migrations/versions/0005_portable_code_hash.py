"""The tuning key no longer depends on the Python that computed it: carry entries over.

``tuner.registry.code_digest`` hashed ``ast.dump`` of a module's tree, whose text differs
between Pythons for the same code (3.12 writes every def's ``type_params=[]``, 3.13 leaves
empty fields out): entries tuned under one Python were stale under another. It now hashes a
form of its own, the same under all. Entries stored under the old key of the code installed
now, as any Python of 3.10-3.13 wrote it, move to the new key (``0003``'s ``carry_over``);
entries of code that has changed since keep theirs (stale, as before).

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-07
"""
from __future__ import annotations

import ast
import hashlib
import importlib
import inspect
import logging
from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

log = logging.getLogger(__name__)

STYLES = ((3, 10), (3, 12), (3, 13))  # ast.dump wrote 3.10 and 3.11 alike
_TYPE_PARAMS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
_MIG_0003 = importlib.import_module("tuner.store.migrations.versions.0003_code_hash")  # carry_over, KEY_COLUMNS


def dump_as(node: Any, style: tuple[int, int]) -> str:
    """``ast.dump(node)`` as the Python of version ``style`` writes it, under any Python."""
    if isinstance(node, ast.AST):
        cls = type(node)
        fields = [f for f in node._fields if f != "type_params"]
        if style >= (3, 12) and isinstance(node, _TYPE_PARAMS):
            fields.append("type_params")
        args = []
        for name in fields:
            value = getattr(node, name, [] if name == "type_params" else None)
            if value is None and getattr(cls, name, ...) is None:
                continue
            if style >= (3, 13) and (value is None or value == []) and not isinstance(
                    node, (ast.Constant, ast.MatchSingleton)):
                continue
            args.append(f"{name}={dump_as(value, style)}")
        return f"{cls.__name__}({', '.join(args)})"
    if isinstance(node, list):
        return "[" + ", ".join(dump_as(x, style) for x in node) + "]"
    return repr(node)


def old_key(kernel: Any, style: tuple[int, int]) -> str:
    """The family's ``source_hash`` as the earlier ``code_digest`` computed it under ``style``."""
    from tuner import registry

    h = hashlib.sha256()
    for mod in kernel.modules():
        tree = registry._strip_docstrings(ast.parse(inspect.getsource(mod)))
        digest = hashlib.sha256(dump_as(tree, style).encode()).hexdigest()
        h.update(mod.__name__.encode() + b"\0" + digest.encode() + b"\0")
    return h.hexdigest()[:16]


def stored_keys(conn) -> dict[str, set[str]]:
    """The source hashes the database holds, by family (none in a new database)."""
    tables = set(sa.inspect(conn).get_table_names())
    out: dict[str, set[str]] = {}
    for table, col in _MIG_0003.KEY_COLUMNS:
        if table in tables:
            for kernel, key in conn.execute(sa.text(f"SELECT DISTINCT kernel, {col} FROM {table}")):
                out.setdefault(kernel, set()).add(key)
    return out


def upgrade() -> None:
    conn = op.get_bind()
    stored = stored_keys(conn)
    if not stored:
        return  # a new database: nothing to carry (and no module parsed three times over)
    try:
        from tuner import registry

        kernels = registry.kernels()
    except Exception as e:  # noqa: BLE001 - no kernels importable: nothing can be matched, nothing moves
        log.warning("source-hash carry-over skipped: %s", e)
        return
    for name, k in kernels.items():
        others = stored.get(name, set()) - {k.source_hash}
        for style in STYLES if others else ():
            if (old := old_key(k, style)) in others:
                _MIG_0003.carry_over(conn, {name: (old, k.source_hash)})


def downgrade() -> None:
    pass
