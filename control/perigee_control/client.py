"""The one client of the gateway's control protocol (docs/control-protocol.md): HTTP/1.1 + JSON, one request
per connection, over the daemon's Unix control socket or over TCP with mutual TLS (a fleet member on another
host). The API, satlab, the benchmarks and the tests all talk to gateways through it.

`exchange` sends one request and hands back the status and the JSON body as they came (a test that checks an
error answer, a lab script that polls); `call` turns an error answer into `GatewayError` (the gateway's code,
message and field); the route methods read a success answer into its generated model of
`perigee_control.reports`, and `client.json` has the same routes answering the JSON as sent. Only the standard
library, pydantic and the generated models: the API's own packages are no concern of this module.
"""

from __future__ import annotations

import http.client
import json
import socket
import ssl
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol, TypeVar
from urllib.parse import urlencode

from pydantic import BaseModel, ValidationError

from perigee_control.reports import (
    Applied,
    CacheStats,
    CollectResponse,
    Counters,
    CrlInstalled,
    DnsReport,
    FlowList,
    Health,
    HyblaStatus,
    InterfaceList,
    PurgeResponse,
    RoutingReport,
    Validated,
)

FlowState = Literal["live", "closed", "all"]
ReportT = TypeVar("ReportT", bound=BaseModel)
# GatewayError.code when no answer came (refused, timed out, reset, TLS), and when what came was not the
# protocol's (not JSON, or not what the schema says that route answers).
UNREACHABLE = "gateway_unreachable"
BAD_ANSWER = "gateway_bad_answer"


