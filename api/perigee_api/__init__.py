"""Perigee control plane: FastAPI + SQLite, talks to the gateway daemon over a Unix socket."""

__version__ = "0.1.0"
