"""Password-guessing throttle: exponential back-off per (user, client address) and per client address.

Never a lock of a user as such: failures from one address slow down only that address (for that user, and
past a higher count for every user), so nobody can keep an operator out of their own appliance by failing
logins in their name from elsewhere. The address is the real one (core/client_address.py), not a header a
client chooses. Login failures and wrong current passwords on change-password count alike: both guess the
same secret.

With n failures in the window (since the pair's last success, for the pair), the next attempt must wait
    0                                   while n < free
    min(base × 2^(n − free), max)       after that, counted from the latest failure
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from perigee_api.core.config import Settings
from perigee_api.models import LoginAttempt


@dataclass(frozen=True)
class Verdict:
    allowed: bool
    reason: str = ""  # login_throttled | address_throttled
    retry_after_s: int = 0


ALLOWED = Verdict(True)


def backoff_s(failures: int, free: int, base_s: float, max_s: float) -> float:
    """The wait after `failures` failures (0 while they are within the free ones)."""
    if failures < free:
        return 0.0
    exponent = failures - free
    if exponent > 60:  # 2^60 s is far past any max: skip the float overflow
        return max_s
    return min(base_s * 2.0**exponent, max_s)


def _failures(db: Session, since: float, *conds: object) -> tuple[int, float | None]:
    row = db.execute(
        select(func.count(), func.max(LoginAttempt.ts)).where(
            *conds,  # type: ignore[arg-type]
            LoginAttempt.success.is_(False),
            LoginAttempt.ts > since,
        )
    ).one()
    return int(row[0]), row[1]


def _wait(last: float | None, failures: int, free: int, settings: Settings, now: float) -> int:
    delay = backoff_s(failures, free, settings.login_backoff_base_s, settings.login_backoff_max_s)
    if last is None or delay <= 0:
        return 0
    left = last + delay - now
    return math.ceil(left) if left > 0 else 0


def check(db: Session, settings: Settings, username: str, address: str, now: float | None = None) -> Verdict:
    """May `address` try a password for `username` now?"""
    now = time.time() if now is None else now
    window_start = now - settings.login_window_s
    username, address = username[:64], address[:64]
    pair = (LoginAttempt.username == username, LoginAttempt.address == address)
    last_ok = db.scalar(select(func.max(LoginAttempt.ts)).where(*pair, LoginAttempt.success.is_(True)))
    n_pair, last_pair = _failures(db, max(window_start, last_ok or 0.0), *pair)
    wait = _wait(last_pair, n_pair, settings.login_free_failures, settings, now)
    if wait:
        return Verdict(False, "login_throttled", wait)
    # Across user names (password spraying): only this address waits, whatever it logs in as.
    n_addr, last_addr = _failures(
        db, window_start, LoginAttempt.address == address, LoginAttempt.username.notin_(OWN_KEYS)
    )
    wait = _wait(last_addr, n_addr, settings.login_free_failures_address, settings, now)
    if wait:
        return Verdict(False, "address_throttled", wait)
    return ALLOWED


# Enrollment tokens (services/enrollment.py) are throttled on their own row key: no user name can be this (user
# names start with a letter or digit), and login's count across user names leaves it out.
ENROLLMENT = "(enrollment token)"
# So are management keys of managed terminals (services/managed_hub.py).
MANAGED = "(management key)"
OWN_KEYS = (ENROLLMENT, MANAGED)


def _check_address(db: Session, settings: Settings, what: str, address: str, reason: str, now: float | None) -> Verdict:
    now = time.time() if now is None else now
    address = address[:64]
    key = (LoginAttempt.username == what, LoginAttempt.address == address)
    last_ok = db.scalar(select(func.max(LoginAttempt.ts)).where(*key, LoginAttempt.success.is_(True)))
    n, last = _failures(db, max(now - settings.login_window_s, last_ok or 0.0), *key)
    wait = _wait(last, n, settings.login_free_failures, settings, now)
    return Verdict(False, reason, wait) if wait else ALLOWED


def check_enrollment(db: Session, settings: Settings, address: str, now: float | None = None) -> Verdict:
    """May `address` present an enrollment token now? Only the address is counted: there is no name to aim at,
    and an address's failures never slow down another one. An address's redeemed token starts it afresh."""
    return _check_address(db, settings, ENROLLMENT, address, "enrollment_throttled", now)


def check_managed(db: Session, settings: Settings, address: str, now: float | None = None) -> Verdict:
    """May `address` present a management key now? As for enrollment tokens: only the address is counted, and a
    valid key is honoured even from a throttled address (the caller's to do), so nobody locks a terminal out."""
    return _check_address(db, settings, MANAGED, address, "management_key_throttled", now)


def note(db: Session, username: str, address: str, success: bool, now: float | None = None) -> None:
    db.add(
        LoginAttempt(
            ts=time.time() if now is None else now, username=username[:64], address=address[:64], success=success
        )
    )


def forget_before(settings: Settings, now: float) -> float:
    """Attempts older than this no longer count for anything (housekeeping deletes them)."""
    return now - settings.login_window_s
