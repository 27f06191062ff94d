"""The peer path's guarantees on a GEO link (prefix pp-, root): a flow's bytes reach the server at
most once under bit errors, forged resets, garbage and a hub killed mid-flow; nothing of a flow
crosses the satellite in clear; each terminal has its own key, bound to its prefixes, revocable and
rotatable; the hub's destination policy holds in the daemon and in the kernel; the terminal
resolver's upstream crosses inside the peer path. satlab `geo-hts` with `--gateway both`
(docs/splitter.md, *The peer path*).

Nothing here is a performance figure: the only time bounds are "hung" and the revocation's 5 s,
which is the behaviour's own bound.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import PrefixTopo, eventually, in_ns, satlab

from satlab import gateway, linkctl
from satlab.capture import ipv4_in, sniff, syn_sources
from satlab.cli import _dir_view, _emu_dir

PREFIX = "pp-"
SERVER4, CLIENT4 = "10.71.3.10", "10.71.1.10"
HUB_LAN = "10.71.3.1"
COUNT_PORT, WHOAMI_PORT, OWN_PORT = 9200, 9103, 9300
PY = sys.executable
TESTS = Path(__file__).resolve().parent
MARKER = "PERIGEE-MARKER-5c0ffee"

pytestmark = pytest.mark.needs_root("network namespaces")


TOPO = PrefixTopo(PREFIX)


def control(role: str, method: str, path: str, body: Any = None) -> Any:
    answer = gateway.client(gateway.socket_path(TOPO, role), timeout=20).exchange(method, path, body)
    assert answer.status == 200, f"{role} {method} {path}: {answer.status} {answer.body}"
    return answer.body


def put_config(role: str, change: Any) -> None:
    cfg = control(role, "GET", "/v1/config")
    change(cfg)
    cfg["revision"] = f"pp-{int(time.monotonic() * 1000)}"
    control(role, "PUT", "/v1/config", cfg)


def peer(role: str) -> dict[str, Any]:
    out: dict[str, Any] = control(role, "GET", "/v1/peer")
    return out


def terminal_status(name: str = gateway.SITE_NAME) -> dict[str, Any]:
    return next(t for t in peer("hub")["terminals"] if t["name"] == name)


def wait_pool(timeout: float = 40) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pool = peer("terminal")["pool"]
        workers = len(control("terminal", "GET", "/v1/health")["workers"])
        if pool and pool["ready"] >= workers * gateway.PEER_POOL_SIZE:
            return int(pool["ready"])
        time.sleep(0.25)
    raise AssertionError(f"peer pool not full in {timeout} s: {peer('terminal')}")


def run(role: str, argv: list[str], timeout: float = 120) -> Any:
    """Run a test tool in a namespace (from lab/tests); its last line is JSON."""
    p = subprocess.run(in_ns(role, argv, PREFIX), capture_output=True, text=True, timeout=timeout, cwd=TESTS)
    assert p.returncode == 0, p.stderr[-2000:]
    return json.loads(p.stdout.strip().splitlines()[-1])


def posts(count: int, concurrency: int, first: int, body: int = 600, hold: float = 0.0, marker: str = "",
          timeout: float = 600) -> dict[str, Any]:
    argv = [PY, "-m", "satlab.postload", SERVER4, str(COUNT_PORT), "--count", str(count), "--concurrency",
            str(concurrency), "--first", str(first), "--body", str(body), "--hold", str(hold)]
    if marker:
        argv += ["--marker", marker]
    out: dict[str, Any] = run("client", argv, timeout)
    return out


def counts() -> dict[str, int]:
    code = (f"import json, urllib.request\nprint(urllib.request.urlopen('http://{SERVER4}:{COUNT_PORT}/counts', "
            "timeout=10).read().decode())")
    out: dict[str, int] = run("server", [PY, "-c", code])
    return out


def assert_at_most_once(ids: range, result: dict[str, Any]) -> dict[str, int]:
    """No body twice; every answered POST's body arrived exactly once; every POST ended."""
    seen = counts()
    twice = {i: n for i, n in seen.items() if n > 1}
    assert not twice, f"bodies received twice: {twice}"
    for rid in result["answered"]:
        assert seen.get(str(rid)) == 1, f"answered {rid} but the server counted {seen.get(str(rid))}"
    assert len(result["answered"]) + len(result["failed"]) == len(ids)
    assert not [r for r in result["failed"].values() if "TimeoutError" in r], f"hung POSTs: {result['failed']}"
    return seen


