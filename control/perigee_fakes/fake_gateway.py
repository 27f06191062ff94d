"""A test double of the gateway daemon: the control protocol of docs/control-protocol.md on a Unix socket.

It validates configs like the real one (GatewayConfig, unknown fields rejected), applies atomically
(a failure injected with `fail_next_apply(step)` leaves the previous config active), serves flows,
counters and cache stats that tests set, and drains the closed-flow ring on /v1/flows/collect. Every
answer goes through the generated report model of the real one (perigee_control.reports) on its way
out, so the double cannot drift from the gateway's schema.

    with FakeGateway(tmp_path / "control.sock") as gw:
        gw.live_flows = [make_flow(1)]
"""

from __future__ import annotations

import asyncio
import copy
import ssl
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import uvicorn
from cryptography import x509
from pydantic import BaseModel, TypeAdapter, ValidationError
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from perigee_api.schemas.gateway_config import GatewayConfig
from perigee_control import reports
from perigee_fakes.fake_peer import FakePeerPath

FLOWS = TypeAdapter(list[reports.Flow])


def _err(status: int, code: str, message: str, field: str | None = None) -> JSONResponse:
    body = reports.ErrorBody(error=reports.ErrorDetail(code=code, message=message, field=field))
    return JSONResponse(body.model_dump(mode="json", exclude_none=True), status_code=status)


def _answer(model: type[BaseModel], body: dict[str, Any]) -> JSONResponse:
    """`body` as the real gateway would send it: checked against its report type."""
    return JSONResponse(model.model_validate(body).model_dump(mode="json", by_alias=True))


def _hybla() -> dict[str, Any]:
    return {
        "implementation": "none",
        "loaded": False,
        "rtt0_ms": 25,
        "base_rtt_ms": 0,
        "cwnd_max": 0,
        "available": ["cubic", "reno"],
        "problem": "fake gateway",
        "owned": False,
        "pin_dir": "/sys/fs/bpf/perigee",
        "netns_cookie": None,
        "netns": [],
        "ld": {"loaded": False, "registration": "missing", "version": None, "problem": None},
    }


def _nic(
    name: str,
    addresses: list[str],
    *,
    mac: str | None = None,
    loopback: bool = False,
    mtu: int = 1500,
    state: str = "up",
    up: bool = True,
) -> dict[str, Any]:
    return {
        "name": name,
        "oper_state": state,
        "up": up,
        "running": up,
        "loopback": loopback,
        "mtu": mtu,
        "mac": mac,
        "addresses": addresses,
        "configured_as": None,
    }


def make_flow(
    fid: int,
    *,
    state: str = "established",
    cls: str = "web",
    action: str = "accelerate",
    client: str = "10.71.1.10:40000",
    server: str = "10.71.3.10:80",
    now: float | None = None,
    bytes_up: int = 1000,
    bytes_down: int = 50000,
    rate_down_bps: float = 1e6,
    path: str = "direct",
    site: str = "other",
    relay: str = "splitter",
    cc: str = "hybla",
    cc_reason: str | None = "default",
    retransmitted: int = 0,
) -> dict[str, Any]:
    """A flow as the gateway reports it; `cc_reason` None leaves out `satellite`, as an older gateway does."""
    now = time.time() if now is None else now
    sent = bytes_down // 1448 + retransmitted
    satellite = {
        "cc": cc,
        "cc_reason": cc_reason,
        "segments_sent": sent,
        "segments_retransmitted": retransmitted,
        "retransmit_pct": 100 * retransmitted / sent if sent else 0.0,
    }
    leg = {
        "cc": cc,
        "state": "established",
        "srtt_us": 600000,
        "rttvar_us": 5000,
        "min_rtt_us": 590000,
        "cwnd": 40,
        "ssthresh": 100,
        "mss": 1448,
        "retrans_total": retransmitted,
        "lost": 0,
        "delivery_rate_bps": 1000000,
        "pacing_rate_bps": 2000000,
        "bytes_acked": bytes_down,
        "bytes_received": bytes_up,
        "notsent_bytes": 0,
        "bytes_sent": bytes_down,
        "bytes_retrans": 0,
        "segs_out": bytes_down // 1448 + 1,
        "segs_in": bytes_up // 1448 + 1,
        "data_segs_out": bytes_down // 1448,
        "data_segs_in": bytes_up // 1448,
        "timestamps": True,
        "tx_bps": rate_down_bps,
        "rx_bps": 1000.0,
    }
    ter = dict(leg, cc="cubic", srtt_us=20000, min_rtt_us=15000)
    return {
        "id": fid,
        "state": state,
        "class": cls,
        "action": action,
        "client": client,
        "server": server,
        "family": 6 if client.startswith("[") else 4,
        "started_at": now - 5,
        "ended_at": now if state == "closed" else None,
        "end_reason": "eof" if state == "closed" else None,
        "bytes_up": bytes_up,
        "bytes_down": bytes_down,
        "rate_up_bps": 1000.0,
        "rate_down_bps": rate_down_bps,
        "legs": {"client": leg, "server": ter, "satellite": "client"},
        "path": path,
        "relay": relay,
        "site": site,
        "dscp": 0,
        "cache": None,
        "satellite": satellite if cc_reason is not None else None,
    }


