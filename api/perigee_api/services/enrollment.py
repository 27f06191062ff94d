"""Enrollment tokens: a terminal enrolls itself at the hub with a one-time token instead of an operator copying
its fingerprint (zero-touch). An operator creates a token for a terminal's name and prefixes; the hub keeps only
its hash and shows the token once. The terminal presents the token with its own identity's fingerprint
(POST /api/v1/peer/enroll, no session: the token is the credential); a live, unused token enrolls it
(services/terminals.enroll: a new config version applied to every hub gateway) and is used up in the same
transaction, and the answer is what the terminal needs to reach this hub (its `peer` section).

Every refusal of a token (unknown, used, expired, revoked, malformed) is one answer that does not say which; the
audit log says which. Failures are throttled per client address only (services/throttle.py, as logins): an
outsider slows down its own address and nobody else's, and a live token is honoured even from a throttled
address, so no failure aimed at a terminal (or made from behind its NAT) keeps it out.
"""

from __future__ import annotations

import base64
import hashlib
import ipaddress
import secrets
import threading
import time
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from perigee_api.core.context import AppContext
from perigee_api.core.errors import ApiError
from perigee_api.models import EnrollmentToken
from perigee_api.services import fleet, managed_hub, terminals, versions
from perigee_control.client import GatewayError

TOKEN_PREFIX = "pgt1."  # noqa: S105 - a visible version tag, not a secret
TOKEN_BYTES = 32
DEFAULT_TTL_S = 24 * 3600
MAX_TTL_S = 7 * 24 * 3600
DEFAULT_PEER_PORT = 7072  # the gateway's default for peer.port
MAX_TOKEN_CHARS = 256

# One redeem at a time in this process: the conditional UPDATE that claims a token is what makes a token enroll
# once (a second claimer matches no row); the lock only keeps concurrent redeems from meeting as SQLite writers
# while the first one applies to the fleet.
_REDEEM = threading.Lock()


