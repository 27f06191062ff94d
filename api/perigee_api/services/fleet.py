"""The fleet: the local gateway (Unix socket) and the gateways registered by address (TCP, mutual TLS).

One config version goes to every member: with more than one, each first reports its current config (what a
roll-back puts back) and dry-runs the new one; then they apply one after another; the first failure stops the
run and the members that had applied get their previous config back. Status (health, live flows and the BGP/BFD
sessions of the FRR beside each gateway) and live flows are read from all members at once, each answer
labelled with its gateway.
"""

from __future__ import annotations

import ipaddress
import logging
import re
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

from sqlalchemy import select
from sqlalchemy.orm import Session

from perigee_api.core.context import AppContext
from perigee_api.core.errors import ApiError
from perigee_api.models import FleetGateway, FleetRevocation
from perigee_api.services import fleet_pki
from perigee_control.client import GatewayClient, GatewayError

log = logging.getLogger("perigee_api.fleet")

LOCAL = "local"  # the member on this host's Unix socket; no registered gateway may take the name
NAME_RE = re.compile(r"^[a-z0-9][a-z0-9-]{0,62}$")
HOST_RE = re.compile(
    r"^(?=.{1,253}$)[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$"
)
T = TypeVar("T")


@dataclass(frozen=True)
class Address:
    host: str
    port: int

    def __str__(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


def parse_address(text: str) -> Address:
    """`host:port` or `[v6]:port`; the host an IP address or a DNS name (what the server certificate names)."""
    m = re.fullmatch(r"\[([0-9A-Fa-f:.]+)\]:(\d{1,5})|([^:\[\]]+):(\d{1,5})", text.strip())
    if not m:
        raise ApiError(422, "invalid_address", "address must be host:port or [ipv6]:port", "address")
    host, port_s = (m.group(1), m.group(2)) if m.group(1) else (m.group(3), m.group(4))
    port = int(port_s)
    if not 1 <= port <= 65535:
        raise ApiError(422, "invalid_address", "port must be 1..65535", "address")
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        if not HOST_RE.match(host):
            raise ApiError(
                422, "invalid_address", f"{host!r} is neither an IP address nor a DNS name", "address"
            ) from None
        return Address(host.lower(), port)
    if ip.is_unspecified or ip.is_multicast:
        raise ApiError(422, "invalid_address", f"{host} cannot be a gateway's address", "address")
    return Address(str(ip), port)


def check_name(name: str) -> str:
    if not NAME_RE.match(name) or name == LOCAL:
        raise ApiError(422, "invalid_name", f"name must match {NAME_RE.pattern} and not be {LOCAL!r}", "name")
    return name


# --- registry ----------------------------------------------------------------------------------


def registered(db: Session) -> list[FleetGateway]:
    return list(db.scalars(select(FleetGateway).order_by(FleetGateway.name)))


def get(db: Session, gateway_id: int) -> FleetGateway:
    g = db.get(FleetGateway, gateway_id)
    if g is None:
        raise ApiError(404, "gateway_not_found", f"gateway {gateway_id} is not registered", "gateway_id")
    return g


def register(
    ctx: AppContext, db: Session, name: str, address: str, metrics_port: int, author: str
) -> tuple[FleetGateway, fleet_pki.IssuedPair]:
    """Record the gateway and issue its server certificate (its key leaves in the answer, never stored)."""
    name = check_name(name)
    addr = parse_address(address)
    if db.scalar(select(FleetGateway.id).where(FleetGateway.name == name)) is not None:
        raise ApiError(409, "gateway_exists", f"a gateway named {name!r} is registered", "name")
    for g in registered(db):
        if (g.host, g.port) == (addr.host, addr.port):
            raise ApiError(409, "gateway_exists", f"{addr} is registered as {g.name!r}", "address")
    pair = fleet_pki.issue_server(ctx.settings.data_dir, name, addr.host)
    g = FleetGateway(
        name=name,
        host=addr.host,
        port=addr.port,
        metrics_port=metrics_port,
        cert_fingerprint=pair.fingerprint,
        cert_not_after=pair.not_after,
        cert_serial=pair.serial,
        created_at=time.time(),
        created_by=author,
    )
    db.add(g)
    db.flush()
    return g, pair


# --- revocation --------------------------------------------------------------------------------


def revoked(db: Session) -> list[fleet_pki.Revoked]:
    """The revoked certificates not yet expired (an expired one is refused anyway: its row goes)."""
    now = time.time()
    rows = list(db.scalars(select(FleetRevocation).order_by(FleetRevocation.id)))
    for r in rows:
        if r.not_after < now:
            db.delete(r)
    return [fleet_pki.Revoked(r.serial, r.revoked_at) for r in rows if r.not_after >= now]


def remove(ctx: AppContext, db: Session, g: FleetGateway) -> bool:
    """Unregister `g` and revoke its certificate (False: issued before revocation existed, not revocable).
    Caller commits, then pushes the new list (push_revocations)."""
    revocable = g.cert_serial is not None
    if revocable:
        db.add(
            FleetRevocation(
                serial=g.cert_serial, subject=f"gateway {g.name}", revoked_at=time.time(), not_after=g.cert_not_after
            )
        )
    db.delete(g)
    db.flush()
    fleet_pki.crl_pem(ctx.settings.data_dir, revoked(db))
    return revocable


def push_revocations(ctx: AppContext, db: Session, ms: list[Member]) -> list[dict[str, Any]]:
    """The CA's revocation list to every member's TLS control listener; per member, whether it took it."""
    pem = fleet_pki.crl_pem(ctx.settings.data_dir, revoked(db))
    out = []
    for m, a in zip(ms, each(ms, lambda c: c.json.put_crl(pem)), strict=True):
        if isinstance(a, GatewayError):
            out.append({"gateway": m.name, "ok": False, "persisted": False, "error": a.as_dict()})
        else:
            out.append({"gateway": m.name, "ok": True, "persisted": bool(a.get("persisted")), "error": None})
    return out


# --- members -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Member:
    name: str
    address: str
    client: GatewayClient
    # The fleet CA's revocation list, when it revoked anything: every apply brings it to the member again.
    crl_pem: str | None = None


def members(ctx: AppContext, db: Session) -> list[Member]:
    """The local gateway, then the registered ones by name (a client holds no connection between requests)."""
    rows = registered(db)
    gone = revoked(db)
    crl = fleet_pki.crl_pem(ctx.settings.data_dir, gone) if gone else None
    out = [Member(LOCAL, f"unix:{ctx.settings.gateway_socket}", ctx.gateway, crl)]
    if rows:
        tls = fleet_pki.client_context(ctx.settings.data_dir, gone)
        for g in rows:
            client = GatewayClient.over_tls(g.host, g.port, tls, ctx.settings.gateway_timeout_s)
            out.append(Member(g.name, str(Address(g.host, g.port)), client, crl))
    return out


def each(ms: list[Member], call: Callable[[GatewayClient], T]) -> list[T | GatewayError]:
    """`call` on every member at once; a member's GatewayError is its answer."""
    return [answers[0] for answers in each_of(ms, [call])]


def each_of(ms: list[Member], calls: list[Callable[[GatewayClient], T]]) -> list[list[T | GatewayError]]:
    """Every call on every member, all in one parallel round (a silent member's calls time out side by side, not
    one after another); per member, its answers in the order of `calls`, a GatewayError being that answer."""

    def one(job: tuple[Member, Callable[[GatewayClient], T]]) -> T | GatewayError:
        m, call = job
        try:
            return call(m.client)
        except GatewayError as exc:
            return exc

    jobs = [(m, call) for call in calls for m in ms]
    with ThreadPoolExecutor(max_workers=min(16, len(jobs))) as pool:
        answers = list(pool.map(one, jobs))
    return [answers[i :: len(ms)] for i in range(len(ms))]


# --- apply to all ------------------------------------------------------------------------------


def _result(
    m: Member,
    status: str,
    revision: str | None = None,
    error: GatewayError | None = None,
    rollback_error: GatewayError | None = None,
) -> dict[str, Any]:
    return {
        "gateway": m.name,
        "address": m.address,
        "status": status,
        "revision": revision,
        "error": error.as_dict() if error else None,
        "rollback_error": rollback_error.as_dict() if rollback_error else None,
        "persisted": None,
        "persist_error": None,
    }


def _kept(m: Member, applied: dict[str, Any]) -> dict[str, Any]:
    """Whether the member kept the config it just applied for its next start, from its answer (None: a gateway
    too old to say). One that could not is running it now but boots its older file after a restart."""
    persisted = applied.get("persisted")
    if persisted is False:
        log.warning(
            "gateway %s applied revision %r but did not keep it: %s",
            m.name,
            applied.get("revision"),
            applied.get("persist_error"),
        )
    return {"persisted": persisted, "persist_error": applied.get("persist_error")}


def apply_all(ms: list[Member], config: dict[str, Any]) -> tuple[bool, list[dict[str, Any]]]:
    """Apply `config` on every member, all or none (as far as a roll-back can undo). Per-member statuses:
    applied | failed | rolled_back | rollback_failed | not_attempted | refused (the dry run) | unreachable.
    The revocation list goes first to every member (one that missed a removal gets it now; a refusal of it
    does not stop the apply: the removal's answer said who took it)."""
    crl = next((m.crl_pem for m in ms if m.crl_pem), None)
    if crl is not None:
        each(ms, lambda c: c.json.put_crl(crl))
    previous: dict[str, dict[str, Any] | None] = {}
    if len(ms) > 1:
        current = each(ms, lambda c: c.json.get_config())
        checks = each(ms, lambda c: c.json.validate_config(config))
        bad = False
        for m, cur, chk in zip(ms, current, checks, strict=True):
            if isinstance(cur, GatewayError) and cur.code != "no_config":
                bad = True
            if isinstance(chk, GatewayError):
                bad = True
            previous[m.name] = None if isinstance(cur, GatewayError) else cur
        if bad:
            out = []
            for m, cur, chk in zip(ms, current, checks, strict=True):
                if isinstance(cur, GatewayError) and cur.code != "no_config":
                    out.append(_result(m, "unreachable", error=cur))
                elif isinstance(chk, GatewayError):
                    out.append(_result(m, "unreachable" if chk.code == "gateway_unreachable" else "refused", error=chk))
                else:
                    out.append(_result(m, "not_attempted"))
            return False, out
    results: list[dict[str, Any]] = []
    done: list[tuple[Member, dict[str, Any]]] = []
    failed = False
    for m in ms:
        if failed:
            results.append(_result(m, "not_attempted"))
            continue
        try:
            res = m.client.json.apply_config(config)
        except GatewayError as exc:
            failed = True
            results.append(_result(m, "failed", error=exc))
            continue
        r = _result(m, "applied", revision=res.get("revision"))
        r.update(_kept(m, res))
        results.append(r)
        done.append((m, r))
    if failed:
        for m, r in done:
            before = previous.get(m.name)
            if before is None:
                r.update(
                    status="rollback_failed",
                    rollback_error={
                        "code": "no_previous_config",
                        "message": "the gateway had no config before",
                        "field": None,
                        "status": 409,
                    },
                )
                continue
            try:
                back = m.client.json.apply_config({k: v for k, v in before.items()})
            except GatewayError as exc:
                r.update(status="rollback_failed", rollback_error=exc.as_dict())
                continue
            r.update(status="rolled_back", revision=back.get("revision"), **_kept(m, back))
    return not failed, results


# --- status and flows --------------------------------------------------------------------------


def _throughput(flows: list[dict[str, Any]]) -> tuple[float, float]:
    down = sum(float(f.get("rate_down_bps") or 0) for f in flows)
    up = sum(float(f.get("rate_up_bps") or 0) for f in flows)
    return down, up


def status(ms: list[Member]) -> list[dict[str, Any]]:
    answers = each_of(ms, [lambda c: c.json.health(), lambda c: c.json.flows("live"), lambda c: c.json.routing()])
    out = []
    for m, (h, live, routing) in zip(ms, answers, strict=True):
        row: dict[str, Any] = {
            "gateway": m.name,
            "address": m.address,
            "reachable": False,
            "status": "unreachable",
            "revision": None,
            "version": None,
            "uptime_s": None,
            "flows_live": None,
            "throughput_down_bps": None,
            "throughput_up_bps": None,
            "problems": [],
            "error": None,
            "routing": None,
            "routing_error": None,
        }
        if isinstance(h, GatewayError):
            row["error"] = h.as_dict()
        else:
            row.update(
                reachable=True,
                status=str(h.get("status", "unknown")),
                revision=h.get("config_revision"),
                version=h.get("version"),
                uptime_s=h.get("uptime_s"),
                problems=[str(p) for p in h.get("problems") or []],
            )
        if not isinstance(live, GatewayError):
            flows = list(live.get("flows") or [])
            row["flows_live"] = len(flows)
            row["throughput_down_bps"], row["throughput_up_bps"] = _throughput(flows)
        # A gateway without FRR answers `available: false`; an error here is a daemon that could not be asked
        # (unreachable: `error` says so already) or does not serve the route.
        if isinstance(routing, GatewayError):
            row["routing_error"] = None if isinstance(h, GatewayError) else routing.as_dict()
        else:
            row["routing"] = routing
        out.append(row)
    return out


def live_flows(ms: list[Member]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Every member's live flows, each with `gateway` set; and the members that did not answer."""
    answers = each(ms, lambda c: c.json.flows("live"))
    flows: list[dict[str, Any]] = []
    errors: list[dict[str, Any]] = []
    for m, a in zip(ms, answers, strict=True):
        if isinstance(a, GatewayError):
            errors.append({"gateway": m.name, "error": a.as_dict()})
            continue
        flows.extend({**f, "gateway": m.name} for f in a.get("flows") or [])
    return flows, errors
