"""A terminal managed from its hub across the emulated satellite (root): `scripts/demo up` (a real gateway at each
end, one dashboard per end), the terminal's API joins the hub's API through the satellite, then the hub's config
versions run on the terminal's real gateway, one its gateway refuses is rolled back, and the counters the terminal
reports match traffic counted independently.

Where each part runs (scripts/demo): each end's API in its gateway's namespace, as on the box itself; the hub's
nginx also inside `mg-hub` on its satellite-side address (https://10.71.2.2/), where a terminal reaches it. So the
terminal's join, long poll and reports leave `mg-terminal` from 10.71.2.1 and cross the link emulator; the hub's
audit log records that address, which exists only on the terminal's side of the emulator.

What the reported counters count: `rx_bytes`/`tx_bytes` are the terminal gateway's `bytes_down`/`bytes_up`
(services/managed_terminal.report_body), the split flows' relayed payload: the bytes its relay wrote toward the
LAN and toward the satellite, summed by each worker and handed to the master every second. Headers of any layer
are not in them. So a download of N bytes to the lab client raises rx by at least N; and every byte in rx reached
the client inside a frame, so rx rose by at most what the client's eth0 received (rx_bytes in the client's
namespace: every frame's Ethernet, IP and TCP headers, plus anything else it received) over a window that encloses
both reports: the bound is N plus that overhead, counted by the client's kernel. Likewise tx with an upload of M
bytes and the client's transmitted bytes. The window is sound because the lab is quiet as it opens (the demo's
traffic mix is stopped; after the client's counters are read the gateway's own stand still for over two of its
reporting periods), so no byte relayed before it is reported inside it. The emulator's bytes each way are a second
such bound. The terminal reports at once after each version (otherwise every 30 s): the counters test makes a
version at each end of its window to have a report there rather than wait for the periodic one.

The per-site figures (`sites`: services/managed_terminal.site_figures, the gateway's `by_site`) count another
leg: the payload its flows' satellite sockets received (rx) and had acknowledged (tx), each byte once however often
it was sent, under the site whose prefixes hold the client (the lab's `site-1`: the client LAN; the test checks the
terminal runs it). The download's N bytes all cross that leg, so the site's rx rises by at least N. On the peer path
the leg also carries the flow's OPEN and STATUS frames and TLS's record overhead (22 bytes a record of up to
16 KiB), which never reach the client: the emulator's count of the same direction bounds the site's figure by
construction, and only that bound is asserted. The client's eth0 would bound it by a margin only (its kernel counts
one set of Ethernet, IP and TCP headers, 66 bytes, per segment the terminal's LAN socket hands it, up to 64 KiB
with segmentation offload across the veth): seen here, about 7 KB of peer-path overhead in N against about 18 KB of
headers at the client's eth0, 2.6 KB against 18 KB in M (the test prints both). Likewise tx with M.

The demo runs under prefix mg- with its own state and run directories and free ports, so it never touches another
demo or test (sl-, dm-). Nothing here is a performance figure: the only time bounds mean "hung".
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from conftest import in_ns
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from test_demo_satlab import Demo, demo_cmd, demo_setup, logged_in

from satlab import content, gateway, linkctl
from satlab.cli import _dir_view
from satlab.testing import HUNG_S

pytestmark = pytest.mark.needs_root("network namespaces, the perigee user, nginx as www-data")

PREFIX = "mg-"
SITE = gateway.SITE_NAME
HUB_SAT = "10.71.2.2"  # the hub's satellite-side address (DEVELOPERS.md, satlab addressing)
TERMINAL_SAT = "10.71.2.1"  # the terminal's: only on the far side of the link emulator from the hub
HUB_URL = f"https://{HUB_SAT}:443"
DOWNLOAD = 4_000_000  # N: the lab server to the client, through the terminal
UPLOAD = 600_000  # M: the client to the lab server
# Somebody else's root qdisc on the terminal's satellite interface: the gateway's shaper never replaces one.
FOREIGN_QDISC = ["root", "handle", "77:", "pfifo", "limit", "1000"]
UP_HUNG_S = 600  # the demo's bring-up: about a minute on a quiet 2-core box


@dataclass
class Managed:
    demo: Demo
    hub: httpx.Client  # the hub's admin, on its dashboard
    terminal: httpx.Client  # the terminal's admin, on its dashboard
    joined: bool = False
    applied: dict[str, Any] = field(default_factory=dict)  # the first hub version the terminal applied, as made
    running: dict[str, Any] = field(default_factory=dict)  # the terminal gateway's config once it ran it


def ns_run(role: str, argv: list[str], timeout: float = HUNG_S) -> str:
    out = subprocess.run(in_ns(role, argv, PREFIX), capture_output=True, text=True, timeout=timeout, check=False)
    assert out.returncode == 0, f"{role}: {' '.join(argv)}: {out.returncode}\n{out.stdout}\n{out.stderr}"
    return out.stdout


def control(role: str, path: str) -> Any:
    """The gateway's own control socket: what it runs, not what an API says."""
    sock = f"/run/satlab/{PREFIX}/gw-{PREFIX}{role}.sock"
    answer = gateway.client(sock, timeout=20).exchange("GET", path)
    assert answer.status == 200, f"{role} {path}: {answer.status} {answer.body}"
    return answer.body


