"""The `hub-scale` benchmark's lab additions to a running 3-gateway satlab cluster (docs/cluster.md).

- Identities: an EC P-256 key and self-signed certificate per simulated terminal (`identities`), its
  fingerprint the SHA-256 of its SubjectPublicKeyInfo, as the gateways pin it.
- Namespaces `<prefix>st1..stS`, each on a veth to the hub router (`sim_up`): namespace K has 10.91.K.1 at the
  hub and 10.91.K.2, plus one source address per terminal (`source_addresses`), its route to the gateways through
  the hub router: a terrestrial path (no emulated satellite: the benchmark measures the hub, not the link).
- Client prefixes: terminal i owns 10.90.(i // 256).(i % 256)/32 (`client_of`). The edge router sends their
  answers over the cluster's bucket group: the route `CLIENT_NET` in the controller's table, on the next-hop
  group the lab's client subnet uses, kept on it when the controller builds a new group (`EdgeRoute`).
- Enrolment (`enroll`): every hub gateway's config gets the terminals in `peer.terminals` and a satellite route
  to the simulated terminals' addresses (SIM_NET via the hub router), applied through its control socket.
- Memory (`gateway_memory`): a gateway daemon's processes' RSS and PSS from /proc.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import os
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

CLIENT_NET = "10.90.0.0/16"
SIM_NET = "10.91.0.0/16"
LAB_CLIENT_NET = "10.71.1.0/24"
CONTROLLER_TABLE = "7100"  # satlab.cluster.fabric.TABLE


def client_of(i: int) -> str:
    return f"10.90.{i // 256}.{i % 256}"


def identities(directory: Path, n: int) -> list[dict[str, Any]]:
    """n terminal identities (name, pem path, fingerprint), one PEM (certificate then key) each."""
    directory.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.UTC)
    out = []
    for i in range(n):
        name = f"sim-{i:04d}"
        key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        cert = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=30))
            .sign(key, hashes.SHA256())
        )
        spki = key.public_key().public_bytes(
            serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
        )
        pem = directory / f"{name}.pem"
        pem.write_bytes(
            cert.public_bytes(serialization.Encoding.PEM)
            + key.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
            )
        )
        os.chmod(pem, 0o600)
        out.append(
            {
                "index": i,
                "name": name,
                "pem": str(pem),
                "client": client_of(i),
                "fingerprint": "sha256:" + hashlib.sha256(spki).hexdigest(),
            }
        )
    return out


def ip(*args: str, ns: str | None = None, check: bool = True, input_text: str | None = None) -> str:
    argv = ["ip", *(("-n", ns) if ns else ()), *args]
    p = subprocess.run(argv, capture_output=True, text=True, timeout=60, input=input_text)
    if check and p.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)}: {p.stderr.strip()}")
    return p.stdout


SOURCE_BASE, SOURCE_BLOCKS = 16, 4  # namespace K's sources: 10.91.(16 + 4 (K - 1)).0/22, up to 1,000 of them


def source_addresses(k: int, n: int) -> list[str]:
    """Namespace k's terminals' source addresses (one each, /32 on its eth0, routed to it by the hub router)."""
    if not 1 <= k < SOURCE_BASE or n > SOURCE_BLOCKS * 250:
        raise ValueError(f"namespace {k} with {n} terminals: outside the simulated terminals' address plan")
    base = SOURCE_BASE + SOURCE_BLOCKS * (k - 1)
    return [f"10.91.{base + j // 250}.{1 + j % 250}" for j in range(n)]


def sim_ns(prefix: str, k: int) -> str:
    return f"{prefix}st{k}"


def sim_up(prefix: str, spaces: int, per_space: int) -> list[list[str]]:
    """The simulated terminals' namespaces; returns each namespace's source addresses (one per terminal)."""
    hub = f"{prefix}hub"
    sources = []
    for k in range(1, spaces + 1):
        ns, host_if, sim_if = sim_ns(prefix, k), f"{prefix}st{k}h", f"{prefix}st{k}s"
        ip("netns", "add", ns)
        ip("link", "add", host_if, "type", "veth", "peer", "name", sim_if)
        ip("link", "set", host_if, "netns", hub)
        ip("link", "set", sim_if, "netns", ns)
        ip("link", "set", host_if, "name", f"st{k}", ns=hub)
        ip("link", "set", sim_if, "name", "eth0", ns=ns)
        ip("addr", "add", f"10.91.{k}.1/24", "dev", f"st{k}", ns=hub)
        addrs = source_addresses(k, per_space)
        batch = [f"addr add 10.91.{k}.2/24 dev eth0"] + [f"addr add {a}/32 dev eth0" for a in addrs]
        ip("-batch", "-", ns=ns, input_text="\n".join(batch) + "\n")
        for n, dev in ((hub, f"st{k}"), (ns, "eth0"), (ns, "lo")):
            ip("link", "set", dev, "up", ns=n)
        ip("route", "add", "default", "via", f"10.91.{k}.1", ns=ns)
        ip("route", "add", f"10.91.{SOURCE_BASE + SOURCE_BLOCKS * (k - 1)}.0/22", "via", f"10.91.{k}.2", ns=hub)
        subprocess.run(
            ["ip", "netns", "exec", ns, "sysctl", "-qw", "net.ipv4.ip_local_port_range=10000 65000"],
            check=True,
            timeout=10,
        )
        sources.append(addrs)
    return sources


def sim_down(prefix: str, spaces: int) -> None:
    for k in range(1, spaces + 1):
        ip("netns", "del", sim_ns(prefix, k), check=False)


class EdgeRoute:
    """Keeps CLIENT_NET on the next-hop group of the lab's client subnet in the edge router's controller table
    (the controller replaces that group, and the routes on it with it, when a gateway fails or returns)."""

    def __init__(self, prefix: str, interval_s: float = 0.02) -> None:
        self.ns, self.interval_s = f"{prefix}edge", interval_s
        self.stop_ev = threading.Event()
        self.repairs: list[float] = []
        self.thread = threading.Thread(target=self._run, daemon=True)

    def nhid(self, prefix: str) -> int | None:
        out = ip("-j", "route", "show", "table", CONTROLLER_TABLE, prefix, ns=self.ns, check=False)
        rows = json.loads(out or "[]")
        return int(rows[0]["nhid"]) if rows and "nhid" in rows[0] else None

    def sync(self) -> bool:
        want = self.nhid(LAB_CLIENT_NET)
        if want is None or self.nhid(CLIENT_NET) == want:
            return False
        ip("route", "replace", CLIENT_NET, "nhid", str(want), "table", CONTROLLER_TABLE, ns=self.ns, check=False)
        return True

    def start(self) -> EdgeRoute:
        for sysctl in ("net.ipv4.conf.all.rp_filter=0", "net.ipv4.conf.default.rp_filter=0"):
            subprocess.run(["ip", "netns", "exec", self.ns, "sysctl", "-qw", sysctl], timeout=10, check=False)
        if not self.sync() and self.nhid(CLIENT_NET) is None:
            raise RuntimeError(f"{self.ns}: no controller route for {LAB_CLIENT_NET} to follow")
        self.thread.start()
        return self

    def _run(self) -> None:
        while not self.stop_ev.wait(self.interval_s):
            if self.sync():
                self.repairs.append(time.time())

    def stop(self) -> None:
        self.stop_ev.set()
        self.thread.join(timeout=5)


def enroll(sock: str, hub_v4: str, terminals: list[dict[str, Any]], timeout: float = 120.0) -> dict[str, Any]:
    """Add the terminals to a hub gateway's `peer.terminals` and a route to SIM_NET; apply. Returns its answer."""
    from perigee_control.client import GatewayClient

    gw = GatewayClient(sock, timeout_s=timeout)
    cfg = gw.get_config()
    peer = cfg["peer"]
    names = {t["name"] for t in terminals}
    peer["terminals"] = [t for t in peer["terminals"] if t["name"] not in names] + [
        {"name": t["name"], "fingerprints": [t["fingerprint"]], "prefixes": [f"{t['client']}/32"]} for t in terminals
    ]
    routes = [r for r in cfg["satellite"]["routes"] if r["dst"] != SIM_NET]
    cfg["satellite"]["routes"] = [*routes, {"dst": SIM_NET, "via": hub_v4}]
    cfg["revision"] = f"hub-scale-{len(terminals)}"
    answer: dict[str, Any] = gw.call("PUT", "/v1/config", cfg)
    return answer


def _children(pid: int) -> list[int]:
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                        out.append(int(d))
            except (OSError, ValueError, IndexError):
                continue
    return out


def _kb(path: str, key: str) -> int:
    try:
        with open(path) as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def gateway_memory(master_pid: int) -> dict[str, int]:
    """RSS and PSS (KiB) of a gateway daemon: its master and its workers (not its Squid or resolver)."""
    pids = [master_pid] + [p for p in _children(master_pid) if _comm(p).startswith("perigee")]
    return {
        "rss_kib": sum(_kb(f"/proc/{p}/status", "VmRSS") for p in pids),
        "pss_kib": sum(_kb(f"/proc/{p}/smaps_rollup", "Pss") for p in pids),
        "processes": len(pids),
    }


def gateway_cpu_s(master_pid: int) -> float:
    """CPU time (user + system, s) a gateway daemon's master and workers have used so far."""
    pids = [master_pid] + [p for p in _children(master_pid) if _comm(p).startswith("perigee")]
    ticks = 0
    for p in pids:
        try:
            with open(f"/proc/{p}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            ticks += int(fields[11]) + int(fields[12])
        except (OSError, ValueError, IndexError):
            continue
    return ticks / os.sysconf("SC_CLK_TCK")


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""
