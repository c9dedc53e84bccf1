"""Opening the results store: URL handling, migrations, and the "is this ours" check."""
from __future__ import annotations

import contextlib
import logging
import os
import re
import zlib
from pathlib import Path
from typing import Iterator

from sqlalchemy import create_engine, event, inspect
from sqlalchemy.engine import Engine
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session, sessionmaker
from sqlalchemy.pool import NullPool

log = logging.getLogger(__name__)

VERSION_TABLE = "tuner_alembic_version"
MIGRATIONS = Path(__file__).resolve().parent / "migrations"
SHIPPED = Path(__file__).resolve().parents[2] / "results.db"
"""The measured history a checkout ships (read, never written, unless named with ``--db``)."""


def user_db() -> Path:
    """Where results go by default: ``$TUNER_DB``, else ``$XDG_DATA_HOME/tuner/results.db``
    (``~/.local/share/tuner/results.db``): never a file of the checkout."""
    if os.environ.get("TUNER_DB"):
        return Path(os.environ["TUNER_DB"]).expanduser()
    base = Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share")
    return base / "tuner" / "results.db"


def default_db(*, write: bool) -> str:
    """The database a command uses without ``--db``: a ``$TUNER_DB`` set is taken as ``--db``
    would be (no fallback, no folders made for it); else the user's (``user_db``, its folders
    made) for commands that record, and for commands that only read the user's once it exists,
    else the shipped history."""
    named = os.environ.get("TUNER_DB")
    if named:
        return named if "://" in named else str(Path(named).expanduser())
    mine = user_db()
    if write:
        mine.parent.mkdir(parents=True, exist_ok=True)
        return str(mine)
    return str(mine if mine.is_file() or not SHIPPED.is_file() else SHIPPED)

# Tables that may share the database with ours: Optuna's RDB storage.
_OPTUNA_TABLES = {"studies", "study_directions", "study_user_attributes", "study_system_attributes",
                  "trials", "trial_user_attributes", "trial_system_attributes", "trial_params",
                  "trial_values", "trial_intermediate_values", "trial_heartbeats", "version_info",
                  "alembic_version"}


class StoreError(Exception):
    """The database cannot be used: unreadable, not ours, or not reachable."""


def redact_url(url: str) -> str:
    """The URL with any password replaced by ***, for reports and pack manifests."""
    return re.sub(r"//([^:/@]+):[^@]*@", r"//\1:***@", url)


def normalize_url(db: str | None) -> str:
    """A SQLAlchemy URL from ``--db``: a URL as is, a bare path as a SQLite file."""
    if db is None:
        raise StoreError("no database given")
    if not db.strip():
        raise StoreError("--db: empty (give a SQLite path or a SQLAlchemy URL)")
    if "://" in db:
        # SQLAlchemy's default PostgreSQL driver is psycopg2; the `postgres` extra installs psycopg 3
        return re.sub(r"^postgres(ql)?://", "postgresql+psycopg://", db)
    return f"sqlite:///{db}"


def _sqlite_pragmas(engine: Engine) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn, _record):  # WAL: concurrent readers while a study writes
        _pragmas(dbapi_conn)


def _text(raw: bytes) -> str:
    """A TEXT value as read: bytes that are no UTF-8 (a hand edit, another tool) read with U+FFFD
    where they do not decode, so that one bad row shows as such instead of failing every query."""
    return raw.decode("utf-8", "replace")


def _pragmas(dbapi_conn) -> None:
    dbapi_conn.text_factory = _text
    cur = dbapi_conn.cursor()
    _waits_and_durability(cur)  # first: switching to WAL takes a lock another process may hold
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA foreign_keys=ON")
    cur.close()


def _waits_and_durability(cur) -> None:
    """The busy timeout, and WAL's ``synchronous=NORMAL``: a commit is not flushed to disk on
    its own (a checkpoint is), so a killed process loses nothing it committed (only a power cut
    can take the last few commits); the default FULL flushes every commit, most of what a
    study's ask and tell cost. Set on Optuna's engine too (``_optuna_pragmas``)."""
    cur.execute("PRAGMA busy_timeout=30000")
    cur.execute("PRAGMA synchronous=NORMAL")


def _optuna_pragmas(dbapi_conn, _record) -> None:
    cur = dbapi_conn.cursor()
    _waits_and_durability(cur)
    cur.close()


