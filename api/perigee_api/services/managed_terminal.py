"""At a terminal: the hub that manages it. Joining (POST /api/v1/managed/join, or the zero-touch file at start)
redeems an enrollment token at the hub's POST /api/v1/peer/enroll over HTTPS pinned to the hub's certificate key
(services/pinned_https.py), then makes the answer's peer section a new local config version and applies it; the
hub's URL, pin and the management key it answered are kept (the key is write-only: no route returns it).

From then on services/managed_poll.py brings each version the hub makes for this terminal through `apply_version`:
its sections merged onto the desired local config, validated, a new version (author "hub") applied atomically;
when the gateway refuses it, the version that ran before is applied again (a roll-back, author "hub"), so the
terminal runs what it ran. What it did and how it runs go back to the hub (`report_body`).
"""

from __future__ import annotations

import copy
import json
import logging
import re
import time
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from sqlalchemy import select
from sqlalchemy.orm import Session

from perigee_api import __version__
from perigee_api.core.context import AppContext
from perigee_api.core.errors import ApiError
from perigee_api.models import ManagedLink
from perigee_api.schemas.managed import MAX_REPORTED_SITES, JoinIn
from perigee_api.schemas.trust import EnrollOut
from perigee_api.services import fleet, pinned_https, secret_view, versions
from perigee_control.client import GatewayError

log = logging.getLogger("perigee_api.managed")

ENROLL = "/api/v1/peer/enroll"
DESIRED = "/api/v1/managed/desired"
REPORT = "/api/v1/managed/report"
HUB_AUTHOR = "hub"
JOIN_TIMEOUT_S = 60.0  # the hub applies the enrollment to its gateways before it answers
# A stand-in for the hub's answer while checking that this box's config can take a peer section at all.
_PLACEHOLDER_PEER = {"hub": "192.0.2.1", "hub_fingerprints": ["sha256:" + "0" * 64]}
SITE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


def link(db: Session) -> ManagedLink | None:
    return db.scalar(select(ManagedLink).order_by(ManagedLink.id).limit(1))


def status(db: Session, join_error: str | None = None) -> dict[str, Any]:
    row = link(db)
    if row is None:
        return {
            "managed": False,
            "hub_url": None,
            "name": None,
            "joined_at": None,
            "last_contact_at": None,
            "last_error": join_error,
            "hub_version_id": None,
            "outcome": None,
        }
    return {
        "managed": True,
        "hub_url": row.hub_url,
        "name": row.name,
        "joined_at": row.joined_at,
        "last_contact_at": row.last_contact_at,
        "last_error": row.last_error,
        "hub_version_id": row.hub_version_id,
        "outcome": row.outcome,
    }


def _as_terminal(peer: dict[str, Any]) -> Any:
    def mutate(cfg: dict[str, Any]) -> None:
        cfg["role"] = "terminal"
        cfg.setdefault("peer", {}).update(copy.deepcopy(peer))

    return mutate


def hub_failure(exc: pinned_https.HubError) -> ApiError:
    if exc.code == "hub_pin_mismatch":
        return ApiError(502, exc.code, exc.message, "hub_pin")
    return ApiError(502, exc.code, exc.message, "hub_url")


def _gateway_error(res: dict[str, Any]) -> str:
    err = res.get("error") or {}
    return str(err.get("message") or err.get("code") or "the gateway refused the config")


def join(ctx: AppContext, db: Session, body: JoinIn) -> ManagedLink:
    """Joins the hub of `body`; commits. Nothing is changed here when the hub cannot be reached, its certificate
    does not match the pin or it refuses the token; when the gateway refuses the new version, the terminal is
    joined all the same (the hub enrolled it) and the error says so."""
    if link(db) is not None:
        raise ApiError(409, "already_managed", "this terminal is managed from a hub already")
    if versions.latest(db).config.get("role") != "terminal":
        raise ApiError(409, "not_a_terminal", "only a terminal joins a hub: this config's role is hub", "role")
    fingerprint = ctx.gateway.json.identity().get("fingerprint")
    if not isinstance(fingerprint, str) or not fingerprint:
        raise ApiError(502, "identity_unavailable", "the gateway did not tell its identity: retry when it answers")
    # This box's config must be able to become a terminal's before a token is spent on it.
    versions.change(db, HUB_AUTHOR, "join (check)", _as_terminal({"enabled": True, **_PLACEHOLDER_PEER}), preview=True)
    db.rollback()  # no transaction stays open while the hub is asked
    try:
        answer = pinned_https.request(
            body.hub_url,
            body.hub_pin,
            "POST",
            ENROLL,
            {"token": body.token, "fingerprint": fingerprint},
            timeout_s=JOIN_TIMEOUT_S,
        )
    except pinned_https.HubError as exc:
        raise hub_failure(exc) from None
    if answer.status != 200:
        err = answer.body.get("error") if isinstance(answer.body, dict) else None
        message = err.get("message") if isinstance(err, dict) else None
        code = 409 if answer.status in (400, 401, 409, 429) else 502
        raise ApiError(code, "hub_refused", f"the hub refused to enroll this terminal ({answer.status}): {message}")
    try:
        enrolled = EnrollOut.model_validate(answer.body)
    except ValidationError:
        raise ApiError(502, "hub_bad_answer", "the hub's enrollment answer is not what this API expects") from None
    peer = enrolled.peer.model_dump(mode="json")
    author = f"hub {body.hub_url}"[:64]
    stored = versions.change(db, author, f"joined the hub {body.hub_url} as {enrolled.name}", _as_terminal(peer))
    now = time.time()
    row = ManagedLink(
        hub_url=body.hub_url,
        hub_pin=body.hub_pin,
        name=enrolled.name,
        management_key=enrolled.management_key,
        joined_at=now,
        outcome_reported=True,
    )
    db.add(row)
    db.flush()
    v = stored.version
    res = versions.apply(db, fleet.members(ctx, db), v) if versions.active_id(db) != v.id else {"ok": True}
    if not res["ok"]:
        row.last_error = (
            f"joined, but the gateway refused version {v.id} (the hub's peer section): {_gateway_error(res)}"
        )
    db.commit()
    ctx.collector.sync_running()
    return row


