"""Many concurrent checked downloads from the bulk server: what the cluster tests and benchmark drive.

Each flow connects (from a chosen source port or an ephemeral one), sends `GET <size>`, reads to EOF and
compares the sha256 of what arrived with the stream's (satlab.content). It ends as `ok`, or with the
way it failed: `reset` (ECONNRESET: the clean failure), `short` (EOF before all bytes), `bad_sha256`,
`stalled` (no byte for --stall seconds: a hang), `refused`, `timeout` (connect). Times are wall-clock
seconds (time.time()), so a test can set them beside the moment it caused a fault.

`python -m satlab.cluster.flowcheck --server 10.71.3.10 --flows 300 --size 65536` prints one JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import sys
import time
from typing import Any

from ..content import iter_stream


def expected_sha256(size: int) -> str:
    h = hashlib.sha256()
    for part in iter_stream(0, size):
        h.update(part)
    return h.hexdigest()


async def one_flow(server: str, port: int, size: int, sha: str, bind: tuple[str, int] | None,
                   stall_s: float, connect_timeout_s: float, rate: int = 0) -> dict[str, Any]:
    """One checked download; `rate` (bytes/s, 0: as fast as it can) asks the server to pace it, so the
    flow stays open without filling the link."""
    rec: dict[str, Any] = {"sport": bind[1] if bind else None, "t_start": time.time(), "bytes": 0}
    try:
        reader, writer = await asyncio.wait_for(
            asyncio.open_connection(server, port, local_addr=bind), connect_timeout_s)
    except TimeoutError:
        return {**rec, "result": "timeout", "t_end": time.time()}
    except ConnectionRefusedError:
        return {**rec, "result": "refused", "t_end": time.time()}
    except ConnectionResetError:
        return {**rec, "result": "reset", "t_end": time.time()}
    except OSError as e:
        return {**rec, "result": f"error: {e}", "t_end": time.time()}
    rec["sport"] = writer.get_extra_info("sockname")[1]
    rec["t_connect"] = time.time()
    h, got, result = hashlib.sha256(), 0, "ok"
    try:
        writer.write((f"GET {size} {rate}\n" if rate > 0 else f"GET {size}\n").encode())
        await writer.drain()
        while True:
            data = await asyncio.wait_for(reader.read(262144), stall_s)
            if not data:
                break
            h.update(data)
            got += len(data)
    except TimeoutError:
        result = "stalled"
    except ConnectionResetError:
        result = "reset"
    except OSError as e:
        result = f"error: {e}"
    finally:
        if result == "ok":
            writer.close()
        else:
            writer.transport.abort()
    if result == "ok":
        result = "short" if got != size else ("ok" if h.hexdigest() == sha else "bad_sha256")
    return {**rec, "result": result, "bytes": got, "t_end": time.time()}


async def run_flows(server: str, port: int, size: int, flows: int, ports: list[int], bind_addr: str,
                    start_interval_s: float, stall_s: float, connect_timeout_s: float,
                    rate: int = 0) -> list[dict[str, Any]]:
    sha = expected_sha256(size)
    tasks = []
    count = len(ports) if ports else flows
    for i in range(count):
        bind = (bind_addr, ports[i]) if ports else None
        tasks.append(asyncio.create_task(one_flow(server, port, size, sha, bind, stall_s, connect_timeout_s,
                                                       rate)))
        if start_interval_s > 0:
            await asyncio.sleep(start_interval_s)
    return list(await asyncio.gather(*tasks))


def summary(records: list[dict[str, Any]]) -> dict[str, int]:
    out: dict[str, int] = {}
    for r in records:
        key = r["result"] if not str(r["result"]).startswith("error") else "error"
        out[key] = out.get(key, 0) + 1
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="satlab.cluster.flowcheck")
    ap.add_argument("--server", default="10.71.3.10")
    ap.add_argument("--port", type=int, default=5001)
    ap.add_argument("--size", type=int, default=65536)
    ap.add_argument("--flows", type=int, default=100)
    ap.add_argument("--ports", default="", help="comma-separated source ports (one flow each; overrides --flows)")
    ap.add_argument("--bind", default="10.71.1.10", help="source address when --ports is given")
    ap.add_argument("--start-interval", type=float, default=0.0, help="seconds between flow starts")
    ap.add_argument("--stall", type=float, default=20.0, help="seconds without a byte that count as a hang")
    ap.add_argument("--connect-timeout", type=float, default=15.0)
    ap.add_argument("--rate", type=int, default=0,
                    help="bytes/s the server paces each flow at (0: unpaced): long flows that leave the link room")
    a = ap.parse_args(argv)
    ports = [int(p) for p in a.ports.split(",") if p]
    t0 = time.time()
    recs = asyncio.run(run_flows(a.server, a.port, a.size, a.flows, ports, a.bind, a.start_interval,
                                 a.stall, a.connect_timeout, a.rate))
    print(json.dumps({"t_start": t0, "t_end": time.time(), "summary": summary(recs), "flows": recs}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
