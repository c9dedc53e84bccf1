"""Opening the results store: URL handling, migrations, and the "is this ours" check."""
from __future__ import annotations

import logging
import re
from pathlib import Path

from sqlalchemy import create_engine, event, inspect
from sqlalchemy.engine import Engine
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session, sessionmaker

log = logging.getLogger(__name__)

VERSION_TABLE = "tuner_alembic_version"
DEFAULT_URL = "sqlite:///results.db"
MIGRATIONS = Path(__file__).resolve().parent / "migrations"

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
        return DEFAULT_URL
    if not db.strip():
        raise StoreError("--db: empty (give a SQLite path or a SQLAlchemy URL)")
    if "://" in db:
        return db
    return f"sqlite:///{db}"


def _sqlite_pragmas(engine: Engine) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn, _record):  # WAL: concurrent readers while a study writes
        cur = dbapi_conn.cursor()
        cur.execute("PRAGMA journal_mode=WAL")
        cur.execute("PRAGMA busy_timeout=30000")
        cur.execute("PRAGMA foreign_keys=ON")
        cur.close()


class Store:
    """An open, migrated results database."""

    def __init__(self, url: str, engine: Engine) -> None:
        self.url = url
        self.engine = engine
        self.Session = sessionmaker(engine, expire_on_commit=False)

    @property
    def shown_url(self) -> str:
        """The URL as printed: any password replaced by ***."""
        return redact_url(self.url)

    def session(self) -> Session:
        return self.Session()

    def optuna_storage(self):
        """Optuna's RDB storage on the same database (imported lazily)."""
        import optuna

        return optuna.storages.RDBStorage(self.url, skip_compatibility_check=False)


def _alembic_config(connection):
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    cfg.attributes["connection"] = connection
    return cfg


def upgrade(engine: Engine, revision: str = "head") -> None:
    """Bring the schema to ``revision`` through the Alembic history (never drop data)."""
    from alembic import command

    with engine.begin() as conn:
        command.upgrade(_alembic_config(conn), revision)


def open_store(db: str | None = None, *, create: bool = True) -> Store:
    """Open (and create or upgrade) the store at ``db``; raise StoreError when unusable."""
    url = normalize_url(db)
    shown = redact_url(url)
    if create and re.fullmatch(r"sqlite(\+\w+)?://(/(:memory:)?)?(\?.*)?", url):
        raise StoreError(f"{shown} is an in-memory database: what a tune measures would be lost with the "
                         "process (give a file path)")
    if url.startswith("sqlite:///") and not create:
        path = Path(url.removeprefix("sqlite:///"))
        if not path.is_file():
            raise StoreError(f"no database at {path}")
        if path.stat().st_size == 0:  # reading it must not write a schema (or a WAL header) into it
            raise StoreError(f"{path} is empty: no tuner database there")
    try:
        engine = create_engine(url)
    except (SQLAlchemyError, ImportError, ValueError) as e:
        raise StoreError(f"cannot open database {shown!r}: {redact_url(str(e))}") from None
    if engine.dialect.name == "sqlite":
        _sqlite_pragmas(engine)
    try:
        tables = set(inspect(engine).get_table_names())
        foreign = tables - _OPTUNA_TABLES - {VERSION_TABLE} - {t for t in tables if t.startswith("tuner_")}
        if foreign and VERSION_TABLE not in tables:
            raise StoreError(f"{shown} is not a tuner database (it holds tables {', '.join(sorted(foreign)[:4])})")
        if not tables and not create:  # an empty database: reading it must not write a schema into it
            raise StoreError(f"{shown} is empty: no tuner database there")
        upgrade(engine)
    except StoreError:
        raise
    except Exception as e:  # sqlite3.DatabaseError "file is not a database", locked, permissions...
        msg = str(e).splitlines()[0] if str(e) else e.__class__.__name__
        raise StoreError(f"cannot use database {shown!r}: {redact_url(msg)}") from None
    return Store(url, engine)
