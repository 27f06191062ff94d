"""The poll thread of a terminal managed from its hub (started with the app when managed_poll_enabled, like the
collector; tests drive `step` by hand or start it).

Not joined yet: it joins with the zero-touch file (settings.join_file) when there is one, retrying with a growing
pause while the hub cannot be reached. Joined: it long-polls the hub's GET /api/v1/managed/desired for the next
version after the newest one it has seen, brings it onto this terminal (services/managed_terminal.apply_version),
and reports the outcome with POST /api/v1/managed/report, again until the hub has it; without a version it reports
how it runs every managed_report_every_s. It is the one writer of the terminal's config besides the operators.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from perigee_api.core.context import AppContext
from perigee_api.core.errors import ApiError
from perigee_api.models import ManagedLink
from perigee_api.services import managed_terminal, pinned_https
from perigee_control.client import GatewayError

log = logging.getLogger("perigee_api.managed")

IDLE_S = 5.0  # not joined, no join file: how often to look again
BACKOFF_MIN_S = 2.0
BACKOFF_MAX_S = 120.0
ANSWER_SLACK_S = 15.0  # past the long poll's wait, how long the hub may take to answer


class ManagedPoller:
    def __init__(self, ctx: AppContext) -> None:
        self.ctx = ctx
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._backoff_s = 0.0
        self._next_report = 0.0
        # Why the zero-touch join did not happen yet (GET /managed/status shows it until joined).
        self.join_error: str | None = None

    # --- one step ----------------------------------------------------------------------------------------------

    def step(self) -> float:
        """One round: join, report, or one long poll and what it brought. The pause before the next one."""
        with self.ctx.db.session() as db:
            row = managed_terminal.link(db)
            if row is None:
                return self._zero_touch()
            if not row.outcome_reported or time.monotonic() >= self._next_report:
                return self._report(row.id)
            after = row.hub_version_id or 0
        wait = min(self.ctx.settings.managed_wait_s, max(0.0, self._next_report - time.monotonic()))
        try:
            answer = self._call(row, "GET", f"{managed_terminal.DESIRED}?after={after}&wait={wait:.1f}", None, wait)
        except pinned_https.HubError as exc:
            return self._failed(row.id, exc.message)
        if answer.status == 204:
            return self._contact(row.id)
        if answer.status != 200 or not isinstance(answer.body, dict):
            return self._failed(row.id, _refusal(answer))
        body: dict[str, Any] = answer.body
        version_id, sections = body.get("version_id"), body.get("sections")
        if not isinstance(version_id, int) or not isinstance(sections, dict):
            return self._failed(row.id, "the hub's answer to the long poll is not a version")
        with self.ctx.db.session() as db:
            outcome, error = managed_terminal.apply_version(
                self.ctx, db, version_id, sections, str(body.get("comment") or "")
            )
            row = db.get(ManagedLink, row.id)
            if row is not None:
                row.hub_version_id, row.outcome, row.outcome_error = version_id, outcome, error
                row.outcome_reported = False
                row.last_contact_at, row.last_error = time.time(), None
                db.commit()
        log.warning("hub version %d: %s%s", version_id, outcome, f" ({error})" if error else "")
        return 0.0

    def _call(self, row: ManagedLink, method: str, path: str, body: Any, wait: float) -> pinned_https.Answer:
        return pinned_https.request(
            row.hub_url,
            row.hub_pin,
            method,
            path,
            body,
            headers={"Authorization": f"Bearer {row.management_key}"},
            timeout_s=wait + ANSWER_SLACK_S,
        )

    def _report(self, link_id: int) -> float:
        with self.ctx.db.session() as db:
            row = db.get(ManagedLink, link_id)
            if row is None:
                return 0.0
            body = managed_terminal.report_body(self.ctx, db, row)
            sent_version = body["version_id"]
        try:
            answer = self._call(row, "POST", managed_terminal.REPORT, body, 0.0)
        except pinned_https.HubError as exc:
            return self._failed(link_id, exc.message)
        if answer.status != 204:
            return self._failed(link_id, _refusal(answer))
        self._next_report = time.monotonic() + self.ctx.settings.managed_report_every_s
        with self.ctx.db.session() as db:
            row = db.get(ManagedLink, link_id)
            if row is not None:
                if row.hub_version_id == sent_version:
                    row.outcome_reported = True
                row.last_contact_at, row.last_error = time.time(), None
                db.commit()
        self._backoff_s = 0.0
        return 0.0

    def _contact(self, link_id: int) -> float:
        with self.ctx.db.session() as db:
            row = db.get(ManagedLink, link_id)
            if row is not None:
                row.last_contact_at, row.last_error = time.time(), None
                db.commit()
        self._backoff_s = 0.0
        return 0.0

    def _failed(self, link_id: int, message: str) -> float:
        with self.ctx.db.session() as db:
            row = db.get(ManagedLink, link_id)
            if row is not None:
                row.last_error = message[:2000]
                db.commit()
        return self._pause(message)

    def _pause(self, message: str) -> float:
        self._backoff_s = min(BACKOFF_MAX_S, max(BACKOFF_MIN_S, self._backoff_s * 2))
        log.warning("managed from the hub: %s; again in %.0f s", message, self._backoff_s)
        return self._backoff_s

    def _zero_touch(self) -> float:
        path = self.ctx.settings.join_file
        if path is None or not path.is_file():
            return IDLE_S
        try:
            with self.ctx.db.session() as db:
                managed_terminal.join_file(self.ctx, db, path)
        except (ApiError, GatewayError) as exc:
            self.join_error = f"zero-touch join with {path}: {exc.message}"
            return self._pause(self.join_error)
        self.join_error = None
        self._backoff_s = 0.0
        return 0.0

    # --- the thread --------------------------------------------------------------------------------------------

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                pause = self.step()
            except Exception:  # keep polling whatever one round did
                log.exception("managed poll failed")
                pause = self._pause("the poll failed (see the log)")
            if pause:
                self._stop.wait(pause)

    def start(self) -> None:
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="perigee-managed-poll", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread:
            self._thread.join(timeout=5)


def _refusal(answer: pinned_https.Answer) -> str:
    err = answer.body.get("error") if isinstance(answer.body, dict) else None
    message = err.get("message") if isinstance(err, dict) else None
    if answer.status == 401:
        return f"the hub refused the management key: {message}"
    return f"the hub answered {answer.status}: {message}"
