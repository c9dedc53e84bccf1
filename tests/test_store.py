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
