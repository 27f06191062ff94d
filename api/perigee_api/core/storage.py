"""Telling "the disk under the database is full" apart from other database failures.

SQLite answers SQLITE_FULL ("database or disk is full") when a write finds no space (or the database reached
its max_page_count); the write is rolled back and the database stays consistent, so the right answer is to
refuse the change clearly and keep serving reads, not to fail as if the API were broken.
"""

from __future__ import annotations

import errno
import sqlite3


def is_storage_full(exc: BaseException) -> bool:
    """True for SQLite's SQLITE_FULL (bare or wrapped by SQLAlchemy) and for ENOSPC/EDQUOT from a file write."""
    orig = getattr(exc, "orig", None) or exc
    if isinstance(orig, sqlite3.OperationalError):
        return getattr(orig, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL or "database or disk is full" in str(orig)
    if isinstance(orig, OSError):
        return orig.errno in (errno.ENOSPC, errno.EDQUOT)
    return False
