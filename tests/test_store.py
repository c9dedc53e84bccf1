"""The results store: migrations, our tables beside Optuna's, and refusing foreign databases."""
from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest
from sqlalchemy import inspect, select

from tuner.store import Environment, StoreError, open_store
from tuner.store.db import VERSION_TABLE

FIXTURES = Path(__file__).parent / "fixtures"


def test_fresh_database_gets_our_tables_and_optuna_coexists(tmp_path):
    store = open_store(str(tmp_path / "r.db"))
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(storage=store.optuna_storage(), study_name="s")
    study.optimize(lambda t: t.suggest_float("x", 0, 1), n_trials=2)
    tables = set(inspect(store.engine).get_table_names())
    assert {"tuner_environments", "tuner_runs", "tuner_trials", "tuner_winners", VERSION_TABLE} <= tables
    assert {"studies", "trials"} <= tables  # optuna-dashboard sqlite:///r.db opens the same file
    again = open_store(str(tmp_path / "r.db"))  # reopening is idempotent
    with again.session() as s:
        assert s.scalars(select(Environment)).all() == []


def test_both_engines_wait_for_locks_and_commit_without_a_flush_each(tmp_path):
    """Optuna's storage opens its own engine on the file: it gets our busy timeout and WAL's
    NORMAL durability as ours does (FULL flushed every ask and tell to disk)."""
    store = open_store(str(tmp_path / "r.db"))
    for engine in (store.engine, store.optuna_storage().engine):
        with engine.connect() as c:
            assert c.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
            assert c.exec_driver_sql("PRAGMA synchronous").scalar() == 1  # NORMAL
            assert c.exec_driver_sql("PRAGMA busy_timeout").scalar() == 30000


def test_golden_first_schema_database_upgrades(tmp_path):
    db = tmp_path / "old.db"
    shutil.copy(FIXTURES / "results-0001.db", db)
    store = open_store(str(db))
    with store.engine.connect() as c:
        rev = c.exec_driver_sql(f"SELECT version_num FROM {VERSION_TABLE}").scalar()
    from alembic.script import ScriptDirectory
    from tuner.store.db import MIGRATIONS, _alembic_config

    head = ScriptDirectory.from_config(_alembic_config(None)).get_current_head()
    assert rev == head
    with store.session() as s:  # the data of the old schema survived the upgrade
        envs = s.scalars(select(Environment)).all()
    assert [e.gpu for e in envs] == ["NVIDIA H200"]
    assert MIGRATIONS.is_dir()


def test_foreign_and_garbage_databases_are_refused(tmp_path):
    other = tmp_path / "other.db"
    con = sqlite3.connect(other)
    con.execute("CREATE TABLE customers (id INTEGER)")
    con.commit()
    con.close()
    with pytest.raises(StoreError, match="not a tuner database"):
        open_store(str(other))
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"this is not sqlite at all" * 100)
    with pytest.raises(StoreError, match="cannot use database"):
        open_store(str(junk))
    with pytest.raises(StoreError, match="no database"):
        open_store(str(tmp_path / "absent.db"), create=False)


def _head_db(tmp_path) -> Path:
    """A copy of the first-schema fixture, upgraded to today's schema."""
    db = tmp_path / "r.db"
    shutil.copy(FIXTURES / "results-0001.db", db)
    open_store(str(db)).engine.dispose()
    for suffix in ("-wal", "-shm"):
        Path(str(db) + suffix).unlink(missing_ok=True)
    return db


def test_read_only_commands_work_on_a_database_that_cannot_be_written(tmp_path, monkeypatch, capsys):
    """A results.db this process may not write (a read-only checkout, a shared mount) opens for
    show / regressions / export / dashboard without a byte written; a tune on it is one line."""
    import os

    import tuner.store.db as dbmod
    from tuner.cli.main import main

    db = _head_db(tmp_path)
    before = db.read_bytes()
    real = os.access
    monkeypatch.setattr(dbmod.os, "access", lambda p, mode: False if mode == os.W_OK else real(p, mode))
    store = open_store(str(db), create=False)
    with store.session() as s:
        assert s.scalars(select(Environment)).all()
    for args in (["show", "moe-routing"], ["regressions"], ["dashboard", "--out", str(tmp_path / "d.html")],
                 ["campaign", "--dry-run", "--kernel", "moe-routing"], ["campaign", "--status"]):
        assert main([*args, "--db", str(db)]) in (0, 1), args
    assert db.read_bytes() == before and not Path(str(db) + "-wal").exists()
    # an older schema cannot be upgraded in place: said in one line
    old = tmp_path / "old.db"
    shutil.copy(FIXTURES / "results-0001.db", old)
    with pytest.raises(StoreError, match="read-only and at an older schema"):
        open_store(str(old), create=False)


def test_results_go_to_the_user_database_and_reads_fall_back_to_the_shipped_one(tmp_path, monkeypatch):
    """Without --db a tune records into $TUNER_DB (else ~/.local/share/tuner/results.db), never a
    file of the checkout; read-only commands read the shipped results.db until that exists."""
    from tuner.store.db import SHIPPED, default_db, user_db

    monkeypatch.delenv("TUNER_DB", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    assert user_db() == tmp_path / "data" / "tuner" / "results.db"
    assert default_db(write=False) == str(SHIPPED)
    assert default_db(write=True) == str(user_db()) and user_db().parent.is_dir()
    store = open_store(None)
    assert store.url.endswith(str(user_db())) and user_db().is_file()
    assert default_db(write=False) == str(user_db())
    monkeypatch.setenv("TUNER_DB", str(tmp_path / "mine.db"))
    assert default_db(write=True) == str(tmp_path / "mine.db")