def running_config(role: str = "terminal") -> dict[str, Any]:
    cfg: dict[str, Any] = control(role, "/v1/config")
    return cfg


def without_revision(cfg: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in cfg.items() if k != "revision"}


def terminal_nft() -> str:
    return ns_run("terminal", ["nft", "list", "ruleset"])


def sat0_root_qdisc() -> dict[str, Any]:
    shown = json.loads(ns_run("terminal", ["tc", "-j", "qdisc", "show", "dev", "sat0", "root"]) or "[]")
    root = next((q for q in shown if q.get("root")), None)
    return root or {"kind": "none", "handle": "0:"}


def link_bytes() -> dict[str, int]:
    """What the satellite link's emulator carried, by direction (forward: hub to terminal)."""
    view = _dir_view("sat", linkctl.stats(f"/run/satlab/{PREFIX}/sat-link.sock"))
    return {d: int(view[d]["bytes_out"]) for d in ("forward", "return")}


def client_eth0() -> dict[str, int]:
    """The lab client's eth0, as its kernel counts it (frames with all their headers)."""
    base = "/sys/class/net/eth0/statistics"
    out = ns_run("client", ["cat", f"{base}/rx_bytes", f"{base}/tx_bytes"]).split()
    return {"rx": int(out[0]), "tx": int(out[1])}


def get(c: httpx.Client, path: str, **params: Any) -> Any:
    r = c.get(path, params=params)
    assert r.status_code == 200, f"{path}: {r.status_code} {r.text}"
    return r.json()


def until(what: str, read: Callable[[], Any], done: Callable[[Any], bool], pause: float = 0.3) -> Any:
    """Poll `read` until `done` of it; HUNG_S means hung."""
    deadline = time.monotonic() + HUNG_S
    while True:
        value = read()
        if done(value):
            return value
        assert time.monotonic() < deadline, f"hung: {what}; last seen: {value}"
        time.sleep(pause)


def spki_pin(cert_pem: bytes) -> str:
    cert = x509.load_pem_x509_certificate(cert_pem)
    spki = cert.public_key().public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    return "sha256:" + hashlib.sha256(spki).hexdigest()


