"""The web-page scenario's pieces that need no lab: the page model, the physical limit, the result
parsers, and the plain HTTP client against a loopback server."""

import http.server
import threading
from collections.abc import Iterator
from typing import ClassVar

import pytest

from bench.browser import http_page
from bench.scenarios import web_pages as w
from satlab.testing import HUNG_S


def test_pages_match_the_paper_and_satlab():
    html1, images1 = w.PAGES["page1"]
    html2, images2 = w.PAGES["page2"]
    assert (html1, images1) == (356, (391 * 1024,))
    assert html2 == 1741 and len(images2) == 16
    assert sum(images2) == 669 * 1024
    assert min(images2) == 19 * 1024 and max(images2) == 100 * 1024
    assert w.page_urls("page1") == [
        "http://10.71.3.10/pages/page1/",
        "http://10.71.3.10/pages/page1/img1.png",
    ]


def test_physical_limit_is_three_round_trips_plus_framed_bytes():
    rtt, rate = 0.58, 1.536e6
    page2 = (1741 + 669 * 1024) * 1514 / 1448 * 8 / rate
    assert w.physical_limit_s("page2", rate, rtt) == pytest.approx(3 * rtt + page2)
    assert w.physical_limit_s("page2", rate, rtt) == pytest.approx(5.48, abs=0.01)
    assert w.physical_limit_s("page1", rate, rtt) == pytest.approx(3.92, abs=0.01)


def test_browser_load_is_timed_from_the_html_connect():
    result = {
        "load_ms": 6500.0,
        "html": {"connect_start_ms": 500.0, "response_end_ms": 1700.0},
        "resources": [{"name": "a"}, {"name": "b"}],
        "connections": 3,
        "xcache": {"u1": "HIT from perigee-cache", "u2": "MISS from perigee-cache"},
    }
    ld = w.parse_browser(result)
    assert (ld.load_s, ld.html_s) == (6.0, 1.2)
    assert (ld.objects, ld.connections, ld.hits) == (3, 3, 1)


def test_hits_count_the_cache_nearest_the_client():
    both = "MISS from perigee-cache\nHIT from perigee-cache"
    assert w.nearest_x_cache(both) == "HIT from perigee-cache"
    assert w.nearest_x_cache("HIT from a, MISS from b") == "MISS from b"
    assert w.nearest_x_cache("") == ""
    objs = [{"x_cache": "MISS from h, HIT from t"}, {"x_cache": "MISS from t"}]
    result = {"load_s": 1.0, "html_end_s": 0.5, "connections": 1, "objects": objs}
    assert w.parse_http(result).hits == 1


def test_variant_records_carry_limit_ratio_and_hits():
    link = w.figures("geo-acts-t1")
    loads = [
        w.Load(6.0, 1.2, 6, 17, 0),
        w.Load(7.0, 1.2, 6, 17, 0),
        w.Load(8.0, 1.3, 6, 17, 0),
    ]
    recs = {r.metric: r for r in w.variant_records("page2/http/cache-hub/cold", loads, link)}
    limit = w.physical_limit_s("page2", link.forward_bps, link.rtt_s)
    assert recs["load_time"].value == 7.0
    assert recs["ratio_to_limit"].value == pytest.approx(7.0 / limit)
    assert recs["cache_hits"].value == 0
    assert "cache_hits" not in {r.metric for r in w.variant_records("page2/http/e2e", loads, link)}


PAGE = b'<html><body><img src="a.png"><IMG alt="" SRC="/b.png"><img src="c.png"></body></html>'
BODIES = {
    "/p/": PAGE,
    "/p/a.png": b"a" * 5000,
    "/b.png": b"b" * 70000,
    "/p/c.png": b"c" * 10,
}


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, like the lab's origin
    requests: ClassVar[list[tuple[int, str]]] = []

    def do_GET(self) -> None:
        body = BODIES.get(self.path)
        self.requests.append((self.client_address[1], self.path))
        if body is None:
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("X-Cache", "MISS from test")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def origin() -> Iterator[str]:
    _Handler.requests = []
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    try:
        yield f"http://127.0.0.1:{srv.server_address[1]}/p/"
    finally:
        srv.shutdown()
        srv.server_close()


def test_http_client_fetches_html_then_every_image(origin: str):
    result = http_page.load(origin, connections=6, timeout=HUNG_S)
    assert result["ok"]
    assert sorted(o["url"] for o in result["objects"]) == sorted(
        [origin] + [origin + "a.png", origin.replace("/p/", "/b.png"), origin + "c.png"]
    )
    assert {o["bytes"] for o in result["objects"]} == {len(PAGE), 5000, 70000, 10}
    assert all(o["status"] == 200 and o["x_cache"] == "MISS from test" for o in result["objects"])
    # The HTML first; one connection per image at most, the first one reused (keep-alive).
    first = min(result["objects"], key=lambda o: o["start_s"])
    assert first["url"] == origin and first["conn"] == 0
    assert result["connections"] == 3
    assert result["load_s"] >= result["html_end_s"]
    assert result["bytes"] == len(PAGE) + 5000 + 70000 + 10


def test_http_client_with_one_connection_reuses_it(origin: str):
    result = http_page.load(origin, connections=1, timeout=HUNG_S)
    assert result["connections"] == 1
    ports = {port for port, _ in _Handler.requests}
    assert len(ports) == 1 and len(_Handler.requests) == 4


def test_http_client_reports_a_missing_object(origin: str, capsys: pytest.CaptureFixture[str]):
    BODIES["/p/c.png"], saved = None, BODIES["/p/c.png"]  # type: ignore[assignment]
    try:
        assert http_page.main([origin, "--timeout", "5"]) == 1
    finally:
        BODIES["/p/c.png"] = saved
    assert '"ok": false' in capsys.readouterr().out