class Refused(Exception):
    """A token refused; `reason` goes to the audit log, never to the caller."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def new_token() -> str:
    return TOKEN_PREFIX + base64.urlsafe_b64encode(secrets.token_bytes(TOKEN_BYTES)).rstrip(b"=").decode()


def token_hash(token: str) -> str:
    # A plain sha256 is enough here, unlike for passwords: the token is 32 random bytes (256 bits), so nobody can
    # search the hash space from a leaked database; a slow hash (argon2) would only add work an outsider can make
    # the hub do with every guess.
    return hashlib.sha256(token.encode()).hexdigest()


def well_formed(token: str) -> bool:
    if not token.startswith(TOKEN_PREFIX) or len(token) > MAX_TOKEN_CHARS:
        return False
    body = token[len(TOKEN_PREFIX) :]
    try:
        raw = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
    except ValueError:
        return False
    return len(raw) == TOKEN_BYTES


def state(t: EnrollmentToken, now: float) -> str:
    if t.used_at is not None:
        return "used"
    if t.revoked_at is not None:
        return "revoked"
    if t.expires_at <= now:
        return "expired"
    return "live"


def _live(db: Session, now: float) -> list[EnrollmentToken]:
    return list(
        db.scalars(
            select(EnrollmentToken).where(
                EnrollmentToken.used_at.is_(None),
                EnrollmentToken.revoked_at.is_(None),
                EnrollmentToken.expires_at > now,
            )
        )
    )


# --- where a terminal reaches this hub ---------------------------------------------------------------------------


def _usable_ip(text: str) -> str | None:
    try:
        ip = ipaddress.ip_interface(text).ip
    except ValueError:
        return None
    if ip.is_unspecified or ip.is_loopback or ip.is_link_local or ip.is_multicast:
        return None
    return str(ip)


def hub_address(ctx: AppContext, config: dict[str, Any]) -> str:
    """The peer address a terminal dials: the hub config's `peer.listen` if set, else the local hub gateway's
    satellite interface address (GET /v1/interfaces)."""
    for a in (config.get("peer") or {}).get("listen") or []:
        if (ip := _usable_ip(str(a))) is not None:
            return ip
    sat = (config.get("interfaces") or {}).get("satellite")
    found: list[str] = []
    if sat:
        try:
            nics = ctx.gateway.json.interfaces().get("interfaces") or []
        except GatewayError as exc:
            raise ApiError(
                502,
                "hub_address_unknown",
                f"the hub's peer address could not be read from the gateway ({exc.message}): set peer.listen in "
                "the config, or retry when the gateway answers",
                "peer.listen",
            ) from exc
        for nic in nics:
            if isinstance(nic, dict) and nic.get("name") == sat:
                found = [ip for a in nic.get("addresses") or [] if (ip := _usable_ip(str(a))) is not None]
    if not found:
        raise ApiError(
            409,
            "hub_address_unknown",
            "a terminal could not be told where to reach this hub: set peer.listen in the config (the peer "
            f"listener's address), or give the satellite interface ({sat or 'interfaces.satellite'}) an address",
            "peer.listen",
        )
    return found[0]


def hub_fingerprints(ctx: AppContext, db: Session) -> tuple[list[str], int]:
    """Every fleet gateway's identity (and a staged next one: it may be committed while the terminal runs), and
    how many gateways the fleet has. A gateway that does not answer fails it: a terminal missing one gateway's
    identity would be refused by that gateway."""
    ms = fleet.members(ctx, db)
    out: list[str] = []
    for m, a in zip(ms, fleet.each(ms, lambda c: c.json.identity()), strict=True):
        if isinstance(a, GatewayError) or not a.get("fingerprint"):
            raise ApiError(
                503,
                "hub_identity_unavailable",
                f"hub gateway '{m.name}' did not tell its identity: the terminal cannot be enrolled now; retry",
            )
        for f in (a.get("fingerprint"), a.get("next_fingerprint")):
            if isinstance(f, str) and f and f not in out:
                out.append(f)
    return out, len(ms)


# --- tokens --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Created:
    row: EnrollmentToken
    token: str


def create(
    ctx: AppContext, db: Session, author: str, name: str, prefixes: list[str], ttl_s: int, comment: str
) -> Created:
    """A new token for terminal `name` with `prefixes`, checked as enrolling them would be. Caller commits."""
    now = time.time()
    config = versions.latest(db).config
    terminals.check_new(config, name, prefixes)
    for t in _live(db, now):
        if t.name == name:
            raise ApiError(409, "token_exists", f"a live enrollment token for '{name}' exists already", "name")
        terminals.check_overlap(prefixes, t.prefixes, f"the live enrollment token for '{t.name}'")
    hub_address(ctx, config)  # refuse now what could not be answered at redeem
    token = new_token()
    row = EnrollmentToken(
        token_hash=token_hash(token),
        name=name,
        prefixes=list(prefixes),
        comment=comment,
        created_at=now,
        created_by=author,
        expires_at=now + ttl_s,
    )
    db.add(row)
    db.flush()
    return Created(row, token)


def listed(db: Session) -> list[EnrollmentToken]:
    return list(db.scalars(select(EnrollmentToken).order_by(EnrollmentToken.id)))


def revoke(db: Session, token_id: int, author: str) -> EnrollmentToken:
    row = db.get(EnrollmentToken, token_id)
    if row is None:
        raise ApiError(404, "token_not_found", f"no enrollment token {token_id}", "token_id")
    if row.used_at is not None:
        raise ApiError(
            409,
            "token_used",
            f"enrollment token {token_id} was used already: revoke the terminal '{row.name}' instead",
            "token_id",
        )
    if row.revoked_at is None:
        row.revoked_at = time.time()
        row.revoked_by = author
    return row


# --- redeeming -----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Redeemed:
    row: EnrollmentToken
    version_id: int
    apply: dict[str, Any]
    peer: dict[str, Any]
    management_key: str


def _why(db: Session, digest: str | None, now: float) -> str:
    row = db.scalar(select(EnrollmentToken).where(EnrollmentToken.token_hash == digest)) if digest else None
    return "malformed" if digest is None else "unknown" if row is None else state(row, now)


def is_live(db: Session, token: str, now: float | None = None) -> bool:
    """Whether `token` is a live token (a throttled address may still redeem one: see the module's doc)."""
    if not well_formed(token):
        return False
    now = time.time() if now is None else now
    row = db.scalar(select(EnrollmentToken).where(EnrollmentToken.token_hash == token_hash(token)))
    return row is not None and state(row, now) == "live"


def redeem(ctx: AppContext, db: Session, token: str, fingerprint: str) -> Redeemed:
    """Enroll the terminal `token` was made for with `fingerprint` and use the token up, in one transaction
    (committed here): a failure anywhere leaves the token unused and the config as it was. Raises Refused for a
    token that is not live (nothing changed), ApiError for a hub that cannot enroll now."""
    digest = token_hash(token) if well_formed(token) else None
    with _REDEEM:
        now = time.time()
        if digest is None:
            raise Refused("malformed")
        # The claim: one statement that matches only a live, unused token. Two redeems of one token cannot both
        # match it; the loser sees no row and is refused.
        claimed = db.execute(
            update(EnrollmentToken)
            .where(
                EnrollmentToken.token_hash == digest,
                EnrollmentToken.used_at.is_(None),
                EnrollmentToken.revoked_at.is_(None),
                EnrollmentToken.expires_at > now,
            )
            .values(used_at=now, used_fingerprint=fingerprint)
            .execution_options(synchronize_session=False)
        )
        if getattr(claimed, "rowcount", 0) != 1:
            db.rollback()
            raise Refused(_why(db, digest, now))
        try:
            row = db.scalars(
                select(EnrollmentToken)
                .where(EnrollmentToken.token_hash == digest)
                .execution_options(populate_existing=True)
            ).one()
            config = versions.latest(db).config
            hub = hub_address(ctx, config)
            fingerprints, gateways = hub_fingerprints(ctx, db)
            v, res = terminals.enroll(
                ctx,
                db,
                f"enrollment token {row.id}",
                row.name,
                list(row.prefixes),
                fingerprint,
                f"enroll terminal {row.name} (enrollment token {row.id})",
            )
            if not res.get("ok"):
                raise ApiError(
                    503,
                    "enrollment_not_applied",
                    "the hub could not apply the enrollment to its gateways; nothing changed: retry later",
                    details=res.get("error"),
                )
            row.used_version_id = v.id
            port = (v.config.get("peer") or {}).get("port", DEFAULT_PEER_PORT)
            # Its key to be managed from this hub (services/managed_hub.py), in the same transaction.
            key = managed_hub.grant(db, row.name)
            db.commit()
        except BaseException:
            db.rollback()
            raise
    peer = {
        "enabled": True,
        "port": int(port),
        "hub": hub,
        "hub_fingerprints": fingerprints,
        "hub_cluster": gateways > 1,
    }
    return Redeemed(row, v.id, res, peer, key)
