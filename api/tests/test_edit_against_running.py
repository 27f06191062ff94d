"""Edits made against what the gateway runs (base=running): classes, bypass rules and BoD's write to config start
from the running version, pending versions are not in the result (they stay in the history), the preview says what
the change would change there and stores nothing, and the listings show what the edit starts from."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.testclient import TestClient

RUNNING = {"base": "running"}
PREVIEW = {"base": "running", "preview": "true"}


def web(name: str = "web", port: str = "80") -> dict[str, Any]:
    return {"name": name, "priority": 100, "action": "accelerate", "match": {"protocol": "tcp", "dports": [port]}}


def total(c: TestClient) -> int:
    return int(c.get("/api/v1/versions").json()["total"])


def config_of(c: TestClient, version_id: int) -> dict[str, Any]:
    return dict(c.get(f"/api/v1/versions/{version_id}").json()["config"])


def running_with_pending(app: FastAPI, c: TestClient) -> tuple[int, int]:
    """The gateway runs version 1; a class and a bypass rule are saved on top of it but not applied. Returns
    (running version, latest pending version)."""
    assert c.post("/api/v1/versions/1/apply").json()["ok"] is True
    assert c.post("/api/v1/policy/classes", json=web("pending-class", "8080")).status_code == 201
    r = c.post("/api/v1/policy/bypass", json={"name": "pending-rule", "protocol": "tcp", "cidrs": ["203.0.113.1/32"]})
    assert r.status_code == 201, r.text
    app.state.ctx.collector.sync_running()
    running = c.get("/api/v1/config/running").json()
    assert running["version_id"] == 1 and not running["in_sync"]
    return 1, r.json()["version_id"]


def test_a_class_added_against_what_runs_leaves_the_pending_versions_out(
    app: FastAPI, operator: TestClient, admin: TestClient
) -> None:
    runs, pending = running_with_pending(app, operator)
    # The listing shows what the edit starts from.
    listed = operator.get("/api/v1/policy/classes", params=RUNNING).json()
    assert listed["version_id"] == runs and listed["classes"] == []
    assert [c["name"] for c in operator.get("/api/v1/policy/classes").json()["classes"]] == ["pending-class"]
    # The preview: what it changes in the running version; nothing stored, nothing audited.
    before, audited = total(operator), admin.get("/api/v1/audit").json()["total"]
    r = operator.post("/api/v1/policy/classes", params=PREVIEW, json=web())
    assert r.status_code == 201, r.text
    out = r.json()
    assert out["preview"] is True and out["changed"] is True and out["base_version_id"] == runs
    assert out["version_id"] == runs
    assert [(d["path"], d["op"]) for d in out["changes"]] == [("$.classes[0]", "added")]
    assert total(operator) == before
    assert admin.get("/api/v1/audit").json()["total"] == audited
    # The edit itself: a new version from the running one, without the pending class and rule.
    r = operator.post("/api/v1/policy/classes", params=RUNNING, json=web())
    made = r.json()
    assert r.status_code == 201 and made["changed"] and made["base_version_id"] == runs and made["version_id"] > pending
    cfg = config_of(operator, made["version_id"])
    assert [c["name"] for c in cfg["classes"]] == ["web"]
    assert "pending-rule" not in {b["name"] for b in cfg["bypass"]}
    # The pending versions stay in the history as they were.
    assert [c["name"] for c in config_of(operator, pending)["classes"]] == ["pending-class"]
    entry = admin.get("/api/v1/audit", params={"action": "POST /api/v1/policy/classes"}).json()["entries"]
    assert any((e["detail"] or {}).get("base") == "running" for e in entry), entry


def test_class_edit_and_delete_against_what_runs(app: FastAPI, operator: TestClient) -> None:
    assert operator.post("/api/v1/policy/classes", json=web()).status_code == 201
    assert operator.post("/api/v1/versions/2/apply").json()["ok"] is True
    assert operator.post("/api/v1/policy/classes", json=web("pending-class", "8080")).status_code == 201
    app.state.ctx.collector.sync_running()
    r = operator.patch("/api/v1/policy/classes/web", params=RUNNING, json={"priority": 5})
    assert r.status_code == 200 and r.json()["base_version_id"] == 2
    assert [(c["name"], c["priority"]) for c in config_of(operator, r.json()["version_id"])["classes"]] == [("web", 5)]
    # A class only a pending version has cannot be edited against what runs: it does not exist there.
    r = operator.patch("/api/v1/policy/classes/pending-class", params=RUNNING, json={"priority": 7})
    assert r.status_code == 404 and r.json()["error"]["code"] == "class_not_found"
    assert operator.post(f"/api/v1/versions/{total(operator)}/apply").json()["ok"] is True
    app.state.ctx.collector.sync_running()
    preview = operator.delete("/api/v1/policy/classes/web", params=PREVIEW).json()
    assert preview["preview"] and [d["op"] for d in preview["changes"]] == ["removed"]
    # An edit that changes nothing in what runs makes no version.
    before = total(operator)
    same = operator.patch("/api/v1/policy/classes/web", params=RUNNING, json={"priority": 5}).json()
    assert same["changed"] is False and same["changes"] == [] and total(operator) == before


def test_bypass_rules_against_what_runs(app: FastAPI, operator: TestClient, admin: TestClient) -> None:
    runs, _pending = running_with_pending(app, operator)
    listed = operator.get("/api/v1/policy/bypass", params=RUNNING).json()
    assert listed["version_id"] == runs and "pending-rule" not in {r["rule"]["name"] for r in listed["rules"]}
    rule = {"name": "vpn", "protocol": "udp", "cidrs": ["198.51.100.7/32"]}
    preview = operator.post("/api/v1/policy/bypass", params=PREVIEW, json=rule).json()
    assert preview["preview"] and preview["base_version_id"] == runs
    made = operator.post("/api/v1/policy/bypass", params=RUNNING, json=rule).json()
    names = {b["name"] for b in config_of(operator, made["version_id"])["bypass"]}
    assert "vpn" in names and "pending-rule" not in names
    # A risky rule needs confirming in the preview as in the edit.
    risky = operator.post(
        "/api/v1/policy/bypass", params=PREVIEW, json={"name": "lan", "protocol": "any", "cidrs": ["192.0.2.0/24"]}
    )
    assert risky.status_code == 409 and risky.json()["error"]["code"] == "confirm_required"
    # Removing a built-in rule and restoring it, against what runs.
    app.state.ctx.collector.sync_running()
    gone = admin.delete("/api/v1/policy/bypass/ike", params={**RUNNING, "force": "true"}).json()
    assert gone["base_version_id"] == runs and "ike" not in {
        b["name"] for b in config_of(admin, gone["version_id"])["bypass"]
    }
    back = admin.post("/api/v1/policy/bypass/restore-builtins", params=PREVIEW).json()
    assert back["base_version_id"] == runs and back["changed"] is False  # what runs has it


def test_bod_writes_against_what_runs(app: FastAPI, operator: TestClient) -> None:
    runs, pending = running_with_pending(app, operator)
    inputs = {
        "forward_rate_bps": 20_000_000,
        "return_cra_bps": 1_000_000,
        "return_rbdc_max_bps": 4_000_000,
        "superframe_ms": 26.5,
        "allocation_delay_ms": 250,
        "base_rtt_ms": 600,
        "terminal_buffer_bytes": 262_144,
        "mss_bytes": 1448,
    }
    profile = {"name": "geo", "inputs": inputs, "overrides": {}}
    r = operator.post("/api/v1/bod/derive", params={"against": "running"}, json=profile)
    assert r.status_code == 200, r.text
    derived = r.json()
    paths = {c["path"] for c in derived["config_changes"]}
    assert "$.satellite.pacing_rate_bps" in paths and not any("classes" in p for p in paths)
    pid = operator.post("/api/v1/bod/profiles", json=profile).json()["id"]
    preview = operator.post(f"/api/v1/bod/profiles/{pid}/apply-to-config", params=PREVIEW, json={}).json()
    assert preview["preview"] and preview["base_version_id"] == runs
    assert {c["path"] for c in preview["changes"]} == paths
    made = operator.post(f"/api/v1/bod/profiles/{pid}/apply-to-config", params=RUNNING, json={}).json()
    cfg = config_of(operator, made["version_id"])
    assert cfg["satellite"]["pacing_rate_bps"] > 0 and cfg["classes"] == [] and made["version_id"] > pending


def test_a_gateway_that_runs_nothing_edits_the_desired_version(operator: TestClient) -> None:
    # No version runs (the first desired config is only a proposal): base=running starts from the desired one.
    r = operator.post("/api/v1/policy/classes", params=RUNNING, json=web())
    assert r.status_code == 201 and r.json()["base_version_id"] == 1
