"""First schema: environments, runs, trials, winners.

Revision ID: 0001
Revises:
Create Date: 2026-11-29
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "tuner_environments",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("fingerprint_hash", sa.String(32), nullable=False, unique=True),
        sa.Column("gpu", sa.String(128), nullable=False, index=True),
        sa.Column("cc", sa.String(16), nullable=False),
        sa.Column("fingerprint", sa.JSON, nullable=False),
        sa.Column("created", sa.DateTime, nullable=False),
    )
    op.create_table(
        "tuner_runs",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("kernel", sa.String(64), nullable=False, index=True),
        sa.Column("environment_id", sa.Integer, sa.ForeignKey("tuner_environments.id"), nullable=False),
        sa.Column("source_hash", sa.String(32), nullable=False),
        sa.Column("git_commit", sa.String(40), nullable=False),
        sa.Column("settings", sa.JSON, nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("started", sa.DateTime, nullable=False),
        sa.Column("finished", sa.DateTime, nullable=True),
    )
    op.create_table(
        "tuner_trials",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("run_id", sa.Integer, sa.ForeignKey("tuner_runs.id"), nullable=False, index=True),
        sa.Column("kernel", sa.String(64), nullable=False),
        sa.Column("workload_key", sa.String(256), nullable=False, index=True),
        sa.Column("workload", sa.JSON, nullable=False),
        sa.Column("config", sa.JSON, nullable=False),
        sa.Column("config_key", sa.String(512), nullable=False),
        sa.Column("phase", sa.String(16), nullable=False),
        sa.Column("status", sa.Enum("ok", "pruned", "compile_error", "out_of_resources", "mismatch", "timeout",
                                    "crashed", name="trialstatus", native_enum=False, length=24), nullable=False),
        sa.Column("median_us", sa.Float, nullable=True),
        sa.Column("p20_us", sa.Float, nullable=True),
        sa.Column("p80_us", sa.Float, nullable=True),
        sa.Column("floor_us", sa.Float, nullable=True),
        sa.Column("meaningful", sa.Boolean, nullable=False),
        sa.Column("error", sa.Text, nullable=True),
        sa.Column("optuna_number", sa.Integer, nullable=True),
        sa.Column("created", sa.DateTime, nullable=False),
    )
    op.create_table(
        "tuner_winners",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("kernel", sa.String(64), nullable=False, index=True),
        sa.Column("workload_key", sa.String(256), nullable=False),
        sa.Column("workload", sa.JSON, nullable=False),
        sa.Column("environment_id", sa.Integer, sa.ForeignKey("tuner_environments.id"), nullable=False),
        sa.Column("source_hash", sa.String(32), nullable=False),
        sa.Column("run_id", sa.Integer, sa.ForeignKey("tuner_runs.id"), nullable=False),
        sa.Column("config", sa.JSON, nullable=False),
        sa.Column("is_default", sa.Boolean, nullable=False),
        sa.Column("median_us", sa.Float, nullable=False),
        sa.Column("p20_us", sa.Float, nullable=False),
        sa.Column("p80_us", sa.Float, nullable=False),
        sa.Column("default_median_us", sa.Float, nullable=True),
        sa.Column("floor_us", sa.Float, nullable=True),
        sa.Column("noise", sa.Float, nullable=False),
        sa.Column("meaningful", sa.Boolean, nullable=False),
        sa.Column("updated", sa.DateTime, nullable=False),
        sa.UniqueConstraint("kernel", "workload_key", "environment_id", "source_hash"),
    )


def downgrade() -> None:
    for t in ("tuner_winners", "tuner_trials", "tuner_runs", "tuner_environments"):
        op.drop_table(t)
