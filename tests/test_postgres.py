"""The store on a real PostgreSQL server started by the tests: first use by several
processes, two runs of one study, the driver named when missing.

One server for the session (initdb + pg_ctl in a temporary folder, as an unprivileged user,
on a free port); a fresh database per test. Skipped when the server binaries are missing.
"""
from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

import pytest

from test_hardening import _check_tuned, _in_children, _open_first_time, _tune
from tuner.store import StoreError, open_store
from tuner.store.db import current_revision, head_revision, normalize_url


def _bin(name: str) -> str | None:
    found = shutil.which(name) or sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    return found if isinstance(found, str) else (found[-1] if found else None)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def pg_server():
    initdb, pg_ctl = _bin("initdb"), _bin("pg_ctl")
    if not (initdb and pg_ctl):
        pytest.skip("PostgreSQL server binaries (initdb, pg_ctl) not found: apt-get install postgresql")
    pytest.importorskip("psycopg", reason="psycopg not installed: pip install 'tuner[postgres]'")
    as_user: list[str] = []
    if os.geteuid() == 0:  # the server refuses to run as root
        user = next((u for u in ("postgres", "nobody") if _uid(u) is not None), None)
        if user is None or not shutil.which("runuser"):
            pytest.skip("running as root with no unprivileged user to start PostgreSQL as")
        as_user = ["runuser", "-u", user, "--"]
    base = Path(tempfile.mkdtemp(prefix="tuner-pg-"))
    data = base / "data"
    if as_user:
        shutil.chown(base, user=as_user[2])
    port = _free_port()
    run = lambda *a: subprocess.run([*as_user, *a], check=True, capture_output=True, text=True, timeout=120)
    run(initdb, "-D", str(data), "-U", "postgres", "-A", "trust", "--no-sync", "-E", "UTF8")
    run(pg_ctl, "-D", str(data), "-l", str(base / "log"), "-w", "-t", "60", "start", "-o",
        f"-p {port} -k {base} -h 127.0.0.1 -c fsync=off -c synchronous_commit=off -c full_page_writes=off")
    try:
        yield f"postgresql+psycopg://postgres@127.0.0.1:{port}"
    finally:
        subprocess.run([*as_user, pg_ctl, "-D", str(data), "-m", "immediate", "stop"], capture_output=True, timeout=60)
        shutil.rmtree(base, ignore_errors=True)


def _uid(user: str) -> int | None:
    import pwd

    try:
        return pwd.getpwnam(user).pw_uid
    except KeyError:
        return None


@pytest.fixture
def pg_db(pg_server) -> str:
    import psycopg

    name = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(pg_server.replace("+psycopg", "") + "/postgres", autocommit=True) as c:
        c.execute(f"CREATE DATABASE {name}")
    return f"{pg_server}/{name}"


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