@dataclass(frozen=True)
class FakeTls:
    """Serve on TCP with mutual TLS like a fleet gateway's --control-tls-listen (PEM files)."""

    host: str
    port: int
    cert: Path
    key: Path
    client_ca: Path


class FakeGateway:
    def __init__(self, socket_path: Path, running: dict[str, Any] | None = None, tls: FakeTls | None = None) -> None:
        """`running`: a config the gateway runs from the start (its own config file), as the real one would;
        `tls`: serve on TCP with mutual TLS as well, like a fleet gateway."""
        self.socket_path = Path(socket_path)
        self.tls = tls
        self.config: dict[str, Any] | None = None
        self.revision: str | None = None
        self.applied: list[dict[str, Any]] = []
        self.validated: int = 0
        self.live_flows: list[dict[str, Any]] = []
        # The box as GET /v1/health reports it (tests and the e2e driver move the figures).
        self.host: dict[str, Any] = {
            "cpus": 2,
            "cpu_busy_seconds": 0.0,
            "cpu_idle_seconds": 0.0,
            "load_1m": 0.0,
            "load_5m": 0.0,
            "load_15m": 0.0,
            "memory_total_bytes": 4 << 30,
            "memory_available_bytes": 3 << 30,
            "disks": [{"path": "/", "total_bytes": 32 << 30, "available_bytes": 20 << 30}],
            "interfaces": [],
        }
        self.services: dict[str, Any] = {
            "squid": {"enabled": False, "serving": False, "problem": None},
            "resolver": {"enabled": False, "serving": False, "problem": None},
        }
        self.closed_ring: list[dict[str, Any]] = []
        self.counters: dict[str, Any] = {
            "flows_live": 0,
            "flows_total": 0,
            "flows_unsplit_overflow": 0,
            "flows_failed_connect": 0,
            "bytes_up": 0,
            "bytes_down": 0,
            "link": {
                "forward_bytes": 0,
                "return_bytes": 0,
                "forward_payload_bytes": 0,
                "return_payload_bytes": 0,
                "interface": None,
            },
            "by_action": {
                "accelerate": {"bytes_up": 0, "bytes_down": 0, "flows": 0, "retrans_segments": 0},
                "cache": {
                    "bytes_up": 0,
                    "bytes_down": 0,
                    "flows": 0,
                    "retrans_segments": 0,
                    "requests": 0,
                    "hits": 0,
                    "misses": 0,
                    "denied": 0,
                    "bytes": 0,
                    "bytes_from_origin": 0,
                    "bytes_saved": 0,
                },
                "bypass": {"packets": 0, "bytes": 0},
            },
            "by_class": {},
            "by_site": {},
            "by_congestion_control": {},
            "by_cc_reason": {},
            "bypass_rules": [],
            "cc_fallback": 0,
            "closed_dropped": 0,
            "peer": {"flows": 0, "fallbacks": 0, "refused": 0},
            "quic_rejected": {"packets": 0, "bytes": 0},
        }
        # The real daemon's GET /v1/cache/stats (perigee_squid::CacheStats), every field.
        self.cache_stats: dict[str, Any] = {
            "enabled": False,
            "running": False,
            "squid_version": "5.7",
            "collapsed_forwarding_requested": False,
            "collapsed_forwarding_effective": False,
            "requests": 0,
            "hits": 0,
            "misses": 0,
            "denied": 0,
            "hit_ratio_requests": 0.0,
            "hit_ratio_bytes": 0.0,
            "bytes_to_clients": 0,
            "bytes_from_cache": 0,
            "bytes_from_origin": 0,
            "bytes_saved_satellite": 0,
            "memory_used_bytes": None,
            "memory_capacity_bytes": None,
            "disk_used_bytes": None,
            "disk_capacity_bytes": None,
            "store_entries": None,
            "requests_buffered": 0,
            "requests_dropped": 0,
            "unparsed_lines": 0,
            "problems": [],
        }
        self.dns_stats: dict[str, Any] = {
            "enabled": False,
            "running": False,
            "unbound_version": None,
            "upstreams": [],
            "queries": 0,
            "cache_hits": 0,
            "cache_misses": 0,
            "hit_ratio": 0.0,
            "stale_answers": 0,
            "prefetches": 0,
            "upstream_resolutions": 0,
            "servfail_answers": 0,
            "ratelimited_queries": 0,
            "mean_upstream_ms": None,
            "satellite_time_saved_s": 0.0,
            "cache_memory_used_bytes": None,
            "cache_memory_capacity_bytes": None,
            "upstream_transport": None,
            "dnssec_validation": False,
            "dnssec_secure_answers": 0,
            "dnssec_bogus_answers": 0,
            "problems": [],
            "intercept": False,
            "intercepted_resolvers": [],
            "serving": False,
            "intercepted_packets": 0,
            "upstream_healthy": True,
            "upstream_probe": [],
        }
        # What the box's kernel would list (configured_as is filled in from the running config).
        self.interfaces: list[dict[str, Any]] = [
            _nic("lo", ["127.0.0.1/8", "::1/128"], loopback=True, mtu=65536, state="unknown"),
            _nic("lan0", ["10.71.1.1/24", "fe80::1/64"], mac="02:00:00:00:01:01"),
            _nic("sat0", ["10.71.2.1/30"], mac="02:00:00:00:02:01"),
            _nic("eth9", [], mac="02:00:00:00:09:01", state="down", up=False),
        ]
        # GET /v1/routing: no FRR beside it (a gateway on its own) until a test sets a report; None answers 404
        # as a daemon from before the route would.
        self.routing: dict[str, Any] | None = {
            "available": False,
            "reason": "bgpd: /var/run/frr/bgpd.vty does not exist",
            "vty_dir": "/var/run/frr",
            "neighbors": [],
            "problems": [],
        }
        self.purges: list[dict[str, Any]] = []
        self.flushes: list[dict[str, Any]] = []
        # Its own identity and the peer path's connections (perigee_fakes.fake_peer).
        self.peer = FakePeerPath()
        # Every revocation list pushed (PUT /v1/control-tls/crl), PEM.
        self.crls: list[str] = []
        self._fail_step: str | None = None
        # Set: applies still succeed, but the answer says the config could not be kept (a read-only /etc).
        self.persist_error: str | None = None
        self._lock = threading.Lock()
        self.started = time.time()
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        if running is not None:
            self.run_config(running)

    def fail_next_apply(self, step: str = "nft") -> None:
        self._fail_step = step

    def run_config(self, config: dict[str, Any]) -> None:
        """Runs `config` as if it had been applied without the API (the CLI, a restored machine)."""
        canonical = GatewayConfig.model_validate(config).to_json()
        with self._lock:
            self.config = canonical
            self.revision = str(canonical["revision"])

    # --- protocol ------------------------------------------------------------------------------

    def _validate(self, body: Any) -> tuple[dict[str, Any] | None, JSONResponse | None]:
        try:
            cfg = GatewayConfig.model_validate(body)
        except ValidationError as exc:
            e = exc.errors()[0]
            path = "$." + ".".join(str(p) for p in e["loc"])
            return None, _err(422, "invalid_config", f"{path}: {e['msg']}", path)
        return cfg.to_json(), None

    async def _health(self, _r: Request) -> JSONResponse:
        return _answer(
            reports.Health,
            {
                "status": "ok",
                "version": "fake-0.1",
                "uptime_s": time.time() - self.started,
                "role": (self.config or {}).get("role"),
                "config_revision": self.revision,
                "fail_open": True,
                "hybla": _hybla(),
                "problems": [],
                "notices": [],
                "peer": None,
                "workers": [],
                "host": self.host,
                "services": self.services,
            },
        )

    async def _get_config(self, _r: Request) -> JSONResponse:
        if self.config is None:
            return _err(404, "no_config", "no config applied yet")
        return JSONResponse(self.config)

    async def _config_of(self, r: Request) -> tuple[dict[str, Any], JSONResponse | None]:
        """The request's config, parsed and validated as the daemon does; or the error it would answer (with an
        empty config, never to be used)."""
        body, bad = await self._body(r)
        if bad:
            return {}, bad
        cfg, err = self._validate(body)
        if err or cfg is None:
            return {}, err or _err(422, "invalid_config", "invalid")
        return cfg, None

    async def _body(self, r: Request) -> tuple[Any, JSONResponse | None]:
        try:
            return await r.json(), None
        except ValueError:
            return None, _err(400, "bad_json", "body is not JSON")

    def _render(self, cfg: dict[str, Any]) -> dict[str, Any]:
        return {
            "nft": f"table inet perigee {{ # {len(cfg['classes'])} classes, {len(cfg['bypass'])} bypass }}",
            "routes": [f"{r['dst']} via {r['via']}" for r in cfg["satellite"]["routes"]],
            "sysctls": cfg["sysctls"],
            "shaping": None,
            "squid_conf": None,
            "unbound_conf": None,
        }

    async def _validate_config(self, r: Request) -> JSONResponse:
        cfg, err = await self._config_of(r)
        if err:
            return err
        self.validated += 1
        return _answer(reports.Validated, {"ok": True, "rendered": self._render(cfg)})

    async def _put_config(self, r: Request) -> JSONResponse:
        cfg, err = await self._config_of(r)
        if err:
            return err
        with self._lock:
            if self._fail_step:
                step, self._fail_step = self._fail_step, None
                return _err(500, "apply_failed", f"{step}: injected failure; previous state kept", step)
            self.config = copy.deepcopy(cfg)
            self.revision = str(cfg["revision"])
            self.applied.append(cfg)
        self.peer.applied(cfg)
        kept = {"persisted": self.persist_error is None, "persist_error": self.persist_error}
        return _answer(reports.Applied, {"ok": True, "revision": self.revision, "applied_at": time.time(), **kept})

    async def _flows(self, r: Request) -> JSONResponse:
        state = r.query_params.get("state", "live")
        if state not in ("live", "closed", "all"):
            return _err(400, "bad_state", "state must be live, closed or all", "state")
        flows = {
            "live": self.live_flows,
            "closed": self.closed_ring,
            "all": self.live_flows + self.closed_ring,
        }[state]
        return JSONResponse(
            {"flows": FLOWS.dump_python(FLOWS.validate_python(flows), mode="json", by_alias=True), "now": time.time()}
        )

    async def _collect(self, _r: Request) -> JSONResponse:
        with self._lock:
            drained, self.closed_ring = self.closed_ring, []
        return JSONResponse({"flows": FLOWS.dump_python(FLOWS.validate_python(drained), mode="json", by_alias=True)})

    async def _counters(self, _r: Request) -> JSONResponse:
        return _answer(reports.Counters, self.counters)

    async def _hybla(self, _r: Request) -> JSONResponse:
        return _answer(reports.HyblaStatus, _hybla())

    async def _cache_stats(self, _r: Request) -> JSONResponse:
        return _answer(reports.CacheStats, self.cache_stats)

    async def _cache_collect(self, _r: Request) -> JSONResponse:
        return _answer(reports.CollectResponse, {"requests": [], "dropped": 0})

    async def _purge(self, r: Request) -> JSONResponse:
        body, bad = await self._body(r)
        if bad:
            return bad
        if not isinstance(body, dict) or set(body) - {"url", "all"}:
            return _err(422, "invalid_purge", "body must be {url} or {all: true}", None)
        if body.get("all") is True:
            self.purges.append({"all": True})
            return JSONResponse({"ok": True, "purged": 7})
        if isinstance(body.get("url"), str) and body["url"]:
            self.purges.append({"url": body["url"]})
            return JSONResponse({"ok": True, "purged": 1})
        return _err(422, "invalid_purge", "url must be a non-empty string", "url")

    async def _interfaces(self, _r: Request) -> JSONResponse:
        cfg = self.config or {}
        lan = (cfg.get("interfaces") or {}).get("lan", [])
        sat = (cfg.get("interfaces") or {}).get("satellite")
        listed = []
        for nic in self.interfaces:
            used = "satellite" if nic["name"] == sat else "lan" if nic["name"] in lan else None
            listed.append(dict(nic, configured_as=used))
        return _answer(reports.InterfaceList, {"interfaces": listed})

    async def _routing(self, _r: Request) -> JSONResponse:
        if self.routing is None:
            return _err(404, "not_found", "no such endpoint")
        return _answer(reports.RoutingReport, self.routing)

    async def _dns_stats(self, _r: Request) -> JSONResponse:
        return _answer(reports.DnsReport, self.dns_stats)

    async def _dns_flush(self, r: Request) -> JSONResponse:
        body, bad = await self._body(r)
        if bad:
            return bad
        if not isinstance(body, dict) or set(body) - {"name", "all"}:
            return _err(400, "invalid_json", "body must be {name} or {all: true}", None)
        if (body.get("all") is True) == isinstance(body.get("name"), str):
            return _err(400, "invalid_request", 'give exactly one of "name" or "all": true', "name")
        self.flushes.append({"all": True} if body.get("all") is True else {"name": body["name"]})
        return JSONResponse({"ok": True})

    async def _identity(self, _r: Request) -> JSONResponse:
        return _answer(reports.IdentityReport, self.peer.answer_identity())

    async def _identity_rotate(self, _r: Request) -> JSONResponse:
        return _answer(reports.IdentityReport, self.peer.rotate())

    async def _identity_commit(self, _r: Request) -> JSONResponse:
        answer = self.peer.commit()
        if answer is None:
            return _err(409, "nothing_staged", "no next identity is staged: POST /v1/identity/rotate first")
        return _answer(reports.IdentityReport, answer)

    async def _peer(self, _r: Request) -> JSONResponse:
        return _answer(reports.PeerStatus, self.peer.answer_peer(self.config))

    async def _put_crl(self, r: Request) -> JSONResponse:
        body, bad = await self._body(r)
        if bad:
            return bad
        if not isinstance(body, dict) or set(body) != {"crl_pem"} or not isinstance(body["crl_pem"], str):
            return _err(422, "invalid_crl", "body must be {crl_pem}", "crl_pem")
        try:
            x509.load_pem_x509_crl(body["crl_pem"].encode())
        except ValueError as exc:
            return _err(422, "invalid_crl", f"not a PEM X509 CRL: {exc}", "crl_pem")
        self.crls.append(body["crl_pem"])
        return _answer(reports.CrlInstalled, {"ok": True, "listening": self.tls is not None, "persisted": False})

    def app(self) -> Starlette:
        async def not_found(_r: Request, _exc: Exception) -> JSONResponse:
            return _err(404, "not_found", "no such endpoint")

        async def not_allowed(_r: Request, _exc: Exception) -> JSONResponse:
            return _err(405, "method_not_allowed", "method not allowed")

        return Starlette(
            exception_handlers={404: not_found, 405: not_allowed},
            routes=[
                Route("/v1/health", self._health),
                Route("/v1/config", self._get_config, methods=["GET"]),
                Route("/v1/config", self._put_config, methods=["PUT"]),
                Route("/v1/config/validate", self._validate_config, methods=["POST"]),
                Route("/v1/flows", self._flows),
                Route("/v1/flows/collect", self._collect, methods=["POST"]),
                Route("/v1/counters", self._counters),
                Route("/v1/hybla", self._hybla),
                Route("/v1/cache/stats", self._cache_stats),
                Route("/v1/cache/requests/collect", self._cache_collect, methods=["POST"]),
                Route("/v1/cache/purge", self._purge, methods=["POST"]),
                Route("/v1/interfaces", self._interfaces),
                Route("/v1/routing", self._routing),
                Route("/v1/dns/stats", self._dns_stats),
                Route("/v1/dns/flush", self._dns_flush, methods=["POST"]),
                Route("/v1/identity", self._identity),
                Route("/v1/identity/rotate", self._identity_rotate, methods=["POST"]),
                Route("/v1/identity/commit", self._identity_commit, methods=["POST"]),
                Route("/v1/peer", self._peer),
                Route("/v1/control-tls/crl", self._put_crl, methods=["PUT"]),
            ],
        )

    # --- lifecycle -----------------------------------------------------------------------------

    def start(self) -> FakeGateway:
        self.socket_path.unlink(missing_ok=True)
        if self.tls is None:
            config = uvicorn.Config(self.app(), uds=str(self.socket_path), log_level="warning", lifespan="off")
        else:
            config = uvicorn.Config(
                self.app(),
                host=self.tls.host,
                port=self.tls.port,
                ssl_certfile=str(self.tls.cert),
                ssl_keyfile=str(self.tls.key),
                ssl_ca_certs=str(self.tls.client_ca),
                ssl_cert_reqs=ssl.CERT_REQUIRED,
                log_level="warning",
                lifespan="off",
            )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=lambda: asyncio.run(self._server.serve()), daemon=True)  # type: ignore[union-attr]
        self._thread.start()
        deadline = time.time() + 10
        while not self._server.started:
            if time.time() > deadline:
                raise RuntimeError("fake gateway did not start")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        if self._server:
            self._server.should_exit = True
        if self._thread:
            self._thread.join(timeout=5)
        self.socket_path.unlink(missing_ok=True)

    def __enter__(self) -> FakeGateway:
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        self.stop()
