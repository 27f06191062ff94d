"""SQLite engine (WAL mode, foreign keys on) and the migration runner."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.orm import DeclarativeBase, Session, sessionmaker


class Base(DeclarativeBase):
    pass


def _on_connect(dbapi_conn: Any, _record: Any) -> None:
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA foreign_keys=ON")
    cur.execute("PRAGMA synchronous=NORMAL")
    cur.execute("PRAGMA busy_timeout=5000")
    cur.close()


def make_engine(url: str) -> Engine:
    engine = create_engine(url, connect_args={"check_same_thread": False, "timeout": 30})
    event.listen(engine, "connect", _on_connect)
    return engine


class Database:
    """Owns the engine and the session factory for one data dir."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.engine = make_engine(url)
        self.sessions = sessionmaker(self.engine, expire_on_commit=False)

    @contextmanager
    def session(self) -> Iterator[Session]:
        with self.sessions() as s:
            yield s

    def migrate(self) -> None:
        run_migrations(self.url)

    def dispose(self) -> None:
        self.engine.dispose()


def owner_only(path: Path) -> None:
    """The database and SQLite's files beside it readable by the API's user alone (password hashes, the config
    history, the key of secret fingerprints): made 0600 before SQLite opens it, which gives its -wal and -shm
    files the same mode; an existing install's files are tightened."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        os.fchmod(fd, 0o600)
    finally:
        os.close(fd)
    for side in ("-wal", "-shm", "-journal"):
        extra = path.with_name(path.name + side)
        if extra.exists() and not extra.is_symlink():
            extra.chmod(0o600)


def alembic_dir() -> Path:
    return Path(__file__).resolve().parents[2] / "alembic"


def run_migrations(url: str) -> None:
    from alembic.config import Config

    from alembic import command

    cfg = Config()
    cfg.set_main_option("script_location", str(alembic_dir()))
    cfg.set_main_option("sqlalchemy.url", url)
    command.upgrade(cfg, "head")
