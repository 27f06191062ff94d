"""Long polls that wait for a change of one key: a hub's managed terminals, each waiting for its next version
(routes/managed.py). Waking one key wakes only the polls of that key, so a version made for one terminal costs one
look in the database, not one per waiting terminal.

A poll registers (`listen`) before it looks, so a change made between its look and its wait still wakes it. An
entry lives only while its request waits: `listen`'s exit drops it, and a key without waiters leaves the map, so
memory follows the polls open now. A key holds at most MAX_PER_KEY of them: one more releases the oldest (a
terminal re-polling after a lost connection leaves its old request behind until that times out)."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Hashable, Iterator
from contextlib import contextmanager

MAX_PER_KEY = 4


class Waiter:
    """One poll's wait, on its own event loop (the thread that wakes it may be any)."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.event = asyncio.Event()
        self.released = False  # a newer poll of the same key took its place: answer now

    async def wait(self, timeout_s: float) -> bool:
        """True when woken (or released) within `timeout_s`; the wake is consumed."""
        try:
            await asyncio.wait_for(self.event.wait(), timeout=max(0.0, timeout_s))
        except TimeoutError:
            return False
        self.event.clear()
        return True

    def set(self) -> None:
        with contextlib.suppress(RuntimeError):  # its loop closed meanwhile: nobody waits there any more
            self.loop.call_soon_threadsafe(self.event.set)


class KeyedWakeups:
    def __init__(self, max_per_key: int = MAX_PER_KEY) -> None:
        self._lock = threading.Lock()
        # Insertion-ordered: the first waiter of a key is its oldest.
        self._waiting: dict[Hashable, dict[Waiter, None]] = {}
        self._max = max_per_key
        self.woken = 0  # polls woken so far (what a wake cost; tests and metrics read it)

    @contextmanager
    def listen(self, key: Hashable) -> Iterator[Waiter]:
        """Registers a poll of `key` on the running loop, for as long as the block runs."""
        waiter = Waiter(asyncio.get_running_loop())
        with self._lock:
            waiters = self._waiting.setdefault(key, {})
            waiters[waiter] = None
            oldest = next(iter(waiters)) if len(waiters) > self._max else None
            if oldest is not None:
                del waiters[oldest]
        if oldest is not None:
            oldest.released = True
            oldest.set()
        try:
            yield waiter
        finally:
            with self._lock:
                mine = self._waiting.get(key)
                if mine is not None:
                    mine.pop(waiter, None)
                    if not mine:
                        del self._waiting[key]

    def wake(self, key: Hashable) -> int:
        """Wakes the polls of `key` (from any thread); how many."""
        with self._lock:
            waiting = list(self._waiting.get(key, ()))
            self.woken += len(waiting)
        for waiter in waiting:
            waiter.set()
        return len(waiting)

    def waiting(self, key: Hashable | None = None) -> int:
        """Polls waiting now: of `key`, or of every key."""
        with self._lock:
            if key is not None:
                return len(self._waiting.get(key, ()))
            return sum(len(w) for w in self._waiting.values())

    def keys(self) -> int:
        """Keys with a poll waiting now (what the map holds)."""
        with self._lock:
            return len(self._waiting)
