"""perigee_control.client on the wire: what it sends and how it reads every kind of answer, against a scripted
Unix-socket server (the fake and the real gateway are in test_gateway_contract.py)."""

from __future__ import annotations

import json
import socket
import socketserver
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from perigee_control import reports
from perigee_control.client import GatewayClient, GatewayError


class Scripted(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    """Answers every request with (status, raw body) and keeps what it was sent, one request per connection."""

    daemon_threads = True

    def __init__(self, path: Path) -> None:
        self.answer: tuple[int, bytes] = (200, b"{}")
        self.seen: list[tuple[str, dict[str, str], bytes]] = []
        super().__init__(str(path), _Handler)


class _Handler(socketserver.StreamRequestHandler):
    server: Scripted

    def handle(self) -> None:
        line = self.rfile.readline().decode().strip()
        headers: dict[str, str] = {}
        while (h := self.rfile.readline().decode().strip()) != "":
            name, _, value = h.partition(":")
            headers[name.strip().lower()] = value.strip()
        body = self.rfile.read(int(headers.get("content-length", "0")))
        self.server.seen.append((line, headers, body))
        status, raw = self.server.answer
        self.wfile.write(
            f"HTTP/1.1 {status} X\r\nContent-Length: {len(raw)}\r\nConnection: close\r\n\r\n".encode() + raw
        )


@pytest.fixture
def scripted(sock_dir: Path) -> Iterator[tuple[Scripted, GatewayClient]]:
    server = Scripted(sock_dir / "scripted.sock")
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server, GatewayClient(sock_dir / "scripted.sock", timeout_s=5)
    finally:
        server.shutdown()
        server.server_close()


def test_request_line_query_and_json_body(scripted: tuple[Scripted, GatewayClient]) -> None:
    server, gw = scripted
    server.answer = (200, b'{"flows": [], "now": 1.5}')
    assert gw.flows("closed") == reports.FlowList(flows=[], now=1.5)
    server.answer = (200, b'{"ok": true}')
    gw.dns_flush(name="example.test")
    (get_line, _, get_body), (post_line, headers, post_body) = server.seen
    assert get_line == "GET /v1/flows?state=closed HTTP/1.1" and get_body == b""
    assert post_line == "POST /v1/dns/flush HTTP/1.1"
    assert headers["content-type"] == "application/json"
    assert json.loads(post_body) == {"name": "example.test"}


def test_error_answer_carries_the_gateways_code_message_and_field(scripted: tuple[Scripted, GatewayClient]) -> None:
    server, gw = scripted
    error = {"error": {"code": "invalid_config", "message": "port out of range", "field": "splitter.tproxy_port"}}
    server.answer = (422, json.dumps(error).encode())
    with pytest.raises(GatewayError) as info:
        gw.validate_config({"schema": 1})
    assert info.value.as_dict() == {
        "code": "invalid_config",
        "message": "port out of range",
        "field": "splitter.tproxy_port",
        "status": 422,
    }
    # exchange hands the same answer back as it came, for a caller that checks the status itself.
    answer = gw.exchange("POST", "/v1/config/validate", {"schema": 1})
    assert (answer.status, answer.ok, answer.body) == (422, False, error)


def test_error_without_the_error_shape_keeps_the_status(scripted: tuple[Scripted, GatewayClient]) -> None:
    server, gw = scripted
    for raw in (b"", b"<html>Service Unavailable</html>", b'{"message": "not the error shape"}'):
        server.answer = (503, raw)
        with pytest.raises(GatewayError) as info:
            gw.json.counters()
        assert (info.value.code, info.value.status, info.value.field) == ("gateway_error", 503, None)


def test_non_json_and_off_schema_answers_are_bad_answers(scripted: tuple[Scripted, GatewayClient]) -> None:
    server, gw = scripted
    server.answer = (200, b"<html>proxy</html>")
    with pytest.raises(GatewayError) as info:
        gw.json.health()
    assert info.value.code == "gateway_bad_answer"
    # JSON, but not what the schema says a Health is: the raw route passes it on, the typed one refuses it.
    server.answer = (200, b'{"status": "ok"}')
    assert gw.json.health() == {"status": "ok"}
    with pytest.raises(GatewayError) as info:
        gw.health()
    assert info.value.code == "gateway_bad_answer"
    assert "Health" in info.value.message
    server.answer = (200, b"[1, 2]")
    with pytest.raises(GatewayError) as info:
        gw.json.counters()
    assert info.value.code == "gateway_bad_answer"


def test_unknown_fields_of_a_newer_gateway_are_kept(scripted: tuple[Scripted, GatewayClient]) -> None:
    server, gw = scripted
    server.answer = (200, b'{"ok": true, "purged": 3, "took_ms": 2}')
    res = gw.cache_purge(purge_all=True)
    assert res.purged == 3 and res.model_extra == {"took_ms": 2}
    assert json.loads(server.seen[-1][2]) == {"all": True}


def test_timeout_is_unreachable(sock_dir: Path) -> None:
    """A gateway that accepts but never answers: the call ends after its timeout, as unreachable."""
    path = sock_dir / "silent.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as silent:
        silent.bind(str(path))
        silent.listen(1)
        with pytest.raises(GatewayError) as info:
            GatewayClient(path, timeout_s=0.3).health()
    assert info.value.code == "gateway_unreachable"
    assert str(path) in info.value.message
