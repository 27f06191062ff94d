"""The one module that talks to the gateway daemon: HTTP/1.1 + JSON over its Unix control socket, or over TCP
with mutual TLS for a fleet member on another host (`GatewayClient.over_tls`, services/fleet_pki.py).

See docs/control-protocol.md. Every call raises GatewayError on transport failures (code
`gateway_unreachable`) and on error answers (the gateway's own code, message and field).
"""

from __future__ import annotations

import ssl
from pathlib import Path
from typing import Any

import httpx


class GatewayError(Exception):
    def __init__(self, code: str, message: str, status: int = 502, field: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.status = status
        self.field = field

    def as_dict(self) -> dict[str, Any]:
        return {"code": self.code, "message": self.message, "field": self.field, "status": self.status}


class GatewayClient:
    def __init__(self, socket_path: Path | str, timeout_s: float = 10.0) -> None:
        self.socket_path = Path(socket_path)
        self.target = f"gateway control socket {self.socket_path}"
        self._client = httpx.Client(
            transport=httpx.HTTPTransport(uds=str(self.socket_path)),
            base_url="http://gateway",
            timeout=timeout_s,
        )

    @classmethod
    def over_tls(cls, host: str, port: int, tls: ssl.SSLContext, timeout_s: float = 10.0) -> GatewayClient:
        """A gateway's TLS control listener: its certificate must name `host` and chain to the context's CA."""
        self = cls.__new__(cls)
        self.socket_path = Path()
        netloc = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        self.target = f"gateway {netloc}"
        # No proxies from the environment: the control protocol goes straight to the gateway.
        self._client = httpx.Client(base_url=f"https://{netloc}", verify=tls, timeout=timeout_s, trust_env=False)
        return self

    def close(self) -> None:
        self._client.close()

    def _call(self, method: str, path: str, **kwargs: Any) -> Any:
        try:
            resp = self._client.request(method, path, **kwargs)
        except httpx.HTTPError as exc:
            raise GatewayError("gateway_unreachable", f"{self.target}: {exc}", 502) from exc
        try:
            body = resp.json()
        except ValueError:
            body = None
        if resp.status_code >= 400:
            err = body.get("error") if isinstance(body, dict) else None
            if isinstance(err, dict):
                raise GatewayError(
                    str(err.get("code", "gateway_error")),
                    str(err.get("message", "")),
                    resp.status_code,
                    err.get("field") if isinstance(err.get("field"), str) else None,
                )
            raise GatewayError("gateway_error", f"gateway answered {resp.status_code}", resp.status_code)
        if body is None:
            raise GatewayError("gateway_bad_answer", f"gateway answered non-JSON to {method} {path}", 502)
        return body

    def health(self) -> dict[str, Any]:
        return dict(self._call("GET", "/v1/health"))

    def get_config(self) -> dict[str, Any]:
        return dict(self._call("GET", "/v1/config"))

    def validate_config(self, config: dict[str, Any]) -> dict[str, Any]:
        return dict(self._call("POST", "/v1/config/validate", json=config))

    def apply_config(self, config: dict[str, Any]) -> dict[str, Any]:
        return dict(self._call("PUT", "/v1/config", json=config))

    def flows(self, state: str = "live") -> dict[str, Any]:
        return dict(self._call("GET", "/v1/flows", params={"state": state}))

    def collect_flows(self) -> list[dict[str, Any]]:
        return list(self._call("POST", "/v1/flows/collect").get("flows", []))

    def counters(self) -> dict[str, Any]:
        return dict(self._call("GET", "/v1/counters"))

    def hybla(self) -> dict[str, Any]:
        return dict(self._call("GET", "/v1/hybla"))

    def interfaces(self) -> dict[str, Any]:
        return dict(self._call("GET", "/v1/interfaces"))

    def routing(self) -> dict[str, Any]:
        return dict(self._call("GET", "/v1/routing"))

    def cache_stats(self) -> dict[str, Any]:
        return dict(self._call("GET", "/v1/cache/stats"))

    def cache_purge(self, url: str | None = None, purge_all: bool = False) -> dict[str, Any]:
        body: dict[str, Any] = {"all": True} if purge_all else {"url": url}
        return dict(self._call("POST", "/v1/cache/purge", json=body))

    def dns_stats(self) -> dict[str, Any]:
        return dict(self._call("GET", "/v1/dns/stats"))

    def dns_flush(self, name: str | None = None, flush_all: bool = False) -> dict[str, Any]:
        body: dict[str, Any] = {"all": True} if flush_all else {"name": name}
        return dict(self._call("POST", "/v1/dns/flush", json=body))
