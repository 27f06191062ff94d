"""The closed-flow history's filters, shared by the paged list, the CSV export and the top-talkers ranking."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from perigee_api.models import FlowRecord


@dataclass(frozen=True)
class FlowFilter:
    client: str | None = None  # client IP, exact
    server: str | None = None  # server IP, exact
    flow_class: str | None = None
    action: str | None = None
    path: str | None = None
    site: str | None = None
    since: float | None = None  # ended at or after (unix s)
    until: float | None = None  # ended before

    def conditions(self) -> list[Any]:
        conds: list[Any] = []
        if self.client:
            conds.append(FlowRecord.client_ip == self.client.strip())
        if self.server:
            conds.append(FlowRecord.server_ip == self.server.strip())
        if self.flow_class:
            conds.append(FlowRecord.flow_class == self.flow_class)
        if self.action:
            conds.append(FlowRecord.action == self.action)
        if self.path:
            conds.append(FlowRecord.path == self.path)
        if self.site:
            conds.append(FlowRecord.site == self.site)
        if self.since is not None:
            conds.append(FlowRecord.ended_at >= self.since)
        if self.until is not None:
            conds.append(FlowRecord.ended_at < self.until)
        return conds
