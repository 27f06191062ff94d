"""Entry point of the lab's background servers: `python -m satlab.servers http|bulk --port P`,
`python -m satlab.servers web --port 443 --cert CHAIN --key KEY` (the HTTPS/HTTP3 origins)."""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys

from . import bulk, httpserver, webnames, webserver


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="satlab.servers")
    ap.add_argument("kind", choices=("http", "bulk", "web"))
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--cert", help="web: the certificate chain (PEM)")
    ap.add_argument("--key", help="web: its private key (PEM)")
    args = ap.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    if args.kind == "web":
        if not args.cert or not args.key or args.port != webnames.HTTPS_PORT:
            ap.error(f"web needs --cert, --key and --port {webnames.HTTPS_PORT}")
        main_task = webserver.serve(args.cert, args.key)
    else:
        main_task = (httpserver.serve if args.kind == "http" else bulk.serve)(args.port)
    try:
        asyncio.run(main_task)
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