def _sqlite_path(url: str) -> Path | None:
    """The file of a SQLite URL (None for other engines and in-memory databases)."""
    m = re.fullmatch(r"sqlite(\+\w+)?:///([^?]+)(\?.*)?", url)
    return Path(m.group(2)) if m and m.group(2) != ":memory:" else None


@contextlib.contextmanager
def schema_lock(engine: Engine) -> Iterator[None]:
    """Held while this process creates or upgrades a schema (ours or Optuna's), so that several
    processes opening a new database one at a time find it complete: PostgreSQL's advisory
    lock (released with the session, a killed holder included), for SQLite ``flock`` on the
    database's folder (released by the kernel when the holder dies)."""
    if engine.dialect.name == "postgresql":
        with engine.connect() as conn:
            conn.exec_driver_sql(f"SELECT pg_advisory_lock({_LOCK_KEY})")
            conn.commit()
            try:
                yield
            finally:
                conn.exec_driver_sql(f"SELECT pg_advisory_unlock({_LOCK_KEY})")
                conn.commit()
        return
    path = _sqlite_path(str(engine.url)) if engine.dialect.name == "sqlite" else None
    if path is None:
        yield
        return
    import fcntl

    fd = os.open(path.parent if str(path.parent) else ".", os.O_RDONLY)  # the folder: no lock file left behind
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


_LOCK_KEY = zlib.crc32(b"tuner schema") & 0x7FFFFFFF


class Store:
    """An open, migrated results database."""

    def __init__(self, url: str, engine: Engine) -> None:
        self.url = url
        self.engine = engine
        self.Session = sessionmaker(engine, expire_on_commit=False)
        self._optuna = None

    @property
    def shown_url(self) -> str:
        """The URL as printed: any password replaced by ***."""
        return redact_url(self.url)

    def session(self) -> Session:
        return self.Session()

    def optuna_storage(self):
        """Optuna's RDB storage on the same database (imported lazily)."""
        import optuna

        if self._optuna is None:
            with schema_lock(self.engine):  # Optuna creates its tables unlocked: one process at a time
                self._optuna = optuna.storages.RDBStorage(self.url, skip_compatibility_check=False)
            if self.engine.dialect.name == "sqlite":  # its own engine: our busy timeout and durability too
                event.listen(self._optuna.engine, "connect", _optuna_pragmas)
                self._optuna.engine.dispose()  # connections opened before the listener go
        return self._optuna


def _alembic_config(connection):
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    cfg.attributes["connection"] = connection
    return cfg


def upgrade(engine: Engine, revision: str = "head") -> None:
    """Bring the schema to ``revision`` through the Alembic history (never drop data)."""
    from alembic import command

    if engine.dialect.name != "sqlite":  # PostgreSQL's DDL is transactional: a killed upgrade leaves nothing
        with engine.begin() as conn:
            command.upgrade(_alembic_config(conn), revision)
        return
    # pysqlite commits before every CREATE TABLE: a process killed between two of them left tables
    # without a schema version, a database no later run could upgrade. One real transaction instead.
    mig = create_engine(engine.url, poolclass=NullPool)

    @event.listens_for(mig, "connect")
    def _on_connect(dbapi_conn, _record):
        _pragmas(dbapi_conn)
        dbapi_conn.isolation_level = None  # the driver's implicit transactions off: BEGIN is ours

    @event.listens_for(mig, "begin")
    def _on_begin(conn):
        conn.exec_driver_sql("BEGIN IMMEDIATE")

    try:
        with mig.begin() as conn:
            command.upgrade(_alembic_config(conn), revision)
    finally:
        mig.dispose()


def head_revision() -> str:
    """The newest schema revision this code knows."""
    from alembic.script import ScriptDirectory

    return ScriptDirectory.from_config(_alembic_config(None)).get_current_head()


def current_revision(engine: Engine) -> str | None:
    """The database's schema revision (None before the first migration)."""
    from sqlalchemy import text

    if VERSION_TABLE not in set(inspect(engine).get_table_names()):
        return None
    with engine.connect() as conn:
        return conn.execute(text(f"SELECT version_num FROM {VERSION_TABLE}")).scalar()


