"""Models of a campaign spread over several workers: the campaign, its workers, its claims.

A campaign (``tune campaign --workers N``) is planned into one claim row per (environment,
kernel, workload); worker processes, on one host or many, take claims through the database
(row locks) and hold each under a lease that a live worker renews. A worker that dies stops
renewing: once its lease runs out another worker takes the claim over, and the trials the
dead one committed stay in ``tuner_trials`` (the study resumes from them).

Times here are those of the database's clock on PostgreSQL (workers on several hosts compare
leases on one clock) and of the host on SQLite (one host only). All naive UTC.
"""
from __future__ import annotations

import datetime as dt
from typing import Any

from sqlalchemy import JSON, DateTime, Float, ForeignKey, Index, Integer, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from tuner.store.models import Base, utcnow


class Campaign(Base):
    """What a campaign tunes and how hard: every worker that joins reads its plan from here.

    ``status``: ``open`` while workloads are left, ``done`` when every claim is done,
    ``replaced`` when a later campaign on the same database superseded it (not resumed: its
    unfinished workloads are planned again by the new one)."""

    __tablename__ = "tuner_campaigns"
    id: Mapped[int] = mapped_column(primary_key=True)
    host: Mapped[str] = mapped_column(String(255))
    kernels: Mapped[list[Any]] = mapped_column(JSON)
    states: Mapped[list[Any]] = mapped_column(JSON)
    settings: Mapped[dict[str, Any]]
    """``n_trials``, ``patience``, ``limit`` (workloads per environment) and the trial timeouts."""
    lease_s: Mapped[float] = mapped_column(Float)
    deadline: Mapped[dt.datetime | None] = mapped_column(DateTime, nullable=True)
    status: Mapped[str] = mapped_column(String(16), default="open")
    created: Mapped[dt.datetime] = mapped_column(DateTime, default=utcnow)
    finished: Mapped[dt.datetime | None] = mapped_column(DateTime, nullable=True)


class CampaignWorker(Base):
    """One worker process of a campaign: where it runs, on which GPU, when it last said it lives.

    ``status``: ``running``, ``done`` (nothing left), ``interrupted`` (Ctrl-C or SIGTERM: its
    claim was given back at once), ``lost`` (its heartbeat stopped: found so by the worker that
    took its claim over)."""

    __tablename__ = "tuner_workers"
    id: Mapped[int] = mapped_column(primary_key=True)
    campaign_id: Mapped[int] = mapped_column(ForeignKey("tuner_campaigns.id"), index=True)
    host: Mapped[str] = mapped_column(String(255))
    pid: Mapped[int] = mapped_column(Integer)
    device: Mapped[str] = mapped_column(String(64), default="")
    """The worker's CUDA_VISIBLE_DEVICES entry ('' through the interpreter)."""
    gpu: Mapped[str] = mapped_column(String(128))
    environment_id: Mapped[int] = mapped_column(ForeignKey("tuner_environments.id"))
    status: Mapped[str] = mapped_column(String(16), default="running")
    started: Mapped[dt.datetime] = mapped_column(DateTime, default=utcnow)
    heartbeat: Mapped[dt.datetime] = mapped_column(DateTime, default=utcnow)
    finished: Mapped[dt.datetime | None] = mapped_column(DateTime, nullable=True)


class Claim(Base):
    """One workload of a campaign on one environment, in the order the plan works on them.

    ``status``: ``pending`` (free to take), ``claimed`` (held by ``worker_id`` until
    ``lease_until``; an expired one is free to take over), ``done`` (``outcome`` says what the
    study produced). ``attempts`` counts the workers that took it."""

    __tablename__ = "tuner_claims"
    __table_args__ = (UniqueConstraint("campaign_id", "environment_id", "kernel", "workload_key"),
                      Index("ix_tuner_claims_next", "campaign_id", "environment_id", "status", "seq"))
    id: Mapped[int] = mapped_column(primary_key=True)
    campaign_id: Mapped[int] = mapped_column(ForeignKey("tuner_campaigns.id"))
    environment_id: Mapped[int] = mapped_column(ForeignKey("tuner_environments.id"))
    seq: Mapped[int] = mapped_column(Integer)
    kernel: Mapped[str] = mapped_column(String(64))
    workload_key: Mapped[str] = mapped_column(String(256))
    workload: Mapped[dict[str, Any]]
    state: Mapped[str] = mapped_column(String(16))
    """What the plan found: missing, stale or current."""
    status: Mapped[str] = mapped_column(String(16), default="pending")
    worker_id: Mapped[int | None] = mapped_column(ForeignKey("tuner_workers.id"), nullable=True)
    lease_until: Mapped[dt.datetime | None] = mapped_column(DateTime, nullable=True)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    claimed: Mapped[dt.datetime | None] = mapped_column(DateTime, nullable=True)
    finished: Mapped[dt.datetime | None] = mapped_column(DateTime, nullable=True)
    outcome: Mapped[dict[str, Any] | None] = mapped_column(nullable=True)
