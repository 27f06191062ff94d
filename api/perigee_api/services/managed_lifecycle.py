"""At a hub: what becomes of a managed terminal's version between its making and the terminal's report.

A version belongs to the enrollment it was made for (managed_terminals.enrollment, bumped with each key granted):
only that enrollment's long poll gets it. When the enrollment ends (the terminal revoked, or enrolled again under
its name) its versions still pending are `superseded`, with the reason, and stay in the history. An admin may
cancel a version the terminal has not been sent yet (`cancelled`); once sent it is the terminal's to report.

Sending and cancelling race only through single conditional UPDATEs (SQLite runs one writer at a time): a
version is either sent or cancelled, never both.
"""

from __future__ import annotations

import time

from sqlalchemy import func, select, update
from sqlalchemy.engine import CursorResult
from sqlalchemy.orm import Session

from perigee_api.core.errors import ApiError
from perigee_api.models import ManagedTerminal, ManagedVersion

SUPERSEDED_REVOKED = "superseded: the terminal was revoked before it got this version"
SUPERSEDED_ENROLLED = "superseded: the terminal enrolled again (a new management key) before it got this version"


def supersede(db: Session, row: ManagedTerminal, reason: str, now: float | None = None) -> int:
    """Ends every pending version of `row`'s enrollment now over; how many. Caller commits."""
    result = db.execute(
        update(ManagedVersion)
        .where(
            ManagedVersion.terminal_id == row.id,
            ManagedVersion.enrollment <= row.enrollment,
            ManagedVersion.state == "pending",
        )
        .values(state="superseded", error=reason, ended_at=time.time() if now is None else now)
        .execution_options(synchronize_session=False)
    )
    return _count(result)


def next_pending(db: Session, row: ManagedTerminal, after: int) -> ManagedVersion | None:
    """The oldest version of the current enrollment not reported yet that is newer than `after`: versions go out
    in the order made."""
    return db.scalar(
        select(ManagedVersion)
        .where(
            ManagedVersion.terminal_id == row.id,
            ManagedVersion.enrollment == row.enrollment,
            ManagedVersion.state == "pending",
            ManagedVersion.id > after,
        )
        .order_by(ManagedVersion.id)
        .limit(1)
    )


def deliver(db: Session, row: ManagedTerminal, after: int, now: float | None = None) -> ManagedVersion | None:
    """The version to send the terminal now (as next_pending), marked sent; commits. A version cancelled between
    the look and the mark is skipped: the next one is looked for."""
    when = time.time() if now is None else now
    while True:
        found = next_pending(db, row, after)
        if found is None:
            return None
        vid = found.id
        db.rollback()  # no read transaction stays open under the conditional write
        sent = db.execute(
            update(ManagedVersion)
            .where(ManagedVersion.id == vid, ManagedVersion.state == "pending")
            .values(delivered_at=func.coalesce(ManagedVersion.delivered_at, when))
            .execution_options(synchronize_session=False)
        )
        db.commit()
        if _count(sent) == 1:
            return db.get(ManagedVersion, vid, populate_existing=True)


def cancel(db: Session, row: ManagedTerminal, version_id: int, who: str, now: float | None = None) -> ManagedVersion:
    """Cancels a version not sent yet; commits. 404 when it is not this terminal's, 409 (nothing changed) when it
    was sent already or is no longer pending."""
    v = db.get(ManagedVersion, version_id)
    if v is None or v.terminal_id != row.id:
        raise ApiError(404, "version_not_found", f"terminal '{row.name}' has no version {version_id}", "version_id")
    when = time.time() if now is None else now
    done = db.execute(
        update(ManagedVersion)
        .where(
            ManagedVersion.id == version_id,
            ManagedVersion.state == "pending",
            ManagedVersion.delivered_at.is_(None),
        )
        .values(state="cancelled", error=f"cancelled by {who}", ended_at=when)
        .execution_options(synchronize_session=False)
    )
    if _count(done) != 1:
        db.rollback()
        db.refresh(v)
        raise ApiError(409, "version_not_cancellable", _why_not(v), "version_id")
    db.commit()
    db.refresh(v)
    return v


def _why_not(v: ManagedVersion) -> str:
    if v.state == "pending":
        return (
            f"version {v.id} was sent to the terminal already: it applies it and reports the outcome; "
            "make a new version to change it back"
        )
    return f"version {v.id} is {v.state.replace('_', ' ')}, not pending: only a version not sent yet can be cancelled"


def _count(result: object) -> int:
    return result.rowcount if isinstance(result, CursorResult) else 0