def terminal_identity() -> str:
    return str(Path(gateway.peer_dir(TOPO, "terminal")) / "identity.pem")


def terminal_exec(code: str, timeout: float = 60) -> Any:
    """Run a PeerClient scenario in the terminal namespace; it prints one JSON value."""
    src = ("import json, socket, ssl, sys, time\nfrom peerclient import *\n"
           f"IDENTITY = {terminal_identity()!r}\n{code}")
    return run("terminal", [PY, "-c", src], timeout)


def new_identity() -> dict[str, Any]:
    """A key nobody enrolled (a second terminal's, or a thief's self-made one)."""
    d = tempfile.mkdtemp(prefix="pp-id-", dir=TOPO.path(""))
    out = json.loads(subprocess.run([gateway.gateway_binary(), "identity", "init", "--state-dir", d],
                                    capture_output=True, text=True, timeout=30, check=True).stdout)
    out["pem"] = str(Path(d) / "identity.pem")
    return dict(out)


@pytest.fixture(scope="module")
def lab() -> Iterator[None]:
    satlab("down", prefix=PREFIX, check=False)
    subprocess.run([str(gateway.REPO / "bin" / "perigee"), "hybla", "load"], capture_output=True, timeout=60,
                   check=False)
    satlab("up", "--profile", "geo-hts", "--gateway", "both", prefix=PREFIX, timeout=240)
    servers = [
        subprocess.Popen(in_ns("server", [PY, "-m", "satlab.countserver", SERVER4, str(COUNT_PORT)], PREFIX),
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True),
        subprocess.Popen(in_ns("server", [PY, "-m", "satlab.probes", "serve", f"--port={WHOAMI_PORT}:whoami",
                                          "--bind", SERVER4], PREFIX),
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True),
    ]
    try:
        for s in servers:
            assert s.stdout is not None
            assert json.loads(s.stdout.readline()).get("ready")
        wait_pool()
        yield
    finally:
        for s in servers:
            s.kill()
            s.wait(timeout=10)
        satlab("down", prefix=PREFIX, check=False)


# --- encryption -------------------------------------------------------------------------------------


def capture_post(rid: int) -> tuple[bytes, dict[str, Any]]:
    """A capture of the satellite link while one POST with the marker crosses, and its result."""
    return sniff(lambda role, argv: in_ns(role, argv, PREFIX), TOPO.path(f"sat-{rid}.pcap"),
                 lambda: posts(1, 1, rid, body=4000, marker=MARKER))


def test_nothing_of_a_flow_crosses_the_satellite_in_clear(lab: None) -> None:
    data, result = capture_post(1)
    assert result["answered"] == [1], result
    flows = control("terminal", "GET", "/v1/flows?state=all")["flows"]
    assert any(f["path"] == "peer" and f["server"] == f"{SERVER4}:{COUNT_PORT}" for f in flows)
    # The capture holds the peer connection's records (the gateways' addresses), and neither the
    # flow's bytes nor its client's or server's address.
    assert bytes([10, 71, 2, 2]) in data and len(data) > 4000
    assert MARKER.encode() not in data
    for ip in (CLIENT4, SERVER4):
        assert not ipv4_in(data, ip), f"{ip} in the capture"
    # The same POST on the direct path shows all of it: the capture sees what crosses.
    put_config("terminal", lambda c: c["peer"].update(enabled=False))
    try:
        clear, result = capture_post(2)
        assert result["answered"] == [2]
        assert MARKER.encode() in clear and ipv4_in(clear, CLIENT4)
    finally:
        put_config("terminal", lambda c: c["peer"].update(enabled=True))
        wait_pool()


def test_an_independent_tls_client_with_the_terminals_key_opens_a_flow(lab: None) -> None:
    out = terminal_exec(f"""
c = PeerClient(IDENTITY)
ready = c.ready()
c.s.sendall(open_flow("{CLIENT4}", 45678, "{SERVER4}", {WHOAMI_PORT}))
status = c.status()
rest = b""
while not rest.endswith(b"\\n"):
    rest += c.s.recv(64)
print(json.dumps({{"pin": c.hub_fingerprint, "ready": ready, "status": status, "whoami": rest.decode(),
                   "tls": c.s.version(), "alpn": c.s.selected_alpn_protocol()}}))
""")
    assert out["pin"] == control("hub", "GET", "/v1/identity")["fingerprint"]
    assert (out["ready"], out["status"], out["tls"], out["alpn"]) == (True, [0, 0], "TLSv1.3", "perigee-peer/2")
    assert out["whoami"].split() == [CLIENT4, "45678"]


