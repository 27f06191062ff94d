"""Parse `ss -tinH` output into per-socket dicts (cwnd, rtt, ssthresh, cc...).

Used to sample the sending socket of a process we do not own (the gateway's satellite leg)."""

from __future__ import annotations

import re
from typing import Any

_KV = re.compile(r"(\w+):(\S+)")
# ss omits the State column when the query names one state ("ss -tin state established").
_STATE_LINE = re.compile(
    r"^(?:(?P<state>[A-Z][A-Z0-9-]*)\s+)?(?P<recvq>\d+)\s+(?P<sendq>\d+)\s+(?P<local>\S+)\s+(?P<peer>\S+)"
)
_KNOWN_CC = {
    "cubic",
    "reno",
    "bbr",
    "bbr2",
    "hybla",
    "hybla_ld",
    "vegas",
    "westwood",
    "htcp",
    "dctcp",
    "highspeed",
    "illinois",
}


# Time the sender spent sending (busy) and, within it, held back by the receiver's window or by
# its own send buffer (tcpi_busy_time, tcpi_rwnd_limited, tcpi_sndbuf_limited).
LIMITED_KEYS = ("busy", "rwnd_limited", "sndbuf_limited")


def _num(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def parse_info_line(line: str) -> dict[str, Any]:
    """The indented detail line: congestion control name plus key:value fields."""
    info: dict[str, Any] = {}
    tokens = line.split()
    for tok in tokens:
        name = tok.split(":", 1)[0]
        if ":" not in tok and tok in _KNOWN_CC:
            info["cc"] = tok
        elif name in _KNOWN_CC and tok.startswith(name + ":("):
            info["cc"] = name  # bbr prints "bbr:(bw:...)"
    for key, raw in _KV.findall(line):
        if key in LIMITED_KEYS:  # "busy:9000ms", "rwnd_limited:2300ms(25.6%)"
            value = _num(raw.split("ms", 1)[0])
            if value is not None:
                info[f"{key}_ms"] = value
        elif key == "rtt":
            rtt, _, var = raw.partition("/")
            info["rtt_ms"] = _num(rtt)
            info["rttvar_ms"] = _num(var)
        elif key in (
            "cwnd",
            "ssthresh",
            "mss",
            "bytes_acked",
            "bytes_sent",
            "bytes_retrans",
            "retrans",
            "rto",
            "unacked",
            "lost",
            "delivered",
            "pmtu",
        ):
            value = _num(raw.split("/")[-1] if key == "retrans" else raw)
            if value is not None:
                info[key] = value
    return info


def parse_ss(text: str) -> list[dict[str, Any]]:
    """All sockets in `ss -tin` / `ss -tinH` output (header line optional)."""
    sockets: list[dict[str, Any]] = []
    current: dict[str, Any] | None = None
    for line in text.splitlines():
        if not line.strip() or line.startswith("State"):
            continue
        match = _STATE_LINE.match(line)
        if match and not line[0].isspace():
            current = {
                "state": match["state"] or "",
                "local": match["local"],
                "peer": match["peer"],
                "recv_q": int(match["recvq"]),
                "send_q": int(match["sendq"]),
            }
            sockets.append(current)
        elif current is not None:
            current.update(parse_info_line(line))
    return sockets


def port_of(endpoint: str) -> int:
    return int(endpoint.rsplit(":", 1)[1])


def busiest_per_sample(samples: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Of the hub's sockets seen at one poll, the one that carried the most (the flow's satellite
    leg; on the peer path the terminal's idle warm connections share its local port)."""
    best: dict[float, dict[str, Any]] = {}
    for s in samples:
        cur = best.get(s["t"])
        if cur is None or int(s.get("bytes_acked", 0)) > int(cur.get("bytes_acked", 0)):
            best[s["t"]] = s
    return [best[t] for t in sorted(best)]
