"""Entry point of the lab's background servers: `python -m satlab.servers http|bulk --port P`."""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys

from . import bulk, httpserver


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="satlab.servers")
    ap.add_argument("kind", choices=("http", "bulk"))
    ap.add_argument("--port", type=int, required=True)
    args = ap.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    serve = httpserver.serve if args.kind == "http" else bulk.serve
    try:
        asyncio.run(serve(args.port))
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