def test_unknown_keys_no_key_and_garbage_are_refused_and_counted(lab: None) -> None:
    before = peer("hub")["refused_unknown"]
    hub_flows = {f["id"] for f in control("hub", "GET", "/v1/flows?state=all")["flows"]}
    stranger = new_identity()
    out = terminal_exec(f"""
res = {{}}
res["unknown_key"] = not PeerClient({stranger["pem"]!r}).ready()
res["no_key"] = not PeerClient(None).ready()
s = raw_connection()
s.sendall(b"GET / HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n" + bytes(64))
res["garbage"] = closed(s)
print(json.dumps(res))
""")
    assert out == {"unknown_key": True, "no_key": True, "garbage": True}, out
    after = eventually(lambda: peer("hub")["refused_unknown"], lambda n: n - before >= 3)
    assert after - before >= 3
    new = [f for f in control("hub", "GET", "/v1/flows?state=all")["flows"] if f["id"] not in hub_flows]
    assert not [f for f in new if f["path"] == "peer"], new


def test_the_peer_listener_binds_the_satellite_side_only(lab: None) -> None:
    code = f"""
import json, socket
out = {{}}
for addr in ("10.71.2.2", "{HUB_LAN}"):
    try:
        socket.create_connection((addr, 7072), timeout=5).close()
        out[addr] = "open"
    except OSError as e:
        out[addr] = type(e).__name__
print(json.dumps(out))
"""
    # The server's default route is the hub's LAN address: both are reachable, only the bind decides.
    assert run("server", [PY, "-c", code]) == {"10.71.2.2": "open", HUB_LAN: "ConnectionRefusedError"}


def test_a_flow_for_a_client_outside_the_terminals_prefixes_is_refused_and_counted(lab: None) -> None:
    before = terminal_status()["refused_prefix"]
    out = terminal_exec(f"""
c = PeerClient(IDENTITY)
assert c.ready()
c.s.sendall(open_flow("10.72.1.10", 40000, "{SERVER4}", {WHOAMI_PORT}))
print(json.dumps({{"status": c.status(), "closed": c.closed_by_hub()}}))
""")
    assert out == {"status": [2, 13], "closed": True}, out  # refused, EACCES
    after = eventually(lambda: terminal_status()["refused_prefix"], lambda n: n > before)
    assert after == before + 1


def kernel_connect(dst: str) -> str:
    """From the hub's namespace, what the daemon does for a flow but with its check skipped: a
    transparent socket bound to the client's address connecting to `dst`."""
    code = f"""
import json, socket
host, port = {dst!r}.rsplit(":", 1)
s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
s.setsockopt(socket.SOL_IP, 19, 1)  # IP_TRANSPARENT
s.settimeout(1.5)
s.bind(("{CLIENT4}", 0))
try:
    s.connect((host, int(port)))
    print(json.dumps("connected"))
except OSError as e:
    print(json.dumps(type(e).__name__))
"""
    return str(run("hub", [PY, "-c", code]))


def egress_denied() -> int:
    p = subprocess.run(in_ns("hub", ["nft", "-j", "list", "counter", "inet", "perigee", "egress_denied"], PREFIX),
                       capture_output=True, text=True, timeout=10, check=True)
    return int(next(o["counter"]["packets"] for o in json.loads(p.stdout)["nftables"] if "counter" in o))


# Where the kernel test's SYNs would go without the policy (another site behind the satellite, the
# metadata address on the server side).
HUB_TEST_ROUTES = (("10.72.1.0/24", "10.71.2.1"), ("169.254.169.254/32", SERVER4))


