"""Campaigns over several workers: campaigns, their workers, and the claims workers take.

New tables only: every earlier row stays as it was.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-06
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "tuner_campaigns",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("host", sa.String(255), nullable=False),
        sa.Column("kernels", sa.JSON, nullable=False),
        sa.Column("states", sa.JSON, nullable=False),
        sa.Column("settings", sa.JSON, nullable=False),
        sa.Column("lease_s", sa.Float, nullable=False),
        sa.Column("deadline", sa.DateTime, nullable=True),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("created", sa.DateTime, nullable=False),
        sa.Column("finished", sa.DateTime, nullable=True),
    )
    op.create_table(
        "tuner_workers",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("campaign_id", sa.Integer, sa.ForeignKey("tuner_campaigns.id"), nullable=False, index=True),
        sa.Column("host", sa.String(255), nullable=False),
        sa.Column("pid", sa.Integer, nullable=False),
        sa.Column("device", sa.String(64), nullable=False),
        sa.Column("gpu", sa.String(128), nullable=False),
        sa.Column("environment_id", sa.Integer, sa.ForeignKey("tuner_environments.id"), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("started", sa.DateTime, nullable=False),
        sa.Column("heartbeat", sa.DateTime, nullable=False),
        sa.Column("finished", sa.DateTime, nullable=True),
    )
    op.create_table(
        "tuner_claims",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("campaign_id", sa.Integer, sa.ForeignKey("tuner_campaigns.id"), nullable=False),
        sa.Column("environment_id", sa.Integer, sa.ForeignKey("tuner_environments.id"), nullable=False),
        sa.Column("seq", sa.Integer, nullable=False),
        sa.Column("kernel", sa.String(64), nullable=False),
        sa.Column("workload_key", sa.String(256), nullable=False),
        sa.Column("workload", sa.JSON, nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("worker_id", sa.Integer, sa.ForeignKey("tuner_workers.id"), nullable=True),
        sa.Column("lease_until", sa.DateTime, nullable=True),
        sa.Column("attempts", sa.Integer, nullable=False),
        sa.Column("claimed", sa.DateTime, nullable=True),
        sa.Column("finished", sa.DateTime, nullable=True),
        sa.Column("outcome", sa.JSON, nullable=True),
        sa.UniqueConstraint("campaign_id", "environment_id", "kernel", "workload_key"),
    )
    op.create_index("ix_tuner_claims_next", "tuner_claims", ["campaign_id", "environment_id", "status", "seq"])


def downgrade() -> None:
    op.drop_index("ix_tuner_claims_next", "tuner_claims")
    for t in ("tuner_claims", "tuner_workers", "tuner_campaigns"):
        op.drop_table(t)
