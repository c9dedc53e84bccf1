"""The tuning key hashes code, not prose: carry stored entries over to the new key.

A family's ``source_hash`` was the sha256 of its modules' source text, so a docstring or
comment edit made every entry stale. It is now ``tuner.registry.code_digest`` of the same
modules (docstrings, comments and formatting never reach it). Entries stored under the old
key of the code installed now are the same code: their runs, winners, revalidations and
Optuna study names move to the new key. Entries of code that has changed since keep theirs
(stale, as before).

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-05
"""
from __future__ import annotations

import logging

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

log = logging.getLogger(__name__)


KEY_COLUMNS = (("tuner_runs", "source_hash"), ("tuner_winners", "source_hash"),
               ("tuner_revalidations", "stored_source_hash"))
"""Every (table, column) of ours that stores a family's source hash (Optuna's study names too)."""


def carry_over(conn, moves: dict[str, tuple[str, str]]) -> int:
    """Rewrite ``kernel -> (old key, new key)`` in every table that stores a source hash;
    the number of rows moved."""
    tables = set(sa.inspect(conn).get_table_names())
    n = 0
    for kernel, (old, new) in moves.items():
        for table, col in KEY_COLUMNS:
            if table in tables:
                n += conn.execute(sa.text(f"UPDATE {table} SET {col} = :new WHERE kernel = :k AND {col} = :old"),
                                  {"new": new, "old": old, "k": kernel}).rowcount or 0
        if "studies" in tables:  # Optuna's: study names end with |<source hash>
            rows = conn.execute(sa.text("SELECT study_id, study_name FROM studies WHERE study_name LIKE :p"),
                                {"p": f"{kernel}|%|{old}"}).all()
            for sid, name in rows:
                conn.execute(sa.text("UPDATE studies SET study_name = :n WHERE study_id = :i"),
                             {"n": name[: -len(old)] + new, "i": sid})
            n += len(rows)
    return n


def upgrade() -> None:
    conn = op.get_bind()
    moves: dict[str, tuple[str, str]] = {}
    try:
        from tuner import registry

        for name, k in registry.kernels().items():
            old = registry.legacy_source_hash(k)
            if old and old != k.source_hash:
                moves[name] = (old, k.source_hash)
    except Exception as e:  # noqa: BLE001 - no kernels importable: nothing can be matched, nothing moves
        log.warning("source-hash carry-over skipped: %s", e)
    if moves:
        carry_over(conn, moves)


def downgrade() -> None:
    pass
