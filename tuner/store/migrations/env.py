"""Alembic environment: runs on the connection handed over by tuner.store.db."""
from __future__ import annotations

from alembic import context

from tuner.store.db import VERSION_TABLE
from tuner.store.models import Base

connection = context.config.attributes["connection"]
context.configure(connection=connection, target_metadata=Base.metadata, version_table=VERSION_TABLE,
                  render_as_batch=True)
with context.begin_transaction():
    context.run_migrations()
