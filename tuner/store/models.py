"""SQLAlchemy 2 models of the results store.

Optuna's own tables (studies, trials, ...) live in the same database so that
``optuna-dashboard sqlite:///results.db`` opens it; ours carry a ``tuner_`` prefix so the
two never collide, and our Alembic history uses its own version table.
"""
from __future__ import annotations

import datetime as dt
import enum
from typing import Any

from sqlalchemy import JSON, Boolean, DateTime, Enum, Float, ForeignKey, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship


def utcnow() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)


class Base(DeclarativeBase):
    type_annotation_map = {dict[str, Any]: JSON}


class TrialStatus(enum.Enum):
    ok = "ok"
    pruned = "pruned"
    compile_error = "compile_error"
    out_of_resources = "out_of_resources"
    mismatch = "mismatch"
    timeout = "timeout"
    crashed = "crashed"


class Environment(Base):
    """One (GPU, driver, CUDA, torch, triton, packages) combination; natural key = hash."""

    __tablename__ = "tuner_environments"
    id: Mapped[int] = mapped_column(primary_key=True)
    fingerprint_hash: Mapped[str] = mapped_column(String(32), unique=True)
    gpu: Mapped[str] = mapped_column(String(128), index=True)
    cc: Mapped[str] = mapped_column(String(16))
    fingerprint: Mapped[dict[str, Any]]
    created: Mapped[dt.datetime] = mapped_column(DateTime, default=utcnow)


class Run(Base):
    """One invocation of ``tune <kernel>`` (kind=tune) or ``tune revalidate`` (kind=revalidate)."""

    __tablename__ = "tuner_runs"
    id: Mapped[int] = mapped_column(primary_key=True)
    kind: Mapped[str] = mapped_column(String(16), default="tune")
    kernel: Mapped[str] = mapped_column(String(64), index=True)
    environment_id: Mapped[int] = mapped_column(ForeignKey("tuner_environments.id"))
    source_hash: Mapped[str] = mapped_column(String(32))
    git_commit: Mapped[str] = mapped_column(String(40), default="")
    settings: Mapped[dict[str, Any]]
    status: Mapped[str] = mapped_column(String(16), default="running")
    started: Mapped[dt.datetime] = mapped_column(DateTime, default=utcnow)
    finished: Mapped[dt.datetime | None] = mapped_column(DateTime, nullable=True)
    environment: Mapped[Environment] = relationship()

    @property
    def options(self) -> dict[str, Any]:
        """``settings`` where it is a JSON object (as this package writes it), else ``{}``: another
        tool's or a hand-edited row is read as holding no settings."""
        return self.settings if isinstance(self.settings, dict) else {}


class Trial(Base):
    """One candidate evaluated (or pruned) for one workload; written as soon as it finishes.

    ``phase`` is ``search`` for sampler trials and ``final`` for the interleaved re-timing
    of finalists. Times are microseconds; ``meaningful`` is False for interpreter times.
    """

    __tablename__ = "tuner_trials"
    id: Mapped[int] = mapped_column(primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("tuner_runs.id"), index=True)
    kernel: Mapped[str] = mapped_column(String(64))
    workload_key: Mapped[str] = mapped_column(String(256), index=True)
    workload: Mapped[dict[str, Any]]
    config: Mapped[dict[str, Any]]
    config_key: Mapped[str] = mapped_column(String(512))
    phase: Mapped[str] = mapped_column(String(16), default="search")
    status: Mapped[TrialStatus] = mapped_column(Enum(TrialStatus, native_enum=False, length=24))
    median_us: Mapped[float | None] = mapped_column(Float, nullable=True)
    p20_us: Mapped[float | None] = mapped_column(Float, nullable=True)
    p80_us: Mapped[float | None] = mapped_column(Float, nullable=True)
    floor_us: Mapped[float | None] = mapped_column(Float, nullable=True)
    meaningful: Mapped[bool] = mapped_column(Boolean, default=True)
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    optuna_number: Mapped[int | None] = mapped_column(Integer, nullable=True)
    created: Mapped[dt.datetime] = mapped_column(DateTime, default=utcnow)


