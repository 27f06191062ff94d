"""The peer path's checks beside its latencies (bench/scenarios/peer_path.py): duplicates under bit
errors (POSTs to a server that counts each body), what a capture of the satellite link shows, and
the encrypted hop's cost on zero-delay veth against the benchmark-only plaintext build."""

from __future__ import annotations

import json
import os
from typing import Any

from bench import lab, peerveth, procs
from bench.tools import gwproc
from satlab.capture import ipv4_in, sniff

COUNT_PORT = 9200
SERVER = "10.71.3.10"
CLIENT = "10.71.1.10"
MARKER = "PERIGEE-BENCH-MARKER-0d15ea5e"
TRANSFER_PORT = 5301


def exactly_once(lb: lab.Lab, count: int, concurrency: int, first: int) -> dict[str, Any]:
    """`count` POSTs, each on its own connection, `concurrency` at a time; how many bodies the
    server received twice, and how the POSTs ended."""
    serve = lb.exec_argv("server", procs.tool_argv("satlab.countserver", SERVER, str(COUNT_PORT)))
    with procs.Background(serve) as server:
        server.wait_line(json.dumps({"ready": True}), timeout=15)
        load = lb.exec_argv("client", procs.tool_argv(
            "satlab.postload", SERVER, str(COUNT_PORT), "--count", str(count), "--concurrency", str(concurrency),
            "--first", str(first)))  # fmt: skip
        result = json.loads(procs.run(load, timeout=3600).stdout.strip().splitlines()[-1])
        code = f"import urllib.request; print(urllib.request.urlopen('http://{SERVER}:{COUNT_PORT}/counts').read().decode())"
        seen: dict[str, int] = json.loads(
            procs.run(lb.exec_argv("server", [procs.PYTHON, "-c", code]), timeout=30).stdout
        )
    return {
        "posts": count,
        "duplicates": sum(1 for n in seen.values() if n > 1),
        "answered": len(result["answered"]),
        "failed": len(result["failed"]),
        "received": len(seen),
    }


def capture(lb: lab.Lab, path: str) -> dict[str, Any]:
    """A capture of the satellite link while one POST with a marker crosses: whether the marker or
    the client's or server's address appears in it."""
    serve = lb.exec_argv("server", procs.tool_argv("satlab.countserver", SERVER, str(COUNT_PORT)))

    def post() -> bool:
        with procs.Background(serve) as server:
            server.wait_line(json.dumps({"ready": True}), timeout=15)
            argv = lb.exec_argv("client", procs.tool_argv(
                "satlab.postload", SERVER, str(COUNT_PORT), "--body", "4000", "--marker", MARKER))  # fmt: skip
            return bool(json.loads(procs.run(argv, timeout=60).stdout.strip().splitlines()[-1])["answered"])

    data, answered = sniff(lb.exec_argv, f"{path}.pcap", post)
    addresses = [ip for ip in (CLIENT, SERVER) if ipv4_in(data, ip)]
    return {"answered": answered, "bytes": len(data), "marker": MARKER.encode() in data, "addresses": addresses}


def _download(vp: peerveth.PeerVethPath, size: int) -> dict[str, Any]:
    serve = vp.exec_argv("server", procs.tool_argv(
        "bench.tools.flow", "serve", "--bind", peerveth.SERVER_V4, "--port", str(TRANSFER_PORT),
        "--bytes", str(size), "--timeout", "120"))  # fmt: skip
    fetch = vp.exec_argv("client", procs.tool_argv(
        "bench.tools.flow", "fetch", "--connect", peerveth.SERVER_V4, "--port", str(TRANSFER_PORT),
        "--bytes", str(size), "--timeout", "120"))  # fmt: skip
    with procs.Background(serve) as server:
        server.wait_line("LISTENING", timeout=15)
        got = procs.run(fetch, timeout=150, check=False)
        server.result(timeout=20)
    fetched = json.loads(got.stdout.strip().splitlines()[-1])
    if fetched.get("error") or int(fetched["bytes"]) < size:
        raise procs.ToolError(f"download incomplete: {fetched.get('bytes')} of {size}: {fetched.get('error')}")
    return {"bytes": int(fetched["bytes"]), "seconds": fetched["t_done"] - fetched["t_connected"]}


def veth_cost(binary: str, size: int, reps: int, workers: int, prefix: str = lab.PREFIX) -> dict[str, Any]:
    """Downloads server -> client across both gateways (the peer path) on zero-delay veth, daemons
    from `binary`: the median rate and both daemons' CPU seconds per GB moved."""
    hz = os.sysconf("SC_CLK_TCK")
    rates: list[float] = []
    cpu_s = 0.0
    moved = 0
    with peerveth.path(prefix) as vp, peerveth.gateways(vp, binary, workers) as gws:
        for _ in range(reps):
            pids = [p for d in gws.daemons.values() for p in d.pids]
            t0 = gwproc.snapshot(pids).cpu_ticks
            tr = _download(vp, size)
            cpu_s += (gwproc.snapshot(pids).cpu_ticks - t0) / hz
            moved += tr["bytes"]
            rates.append(tr["bytes"] / tr["seconds"])
        peer = gws.sockets["terminal"]
        flows = procs.run(
            [str(procs.REPO / "bin" / "perigee"), "flows", "--json", "--state", "all", "--control-socket", peer],
            timeout=30,
        ).stdout
    on_peer = sum(1 for f in json.loads(flows)["flows"] if f["path"] == "peer")
    rates.sort()
    return {
        "rate_Bps": rates[len(rates) // 2],
        "rates_Bps": rates,
        "cpu_s_per_gb": cpu_s / (moved / 1e9),
        "peer_flows": on_peer,
    }
