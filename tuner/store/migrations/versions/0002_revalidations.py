"""Revalidations: configs of a pack re-timed on the current environment by `tune revalidate`.

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-01
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "tuner_revalidations",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("run_id", sa.Integer, sa.ForeignKey("tuner_runs.id"), nullable=False, index=True),
        sa.Column("kernel", sa.String(64), nullable=False, index=True),
        sa.Column("workload_key", sa.String(256), nullable=False, index=True),
        sa.Column("workload", sa.JSON, nullable=False),
        sa.Column("role", sa.String(16), nullable=False),
        sa.Column("config", sa.JSON, nullable=False),
        sa.Column("config_key", sa.String(512), nullable=False),
        sa.Column("status", sa.Enum("ok", "pruned", "compile_error", "out_of_resources", "mismatch", "timeout",
                                    "crashed", name="trialstatus", native_enum=False, length=24), nullable=False),
        sa.Column("median_us", sa.Float, nullable=True),
        sa.Column("p20_us", sa.Float, nullable=True),
        sa.Column("p80_us", sa.Float, nullable=True),
        sa.Column("floor_us", sa.Float, nullable=True),
        sa.Column("meaningful", sa.Boolean, nullable=False),
        sa.Column("error", sa.Text, nullable=True),
        sa.Column("stored_median_us", sa.Float, nullable=True),
        sa.Column("stored_noise", sa.Float, nullable=True),
        sa.Column("stored_source_hash", sa.String(32), nullable=True),
        sa.Column("stored_gpu", sa.String(128), nullable=True),
        sa.Column("winner_id", sa.Integer, sa.ForeignKey("tuner_winners.id"), nullable=True),
        sa.Column("verdict", sa.String(16), nullable=True),
        sa.Column("reason", sa.Text, nullable=True),
        sa.Column("created", sa.DateTime, nullable=False),
        sa.UniqueConstraint("run_id", "workload_key", "config_key"),
    )


def downgrade() -> None:
    op.drop_table("tuner_revalidations")
