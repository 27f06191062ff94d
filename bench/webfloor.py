"""The physical floor of an HTTPS page on one satellite link: the shortest load time that no
browser, gateway or protocol can beat without knowing the page in advance.

What cannot be removed, per object, on its dependency chain (RTT = the link's base round trip):
- it is found only when its parent arrives: the HTML's first byte for objects the HTML names (a
  browser parses HTML as it streams), the whole parent for objects named by a stylesheet, a script
  or a JSON response (those are parsed or run whole);
- its request crosses the link and its response's first byte comes back: 1 RTT;
- its origin's connection: TLS (1.3, full handshake: a fresh browser holds no session ticket) is
  end to end, so the ClientHello and the server's answer cross the link once: 1 RTT, from when the
  origin is first needed; QUIC's handshake is the same 1 RTT. The TCP handshake costs nothing here:
  a splitting gateway answers it locally and can keep satellite connections open in advance;
- cold DNS: a name nobody at the site has resolved needs its answer from behind the link: 1 RTT
  when the origin is first needed (warm: the site's resolver holds it: 0);
- its bytes cross the link at the forward rate, in full frames (1514 wire bytes per 1448 of payload).
An origin's connection, once up, serves all of its objects (HTTP/2, HTTP/3 multiplexing).

floor = max(critical path, first possible byte + every byte of the page at the link rate), where the
critical path is the latest arrival of any object computed as above (each object's own bytes
counted on its path, its siblings' not), and the second term says that nothing arrives before the
HTML's first byte and all bytes must still cross after it. Protocol headers are not counted.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import dataclass

MSS = 1448
WIRE_FRAME = 1514


@dataclass(frozen=True)
class Item:
    path: str
    origin: str
    kind: str
    size: int
    parent: str | None


def items_from_manifest(manifest: dict[str, object]) -> list[Item]:
    raw = manifest["items"]
    if not isinstance(raw, list):
        raise TypeError("manifest items must be a list")
    return [
        Item(
            str(i["path"]),
            str(i["origin"]),
            str(i["kind"]),
            int(i["size"]),
            None if i["parent"] is None else str(i["parent"]),
        )
        for i in raw
    ]


def wire_s(payload: float, rate_bps: float) -> float:
    return payload * WIRE_FRAME / MSS * 8 / rate_bps


@dataclass(frozen=True)
class Floor:
    floor_s: float
    critical_path_s: float
    bandwidth_s: float
    arrivals: dict[str, float]  # path -> when its last byte can arrive


def page_floor(items: Sequence[Item], rate_bps: float, rtt_s: float, cold_dns: bool) -> Floor:
    if rate_bps <= 0 or rtt_s < 0:
        raise ValueError("rate must be > 0 and rtt >= 0")
    roots = [i for i in items if i.parent is None]
    if len(roots) != 1:
        raise ValueError(f"a page has exactly one root (its HTML), found {len(roots)}")
    children: dict[str, list[Item]] = {}
    for i in items:
        if i.parent is not None:
            children.setdefault(i.parent, []).append(i)
    known = {i.path for i in items}
    orphans = [i.path for i in items if i.parent is not None and i.parent not in known]
    if orphans:
        raise ValueError(f"objects whose parent is not on the page: {orphans[:5]}")
    setup = rtt_s * (1 + (1 if cold_dns else 0))  # TLS (+ DNS when cold), before the first request
    ready: dict[str, float] = {}
    arrivals: dict[str, float] = {}
    first_bytes: dict[str, float] = {}
    # Objects in the order they are found (Dijkstra-like: a child is always found after its parent),
    # so an origin's connection starts at the earliest moment any of its objects is known.
    heap: list[tuple[float, int, Item]] = [(0.0, 0, roots[0])]
    seq = 1
    while heap:
        found, _, item = heapq.heappop(heap)
        if item.path in arrivals:
            continue
        if item.origin not in ready:
            ready[item.origin] = found + setup
        start = max(found, ready[item.origin])
        first_bytes[item.path] = start + rtt_s
        arrivals[item.path] = first_bytes[item.path] + wire_s(item.size, rate_bps)
        reveal = first_bytes[item.path] if item.kind == "html" else arrivals[item.path]
        for child in children.get(item.path, []):
            heapq.heappush(heap, (reveal, seq, child))
            seq += 1
    if len(arrivals) != len(items):
        raise ValueError("objects unreachable from the HTML")
    critical = max(arrivals.values())
    bandwidth = first_bytes[roots[0].path] + wire_s(sum(i.size for i in items), rate_bps)
    return Floor(max(critical, bandwidth), critical, bandwidth, arrivals)