def test_the_hubs_destination_policy_holds_in_the_daemon_and_in_the_kernel(lab: None) -> None:
    other = new_identity()
    site2 = {"name": "site-2", "fingerprints": [other["fingerprint"]], "prefixes": ["10.72.1.0/24"]}
    put_config("hub", lambda c: c["peer"]["terminals"].append(site2))
    own = subprocess.Popen(in_ns("hub", [PY, "-m", "satlab.probes", "serve", f"--port={OWN_PORT}:whoami",
                                         "--bind", HUB_LAN], PREFIX), stdout=subprocess.PIPE,
                           stderr=subprocess.DEVNULL, text=True)
    try:
        assert own.stdout is not None and json.loads(own.stdout.readline()).get("ready")
        denied = ["127.0.0.1:9103", "169.254.169.254:80", f"{HUB_LAN}:{OWN_PORT}", "10.72.1.5:80"]
        before = terminal_status()["refused_other"]
        code = f"""
out = {{}}
for dst in {denied + [f"{SERVER4}:{WHOAMI_PORT}"]!r}:
    host, port = dst.rsplit(":", 1)
    c = PeerClient(IDENTITY)
    assert c.ready()
    c.s.sendall(open_flow("{CLIENT4}", 41000 + len(out), host, int(port)))
    out[dst] = c.status()
    c.close()
print(json.dumps(out))
"""
        out = terminal_exec(code)
        for d in denied:
            assert out[d] == [2, 13], (d, out)  # refused by the policy, nothing connected
        assert out[f"{SERVER4}:{WHOAMI_PORT}"] == [0, 0], out  # an allowed destination works
        after = eventually(lambda: terminal_status()["refused_other"], lambda n: n - before >= len(denied))
        assert after - before == len(denied)
        # The kernel holds the same line without the daemon: its counter counts each refused SYN.
        # (Routes for the test's destinations, so the SYN reaches the output hook at all: the hub
        # has no default route.)
        for dst, via in HUB_TEST_ROUTES:
            subprocess.run(["ip", "-n", f"{PREFIX}hub", "route", "replace", dst, "via", via], check=True)
        # A dropped SYN never leaves (the connect times out, TCP retries its SYN); each one counts.
        for dst in denied[1:]:
            k0 = egress_denied()
            assert kernel_connect(dst) == "TimeoutError", dst
            assert egress_denied() > k0, f"the kernel let the SYN to {dst} through"
        k0 = egress_denied()
        assert kernel_connect(f"{SERVER4}:{WHOAMI_PORT}") == "connected"
        assert egress_denied() == k0
        # A direct split at the hub (the terminal's peer path off) is held to it too.
        before_split = peer("hub")["egress_refused"]
        put_config("terminal", lambda c: c["peer"].update(enabled=False))
        try:
            split = ("import socket\ns = socket.socket(); s.settimeout(10)\n"
                     "try:\n    s.connect(('169.254.169.254', 80)); s.sendall(b'x'); r = s.recv(10)\n"
                     "    print('\"answered\"' if r else '\"closed\"')\n"
                     "except OSError as e:\n    print('\"' + type(e).__name__ + '\"')\n")
            assert run("client", [PY, "-c", split]) in ("ConnectionResetError", "closed", "BrokenPipeError")
            after_split = eventually(lambda: peer("hub")["egress_refused"], lambda n: n > before_split)
            assert after_split == before_split + 1
        finally:
            put_config("terminal", lambda c: c["peer"].update(enabled=True))
            wait_pool()
        # egress.allow re-opens a destination for both. (The daemon's connection to the hub's own
        # address, from the client's, cannot complete: the answer is routed to the client across
        # the satellite. What counts is that the policy no longer refuses it.)
        put_config("hub", lambda c: c.update(egress={"allow": [f"{HUB_LAN}/32"], "deny": []}))
        before = terminal_status()["refused_other"]
        allowed = f"""
c = PeerClient(IDENTITY, timeout=15)
assert c.ready()
c.s.sendall(open_flow("{CLIENT4}", 42000, "{HUB_LAN}", {OWN_PORT}))
try:
    out = c.status()
except OSError as e:
    out = type(e).__name__
c.close()
print(json.dumps(out))
"""
        out = terminal_exec(allowed)
        assert out != [2, 13], "egress.allow re-opens the hub's own address for the daemon"
        time.sleep(1.5)  # past a report period: a refusal would have been counted by now
        assert terminal_status()["refused_other"] == before, out
        k0 = egress_denied()
        kernel_connect(f"{HUB_LAN}:{OWN_PORT}")
        assert egress_denied() == k0, "egress.allow re-opens it in the kernel too"
    finally:
        for dst, _ in HUB_TEST_ROUTES:
            subprocess.run(["ip", "-n", f"{PREFIX}hub", "route", "del", dst], check=False, capture_output=True)
        own.kill()
        own.wait(timeout=10)
        put_config("hub", lambda c: (c["peer"]["terminals"].pop(), c.update(egress={"allow": [], "deny": []})))


