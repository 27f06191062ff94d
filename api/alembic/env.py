"""Alembic environment: the URL comes from the caller's config, else from PERIGEE_* settings."""

from __future__ import annotations

from alembic import context
from perigee_api import models  # noqa: F401  (registers the tables)
from perigee_api.core.config import Settings
from perigee_api.core.db import Base, make_engine

config = context.config
url = config.get_main_option("sqlalchemy.url") or Settings().database_url


def run() -> None:
    engine = make_engine(url)
    with engine.connect() as conn:
        context.configure(connection=conn, target_metadata=Base.metadata, render_as_batch=True)
        with context.begin_transaction():
            context.run_migrations()
    engine.dispose()


run()
