"""The terminal resolver's upstream through the peer path when the hub's resolver answers some names
badly (prefix pu-, root): a page's lookups asked beside a name the upstream refuses and one it
answers late (a broken domain's SERVFAIL) still take one exchange with the hub's resolver. satlab
`geo-hts` with `--gateway both` (docs/dns.md, *The upstream through the peer path*).

unbound sends the forwarder's TCP queries down one shared stream; a query whose timer fires closes
the stream and sends every query on it again, a second satellite round trip for the page's names.
Nothing here is a performance figure: the check is that each of the page's queries reached the
hub's resolver once, and the only time bound is "hung".
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import PrefixTopo, in_ns, satlab

from satlab import gateway

PREFIX = "pu-"
TOPO = PrefixTopo(PREFIX)
PY = sys.executable
TESTS = Path(__file__).resolve().parent
CLIENT_RESOLVER = "10.71.3.53"  # any address: the terminal intercepts the served subnets' DNS
STANDIN = "10.71.3.54"  # the hub's resolver for this test, in the server namespace
PAGE_ZONE = "site.test"  # the lab's authoritative server (NSD) answers it
REFUSED_ZONE = "refused.example.net"  # NSD refuses it, as it does a browser's background names
BROKEN_ZONE = "broken.example.net"  # the stand-in answers SERVFAIL, late
BROKEN_DELAY_S = 1.5
QTYPE_NAMES = {1: "A", 28: "AAAA", 65: "HTTPS"}

pytestmark = pytest.mark.needs_root("network namespaces")


def control(role: str, method: str, path: str, body: Any = None) -> Any:
    answer = gateway.client(gateway.socket_path(TOPO, role), timeout=20).exchange(method, path, body)
    assert answer.status == 200, f"{role} {method} {path}: {answer.status} {answer.body}"
    return answer.body


def set_hub_upstream(addr: str) -> None:
    cfg = control("hub", "GET", "/v1/config")
    cfg["dns"]["upstream"] = [addr]
    cfg["revision"] = f"pu-{int(time.monotonic() * 1000)}"
    control("hub", "PUT", "/v1/config", cfg)


def wait_pool(timeout: float = 40) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pool = control("terminal", "GET", "/v1/peer")["pool"]
        workers = len(control("terminal", "GET", "/v1/health")["workers"])
        if pool and pool["ready"] >= workers * gateway.PEER_POOL_SIZE:
            return
        time.sleep(0.25)
    raise AssertionError(f"peer pool not full in {timeout} s")


@pytest.fixture(scope="module")
def lab() -> Iterator[subprocess.Popen[str]]:
    satlab("down", prefix=PREFIX, check=False)
    subprocess.run([str(gateway.REPO / "bin" / "perigee"), "hybla", "load"], capture_output=True, timeout=60,
                   check=False)
    satlab("up", "--profile", "geo-hts", "--gateway", "both", prefix=PREFIX, timeout=240)
    standin: subprocess.Popen[str] | None = None
    try:
        subprocess.run(["ip", "-n", f"{PREFIX}server", "addr", "replace", f"{STANDIN}/24", "dev", "eth0"],
                       check=True, capture_output=True)
        standin = subprocess.Popen(
            in_ns("server", [PY, "-u", str(TESTS / "slowupstream.py"), STANDIN, gateway.LAB_RESOLVER,
                             "--broken-zone", BROKEN_ZONE, "--delay", str(BROKEN_DELAY_S)], PREFIX),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert standin.stdout is not None and standin.stdout.readline().strip() == "ready", standin.stderr
        set_hub_upstream(STANDIN)
        wait_pool()
        yield standin
    finally:
        if standin is not None:
            standin.kill()
            standin.wait(timeout=10)
        satlab("down", prefix=PREFIX, check=False)


def test_a_pages_lookups_beside_refused_and_broken_names_take_one_exchange(
        lab: subprocess.Popen[str]) -> None:
    p = subprocess.run(
        in_ns("client", [PY, str(TESTS / "dnsburst.py"), CLIENT_RESOLVER, "--page-zone", PAGE_ZONE,
                         "--refused-zone", REFUSED_ZONE, "--broken-zone", BROKEN_ZONE], PREFIX),
        capture_output=True, text=True, timeout=180)
    assert p.returncode == 0, p.stderr[-2000:]
    out = json.loads(p.stdout.strip().splitlines()[-1])
    lab.kill()
    seen_lines, _ = lab.communicate(timeout=10)
    asked: Counter[tuple[str, str]] = Counter()
    for line in seen_lines.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[0] == "query":
            asked[(parts[1], QTYPE_NAMES.get(int(parts[2]), parts[2]))] += 1
    # The upstream answered as the test meant: refused, late SERVFAIL, the page's names at once.
    assert any(n.endswith(BROKEN_ZONE) for n, _ in asked), f"the stand-in saw no broken name: {asked}"
    for page in (q for r in out["rounds"] for q in r if q["kind"] == "page"):
        what = f"{page['name']} {page['type']}"
        assert page["rcode"] == "NOERROR", f"{what}: {page}"
        # Hung, not slow: a lookup that needed a second exchange still ends in about 1.2 s.
        assert page["s"] < 5.0, f"{what} took {page['s']} s"
        # A second copy at the hub's resolver is the terminal's resolver sending it again after it
        # closed the stream under it: a second satellite round trip for a name that needed one.
        assert asked[(page["name"], page["type"])] == 1, (
            f"{what} reached the hub's resolver {asked[(page['name'], page['type'])]} times "
            f"(answered after {page['s']} s); every page lookup: "
            f"{[(q['name'], q['type'], q['s']) for r in out['rounds'] for q in r if q['kind'] == 'page']}")