def dns_query(qid: int) -> bytes:
    name = b"".join(bytes([len(x)]) + x for x in b"www.site.test".split(b".")) + b"\0"
    q = qid.to_bytes(2, "big") + b"\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00" + name + b"\x00\x01\x00\x01"
    return len(q).to_bytes(2, "big") + q


def test_the_terminal_resolvers_upstream_crosses_inside_the_peer_path(lab: None) -> None:
    code = f"""
import socket, json
s = socket.create_connection(("127.0.0.1", 8853), timeout=10)
s.sendall({dns_query(0x5a5a)!r})
head = b""
while len(head) < 2:
    head += s.recv(2 - len(head))
n = int.from_bytes(head, "big")
body = b""
while len(body) < n:
    body += s.recv(n - len(body))
print(json.dumps({{"id": body[:2].hex(), "qr": bool(body[2] & 0x80)}}))
"""
    out = run("terminal", [PY, "-c", code])
    assert out == {"id": "5a5a", "qr": True}, out
    flows = control("terminal", "GET", "/v1/flows?state=all")["flows"]
    tunnel = [f for f in flows if f["client"].startswith("127.0.0.1:") and f["server"].endswith(":53")]
    assert tunnel and all(f["path"] == "peer" for f in tunnel), tunnel


def test_the_resolvers_health_check_does_not_keep_the_pool_busy(lab: None) -> None:
    # Through the peer path each upstream probe is a flow of its own: an idle terminal opens a few
    # a minute (one every 15 s), not one a second.
    before = control("terminal", "GET", "/v1/counters")["peer"]["flows"]
    time.sleep(20)
    opened = control("terminal", "GET", "/v1/counters")["peer"]["flows"] - before
    assert opened <= 3, f"{opened} peer flows in 20 s on an idle terminal"


# --- redundancy ---------------------------------------------------------------------------------------

# A GSO packet that crosses the threshold leaves once (conntrack counts it whole before the rule
# sees it), and the handshake's bytes count but were sent before the flow took the connection.
DUP_SLACK = 70_000


def link_bytes() -> dict[str, int]:
    """What the emulator put out on the satellite link so far, per direction (its own counters)."""
    view = _dir_view("sat", linkctl.stats(TOPO.path("sat-link.sock")))
    return {d: int(view[d]["bytes_out"]) for d in ("forward", "return")}


def peer_counters() -> dict[str, dict[str, Any]]:
    """Each gateway's `/v1/counters` peer section: its flows and what it says it sent twice (from its
    duplicate rule's nft counter)."""
    return {r: control(r, "GET", "/v1/counters")["peer"] for r in ("hub", "terminal")}


def through_the_peer_path(traffic: Any) -> dict[str, Any]:
    """Runs `traffic` (from the client); what each direction of the link carried meanwhile and what
    each gateway counted as sent twice. Its flows must have taken the peer path."""
    wait_pool()
    before, link = peer_counters(), link_bytes()
    got = traffic()
    time.sleep(0.5)  # the last frames on the emulator's books
    after, link_after = peer_counters(), link_bytes()
    flows = after["terminal"]["flows"] - before["terminal"]["flows"]
    assert flows > 0, "the flows went direct"
    return {"result": got, "flows": flows, "link": {d: link_after[d] - link[d] for d in link},
            "dup": {r: after[r]["redundant"]["bytes"] - before[r]["redundant"]["bytes"] for r in before}}


def download(size: int) -> Any:
    code = f"import json\nfrom satlab import bulk\nprint(json.dumps(bulk.client('get', {size}, {SERVER4!r})))"
    return run("client", [PY, "-c", code])


def stream_sha256(size: int) -> str:
    from satlab.content import iter_stream

    h = hashlib.sha256()
    for part in iter_stream(0, size):
        h.update(part)
    return h.hexdigest()


