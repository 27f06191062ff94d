"""Background collector: polls the gateway every interval, keeps the live snapshot, stores history.

It is the only writer of the live snapshot (`ctx.live`): readers that find it stale ask it to read the gateway
now (`refresh_live_if_stale`) instead of reading the gateway themselves."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from sqlalchemy.exc import OperationalError

from perigee_api.core.context import AppContext
from perigee_api.core.storage import is_storage_full
from perigee_api.services import auth, running, stats
from perigee_control.client import GatewayError

log = logging.getLogger("perigee_api.collector")

# How often the collector asks which config the gateway runs (and records it as a version).
RUNNING_EVERY_S = 5.0


# A live snapshot older than this many collector intervals is stale: the collector is stopped or behind, and a
# reader's request reads the gateway at once.
LIVE_STALE_INTERVALS = 3

# While the disk under the database is full the live snapshot stays current every tick, but the database is
# tried again only after a pause that doubles from 1 s up to this (short: writes resume within seconds of space
# being freed), and closed flows wait in memory, at most PENDING_FLOWS_MAX (the oldest are dropped beyond).
WRITE_BACKOFF_MAX_S = 8.0
PENDING_FLOWS_MAX = 20_000

# How long after a whole second the gateway's per-second samples are in (they take a few ms).
READ_AFTER_S = 0.4


def next_reading_in(now: float, interval: float) -> float:
    """Seconds until the next reading: READ_AFTER_S past the next multiple of `interval` (whole seconds when
    interval is 1 s)."""
    nxt = (now - READ_AFTER_S) // interval * interval + interval + READ_AFTER_S
    return max(0.0, nxt - now)


class Collector:
    def __init__(self, ctx: AppContext) -> None:
        self.ctx = ctx
        self.builder = stats.SampleBuilder()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._last_maintenance = 0.0
        self._running_lock = threading.Lock()
        # Held while reading the gateway's live flows and publishing them: snapshots are published in the order
        # they were read, and readers that ask at once share one read.
        self._live_lock = threading.Lock()
        self._live_read_at = 0.0  # time.monotonic() when the last read of the live flows ended (either way)
        self.ticks = 0
        self.last_error: str | None = None
        self.pending_flows: list[dict[str, Any]] = []  # closed flows not yet stored (the database was full)
        self.dropped_flows = 0  # closed flows lost because PENDING_FLOWS_MAX were already waiting
        self._full_since: float | None = None  # the first refused write of the current outage
        self._backoff_s = 0.0
        self._retry_at = 0.0

    def _writable(self, now: float) -> bool:
        return self._full_since is None or now >= self._retry_at

    def _storage_full(self, now: float, what: str) -> None:
        """A write found the disk full: log the first of the outage, then retry after a growing pause."""
        if self._full_since is None:
            self._full_since = now
            log.warning("database disk full: %s not stored; retrying with back-off (live view continues)", what)
        self._backoff_s = min(WRITE_BACKOFF_MAX_S, max(1.0, self._backoff_s * 2))
        self._retry_at = now + self._backoff_s
        self.last_error = f"database disk full since {time.strftime('%H:%M:%S', time.gmtime(self._full_since))} UTC"

    def _try_write(self, now: float, what: str, write: Callable[[], object]) -> bool:
        """Runs `write` unless the disk was full and its retry is not due yet. False when it did not run or found
        the disk full (the outage is noted: `what` was not stored); any other database error propagates."""
        if not self._writable(now):
            return False
        try:
            write()
        except OperationalError as exc:
            if not is_storage_full(exc):
                raise
            self._storage_full(now, what)
            return False
        return True

    def _stored(self, now: float) -> None:
        if self._full_since is not None:
            log.warning(
                "database writable again after %.0f s; %d closed flows lost meanwhile",
                now - self._full_since,
                self.dropped_flows,
            )
        self._full_since, self._backoff_s, self.dropped_flows = None, 0.0, 0

    def _hold(self, closed: list[dict[str, Any]]) -> None:
        self.pending_flows.extend(closed)
        over = len(self.pending_flows) - PENDING_FLOWS_MAX
        if over > 0:
            del self.pending_flows[:over]
            self.dropped_flows += over

    def sync_running(self) -> running.Running:
        """Ask the gateway which config it runs; import it as a version when it is none the API knows."""
        with self._running_lock, self.ctx.db.session() as db:
            state = running.reconcile(db, self.ctx.gateway)
            db.commit()
            self.ctx.running = state
            return state

    def tick(self, now: float | None = None) -> None:
        """One poll: live flows, closed flows, counters, cache and DNS stats → snapshot, history, samples; every
        few seconds, the config the gateway runs."""
        now = time.time() if now is None else now
        if time.time() - self.ctx.running.checked_at >= RUNNING_EVERY_S:
            self._try_write(now, "the running config's version", self.sync_running)
        gw = self.ctx.gateway
        try:
            with self._live_lock:
                self._read_live(now)
            closed: list[dict[str, Any]] = gw.json.collect_flows().get("flows", [])
            counters = gw.json.counters()
        except GatewayError as exc:
            self.last_error = exc.message
            self.ctx.live.publish_error(exc.message)
            if now - self._last_maintenance >= 60 and self._writable(now):
                self._try_write(now, "housekeeping", lambda: self._housekeeping(now))
                self._last_maintenance = now
            return
        try:
            cache = gw.json.cache_stats()
        except GatewayError:
            cache = None  # the cache is optional
        try:
            dns = gw.json.dns_stats()
        except GatewayError:
            dns = None  # so is the resolver (and an older gateway has no /v1/dns)
        values = self.builder.build(now, self.ctx.live.flows, counters, cache, dns)
        latest: dict[str, dict[str, float]] = {}
        for metric, key, value in values:
            latest.setdefault(metric, {})[key] = value
        self.ctx.latest, self.ctx.latest_at = latest, now
        self.ctx.counters = counters
        self._hold(closed)
        self.ticks += 1
        self._notify()

        def store() -> None:
            with self.ctx.db.session() as db:
                stats.store_closed_flows(db, self.pending_flows, now)
                stats.store_samples(db, int(now), values)
                if now - self._last_maintenance >= 60:
                    stats.rollup(db, now)
                    stats.enforce_retention(db, self.ctx.settings, now)
                    auth.housekeeping(db, self.ctx.settings, now)
                    self._last_maintenance = now
                db.commit()

        if not self._try_write(now, "flow history and samples", store):
            return  # this second's samples are a gap in the history; its closed flows wait
        self.pending_flows = []
        self._stored(now)
        self.last_error = None

    def _housekeeping(self, now: float) -> None:
        with self.ctx.db.session() as db:
            auth.housekeeping(db, self.ctx.settings, now)
            db.commit()

    def refresh_live_if_stale(self) -> None:
        """For readers of the live snapshot: when it is stale (the collector is stopped or behind), read the
        gateway's live flows now and wake the live streams. An unreachable gateway leaves the last flows with
        the error. Readers that ask while a read is under way take its result instead of reading again."""
        if self._live_is_fresh():
            return
        asked_at = time.monotonic()
        with self._live_lock:
            if self._live_read_at >= asked_at or self._live_is_fresh():
                return  # another reader's read ended after this one asked
            try:
                self._read_live(time.time())
            except GatewayError as exc:
                self.ctx.live.publish_error(exc.message)
        self._notify()

    def _live_is_fresh(self) -> bool:
        max_age = LIVE_STALE_INTERVALS * self.ctx.settings.collect_interval_s
        return time.time() - self.ctx.live.fetched_at <= max_age

    def _read_live(self, now: float) -> None:
        """Reads the gateway's live flows into a new snapshot (the caller holds `_live_lock`); a GatewayError
        leaves the snapshot to the caller."""
        try:
            snap = self.ctx.gateway.json.flows("live")
        finally:
            self._live_read_at = time.monotonic()
        self.ctx.live.publish(list(snap.get("flows", [])), float(snap.get("now", now)))

    def _notify(self) -> None:
        loop = self.ctx.loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self.ctx.live.notify)

    def _run(self) -> None:
        interval = self.ctx.settings.collect_interval_s
        while not self._stop.is_set():
            # The gateway samples on whole seconds (docs/splitter.md, *Rates*): read it a little after one, so every
            # reading holds exactly one more sample and each second's rates cover one whole second.
            self._stop.wait(next_reading_in(time.time(), interval))
            if self._stop.is_set():
                break
            try:
                self.tick(now=float(round(time.time() - READ_AFTER_S)) if interval == 1.0 else None)
            except Exception:  # keep collecting whatever one tick did
                log.exception("collector tick failed")

    def start(self) -> None:
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="perigee-collector", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread:
            self._thread.join(timeout=5)
