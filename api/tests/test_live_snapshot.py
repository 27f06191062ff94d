"""The live-flow snapshot has one writer, the collector: routes and everything else only read it, and ask the
collector for a fresh one when it is stale."""

from __future__ import annotations

import ast
import asyncio
import os
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from perigee_api.core.context import AppContext, LiveFlows
from perigee_fakes.fake_gateway import FakeGateway, make_flow
from satlab.testing import HUNG_S

ROOT = Path(__file__).resolve().parents[2]
COLLECTOR = ROOT / "api" / "perigee_api" / "services" / "collector.py"
WRITES = {"publish", "publish_error"}
NOT_SOURCE = {".git", ".venv", "node_modules", "target", "__pycache__", "dist", "debian"}


def python_files() -> Iterator[Path]:
    """The project's Python source: what git tracks or would track (build output such as a package's staging
    tree under debian/ holds copies of the collector). Without git, every file outside the usual output dirs."""
    try:
        listed = subprocess.run(
            ["git", "-C", str(ROOT), "ls-files", "-z", "--cached", "--others", "--exclude-standard", "--", "*.py"],
            capture_output=True,
            check=True,
            timeout=30,
        )
    except (OSError, subprocess.SubprocessError):
        for top, dirs, files in os.walk(ROOT):
            dirs[:] = [d for d in dirs if d not in NOT_SOURCE]
            yield from (Path(top) / f for f in files if f.endswith(".py"))
        return
    yield from (ROOT / name for name in listed.stdout.decode().split("\0") if name and (ROOT / name).is_file())


def write_calls(path: Path) -> list[str]:
    """Every call of a snapshot write method in `path` (by name: the names are the store's alone)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    return [
        f"{path.relative_to(ROOT)}:{node.lineno}: .{node.func.attr}(...)"
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in WRITES
    ]


def test_only_the_collector_writes_the_live_snapshot() -> None:
    assert set(vars(LiveFlows)) >= WRITES, "the store's write methods were renamed: update WRITES"
    scanned = list(python_files())
    assert COLLECTOR in scanned and len(scanned) > 50
    assert write_calls(COLLECTOR), "the collector no longer publishes snapshots"
    elsewhere = [call for path in scanned if path != COLLECTOR for call in write_calls(path)]
    assert not elsewhere, "only services/collector.py may write the live snapshot; ask it instead:\n" + "\n".join(
        elsewhere
    )


def test_a_fresh_snapshot_is_not_read_again(app: FastAPI, fake_gw: FakeGateway, viewer: TestClient) -> None:
    collector = app.state.ctx.collector
    fake_gw.live_flows = [make_flow(1)]
    collector.tick()
    fake_gw.live_flows = [make_flow(2)]  # not read: the collector's snapshot is current
    flows = viewer.get("/api/v1/flows").json()["flows"]
    assert [f["id"] for f in flows] == [1]


def test_a_stale_snapshot_is_refreshed_by_the_collector_and_wakes_streams(app: FastAPI, fake_gw: FakeGateway) -> None:
    ctx = app.state.ctx
    fake_gw.live_flows = [make_flow(5)]

    async def scenario() -> tuple[int, bool]:
        ctx.loop = asyncio.get_running_loop()
        woken = ctx.live.listen()
        try:
            await asyncio.to_thread(ctx.collector.refresh_live_if_stale)
            await asyncio.wait_for(woken.wait(), timeout=HUNG_S)
            return ctx.live.seq, woken.is_set()
        finally:
            ctx.live.unlisten(woken)

    seq, woken = asyncio.run(scenario())
    assert woken and seq == 1
    assert [f["id"] for f in ctx.live.snapshot()[0]] == [5] and ctx.live.error is None


def slow_counted_reads(ctx: AppContext, monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """Makes each read of the live flows take 0.2 s (so readers asking at once overlap it) and records it."""
    reads: list[float] = []
    read = ctx.gateway.json.flows

    def slow_read(state: str) -> dict[str, Any]:
        reads.append(time.time())
        time.sleep(0.2)
        return read(state)

    monkeypatch.setattr(ctx.gateway.json, "flows", slow_read)
    return reads


def ask_at_once(ctx: AppContext, readers: int = 8) -> None:
    start = threading.Barrier(readers)

    def reader() -> None:
        start.wait()
        assert ctx.collector is not None
        ctx.collector.refresh_live_if_stale()

    threads = [threading.Thread(target=reader) for _ in range(readers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=10)


def test_readers_asking_at_once_share_one_read(
    app: FastAPI, fake_gw: FakeGateway, monkeypatch: pytest.MonkeyPatch
) -> None:
    ctx = app.state.ctx
    fake_gw.live_flows = [make_flow(9)]
    reads = slow_counted_reads(ctx, monkeypatch)
    ask_at_once(ctx)
    assert len(reads) == 1 and ctx.live.seq == 1 and ctx.live.error is None


def test_readers_asking_at_once_share_one_failed_read(
    app: FastAPI, fake_gw: FakeGateway, monkeypatch: pytest.MonkeyPatch
) -> None:
    ctx = app.state.ctx
    fake_gw.stop()
    reads = slow_counted_reads(ctx, monkeypatch)
    ask_at_once(ctx)
    # One attempt for all of them; the next reader to ask tries the gateway again.
    assert len(reads) == 1 and ctx.live.seq == 0 and ctx.live.error
    ctx.collector.refresh_live_if_stale()
    assert len(reads) == 2
