"""The results store: SQLAlchemy models, sessions and Alembic migrations."""
from tuner.store.campaigns import Campaign, CampaignWorker, Claim
from tuner.store.db import Store, StoreError, default_db, normalize_url, open_store, user_db
from tuner.store.models import Environment, Run, Trial, TrialStatus, Winner

__all__ = ["default_db", "user_db", "Store", "StoreError", "normalize_url", "open_store",
           "Environment", "Run", "Trial", "TrialStatus", "Winner", "Campaign", "CampaignWorker", "Claim"]