def stop_traffic_mix(demo: Demo) -> None:
    """The demo's background mix (its own process group, started by `up` above) stops: the counters' window needs a
    quiet lab."""
    pid_file = demo.root / "run" / "traffic.pid"
    pid = int(pid_file.read_text())
    os.killpg(pid, signal.SIGTERM)
    deadline = time.monotonic() + HUNG_S
    while time.monotonic() < deadline:
        try:
            os.killpg(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    os.killpg(pid, signal.SIGKILL)


@pytest.fixture(scope="module")
def managed() -> Iterator[Managed]:
    env, root, ports = demo_setup(PREFIX, tools=("tc", "nft"))
    demo_cmd(env, "down")
    try:
        up = demo_cmd(env, "up", timeout=UP_HUNG_S)
        assert up.returncode == 0, f"scripts/demo up: {up.returncode}\n{up.stdout[-3000:]}\n{up.stderr[-3000:]}"
        demo = Demo(env, root, ports, up.stdout)
        stop_traffic_mix(demo)
        with ExitStack() as stack:
            hub = stack.enter_context(logged_in(demo, "hub"))
            terminal = stack.enter_context(logged_in(demo, "terminal"))
            hub.timeout = terminal.timeout = httpx.Timeout(2 * HUNG_S)  # a join crosses the satellite a few times
            yield Managed(demo, hub, terminal)
    finally:
        demo_cmd(env, "down")
        shutil.rmtree(root, ignore_errors=True)


def detail(managed: Managed) -> Any:
    return get(managed.hub, f"/api/v1/peer/terminals/{SITE}")


def version_state(managed: Managed, version_id: int) -> dict[str, Any]:
    listed = get(managed.hub, f"/api/v1/peer/terminals/{SITE}/versions")["versions"]
    found: dict[str, Any] = next(v for v in listed if v["id"] == version_id)
    return found


def make_version(managed: Managed, sections: dict[str, Any], comment: str) -> dict[str, Any]:
    r = managed.hub.post(f"/api/v1/peer/terminals/{SITE}/versions", json={"sections": sections, "comment": comment})
    assert r.status_code == 201, r.text
    made: dict[str, Any] = r.json()
    assert made["state"] == "pending", made
    return made


def reported(managed: Managed, version_id: int) -> dict[str, Any]:
    """The version once the terminal reported what became of it."""
    got: dict[str, Any] = until(
        f"the terminal reports hub version {version_id}",
        lambda: version_state(managed, version_id),
        lambda v: v["state"] != "pending",
    )
    return got


def test_the_terminal_joins_the_hub_across_the_satellite(managed: Managed) -> None:
    """The terminal's API joins the hub's API at its satellite-side address with a token and the pin of the hub's
    HTTPS key; the hub records the terminal's satellite-side address as the client, the emulator carried at least
    the join's bytes, and afterwards the terminal reports to the hub and its peer path runs on the new enrollment."""
    hub, terminal = managed.hub, managed.terminal
    tls = get(hub, "/api/v1/system/tls")
    pin = tls["certificate"]["spki_pin"]
    assert pin == spki_pin(Path(managed.demo.cert("hub")).read_bytes()), tls  # the key nginx serves
    # The demo enrolled the terminal by its fingerprint: revoked here, so a token can enroll the same identity.
    r = hub.delete(f"/api/v1/peer/terminals/{SITE}")
    assert r.status_code == 200, r.text
    r = hub.post("/api/v1/peer/enrollment-tokens", json={"name": SITE, "prefixes": gateway.CLIENT_SUBNETS})
    assert r.status_code == 201, r.text
    token = r.json()["token"]

    # A wrong pin: refused before the token is sent, naming the key the terminal saw across the satellite.
    wrong = "sha256:" + hashlib.sha256(b"not the hub's key").hexdigest()
    r = terminal.post("/api/v1/managed/join", json={"hub_url": HUB_URL, "hub_pin": wrong, "token": token})
    assert r.status_code == 502 and r.json()["error"]["code"] == "hub_pin_mismatch", r.text
    assert pin in r.json()["error"]["message"], r.text

    fingerprint = control("terminal", "/v1/identity")["fingerprint"]
    before, started = link_bytes(), time.monotonic()
    r = terminal.post("/api/v1/managed/join", json={"hub_url": HUB_URL, "hub_pin": pin, "token": token})
    after, took = link_bytes(), {"join": time.monotonic() - started}
    assert r.status_code == 200, r.text
    status = r.json()
    assert (status["managed"], status["hub_url"], status["name"], status["last_error"]) == (True, HUB_URL, SITE, None)
    managed.joined = True

    # The hub's audit log: the token redeemed from the terminal's satellite-side address.
    entries = get(hub, "/api/v1/audit", limit=100)["entries"]
    enrolled = [e for e in entries if e["action"] == "POST /api/v1/peer/enroll"]
    assert [(e["address"], e["result"]) for e in enrolled] == [(TERMINAL_SAT, "ok")], enrolled
    # Each way the emulator carried at least the join's own bytes: the request's body one way, the hub's
    # certificate (its TLS handshake) the other.
    sent = len(json.dumps({"token": token, "fingerprint": fingerprint}))
    cert_der = x509.load_pem_x509_certificate(Path(managed.demo.cert("hub")).read_bytes()).public_bytes(
        serialization.Encoding.DER
    )
    assert after["return"] - before["return"] >= sent, (before, after, sent)
    assert after["forward"] - before["forward"] >= len(cert_der), (before, after, len(cert_der))

    # From then on the terminal reports to the hub (over the same path): the revision its gateway runs.
    shown = until("the terminal's first report", lambda: detail(managed), lambda d: d["last_report_at"] is not None)
    took["first report"] = time.monotonic() - started
    assert shown["managed"] is True, shown
    assert shown["revision"] == control("terminal", "/v1/health")["config_revision"], shown
    # The hub's answer became the terminal gateway's peer section: its peer path runs again, enrolled by token.
    site = until(
        "the terminal connected on the peer path",
        lambda: next(t for t in get(hub, "/api/v1/peer/terminals")["terminals"] if t["name"] == SITE),
        lambda t: bool(t["connected"]),
    )
    took["peer path"] = time.monotonic() - started
    print(", ".join(f"{what} after {s:.1f} s" for what, s in took.items()))
    assert site["fingerprints"] == [fingerprint], site
    assert running_config()["peer"]["hub"] == HUB_SAT


def test_a_hub_version_runs_on_the_terminals_gateway(managed: Managed) -> None:
    """A version made at the hub (QUIC passed untouched, the terminal's shaper off) is applied by the terminal's
    gateway: its nft ruleset loses the QUIC fallback rule, its satellite interface loses Perigee's HTB root."""
    assert managed.joined, "the terminal did not join the hub (the join test failed)"
    assert 'comment "quic fallback"' in terminal_nft()
    assert sat0_root_qdisc()["kind"] == "htb", sat0_root_qdisc()
    shaping = running_config()["shaping"]
    assert shaping["enabled"] is True, shaping

    sections = {"quic": "pass", "shaping": {**shaping, "enabled": False}}
    made = make_version(managed, sections, "QUIC end to end, no shaper")
    got = reported(managed, made["id"])
    assert (got["state"], got["error"]) == ("applied", None), got

    # The terminal's gateway itself runs it.
    cfg = running_config()
    assert (cfg["quic"], cfg["shaping"]["enabled"]) == ("pass", False), cfg
    assert "quic fallback" not in terminal_nft()
    assert sat0_root_qdisc()["kind"] != "htb", sat0_root_qdisc()
    shown = until("the report of the applied version", lambda: detail(managed), lambda d: d["applied_version_id"])
    assert shown["applied_version_id"] == made["id"], shown
    assert shown["revision"] == control("terminal", "/v1/health")["config_revision"] == cfg["revision"], shown
    # The report that moved the version came across the satellite too (routine reports are not audited).
    entries = get(managed.hub, "/api/v1/audit", limit=100)["entries"]
    moved = [e for e in entries if e["actor"] == f"terminal {SITE}" and e["action"] == "POST /api/v1/managed/report"]
    assert [(e["address"], e["detail"]["managed_version_id"]) for e in moved] == [(TERMINAL_SAT, made["id"])], moved
    managed.applied, managed.running = made, cfg


def test_a_version_the_terminals_gateway_refuses_is_rolled_back(managed: Managed) -> None:
    """A shaper on a satellite interface with somebody else's root qdisc: the API's validation cannot know, the
    gateway refuses it at apply time; the terminal rolls back and reports it, and its gateway runs what it ran."""
    assert managed.running, "no version ran on the terminal (the previous test failed)"
    ns_run("terminal", ["tc", "qdisc", "add", "dev", "sat0", *FOREIGN_QDISC])
    try:
        shaping = {**managed.running["shaping"], "enabled": True}
        made = make_version(managed, {"shaping": shaping}, "shaper back on")
        got = reported(managed, made["id"])
        assert got["state"] == "rolled_back", got
        assert "root qdisc" in got["error"] and "rolled back to version" in got["error"], got

        # The gateway runs the previous config (again, under the roll-back's revision); the foreign qdisc is
        # untouched.
        cfg = running_config()
        assert without_revision(cfg) == without_revision(managed.running)
        assert cfg["revision"] != managed.running["revision"]
        assert "quic fallback" not in terminal_nft()
        assert (sat0_root_qdisc()["kind"], sat0_root_qdisc()["handle"]) == ("pfifo", "77:"), sat0_root_qdisc()
        shown = detail(managed)
        assert shown["applied_version_id"] == managed.applied["id"], shown
        assert shown["desired_version"]["id"] == made["id"], shown
        assert shown["desired_version"]["state"] == "rolled_back", shown
        assert shown["revision"] == cfg["revision"] == control("terminal", "/v1/health")["config_revision"], shown
    finally:
        ns_run("terminal", ["tc", "qdisc", "del", "dev", "sat0", "root"])


def gateway_bytes() -> tuple[int, int, int, int]:
    """The terminal gateway's relay totals (down, up), then its lab site's satellite-leg payload (down, up)."""
    c = control("terminal", "/v1/counters")
    site = (c.get("by_site") or {}).get(SITE) or {}
    return int(c["bytes_down"]), int(c["bytes_up"]), int(site.get("bytes_down", 0)), int(site.get("bytes_up", 0))


def site_reported(report: dict[str, Any]) -> dict[str, int]:
    """The lab site's figures in a report the hub shows (none yet: nothing counted for it)."""
    found = next((s for s in report["sites"] if s["name"] == SITE), None)
    return {"rx": int(found["rx_bytes"]), "tx": int(found["tx_bytes"])} if found else {"rx": 0, "tx": 0}


def lab_site_covers_the_client() -> None:
    """The terminal runs a site for the client LAN (the lab's `site-1`): otherwise its flows count under "other"."""
    sites = {s["name"]: s["prefixes"] for s in running_config()["sites"]}
    assert sites.get(SITE) == gateway.CLIENT_SUBNETS, f"no site {SITE} for the client LAN in {sites}"


def quiet() -> tuple[int, int, int, int]:
    """The terminal's relay and site counters once they stand still for two of its reporting periods (1 s each)."""
    last = gateway_bytes()
    deadline = time.monotonic() + HUNG_S
    while True:
        time.sleep(2.2)
        now = gateway_bytes()
        if now == last:
            return now
        assert time.monotonic() < deadline, f"hung: the lab never went quiet ({last} -> {now})"
        last = now


def report_after_version(managed: Managed, sections: dict[str, Any], comment: str) -> dict[str, Any]:
    made = make_version(managed, sections, comment)
    got = reported(managed, made["id"])
    assert got["state"] == "applied", got
    shown = until("its report", lambda: detail(managed), lambda d: d["applied_version_id"] == made["id"])
    return dict(shown)


def client_tool(argv: list[str]) -> dict[str, Any]:
    out = ns_run("client", [sys.executable, "-m", "satlab.clients", *argv, "--json"], timeout=2 * HUNG_S)
    res: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    return res


def test_the_reported_counters_match_the_traffic(managed: Managed) -> None:
    """N bytes down and M bytes up through the terminal (checked by sha256): between the reports before and after,
    the terminal's reported rx rose by at least N and tx by at least M, each by at most what the client's eth0
    received or sent meanwhile (module docstring: payload vs frames); the client site's reported rx and tx (its
    satellite leg's payload) rose by at least N and M and at most what the emulated link carried. Then a flow held
    open is reported live."""
    assert managed.joined, "the terminal did not join the hub (the join test failed)"
    lab_site_covers_the_client()
    # The window opens, then the gateway's counters stand still: every byte relayed before it opened was reported
    # to the master before the first report.
    eth0_before, link_before = client_eth0(), link_bytes()
    quiet()
    first = report_after_version(managed, {"quic": "fallback"}, "report: before the traffic")
    down_before, up_before, site_down_before, site_up_before = gateway_bytes()

    got = client_tool(["bulk", "get", str(DOWNLOAD)])
    assert (got["bytes"], got["sha256"]) == (DOWNLOAD, content.stream_sha256(DOWNLOAD)), got
    put = client_tool(["bulk", "put", str(UPLOAD)])
    assert put["complete"] and put["server_reply"]["sha256"] == content.stream_sha256(UPLOAD), put
    # The workers hand their counts to the master every second: the next report must find them there.
    until(
        "the terminal's gateway counts the traffic",
        gateway_bytes,
        lambda b: b[0] >= down_before + DOWNLOAD
        and b[1] >= up_before + UPLOAD
        and b[2] >= site_down_before + DOWNLOAD
        and b[3] >= site_up_before + UPLOAD,
    )
    second = report_after_version(managed, {"quic": "pass"}, "report: after the traffic")
    eth0_after, link_after = client_eth0(), link_bytes()

    rx = second["rx_bytes"] - first["rx_bytes"]
    tx = second["tx_bytes"] - first["tx_bytes"]
    received = eth0_after["rx"] - eth0_before["rx"]
    sent = eth0_after["tx"] - eth0_before["tx"]
    forward = link_after["forward"] - link_before["forward"]
    back = link_after["return"] - link_before["return"]
    print(f"rx +{rx}: N {DOWNLOAD} + overhead bound {received - DOWNLOAD} (client eth0), link forward {forward}")
    print(f"tx +{tx}: M {UPLOAD} + overhead bound {sent - UPLOAD} (client eth0), link return {back}")
    assert second["last_report_at"] > first["last_report_at"], (first, second)
    assert DOWNLOAD <= rx <= received, (rx, DOWNLOAD, received)
    assert UPLOAD <= tx <= sent, (tx, UPLOAD, sent)
    # The same bytes crossed the satellite in frames too (the peer path's framing on top): a second bound.
    assert rx <= forward and tx <= back, (rx, forward, tx, back)

    # The client's site, as the terminal reports it per site: its satellite leg's payload, the peer path's framing
    # in it; the link bounds it by construction. The client's eth0 would bound it only by a margin (module
    # docstring), so it is printed, not asserted.
    before, after = site_reported(first), site_reported(second)
    site_rx, site_tx = after["rx"] - before["rx"], after["tx"] - before["tx"]
    print(f"site {SITE}: rx +{site_rx} (N {DOWNLOAD}, client eth0 {received}, link forward {forward}), "
          f"tx +{site_tx} (M {UPLOAD}, client eth0 {sent}, link return {back})")
    assert DOWNLOAD <= site_rx <= forward, (site_rx, DOWNLOAD, forward, first["sites"], second["sites"])
    assert UPLOAD <= site_tx <= back, (site_tx, UPLOAD, back, first["sites"], second["sites"])
    assert second["health_ok"] is True, second

    # A flow open (idle) from the client: the next report counts it live, as the gateway does.
    idle = "import socket, time; s = socket.create_connection(('10.71.3.10', 5001)); time.sleep(120)"
    flow = subprocess.Popen(in_ns("client", [sys.executable, "-c", idle], PREFIX))
    try:
        until("the idle flow is split", lambda: control("terminal", "/v1/counters")["flows_live"], lambda n: n >= 1)
        third = report_after_version(managed, {"quic": "fallback"}, "report: a flow open")
        assert third["live_flows"] >= 1, third
    finally:
        flow.kill()
        flow.wait(timeout=HUNG_S)


def test_down_removes_everything(managed: Managed) -> None:
    down = demo_cmd(managed.demo.env, "down", timeout=UP_HUNG_S)
    assert down.returncode == 0, down.stderr
    netns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True).stdout
    assert PREFIX not in netns, netns
    left = []
    for proc in Path("/proc").iterdir():
        try:
            cmd = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if str(managed.demo.root) in cmd or f"/run/satlab/{PREFIX}" in cmd or f"--prefix {PREFIX}" in cmd:
            left.append(cmd)
    assert not left, f"still running: {left}"
    assert not (managed.demo.root / "run").exists() and not (managed.demo.root / "state").exists()
    assert not Path(f"/run/satlab/{PREFIX}").exists()
    for port in managed.demo.ports.values():
        with socket.socket() as s:
            assert s.connect_ex(("127.0.0.1", port)) != 0, f"something still listens on {port}"
