"""Terminals enrolled at the hub: each by its own identity (the fingerprint its dashboard shows), bound to its
site's prefixes. Enrolling, rotating and revoking are config changes like any other: a new version (validated,
with author and comment, audited) applied to every gateway of the fleet at once. The hub gateways' peer state
(GET /v1/peer) says which terminals are connected, with how many idle connections and live flows, and what they
refused.

A change is refused while the desired config holds changes nobody applied: they would go out with it unseen.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable
from typing import Any

from sqlalchemy.orm import Session

from perigee_api.core.context import AppContext
from perigee_api.core.errors import ApiError
from perigee_api.models import ConfigVersion
from perigee_api.services import fleet, versions
from perigee_control.client import GatewayError

MAX_FINGERPRINTS = 2  # the current identity, and the next one while it rotates


def enrolled(config: dict[str, Any]) -> list[dict[str, Any]]:
    peer = config.get("peer") or {}
    return list(peer.get("terminals") or [])


def _find(config: dict[str, Any], name: str) -> dict[str, Any]:
    for t in enrolled(config):
        if t["name"] == name:
            return t
    raise ApiError(404, "terminal_not_found", f"no terminal named '{name}' is enrolled", "name")


def _desired_is_applied(db: Session) -> ConfigVersion:
    desired = versions.latest(db)
    active = versions.active_id(db)
    if active != desired.id:
        raise ApiError(
            409,
            "unapplied_changes",
            f"the desired config (version {desired.id}) holds changes not applied yet; apply or roll them back "
            "first (Config history), so that nothing else goes out with this one",
        )
    return desired


def _at_hub(config: dict[str, Any]) -> None:
    if config.get("role") != "hub":
        raise ApiError(409, "not_a_hub", "terminals are enrolled at their hub; this gateway is a terminal", "role")


def check_overlap(prefixes: list[str], others: list[str], whose: str) -> None:
    """No address of `prefixes` is in `others` (`whose` they are, for the message)."""
    for mine in prefixes:
        a = ipaddress.ip_network(mine)
        for theirs in others:
            b = ipaddress.ip_network(theirs)
            if a.version == b.version and a.overlaps(b):
                raise ApiError(
                    422,
                    "prefix_overlap",
                    f"{mine} overlaps {theirs} of {whose}: one address belongs to one terminal",
                    "prefixes",
                )


def _overlap(config: dict[str, Any], prefixes: list[str], skip: str | None = None) -> None:
    for t in enrolled(config):
        if t["name"] == skip:
            continue
        check_overlap(prefixes, t["prefixes"], f"terminal '{t['name']}'")


def check_new(config: dict[str, Any], name: str, prefixes: list[str], fingerprint: str | None = None) -> None:
    """What enrolling `name` with `prefixes` checks: a hub, a new name, its identity (when known yet) enrolled by
    no other terminal, prefixes of its own."""
    _at_hub(config)
    if any(t["name"] == name for t in enrolled(config)):
        raise ApiError(409, "terminal_exists", f"a terminal named '{name}' is enrolled already", "name")
    if fingerprint is not None:
        _fingerprint_free(config, fingerprint)
    _overlap(config, prefixes)


def _fingerprint_free(config: dict[str, Any], fingerprint: str) -> None:
    for t in enrolled(config):
        if fingerprint in t["fingerprints"]:
            raise ApiError(
                409, "fingerprint_in_use", f"that identity is already enrolled as terminal '{t['name']}'", "fingerprint"
            )


def change_and_apply(
    ctx: AppContext, db: Session, author: str, comment: str, mutate: Callable[[dict[str, Any]], None]
) -> tuple[ConfigVersion, dict[str, Any]]:
    """A new version with `mutate` made on the desired config, applied to the fleet. Caller commits."""
    _desired_is_applied(db)
    v = versions.change(db, author, comment, mutate).version
    db.flush()
    return v, versions.apply(db, fleet.members(ctx, db), v)


def _peer(config: dict[str, Any]) -> dict[str, Any]:
    peer: dict[str, Any] = config.setdefault("peer", {})
    return peer


def enroll(
    ctx: AppContext, db: Session, author: str, name: str, prefixes: list[str], fingerprint: str, comment: str
) -> tuple[ConfigVersion, dict[str, Any]]:
    check_new(_desired_is_applied(db).config, name, prefixes, fingerprint)

    def add(cfg: dict[str, Any]) -> None:
        peer = _peer(cfg)
        peer["terminals"] = [*enrolled(cfg), {"name": name, "fingerprints": [fingerprint], "prefixes": prefixes}]
        peer["enabled"] = True  # a hub with a terminal enrolled listens for it

    return change_and_apply(ctx, db, author, comment or f"enroll terminal {name}", add)


def revoke(ctx: AppContext, db: Session, author: str, name: str, comment: str) -> tuple[ConfigVersion, dict[str, Any]]:
    current = _desired_is_applied(db).config
    _find(current, name)

    def drop(cfg: dict[str, Any]) -> None:
        _peer(cfg)["terminals"] = [t for t in enrolled(cfg) if t["name"] != name]

    return change_and_apply(ctx, db, author, comment or f"revoke terminal {name}", drop)


def add_fingerprint(
    ctx: AppContext, db: Session, author: str, name: str, fingerprint: str, comment: str
) -> tuple[ConfigVersion, dict[str, Any]]:
    current = _desired_is_applied(db).config
    t = _find(current, name)
    if len(t["fingerprints"]) >= MAX_FINGERPRINTS:
        raise ApiError(
            409,
            "rotation_in_progress",
            f"terminal '{name}' has {MAX_FINGERPRINTS} identities already: drop the old one first",
            "fingerprint",
        )
    _fingerprint_free(current, fingerprint)

    def add(cfg: dict[str, Any]) -> None:
        _find(cfg, name)["fingerprints"].append(fingerprint)

    return change_and_apply(ctx, db, author, comment or f"terminal {name}: add its next identity", add)


def drop_fingerprint(
    ctx: AppContext, db: Session, author: str, name: str, fingerprint: str, comment: str
) -> tuple[ConfigVersion, dict[str, Any]]:
    current = _desired_is_applied(db).config
    t = _find(current, name)
    if fingerprint not in t["fingerprints"]:
        raise ApiError(404, "fingerprint_not_found", f"terminal '{name}' has no such identity", "fingerprint")
    if len(t["fingerprints"]) == 1:
        raise ApiError(
            409,
            "last_fingerprint",
            f"that is the only identity of terminal '{name}': revoke the terminal instead",
            "fingerprint",
        )

    def drop(cfg: dict[str, Any]) -> None:
        t = _find(cfg, name)
        t["fingerprints"] = [f for f in t["fingerprints"] if f != fingerprint]

    return change_and_apply(ctx, db, author, comment or f"terminal {name}: drop its old identity", drop)


def set_hub(
    ctx: AppContext,
    db: Session,
    author: str,
    hub: str,
    fingerprints: list[str],
    port: int | None,
    enabled: bool,
    comment: str,
) -> tuple[ConfigVersion, dict[str, Any]]:
    """A terminal's hub: its address and the identities of the hub's gateways it accepts."""
    current = _desired_is_applied(db).config
    if current.get("role") != "terminal":
        raise ApiError(409, "not_a_terminal", "only a terminal names its hub", "role")

    def point(cfg: dict[str, Any]) -> None:
        peer = _peer(cfg)
        peer.update(hub=hub, hub_fingerprints=fingerprints, enabled=enabled)
        if port is not None:
            peer["port"] = port

    return change_and_apply(ctx, db, author, comment or f"peer path: hub {hub}", point)


# --- live state ------------------------------------------------------------------------------------------------


def _count(v: Any) -> int:
    return int(v) if isinstance(v, int | float) and not isinstance(v, bool) else 0


def status(ctx: AppContext, db: Session) -> dict[str, Any]:
    """The enrolled terminals (desired config) with each hub gateway's view of them (GET /v1/peer)."""
    desired = versions.latest(db)
    aid = versions.active_id(db)
    active = db.get(ConfigVersion, aid) if aid is not None else None
    applied_names = {t["name"] for t in enrolled(active.config)} if active else set()
    ms = fleet.members(ctx, db)
    views: dict[str, list[dict[str, Any]]] = {}
    refused_unknown = 0
    errors = []
    if desired.config.get("role") == "hub":
        for m, a in zip(ms, fleet.each(ms, lambda c: c.json.peer()), strict=True):
            if isinstance(a, GatewayError):
                errors.append({"gateway": m.name, "error": a.as_dict()})
                continue
            refused_unknown += _count(a.get("refused_unknown"))
            for t in a.get("terminals") or []:
                if not isinstance(t, dict) or "name" not in t:
                    continue
                views.setdefault(str(t["name"]), []).append(
                    {
                        "gateway": m.name,
                        "idle_connections": _count(t.get("idle_connections")),
                        "live_flows": _count(t.get("live_flows")),
                        "refused_prefix": _count(t.get("refused_prefix")),
                        "refused_other": _count(t.get("refused_other")),
                        "last_seen": t.get("last_seen") if isinstance(t.get("last_seen"), int | float) else None,
                    }
                )
    out = []
    for t in enrolled(desired.config):
        seen = views.get(t["name"], [])
        idle = sum(g["idle_connections"] for g in seen)
        live = sum(g["live_flows"] for g in seen)
        last = [g["last_seen"] for g in seen if g["last_seen"] is not None]
        out.append(
            {
                "name": t["name"],
                "fingerprints": list(t["fingerprints"]),
                "prefixes": list(t["prefixes"]),
                "applied": t["name"] in applied_names,
                "connected": idle + live > 0,
                "idle_connections": idle,
                "live_flows": live,
                "refused_prefix": sum(g["refused_prefix"] for g in seen),
                "refused_other": sum(g["refused_other"] for g in seen),
                "last_seen": max(last) if last else None,
                "gateways": seen,
            }
        )
    return {
        "role": str(desired.config.get("role", "")),
        "terminals": out,
        "refused_unknown": refused_unknown,
        "desired_version_id": desired.id,
        "active_version_id": aid,
        "errors": errors,
    }


def identities(ctx: AppContext, db: Session) -> dict[str, Any]:
    """Every fleet gateway's own identity (the local one first) and the local gateway's peer state."""
    ms = fleet.members(ctx, db)
    rows = []
    for m, a in zip(ms, fleet.each(ms, lambda c: c.json.identity()), strict=True):
        if isinstance(a, GatewayError):
            rows.append(
                {
                    "gateway": m.name,
                    "fingerprint": None,
                    "certificate_pem": None,
                    "next_fingerprint": None,
                    "error": a.as_dict(),
                }
            )
        else:
            rows.append(
                {
                    "gateway": m.name,
                    "fingerprint": a.get("fingerprint"),
                    "certificate_pem": a.get("certificate_pem"),
                    "next_fingerprint": a.get("next_fingerprint"),
                    "error": None,
                }
            )
    peer: dict[str, Any] | None = None
    peer_error: dict[str, Any] | None = None
    try:
        peer = ctx.gateway.json.peer()
    except GatewayError as exc:
        peer_error = exc.as_dict()
    return {
        "role": str(versions.latest(db).config.get("role", "")),
        "identities": rows,
        "peer": peer,
        "peer_error": peer_error,
    }
