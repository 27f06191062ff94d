"""Runs the fake gateway (perigee_fakes) on a Unix socket with moving synthetic traffic, for the browser suite.

    .venv/bin/python webui/e2e/fake_gateway_server.py /tmp/x/control.sock [flows]

Every second the flows' rates and the counters change, so the dashboard has something live to show.
PERIGEE_E2E_DIAL=sha256:... names a terminal identity that keeps dialing this hub's peer path (5 idle
connections and a live flow once enrolled; refused otherwise). PERIGEE_E2E_BOOT=factory starts it on the packaged
boot config (debian/conf/gateway.json: what a new box from the package, the image or the VM runs) instead of a lab
hub's config; PERIGEE_E2E_ROLE=terminal on a lab terminal's. Stops on SIGTERM/SIGINT.
"""

from __future__ import annotations

import json
import math
import os
import signal
import sys
import threading
import time
from pathlib import Path

from perigee_fakes.fake_gateway import FakeGateway, make_flow
from perigee_fakes.lab_config import lab_config

BOOT_CONFIG = Path(__file__).resolve().parents[2] / "debian" / "conf" / "gateway.json"


def flows_at(tick: int, count: int) -> list[dict]:
    now = time.time()
    out = []
    for i in range(count):
        action = ("accelerate", "accelerate", "cache", "bypass")[i % 4]
        cls = {"accelerate": "bulk" if i % 8 == 0 else "web", "cache": "web-cache", "bypass": "vpn"}[action]
        wave = 1 + 0.5 * math.sin((tick + i) / 5)
        # The satellite leg: the default (hybla_ld), BBR for the bulk class, BBR switched to (a plain-hybla
        # default on a short path).
        cc, reason = ("bbr", "class") if cls == "bulk" else ("bbr", "automatic") if i % 10 == 3 else ("hybla_ld", "default")
        down = 50_000 + 10_000 * i * (tick + 1)
        f = make_flow(
            i + 1,
            cls=cls,
            action=action,
            client=f"10.71.1.{10 + i % 2}:{40000 + i}",
            server=f"10.71.3.10:{80 if i % 2 else 5001}",
            now=now,
            bytes_up=1000 + 200 * i + 50 * tick,
            bytes_down=down,
            rate_down_bps=5e4 * wave * (1 + i % 7),
            # Most accelerated flows take the peer path (a terminal with its hub), a few go direct.
            path="peer" if action == "accelerate" and i % 5 else "direct",
            cc=cc,
            cc_reason=reason,
            # A rain fade comes and goes: each second the leg repairs 0 to 3 % of what it sent (1.5 % × (1 + sin));
            # summed over the seconds so far, as a counter only grows.
            retransmitted=int(10_000 * i / 1448 * 0.015 * (tick + 1 + 20 * (1 - math.cos((tick + 1) / 20)))),
        )
        sat = f["legs"]["client"]
        sat["srtt_us"] = int(600_000 + 40_000 * math.sin((tick + i) / 3))
        sat["cwnd"] = int(20 + (tick * 3 + i) % 80)
        sat["delivery_rate_bps"] = int(f["rate_down_bps"])
        f["legs"]["server"]["srtt_us"] = int(20_000 + 3_000 * math.cos((tick + i) / 4))
        out.append(f)
    return out


def satellite_counters(c: dict, flows: list[dict]) -> None:
    """by_congestion_control and by_cc_reason as the gateway keeps them: the live flows' satellite legs, summed
    (cumulative: the flows' own counts only grow)."""
    for field, key in (("by_congestion_control", "cc"), ("by_cc_reason", "cc_reason")):
        totals: dict[str, dict] = {}
        for f in flows:
            leg = f["satellite"]
            t = totals.setdefault(leg[key], {"bytes_up": 0, "bytes_down": 0, "flows": 0, "segments": 0,
                                             "retrans_segments": 0})
            t["flows"] += 1
            t["bytes_up"] += f["bytes_up"]
            t["bytes_down"] += f["bytes_down"]
            t["segments"] += leg["segments_sent"]
            t["retrans_segments"] += leg["segments_retransmitted"]
        c[field] = totals


def main() -> None:
    sock = Path(sys.argv[1])
    count = int(sys.argv[2]) if len(sys.argv) > 2 else 120
    # A box started with a config of its own, or a new box on the factory config (e2e/first-boot.mjs).
    if os.environ.get("PERIGEE_E2E_BOOT") == "factory":
        running = json.loads(BOOT_CONFIG.read_text())
    else:
        # PERIGEE_E2E_ROLE=terminal: a lab terminal's config (e2e/managed.mjs runs a hub and a terminal).
        role = "terminal" if os.environ.get("PERIGEE_E2E_ROLE") == "terminal" else "hub"
        running = lab_config(role).to_json() | {"revision": f"fake-{role}"}
    gw = FakeGateway(sock, running=running).start()
    if os.environ.get("PERIGEE_E2E_DIAL"):
        gw.peer.dial(os.environ["PERIGEE_E2E_DIAL"], idle=5, live=1)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    tick = 0
    totals = {"accelerate": 0, "cache": 0, "bypass": 0}
    print(f"fake gateway on {sock} with {count} flows", flush=True)
    while not stop.is_set():
        flows = flows_at(tick, count)
        gw.live_flows = flows
        for f in flows:
            totals[f["action"]] += int(f["rate_down_bps"] / 8)
        # Only the figures that move; the rest keeps the fake's complete (schema-checked) defaults.
        c = gw.counters
        c.update(flows_live=len(flows), flows_total=len(flows) + tick, bytes_up=tick * 10_000,
                 bytes_down=sum(totals.values()))
        c["by_action"]["accelerate"].update(bytes_up=tick * 5_000, bytes_down=totals["accelerate"], flows=count // 2)
        c["by_action"]["cache"].update(bytes_up=tick * 1_000, bytes_down=totals["cache"], flows=count // 4)
        c["by_action"]["bypass"].update(packets=tick * 100, bytes=totals["bypass"])
        # The satellite interface carries the intercepted traffic and the bypassed traffic beside it.
        split_down, split_up = sum(totals.values()) - totals["bypass"], tick * 15_000
        c["link"].update(forward_bytes=split_down, return_bytes=split_up)
        c["link"]["interface"] = {"name": "sat0", "forward_bytes": split_down + totals["bypass"],
                                  "return_bytes": split_up * 4, "forward_packets": tick * 900, "return_packets": tick * 300,
                                  "forward_dropped": 0, "return_dropped": tick // 10, "errors": 0}
        ifaces = [("sat0", split_up * 4, split_down + totals["bypass"]), ("lan0", split_down, split_up)]
        gw.host.update(cpu_busy_seconds=tick * 0.35, cpu_idle_seconds=tick * 1.65, load_1m=0.7, load_5m=0.6, load_15m=0.5,
                       interfaces=[{"name": n, "rx_bytes": rx, "tx_bytes": tx, "rx_packets": tick * 400,
                                    "tx_packets": tick * 500, "rx_errors": 0, "tx_errors": 0, "rx_dropped": 0,
                                    "tx_dropped": 0} for n, rx, tx in ifaces])
        gw.services.update(squid={"enabled": True, "serving": True, "problem": None},
                           resolver={"enabled": True, "serving": True, "problem": None})
        gw.cache_stats.update(enabled=True, running=True, requests=10 * tick, hits=6 * tick, misses=4 * tick,
                              bytes_from_cache=3_000_000 * tick, store_entries=40 + tick)
        satellite_counters(c, flows)
        tick += 1
        stop.wait(1.0)
    gw.stop()


if __name__ == "__main__":
    main()