def _read_only(url: str) -> Path | None:
    """The SQLite file of ``url`` when this process cannot write it (or its folder, where SQLite
    keeps its journal), else None."""
    if not url.startswith("sqlite:///"):
        return None
    path = Path(url.removeprefix("sqlite:///").split("?")[0])
    if path.is_file() and not (os.access(path, os.W_OK) and os.access(path.parent, os.W_OK)):
        return path
    return None


def open_store(db: str | None = None, *, create: bool = True) -> Store:
    """Open (and create or upgrade) the store at ``db``; raise StoreError when unusable."""
    url = normalize_url(db if db is not None else default_db(write=create))
    shown = redact_url(url)
    if create and re.fullmatch(r"sqlite(\+\w+)?://(/(:memory:)?)?(\?.*)?", url):
        raise StoreError(f"{shown} is an in-memory database: what a tune measures would be lost with the "
                         "process (give a file path)")
    given = " ($TUNER_DB)" if db is None and os.environ.get("TUNER_DB") else ""
    named = _sqlite_path(url)
    if create and named is not None and not named.parent.is_dir():  # a path given is not a folder made
        raise StoreError(f"no folder {named.parent} for the database {named}{given} (create it, or give another path)")
    if url.startswith("sqlite:///") and not create:
        path = Path(url.removeprefix("sqlite:///"))
        if not path.is_file():
            raise StoreError(f"no database at {path}{given}")
        if path.stat().st_size == 0:  # reading it must not write a schema (or a WAL header) into it
            raise StoreError(f"{path} is empty: no tuner database there")
    ro = None if create else _read_only(url)
    try:
        # a file we may not write: opened immutable (no journal, no WAL index to create)
        engine = create_engine(f"sqlite:///file:{ro}?mode=ro&immutable=1&uri=true" if ro else url)
    except ImportError as e:
        extra = ""
        if "psycopg2" in str(e):  # asked for by name: the extra installs psycopg 3, which plain URLs use
            extra = " (the `postgres` extra installs psycopg 3: write the URL as postgresql://...)"
        elif "psycopg" in str(e):
            extra = " (install the extra: pip install 'tuner[postgres]')"
        raise StoreError(f"cannot open database {shown!r}: {e}{extra}") from None
    except (SQLAlchemyError, ValueError) as e:
        raise StoreError(f"cannot open database {shown!r}: {redact_url(str(e))}") from None
    if engine.dialect.name == "sqlite" and ro is None:
        _sqlite_pragmas(engine)
    # SQLite: the whole first look under the folder's lock. A process's first connection switches
    # a new file to WAL while another may be creating the schema in it; SQLite answers such a
    # crossing with "database is locked" at once, without waiting out the busy timeout.
    sqlite_rw = engine.dialect.name == "sqlite" and ro is None
    try:
        with schema_lock(engine) if sqlite_rw else contextlib.nullcontext():
            _look_and_upgrade(engine, shown, create, ro, locked=sqlite_rw)
    except StoreError:
        raise
    except Exception as e:  # sqlite3.DatabaseError "file is not a database", locked, permissions...
        msg = str(e).splitlines()[0] if str(e) else e.__class__.__name__
        raise StoreError(f"cannot use database {shown!r}: {redact_url(msg)}") from None
    return Store(url, engine)


def _look_and_upgrade(engine: Engine, shown: str, create: bool, ro: Path | None, *, locked: bool) -> None:
    """Refuse a database that is not ours (or empty when only read); create or upgrade the
    schema where it is behind, under the schema lock unless the caller holds it."""
    tables = set(inspect(engine).get_table_names())
    foreign = tables - _OPTUNA_TABLES - {VERSION_TABLE} - {t for t in tables if t.startswith("tuner_")}
    if foreign and VERSION_TABLE not in tables:
        raise StoreError(f"{shown} is not a tuner database (it holds tables {', '.join(sorted(foreign)[:4])})")
    if not tables and not create:  # an empty database: reading it must not write a schema into it
        raise StoreError(f"{shown} is empty: no tuner database there")
    if create or current_revision(engine) != head_revision():
        if ro is not None:
            raise StoreError(f"{ro} is read-only and at an older schema "
                             f"({current_revision(engine)}, this tuner needs {head_revision()}): "
                             "open a writable copy once to upgrade it")
        # several processes on a new database: one creates, the others wait
        with contextlib.nullcontext() if locked else schema_lock(engine):
            if current_revision(engine) != head_revision():
                upgrade(engine)
