"""The store on a real PostgreSQL server started by the tests: first use by several
processes, two runs of one study, the driver named when missing.

One server for the session (``pg_server`` in conftest.py: initdb + pg_ctl in a temporary
folder, as an unprivileged user, on a free port); a fresh database per test (``pg_db``).
Skipped when the server binaries are missing.
"""
from __future__ import annotations

import sys
import uuid

import pytest

from test_hardening import _check_tuned, _in_children, _open_first_time, _tune
from tuner.store import StoreError, open_store
from tuner.store.db import current_revision, head_revision, normalize_url


def test_first_use_of_a_postgresql_database_by_four_processes(pg_server):
    for _ in range(2):
        import psycopg

        name = f"t_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(pg_server.replace("+psycopg", "") + "/postgres", autocommit=True) as c:
            c.execute(f"CREATE DATABASE {name}")
        db = f"{pg_server}/{name}"
        assert _in_children(_open_first_time, 4, db) == [0] * 4
        assert current_revision(open_store(db).engine) == head_revision()


def test_two_runs_of_one_study_on_postgresql_both_finish(pg_db):
    _open_first_time(pg_db)
    assert _in_children(_tune, 2, pg_db) == [0, 0], "a run crashed (its traceback is in the captured stderr)"
    _check_tuned(pg_db, 2)


def test_postgresql_urls_use_psycopg_and_a_missing_driver_names_the_extra(monkeypatch):
    assert normalize_url("postgresql://u@h/db") == "postgresql+psycopg://u@h/db"
    assert normalize_url("postgres://u@h/db") == "postgresql+psycopg://u@h/db"
    assert normalize_url("postgresql+psycopg://u@h/db") == "postgresql+psycopg://u@h/db"
    monkeypatch.setitem(sys.modules, "psycopg", None)  # as if not installed
    with pytest.raises(StoreError, match=r"pip install 'tuner\[postgres\]'"):
        open_store("postgresql://u@127.0.0.1:1/db")
    monkeypatch.setitem(sys.modules, "psycopg2", None)
    with pytest.raises(StoreError, match=r"psycopg 3: write the URL as postgresql://"):
        open_store("postgresql+psycopg2://u@127.0.0.1:1/db")