class Winner(Base):
    """The admitted config per (kernel, workload, environment, template source).

    A winner is the default config itself when no candidate beat it by more than the noise.
    """

    __tablename__ = "tuner_winners"
    __table_args__ = (UniqueConstraint("kernel", "workload_key", "environment_id", "source_hash"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    kernel: Mapped[str] = mapped_column(String(64), index=True)
    workload_key: Mapped[str] = mapped_column(String(256))
    workload: Mapped[dict[str, Any]]
    environment_id: Mapped[int] = mapped_column(ForeignKey("tuner_environments.id"))
    source_hash: Mapped[str] = mapped_column(String(32))
    run_id: Mapped[int] = mapped_column(ForeignKey("tuner_runs.id"))
    config: Mapped[dict[str, Any]]
    is_default: Mapped[bool] = mapped_column(Boolean, default=False)
    median_us: Mapped[float] = mapped_column(Float)
    p20_us: Mapped[float] = mapped_column(Float)
    p80_us: Mapped[float] = mapped_column(Float)
    default_median_us: Mapped[float | None] = mapped_column(Float, nullable=True)
    floor_us: Mapped[float | None] = mapped_column(Float, nullable=True)
    noise: Mapped[float] = mapped_column(Float, default=0.0)
    meaningful: Mapped[bool] = mapped_column(Boolean, default=True)
    updated: Mapped[dt.datetime] = mapped_column(DateTime, default=utcnow, onupdate=utcnow)
    environment: Mapped[Environment] = relationship()


class Revalidation(Base):
    """One config re-timed by ``tune revalidate`` on the current environment.

    Per pack entry the winner, the default and the stored runners-up are re-timed
    interleaved in one revalidation run (``Run.kind == "revalidate"``, one run per kernel).
    ``stored_*`` keep what the entry claimed when it was tuned, so a row reads on its own;
    ``verdict`` and ``reason`` are set on the winner's row only (``ok``, ``stale``,
    ``broken``, or ``unchecked`` when the times are not meaningful). Times in microseconds.
    """

    __tablename__ = "tuner_revalidations"
    __table_args__ = (UniqueConstraint("run_id", "workload_key", "config_key"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("tuner_runs.id"), index=True)
    kernel: Mapped[str] = mapped_column(String(64), index=True)
    workload_key: Mapped[str] = mapped_column(String(256), index=True)
    workload: Mapped[dict[str, Any]]
    role: Mapped[str] = mapped_column(String(16))  # winner | default | runner_up
    config: Mapped[dict[str, Any]]
    config_key: Mapped[str] = mapped_column(String(512))
    status: Mapped[TrialStatus] = mapped_column(Enum(TrialStatus, native_enum=False, length=24))
    median_us: Mapped[float | None] = mapped_column(Float, nullable=True)
    p20_us: Mapped[float | None] = mapped_column(Float, nullable=True)
    p80_us: Mapped[float | None] = mapped_column(Float, nullable=True)
    floor_us: Mapped[float | None] = mapped_column(Float, nullable=True)
    meaningful: Mapped[bool] = mapped_column(Boolean, default=True)
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    # What the pack / database entry recorded when it was tuned (winner and default rows).
    stored_median_us: Mapped[float | None] = mapped_column(Float, nullable=True)
    stored_noise: Mapped[float | None] = mapped_column(Float, nullable=True)
    stored_source_hash: Mapped[str | None] = mapped_column(String(32), nullable=True)
    stored_gpu: Mapped[str | None] = mapped_column(String(128), nullable=True)
    winner_id: Mapped[int | None] = mapped_column(ForeignKey("tuner_winners.id"), nullable=True)
    verdict: Mapped[str | None] = mapped_column(String(16), nullable=True)
    reason: Mapped[str | None] = mapped_column(Text, nullable=True)
    created: Mapped[dt.datetime] = mapped_column(DateTime, default=utcnow)