def join_file(ctx: AppContext, db: Session, path: Path) -> ManagedLink:
    """Zero-touch: joins with the file's {hub_url, hub_pin, token}, then renames it to <file>.used."""
    try:
        body = JoinIn.model_validate(json.loads(path.read_text()))
    except (ValueError, ValidationError) as exc:
        raise ApiError(422, "invalid_join_file", f"{path}: not a JSON {{hub_url, hub_pin, token}}: {exc}") from None
    row = join(ctx, db, body)
    path.rename(path.with_name(path.name + ".used"))
    log.warning("joined the hub %s as %s (zero-touch file %s)", row.hub_url, row.name, path)
    return row


# --- versions from the hub -------------------------------------------------------------------------------------


def apply_version(
    ctx: AppContext, db: Session, hub_version: int, sections: dict[str, Any], comment: str
) -> tuple[str, str | None]:
    """Brings one hub version onto this terminal; (outcome, error). Commits."""
    before = versions.active_id(db)

    def merge(cfg: dict[str, Any]) -> None:
        cfg.update(copy.deepcopy(sections))

    label = f"hub version {hub_version}" + (f": {comment}" if comment else "")
    try:
        stored = versions.change(db, HUB_AUTHOR, label, merge)
    except ApiError as exc:
        db.rollback()
        return "refused", f"refused here: {exc.message}"
    except ValidationError as exc:
        db.rollback()
        first = exc.errors()[0]
        return "refused", f"refused here: {'.'.join(str(p) for p in first['loc'])}: {first['msg']}"
    v = stored.version
    if before == v.id:
        db.commit()
        return "applied", None
    ms = fleet.members(ctx, db)
    res = versions.apply(db, ms, v)
    db.commit()
    if res["ok"]:
        ctx.collector.sync_running()
        return "applied", None
    why = _gateway_error(res)
    if before is None:
        return "refused", f"the gateway refused it: {why}; nothing ran before it to roll back to"
    _new, back = versions.rollback(db, ms, versions.get(db, before), HUB_AUTHOR)
    db.commit()
    ctx.collector.sync_running()
    if back["ok"]:
        return "rolled_back", f"the gateway refused it: {why}; rolled back to version {before}"
    return (
        "rolled_back",
        f"the gateway refused it: {why}; the roll-back to version {before} failed too: {_gateway_error(back)}",
    )


def report_body(ctx: AppContext, db: Session, row: ManagedLink) -> dict[str, Any]:
    """What this terminal tells its hub: the outcome of the newest hub version (once), and how it runs."""
    gw = ctx.gateway
    health_ok, problems, software, revision = False, [], None, None
    try:
        h = gw.json.health()
        health_ok = h.get("status") == "ok"
        problems = [str(p) for p in h.get("problems") or []][:64]
        software = str(h.get("version"))[:64] if h.get("version") else None
        revision = h.get("config_revision")
    except GatewayError as exc:
        problems = [f"gateway: {exc.message}"]
    rx = tx = live = 0
    by_site: dict[str, Any] = {}
    try:
        c = gw.json.counters()
        rx, tx, live = int(c.get("bytes_down") or 0), int(c.get("bytes_up") or 0), int(c.get("flows_live") or 0)
        by_site = c.get("by_site") or {}
    except GatewayError:
        pass
    active = versions.active_id(db)
    config = secret_view.shown(db, versions.get(db, active).config) if active is not None else None
    pending = not row.outcome_reported and row.hub_version_id is not None
    return {
        "version_id": row.hub_version_id if pending else None,
        "outcome": row.outcome if pending and row.outcome else "none",
        "error": (row.outcome_error or "")[:4000] or None if pending else None,
        "revision": str(revision)[:64] if revision is not None else None,
        "local_version_id": active,
        "software": software or f"perigee-api {__version__}",
        "health_ok": health_ok,
        "problems": problems,
        "rx_bytes": max(rx, 0),
        "tx_bytes": max(tx, 0),
        "live_flows": max(live, 0),
        "sites": site_figures(by_site, ctx.latest.get("site_flows") or {}),
        "config": config,
    }


def site_figures(by_site: dict[str, Any], live: dict[str, float]) -> list[dict[str, Any]]:
    """Per site, what this terminal's Sites page counts: bytes from the gateway's `by_site` counters (received is
    down, sent is up, as the report's totals), live flows from the collector's last second. The busiest
    MAX_REPORTED_SITES, in name order."""
    names = {str(k) for k in by_site} | {str(k) for k in live}
    rows: list[dict[str, Any]] = []
    for name in names:
        if not SITE_NAME.fullmatch(name):
            continue  # not a name the hub takes: the report would be refused whole
        found = by_site.get(name)
        counters: dict[str, Any] = found if isinstance(found, dict) else {}
        rows.append(
            {
                "name": name,
                "rx_bytes": _count(counters.get("bytes_down")),
                "tx_bytes": _count(counters.get("bytes_up")),
                "live_flows": _count(live.get(name)),
            }
        )
    rows.sort(key=lambda r: r["rx_bytes"] + r["tx_bytes"], reverse=True)
    return sorted(rows[:MAX_REPORTED_SITES], key=lambda r: r["name"])


def _count(value: Any) -> int:
    return min(max(int(value), 0), 2**62) if isinstance(value, int | float) and not isinstance(value, bool) else 0
