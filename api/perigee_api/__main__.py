"""`python -m perigee_api`: uvicorn on 127.0.0.1:8000 or a Unix socket (PERIGEE_LISTEN=unix:/path)."""

from __future__ import annotations

import logging
import os
import sys

import uvicorn

from perigee_api.core.config import get_settings
from perigee_api.main import create_app


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    settings = get_settings()
    if os.geteuid() == 0 and not settings.allow_root:
        sys.exit("perigee-api runs as an unprivileged user; set PERIGEE_ALLOW_ROOT=1 only for development")
    os.umask(0o007)  # data files and the Unix socket: owner and group only
    app = create_app(settings)
    # uvicorn's proxy_headers stay off: it would take the client address from X-Forwarded-For. The API reads
    # nginx's X-Real-IP itself, and only from the front proxy (core/client_address.py).
    if settings.listen.startswith("unix:"):
        uvicorn.run(app, uds=settings.listen[5:], proxy_headers=False, log_level="info")
    else:
        host, _, port = settings.listen.rpartition(":")
        uvicorn.run(app, host=host or "127.0.0.1", port=int(port), proxy_headers=False, log_level="info")


if __name__ == "__main__":
    main()
