"""The lab's DNS server behind the satellite: NSD (an authoritative-only server) in the server
namespace at 10.71.3.53 and fd71:3::53, authoritative for the zone `test.` with the web origins'
names (satlab.webnames).

For each origin: A and AAAA for its name and for the wildcard under it (the per-load labels), and
an HTTPS record (RFC 9460) `1 . alpn="h3,h2"` on the wildcard, which tells a browser that uses
HTTPS records that the origin speaks HTTP/3, so it may try QUIC on its first connection. TTL 300 s.
The client namespace's resolver points here (`write_resolv_conf`), so every lookup of a page's
names crosses the satellite unless something at the site answers it.
"""

from __future__ import annotations

import os

from .webnames import DNS_TTL_S, DNS_V4, DNS_V6, ORIGINS, ZONE

NSD = "nsd"
NETNS_ETC = "/etc/netns"


def zone_text(serial: int = 1) -> str:
    lines = [
        f"$ORIGIN {ZONE}.",
        f"$TTL {DNS_TTL_S}",
        f"@ IN SOA ns.{ZONE}. hostmaster.{ZONE}. {serial} 3600 600 86400 {DNS_TTL_S}",
        f"@ IN NS ns.{ZONE}.",
        f"ns IN A {DNS_V4}",
        f"ns IN AAAA {DNS_V6}",
    ]
    for o in ORIGINS:
        rel = o.host.removesuffix(f".{ZONE}")
        for name in (rel, f"*.{rel}"):
            lines += [f"{name} IN A {o.v4}", f"{name} IN AAAA {o.v6}", f'{name} IN HTTPS 1 . alpn="h3,h2"']
    return "\n".join(lines) + "\n"


def config_text(directory: str) -> str:
    return "\n".join([
        "server:",
        f"    ip-address: {DNS_V4}",
        f"    ip-address: {DNS_V6}",
        "    port: 53",
        "    server-count: 1",
        '    username: ""',
        '    chroot: ""',
        '    database: ""',
        f'    zonesdir: "{directory}"',
        f'    zonelistfile: "{directory}/zone.list"',
        f'    xfrdfile: "{directory}/xfrd.state"',
        f'    xfrdir: "{directory}"',
        f'    pidfile: "{directory}/nsd.pid"',
        f'    logfile: "{directory}/nsd.log"',
        "    hide-version: yes",
        "    verbosity: 1",
        "remote-control:",
        "    control-enable: no",
        "zone:",
        f"    name: {ZONE}",
        f'    zonefile: "{directory}/{ZONE}.zone"',
        "",
    ])


def prepare(directory: str) -> list[str]:
    """Write the config and zone; returns the argv that serves them in the foreground."""
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, f"{ZONE}.zone"), "w") as f:
        f.write(zone_text())
    conf = os.path.join(directory, "nsd.conf")
    with open(conf, "w") as f:
        f.write(config_text(directory))
    return [NSD, "-d", "-c", conf]


def resolv_conf_path(ns: str) -> str:
    return os.path.join(NETNS_ETC, ns, "resolv.conf")


def write_resolv_conf(ns: str) -> str:
    """`ip netns exec <ns>` binds /etc/netns/<ns>/resolv.conf over /etc/resolv.conf."""
    path = resolv_conf_path(ns)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(f"# satlab: the lab's DNS server behind the satellite\nnameserver {DNS_V4}\nnameserver {DNS_V6}\n"
                "options timeout:3 attempts:2\n")
    return path


def remove_resolv_conf(ns: str) -> None:
    path = resolv_conf_path(ns)
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    try:
        os.rmdir(os.path.dirname(path))
    except OSError:
        pass  # not ours alone, or already gone