def redundancy_budget(role: str, cfg: dict[str, Any]) -> int:
    """What a gateway's config says it sends twice of each connection (docs/splitter.md, *Redundancy*):
    the direction's cap or link_ms at the direction's rate, whichever is less."""
    r, sat = cfg["peer"]["redundancy"], cfg["satellite"]
    cap, rate = ((r["forward_bytes"], sat["forward_rate_bps"]) if role == "hub"
                 else (r["return_bytes"], sat["return_rate_bps"]))
    return int(min(cap, rate * r["link_ms"] // 8000))


def set_redundancy(forward: int, ret: int) -> None:
    put_config("hub", lambda c: c["peer"]["redundancy"].update(forward_bytes=forward))
    put_config("terminal", lambda c: c["peer"]["redundancy"].update(return_bytes=ret))


def test_a_flows_first_bytes_cross_twice_and_arrive_once(lab: None) -> None:
    """With the defaults, a 1 MB download through the peer path puts about the hub's redundancy budget
    (geo-hts: 40 ms at 50 Mbit/s, 250 kB) more on the forward link than with redundancy off, by the
    emulator's counters, and the hub's counters report the same; the client gets every byte once and
    in order (sha256). Requests (20 POSTs of 4 kB, each under return_bytes, two at a time so that
    each finds a warm connection): every byte of them twice on the return link, each reaches the
    server once."""
    down, n_posts, body = 1_000_000, 20, 4000
    cfgs = {r: control(r, "GET", "/v1/config") for r in ("hub", "terminal")}
    forward_dup, return_dup = redundancy_budget("hub", cfgs["hub"]), redundancy_budget("terminal", cfgs["terminal"])
    assert forward_dup > 200_000 and return_dup > n_posts * body // 8, (forward_dup, return_dup)
    caps = {r: cfg["peer"]["redundancy"] for r, cfg in cfgs.items()}

    def both(first: int) -> dict[str, Any]:
        return {"get": through_the_peer_path(lambda: download(down)),
                "post": through_the_peer_path(lambda: posts(n_posts, 2, first, body=body))}

    on = both(5000)
    set_redundancy(0, 0)
    try:
        off = both(6000)
    finally:
        set_redundancy(caps["hub"]["forward_bytes"], caps["terminal"]["return_bytes"])
    print(json.dumps({run: {k: {f: v[f] for f in ("flows", "link", "dup")} for k, v in runs.items()}
                      for run, runs in (("on", on), ("off", off))}))
    for runs, first in ((on, 5000), (off, 6000)):
        # A POST that found the pool dry would take the direct path and leave once (four at a
        # time could drain one worker's pool). More flows than POSTs: the resolver's health check.
        assert runs["post"]["flows"] >= n_posts, f"peer flows: {runs['post']['flows']} for {n_posts} POSTs"
        got = runs["get"]["result"]
        assert got["complete"] and got["sha256"] == stream_sha256(down), got
        assert len(runs["post"]["result"]["answered"]) == n_posts, runs["post"]["result"]
        assert_at_most_once(range(first, first + n_posts), runs["post"]["result"])
    fwd = on["get"]["dup"]["hub"]
    assert forward_dup - DUP_SLACK <= fwd <= forward_dup, (fwd, forward_dup)
    ret = on["post"]["dup"]["terminal"]
    assert ret >= n_posts * body, ret
    # The link carried the copies the gateways counted, and a little more: a copied 64 kB send
    # is counted with one set of headers but crosses as ~44 frames, and the other side's copies
    # are acknowledged on this link (each run's other bytes alike).
    for extra, counted in ((on["get"]["link"]["forward"] - off["get"]["link"]["forward"], fwd),
                           (on["post"]["link"]["return"] - off["post"]["link"]["return"], ret)):
        assert counted <= extra <= 1.1 * counted + 3_000, (extra, counted)
    # Only the sending side duplicates: the terminal's acknowledgements of a download are not
    # copied, nor the hub's of the requests (their short answers are). The receiver acknowledges
    # each copy at once (a D-SACK): about one ACK per copied segment on the other link.
    assert on["get"]["dup"]["terminal"] < 2_000, on["get"]["dup"]
    acks = on["get"]["link"]["return"] - off["get"]["link"]["return"]
    assert acks <= 0.1 * fwd + 3_000, (acks, fwd)
    assert off["get"]["dup"]["hub"] == off["post"]["dup"]["terminal"] == 0, off


# --- exactly once -------------------------------------------------------------------------------------


def set_ber(ber: float) -> None:
    linkctl.set_params(TOPO.path("sat-link.sock"), _emu_dir("sat", "both"), {"ber": ber})


def test_a_thousand_posts_at_ber_1e5_reach_the_server_at_most_once(lab: None) -> None:
    before = control("terminal", "GET", "/v1/counters")["peer"]
    set_ber(1e-5)
    try:
        result = posts(1000, 24, 1000)
    finally:
        set_ber(0.0)
    seen = assert_at_most_once(range(1000, 2000), result)
    after = control("terminal", "GET", "/v1/counters")["peer"]
    print(json.dumps({"answered": len(result["answered"]), "failed": len(result["failed"]),
                      "received": sum(1 for i in range(1000, 2000) if str(i) in seen),
                      "peer_flows": after["flows"] - before["flows"],
                      "peer_failed": after["failed"] - before["failed"]}))
    # The peer path carried them (a drained pool sends a flow direct, which is as safe).
    assert after["flows"] - before["flows"] >= 300, (before, after)
    assert len(result["answered"]) >= 900, result["failed"]


def fresh_pool() -> None:
    """New pool connections, so the injector sees them open: a second, unused hub pin (added or
    taken away again) makes the pool start over."""
    spare = "sha256:" + "e" * 64

    def toggle(c: dict[str, Any]) -> None:
        pins = c["peer"]["hub_fingerprints"]
        c["peer"]["hub_fingerprints"] = pins[:1] if spare in pins else [*pins, spare]

    put_config("terminal", toggle)
    # The workers report their pools once a second: until then /v1/peer may still count the old
    # pool's connections as ready, and a flow started now would find none (and go direct). Past
    # two report periods every count is of the new pool.
    time.sleep(2.5)
    wait_pool()


@pytest.mark.parametrize("kind,at", [("garbage", "open"), ("rst", "open"), ("garbage", "status"), ("rst", "status")])
def test_a_forged_reset_or_garbage_resets_the_client_and_never_replays(lab: None, kind: str, at: str) -> None:
    rid = {"garbage": 3000, "rst": 3100}[kind] + (0 if at == "open" else 50)
    before = control("terminal", "GET", "/v1/counters")["peer"]
    injector = subprocess.Popen(in_ns("sat", [PY, "peerinject.py", "st0", "--kind", kind, "--at", at], PREFIX),
                                cwd=TESTS, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert injector.stdout is not None and json.loads(injector.stdout.readline()).get("ready")
        if at == "open":
            fresh_pool()
        result = posts(1, 1, rid, body=20_000, hold=3.0)
        did = json.loads(injector.stdout.readline())
    finally:
        injector.kill()
        injector.wait(timeout=10)
    assert did.get("injected") == kind, did
    assert result["answered"] == [] and list(result["failed"]) == [str(rid)], result
    assert_at_most_once(range(rid, rid + 1), result)
    after = eventually(lambda: control("terminal", "GET", "/v1/counters")["peer"],
                       lambda a: a["failed"] > before["failed"])
    assert after["failed"] == before["failed"] + 1
    assert after["fallbacks"] == before["fallbacks"], "nothing went to the direct path"
    wait_pool()


def test_a_burst_beyond_the_pool_goes_direct_and_is_counted(lab: None) -> None:
    """30 POSTs at once find fewer ready connections (each worker's pool of 8, less the quarter it
    keeps for the gateway's own flows): the others open their own connection across the satellite
    (their SYNs to the server, in a capture of the link), the terminal's `peer.pool_empty` counts
    exactly those (with any fallbacks), and every body reaches the server once."""
    first, n = 7000, 30
    ready = wait_pool()
    before = control("terminal", "GET", "/v1/counters")["peer"]
    data, result = sniff(lambda role, argv: in_ns(role, argv, PREFIX), TOPO.path("sat-burst.pcap"),
                         lambda: posts(n, n, first))
    assert len(result["answered"]) == n, result
    assert_at_most_once(range(first, first + n), result)
    direct = len(syn_sources(data, SERVER4, COUNT_PORT))

    def went_direct(a: dict[str, Any]) -> int:
        # A flow whose warm connection refused its first byte goes direct too (a fallback).
        return int(a["pool_empty"] + a["fallbacks"] - before["pool_empty"] - before["fallbacks"])

    after = eventually(lambda: control("terminal", "GET", "/v1/counters")["peer"], lambda a: went_direct(a) >= direct)
    on_peer = after["flows"] - before["flows"]
    print(json.dumps({"ready": ready, "syns": direct, "pool_empty": after["pool_empty"] - before["pool_empty"],
                      "fallbacks": after["fallbacks"] - before["fallbacks"], "peer_flows": on_peer}))
    assert direct >= n - ready, (direct, on_peer, ready)
    assert went_direct(after) == direct, (after, before, direct)
    # The rest took the peer path (one more peer flow: the resolver's health check may have run).
    assert n <= direct + on_peer <= n + 1, (direct, on_peer)
    wait_pool()


def test_a_hub_killed_mid_flow_resets_its_flows_and_never_replays(lab: None) -> None:
    first = 4000
    argv = [PY, "-m", "satlab.postload", SERVER4, str(COUNT_PORT), "--count", "40", "--concurrency", "40",
            "--first", str(first), "--hold", "3"]
    load = subprocess.Popen(in_ns("client", argv, PREFIX), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    pins = gateway.peer_pins(TOPO)
    try:
        time.sleep(2.0)  # the bodies are at the server, the answers held
        pid = int(Path(TOPO.path(f"gw-{PREFIX}hub.pid")).read_text().split()[0])
        os.kill(pid, signal.SIGKILL)
        out, _ = load.communicate(timeout=180)
    finally:
        if load.poll() is None:
            load.kill()
        gateway._stop_one(TOPO, "hub")
        gateway._start_one(TOPO, "hub", 45, False, pins)
    result = json.loads(out.strip().splitlines()[-1])
    assert_at_most_once(range(first, first + 40), result)
    assert result["failed"], "the hub's end reset its flows"
    # The pool comes back on its own (backoff at most 15 s), and new flows take it again.
    wait_pool()
    again = posts(1, 1, first + 100)
    assert again["answered"] == [first + 100]


# --- identities -------------------------------------------------------------------------------------


def test_revoking_the_terminal_closes_its_pool_within_5_s_and_refuses_its_key(lab: None) -> None:
    enrolled = control("hub", "GET", "/v1/config")["peer"]["terminals"]
    put_config("hub", lambda c: c["peer"].update(terminals=[]))
    t0 = time.monotonic()
    try:
        ready = eventually(lambda: peer("terminal")["pool"]["ready"], lambda n: n == 0, timeout=5.0)
        assert ready == 0, f"pool still has {ready} ready {time.monotonic() - t0:.1f} s after the revocation"
        out = terminal_exec("print(json.dumps({'ready': PeerClient(IDENTITY).ready()}))")
        assert out == {"ready": False}
        # New flows take the direct path meanwhile and work.
        assert posts(1, 1, 5000)["answered"] == [5000]
    finally:
        put_config("hub", lambda c: c["peer"].update(terminals=enrolled))
    wait_pool()


def test_rotating_the_terminals_key_keeps_live_flows(lab: None) -> None:
    old = control("terminal", "GET", "/v1/identity")["fingerprint"]
    staged = control("terminal", "POST", "/v1/identity/rotate")
    new = staged["next_fingerprint"]
    assert new and new != old and staged["fingerprint"] == old
    put_config("hub", lambda c: c["peer"]["terminals"][0].update(fingerprints=[old, new]))
    # A flow on a connection made with the old key, its answer held past the rotation.
    argv = [PY, "-m", "satlab.postload", SERVER4, str(COUNT_PORT), "--first", "6000", "--hold", "4"]
    load = subprocess.Popen(in_ns("client", argv, PREFIX), stdout=subprocess.PIPE, text=True)
    try:
        time.sleep(1.5)
        committed = control("terminal", "POST", "/v1/identity/commit")
        assert (committed["fingerprint"], committed["next_fingerprint"]) == (new, None)
        wait_pool()
        put_config("hub", lambda c: c["peer"]["terminals"][0].update(fingerprints=[new]))
        out, _ = load.communicate(timeout=60)
    finally:
        if load.poll() is None:
            load.kill()
    assert json.loads(out.strip().splitlines()[-1])["answered"] == [6000], out
    assert peer("terminal")["identity"] == new
    assert wait_pool() > 0
    assert posts(1, 1, 6001)["answered"] == [6001]
