"""Everything one running app owns: settings, database, gateway client, live flow snapshot, collector."""

from __future__ import annotations

import asyncio
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from perigee_api.core.config import Settings
from perigee_api.core.db import Database
from perigee_api.core.observed import Running
from perigee_api.core.wakeups import KeyedWakeups
from perigee_control.client import GatewayClient

if TYPE_CHECKING:
    from perigee_api.services.collector import Collector
    from perigee_api.services.managed_poll import ManagedPoller


class LiveFlows:
    """The latest live-flow snapshot from the gateway, and the live streams waiting for the next one.

    The collector is its only writer (`publish`, `publish_error`, then `notify` on the event loop; a test holds
    every other module to that); readers take `snapshot`, and each SSE stream registers an event with `listen`
    and drops it with `unlisten`. `encoded` and `encoded_flows` are the readers' cache of one snapshot's JSON."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._listeners: set[asyncio.Event] = set()
        self.flows: list[dict[str, Any]] = []
        self.now: float = 0.0
        self.fetched_at: float = 0.0
        self.seq = 0
        self.error: str | None = None
        self.encoded: tuple[int, bytes] | None = None  # (seq, JSON) of the unfiltered answer
        # (seq, each flow's JSON): filtered answers join these instead of encoding again.
        self.encoded_flows: tuple[int, list[bytes]] | None = None

    def publish(self, flows: list[dict[str, Any]], now: float) -> None:
        """A new snapshot: the gateway's live flows at its time `now`."""
        with self._lock:
            self.flows = flows
            self.now = now
            self.fetched_at = time.time()
            self.seq += 1
            self.error = None

    def publish_error(self, message: str) -> None:
        """The gateway could not be read: the last flows stay, with the reason they are stale."""
        with self._lock:
            self.error = message
            self.encoded = None  # the cached answer carries the old error field

    def listen(self) -> asyncio.Event:
        ev = asyncio.Event()
        self._listeners.add(ev)
        return ev

    def unlisten(self, ev: asyncio.Event) -> None:
        self._listeners.discard(ev)

    def notify(self) -> None:
        """Wakes every stream (on the event loop's thread: asyncio events are not thread-safe)."""
        for ev in list(self._listeners):
            ev.set()

    def snapshot(self) -> tuple[list[dict[str, Any]], float, int]:
        with self._lock:
            return self.flows, self.now, self.seq


class StreamSlots:
    """Open live streams per user: a cap, so one account cannot hold the API's connections open by the thousand."""

    def __init__(self) -> None:
        self._open: dict[int, int] = {}
        self._lock = threading.Lock()

    def take(self, user_id: int, limit: int) -> bool:
        with self._lock:
            n = self._open.get(user_id, 0)
            if n >= limit:
                return False
            self._open[user_id] = n + 1
            return True

    def give_back(self, user_id: int) -> None:
        with self._lock:
            n = self._open.get(user_id, 0) - 1
            if n > 0:
                self._open[user_id] = n
            else:
                self._open.pop(user_id, None)

    def open_for(self, user_id: int) -> int:
        with self._lock:
            return self._open.get(user_id, 0)


@dataclass
class AppContext:
    settings: Settings
    db: Database
    gateway: GatewayClient
    live: LiveFlows = field(default_factory=LiveFlows)
    # What the gateway runs, as last checked (the collector keeps it fresh).
    running: Running = field(default_factory=Running)
    streams: StreamSlots = field(default_factory=StreamSlots)
    # Set by create_app right after the context is built (the collector needs the context).
    collector: Collector = field(init=False)
    # A terminal's poll of the hub that manages it (services/managed_poll.py), set with the collector.
    managed_poller: ManagedPoller = field(init=False)
    loop: asyncio.AbstractEventLoop | None = None
    started_at: float = field(default_factory=time.time)
    # The collector's latest per-second values: metric -> key -> value (what /sites shows as "now").
    latest: dict[str, dict[str, float]] = field(default_factory=dict)
    latest_at: float = 0.0
    # The gateway's counters as last read by the collector (None until the first reading).
    counters: dict[str, Any] | None = None
    # A new version for a managed terminal was made (services/managed_hub.py): that terminal's long poll (keyed by
    # its id) answers at once, no other.
    managed_versions: KeyedWakeups = field(default_factory=KeyedWakeups)