class GatewayError(Exception):
    """An error answer of the gateway (its `{"error": {"code", "message", "field"}}` and the HTTP status), or
    `gateway_unreachable` / `gateway_bad_answer` (status 502) when no usable answer came."""

    def __init__(self, code: str, message: str, status: int = 502, field: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.status = status
        self.field = field

    def as_dict(self) -> dict[str, Any]:
        return {"code": self.code, "message": self.message, "field": self.field, "status": self.status}

    @classmethod
    def from_answer(cls, status: int, body: Any) -> GatewayError:
        err = body.get("error") if isinstance(body, dict) else None
        if not isinstance(err, dict):
            return cls("gateway_error", f"gateway answered {status}", status)
        field = err.get("field")
        return cls(
            str(err.get("code", "gateway_error")),
            str(err.get("message", "")),
            status,
            field if isinstance(field, str) else None,
        )


@dataclass(frozen=True)
class Answer:
    """One answer as it came: the HTTP status and the decoded JSON body (None when the body was empty)."""

    status: int
    body: Any

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300


class Transport(Protocol):
    """Where a gateway's control protocol is reached; a fresh connection per request (the daemon closes each)."""

    @property
    def description(self) -> str: ...

    def connection(self, timeout_s: float) -> http.client.HTTPConnection: ...


class _UnixConnection(http.client.HTTPConnection):
    """http.client's connection with a Unix stream socket in place of TCP."""

    def __init__(self, path: str, timeout_s: float) -> None:
        # The Host header is required by HTTP/1.1; the daemon does not look at it.
        super().__init__("perigee", timeout=timeout_s)
        self._path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.settimeout(self.timeout)
            sock.connect(self._path)
        except OSError:
            sock.close()
            raise
        self.sock = sock


@dataclass(frozen=True)
class UnixTransport:
    """The daemon's control socket (default /run/perigee/control.sock)."""

    path: Path

    @property
    def description(self) -> str:
        return f"gateway control socket {self.path}"

    def connection(self, timeout_s: float) -> http.client.HTTPConnection:
        return _UnixConnection(str(self.path), timeout_s)


@dataclass(frozen=True)
class TlsTransport:
    """A gateway's TLS control listener (`--control-tls-listen`): its certificate must name `host` and chain to
    the context's CA, and the context carries the client certificate the gateway's CA issued."""

    host: str
    port: int
    context: ssl.SSLContext

    @property
    def description(self) -> str:
        netloc = f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"
        return f"gateway {netloc}"

    def connection(self, timeout_s: float) -> http.client.HTTPConnection:
        # Straight to the gateway: http.client reads no proxy settings from the environment.
        return http.client.HTTPSConnection(self.host, self.port, timeout=timeout_s, context=self.context)


class GatewayClient:
    """A gateway's control protocol. `target` is a transport, or the path of the daemon's Unix socket."""

    def __init__(self, target: Transport | Path | str, timeout_s: float = 10.0) -> None:
        self.transport: Transport = UnixTransport(Path(target)) if isinstance(target, (str, Path)) else target
        self.timeout_s = timeout_s
        self.json = JsonRoutes(self)

    @classmethod
    def over_tls(cls, host: str, port: int, tls: ssl.SSLContext, timeout_s: float = 10.0) -> GatewayClient:
        return cls(TlsTransport(host, port, tls), timeout_s)

    @property
    def target(self) -> str:
        return self.transport.description

    # --- the protocol ---------------------------------------------------------------------------------

    def exchange(
        self,
        method: str,
        path: str,
        body: Any = None,
        query: dict[str, str | int] | None = None,
        timeout_s: float | None = None,
    ) -> Answer:
        """One request; any status comes back as an Answer. Raises GatewayError only when no answer came
        (`gateway_unreachable`) or a success answer was not JSON (`gateway_bad_answer`); an error answer that is
        not JSON (a proxy's page, say) comes back with its status and no body."""
        url = f"{path}?{urlencode(query)}" if query else path
        payload = None if body is None else json.dumps(body).encode()
        headers = {"Content-Type": "application/json", "Connection": "close"}
        conn = self.transport.connection(self.timeout_s if timeout_s is None else timeout_s)
        try:
            conn.request(method, url, body=payload or b"", headers=headers)  # a Content-Length, even 0, always
            resp = conn.getresponse()
            status, raw = resp.status, resp.read()
        except (OSError, http.client.HTTPException) as exc:
            raise GatewayError(UNREACHABLE, f"{self.target}: {exc or type(exc).__name__}") from exc
        finally:
            conn.close()
        if not raw:
            return Answer(status, None)
        try:
            return Answer(status, json.loads(raw))
        except ValueError as exc:
            if status >= 400:
                return Answer(status, None)
            raise GatewayError(BAD_ANSWER, f"{self.target} answered non-JSON ({status}) to {method} {path}") from exc

    def call(self, method: str, path: str, body: Any = None, query: dict[str, str | int] | None = None) -> Any:
        """One request whose success answer is JSON: that JSON, or GatewayError with the gateway's error."""
        answer = self.exchange(method, path, body, query)
        if not answer.ok:
            raise GatewayError.from_answer(answer.status, answer.body)
        if answer.body is None:
            raise GatewayError(BAD_ANSWER, f"{self.target} answered no body to {method} {path}")
        return answer.body

    # --- the routes (docs/control-protocol.md), read into the generated models -----------------------------
    # `self.json` has the same routes answering the JSON as sent (see JsonRoutes).

    def _read(self, model: type[ReportT], answer: dict[str, Any]) -> ReportT:
        """An answer the schema does not describe is a bad answer of the gateway, not a crash of the caller."""
        try:
            return model.model_validate(answer)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "(the answer)"
            raise GatewayError(BAD_ANSWER, f"{self.target}: {model.__name__} answer: {where}: {first['msg']}") from exc

    def health(self) -> Health:
        return self._read(Health, self.json.health())

    def get_config(self) -> dict[str, Any]:
        """The running config as the daemon wrote it back (canonical forms, every default written out). JSON,
        not GatewayConfig: the API stores and compares exactly this, and a newer daemon's fields must survive."""
        return self.json.get_config()

    def validate_config(self, config: dict[str, Any]) -> Validated:
        return self._read(Validated, self.json.validate_config(config))

    def apply_config(self, config: dict[str, Any]) -> Applied:
        return self._read(Applied, self.json.apply_config(config))

    def flows(self, state: FlowState = "live") -> FlowList:
        return self._read(FlowList, self.json.flows(state))

    def collect_flows(self) -> FlowList:
        """Drains the closed-flow ring."""
        return self._read(FlowList, self.json.collect_flows())

    def counters(self) -> Counters:
        return self._read(Counters, self.json.counters())

    def hybla(self) -> HyblaStatus:
        return self._read(HyblaStatus, self.json.hybla())

    def interfaces(self) -> InterfaceList:
        return self._read(InterfaceList, self.json.interfaces())

    def routing(self) -> RoutingReport:
        """The BGP sessions and BFD state of the FRR beside the daemon (`available: false` where none runs)."""
        return self._read(RoutingReport, self.json.routing())

    def cache_stats(self) -> CacheStats:
        return self._read(CacheStats, self.json.cache_stats())

    def collect_cache_requests(self) -> CollectResponse:
        """Drains the Squid access-log ring."""
        return self._read(CollectResponse, self.json.collect_cache_requests())

    def cache_purge(self, url: str | None = None, purge_all: bool = False) -> PurgeResponse:
        return self._read(PurgeResponse, self.json.cache_purge(url, purge_all))

    def dns_stats(self) -> DnsReport:
        return self._read(DnsReport, self.json.dns_stats())

    def dns_flush(self, name: str | None = None, flush_all: bool = False) -> None:
        self.json.dns_flush(name, flush_all)

    def put_crl(self, crl_pem: str) -> CrlInstalled:
        return self._read(CrlInstalled, self.json.put_crl(crl_pem))


class JsonRoutes:
    """The routes answering the JSON as the gateway sent it, for a caller that passes it on (the API's
    passthrough routes, its collector handing 10,000 live flows a second to the dashboard): no model is built."""

    def __init__(self, client: GatewayClient) -> None:
        self._client = client

    def _object(
        self, method: str, path: str, body: Any = None, query: dict[str, str | int] | None = None
    ) -> dict[str, Any]:
        answer = self._client.call(method, path, body, query)
        if not isinstance(answer, dict):
            raise GatewayError(BAD_ANSWER, f"{self._client.target} answered a non-object to {method} {path}")
        return answer

    def health(self) -> dict[str, Any]:
        return self._object("GET", "/v1/health")

    def get_config(self) -> dict[str, Any]:
        return self._object("GET", "/v1/config")

    def validate_config(self, config: dict[str, Any]) -> dict[str, Any]:
        return self._object("POST", "/v1/config/validate", config)

    def apply_config(self, config: dict[str, Any]) -> dict[str, Any]:
        return self._object("PUT", "/v1/config", config)

    def flows(self, state: FlowState = "live") -> dict[str, Any]:
        return self._object("GET", "/v1/flows", query={"state": state})

    def collect_flows(self) -> dict[str, Any]:
        return self._object("POST", "/v1/flows/collect")

    def counters(self) -> dict[str, Any]:
        return self._object("GET", "/v1/counters")

    def hybla(self) -> dict[str, Any]:
        return self._object("GET", "/v1/hybla")

    def interfaces(self) -> dict[str, Any]:
        return self._object("GET", "/v1/interfaces")

    def routing(self) -> dict[str, Any]:
        return self._object("GET", "/v1/routing")

    def cache_stats(self) -> dict[str, Any]:
        return self._object("GET", "/v1/cache/stats")

    def cache_requests(self, limit: int = 100) -> dict[str, Any]:
        return self._object("GET", "/v1/cache/requests", query={"limit": limit})

    def collect_cache_requests(self) -> dict[str, Any]:
        return self._object("POST", "/v1/cache/requests/collect")

    def cache_purge(self, url: str | None = None, purge_all: bool = False) -> dict[str, Any]:
        body: dict[str, Any] = {"all": True} if purge_all else {"url": url}
        return self._object("POST", "/v1/cache/purge", body)

    def dns_stats(self) -> dict[str, Any]:
        return self._object("GET", "/v1/dns/stats")

    def dns_flush(self, name: str | None = None, flush_all: bool = False) -> dict[str, Any]:
        body: dict[str, Any] = {"all": True} if flush_all else {"name": name}
        return self._object("POST", "/v1/dns/flush", body)

    def put_crl(self, crl_pem: str) -> dict[str, Any]:
        """The fleet CA's revocation list for the TLS control listener (a client certificate on it is refused)."""
        return self._object("PUT", "/v1/control-tls/crl", {"crl_pem": crl_pem})

    def identity(self) -> dict[str, Any]:
        """This gateway's own identity for the peer path: its fingerprint, certificate, and a staged next one."""
        return self._object("GET", "/v1/identity")

    def identity_rotate(self) -> dict[str, Any]:
        """Stage a next identity (the current one stays in use until commit)."""
        return self._object("POST", "/v1/identity/rotate")

    def identity_commit(self) -> dict[str, Any]:
        """New pool connections use the staged identity; live flows keep theirs."""
        return self._object("POST", "/v1/identity/commit")

    def peer(self) -> dict[str, Any]:
        """The peer path's state: a hub's enrolled terminals with their connections and refusals, a terminal's
        pool and the hub identity it is pinned to."""
        return self._object("GET", "/v1/peer")
