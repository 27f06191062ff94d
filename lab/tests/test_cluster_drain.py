"""The drain's stop condition, without a lab: the gateway is stopped only once "no bucket and no live flow"
has held for the settle time. A flow accepted just before its bucket moved away is counted by the gateway a
tick later, and a gateway that does not answer has not said it has no flows; stopping on either cuts a flow."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from satlab.cluster import members
from satlab.topology import Topology

TOPO = Topology("pd-", hub_gateways=3)


@pytest.fixture
def stopped(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    events: list[str] = []
    monkeypatch.setattr(members.frr, "configure", lambda *a: events.append("graceful-shutdown"))
    monkeypatch.setattr(members.fabric, "stop_announcer", lambda *a: events.append("announcer stopped"))
    monkeypatch.setattr(members.gateway, "stop_one", lambda *a: events.append("gateway stopped"))
    monkeypatch.setattr(members.frr, "stop", lambda *a: events.append("frr stopped"))
    monkeypatch.setattr(members, "held_buckets", lambda *a: 0)
    yield events


def answers(monkeypatch: pytest.MonkeyPatch, flows: list[Any], events: list[str]) -> None:
    """The gateway's live-flow count, one answer per poll (the last repeats); each poll is recorded."""
    seq = list(flows)

    def live(*_: Any) -> Any:
        value = seq.pop(0) if len(seq) > 1 else seq[0]
        events.append(f"flows={value}")
        return value

    monkeypatch.setattr(members, "live_flows", live)


def polls_before_stop(events: list[str]) -> list[str]:
    return [e for e in events[: events.index("gateway stopped")] if e.startswith("flows=")]


def test_a_flow_counted_a_tick_late_is_waited_for(monkeypatch: pytest.MonkeyPatch, stopped: list[str]) -> None:
    # At the start 3 flows; 0 once, then the late count of a flow accepted just before (1), then 0 for good.
    answers(monkeypatch, [3, 0, 1, 1, 0], stopped)
    members.drain(TOPO, "gw1", timeout=10, poll=0.01, settle=0.1)
    seen = polls_before_stop(stopped)
    assert "flows=1" in seen, "stopped on the first zero, before the late-counted flow ended"
    assert seen[-1] == "flows=0" and len(seen) > 5  # the zero held over the settle time


def test_no_answer_is_not_no_flows(monkeypatch: pytest.MonkeyPatch, stopped: list[str]) -> None:
    answers(monkeypatch, [2, None], stopped)
    with pytest.raises(members.MemberError, match="None flows"):
        members.drain(TOPO, "gw1", timeout=0.3, poll=0.01, settle=0.05)
    assert "gateway stopped" not in stopped


def test_a_quiet_gateway_is_stopped_after_the_settle_time(monkeypatch: pytest.MonkeyPatch, stopped: list[str]) -> None:
    answers(monkeypatch, [0], stopped)
    r = members.drain(TOPO, "gw1", timeout=10, poll=0.01, settle=0.1)
    assert r.drained_s >= 0.1
    assert stopped[-3:] == ["announcer stopped", "gateway stopped", "frr stopped"]
