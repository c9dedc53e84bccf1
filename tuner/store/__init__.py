"""The results store: SQLAlchemy models, sessions and Alembic migrations."""
from tuner.store.db import DEFAULT_URL, Store, StoreError, normalize_url, open_store
from tuner.store.models import Environment, Run, Trial, TrialStatus, Winner

__all__ = ["DEFAULT_URL", "Store", "StoreError", "normalize_url", "open_store",
           "Environment", "Run", "Trial", "TrialStatus", "Winner"]
