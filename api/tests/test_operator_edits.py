"""Edits an operator makes every day: a class edited in place, a no-change save, risky bypass rules named first."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from perigee_api.schemas.gateway_config import BypassRule
from perigee_api.services.bypass_risk import bypass_issues, bypass_risks, covered_share
from perigee_api.tuning import OVERRIDABLE

SERVED = ["10.71.1.0/24", "fd71:1::/64"]


def total(client: TestClient) -> int:
    return int(client.get("/api/v1/versions").json()["total"])


def test_edit_a_class_as_the_dashboard_sends_it(operator: TestClient) -> None:
    # The dashboard's edit dialog sends the whole class (its name included) back: that is an edit, not an error.
    body: dict[str, Any] = {"name": "web", "priority": 100, "action": "accelerate", "match": {"protocol": "tcp"}}
    assert operator.post("/api/v1/policy/classes", json=body).status_code == 201
    edited = {**body, "satellite": {"congestion_control": "bbr"}, "comment": "bbr for web"}
    r = operator.patch("/api/v1/policy/classes/web", json=edited)
    assert r.status_code == 200, r.text
    assert r.json()["changed"] is True
    classes = operator.get("/api/v1/policy/classes").json()["classes"]
    assert [(c["name"], c["satellite"]["congestion_control"]) for c in classes] == [("web", "bbr")]


def test_rename_a_class_and_refuse_a_taken_name(operator: TestClient) -> None:
    for name, prio in (("a", 10), ("b", 20)):
        body = {
            "name": name,
            "priority": prio,
            "action": "accelerate",
            "match": {"protocol": "tcp", "dports": [str(prio)]},
        }
        assert operator.post("/api/v1/policy/classes", json=body).status_code == 201
    before = total(operator)
    r = operator.patch("/api/v1/policy/classes/a", json={"name": "b"})
    assert r.status_code == 409 and r.json()["error"]["code"] == "duplicate_name"
    assert total(operator) == before
    assert operator.patch("/api/v1/policy/classes/a", json={"name": "renamed"}).status_code == 200
    assert {c["name"] for c in operator.get("/api/v1/policy/classes").json()["classes"]} == {"renamed", "b"}


def test_a_change_that_changes_nothing_makes_no_version(operator: TestClient) -> None:
    body = {"name": "web", "priority": 100, "action": "accelerate", "match": {"protocol": "tcp"}}
    assert operator.post("/api/v1/policy/classes", json=body).status_code == 201
    before = total(operator)
    r = operator.patch("/api/v1/policy/classes/web", json=body)
    assert r.status_code == 200 and r.json()["changed"] is False
    assert r.json()["version_id"] == operator.get("/api/v1/versions").json()["latest_version_id"]
    assert total(operator) == before


RISKY = [
    ({"name": "all", "protocol": "any", "cidrs": ["0.0.0.0/0"]}, "bypasses_served"),
    # The first proposal's served subnet (PLACEHOLDER_SERVED), all of it and half of it.
    ({"name": "lan", "protocol": "any", "cidrs": ["192.0.2.0/24"]}, "bypasses_served"),
    ({"name": "half", "protocol": "tcp", "cidrs": ["192.0.2.0/25"]}, "bypasses_served"),
    ({"name": "web", "protocol": "tcp", "ports": ["443"]}, "bypasses_served"),
    ({"name": "host", "protocol": "any", "cidrs": ["10.71.3.5/24"]}, "host_as_network"),
    ({"name": "esp-again", "protocol": "esp"}, "duplicate"),
    ({"name": "nat-t-host", "protocol": "udp", "ports": ["4500"], "cidrs": ["203.0.113.9/32"]}, "covered"),
]


@pytest.mark.parametrize(("rule", "code"), RISKY, ids=[r[0]["name"] for r in RISKY])
def test_a_risky_bypass_rule_is_named_and_needs_confirming(
    operator: TestClient, admin: TestClient, rule: dict[str, Any], code: str
) -> None:
    before = total(operator)
    r = operator.post("/api/v1/policy/bypass", json=rule)
    assert r.status_code == 409, r.text
    err = r.json()["error"]
    assert err["code"] == "confirm_required"
    assert code in [x["code"] for x in err["details"]["risks"]]
    assert total(operator) == before, "nothing stored before the operator confirms"
    r = operator.post("/api/v1/policy/bypass", json={**rule, "confirm": True})
    assert r.status_code == 201, r.text
    assert total(operator) == before + 1
    # Stored, and the policy check goes on naming it.
    checks = operator.get("/api/v1/policy/check").json()
    if code in ("bypasses_served", "duplicate", "covered"):
        assert any(i["code"] == code and rule["name"] in i["classes"] for i in checks), checks
    audit = admin.get("/api/v1/audit", params={"action": "bypass"}).json()["entries"]
    assert code in audit[0]["detail"]["confirmed_risks"]


def test_a_narrow_rule_needs_no_confirming(operator: TestClient) -> None:
    r = operator.post("/api/v1/policy/bypass", json={"name": "vpn", "protocol": "udp", "cidrs": ["203.0.113.7/32"]})
    assert r.status_code == 201, r.text


def test_host_as_network_names_the_host_form() -> None:
    rule = BypassRule(name="h", builtin=False, protocol="udp", cidrs=["10.71.3.5/24"])
    risks = bypass_risks(rule, ["10.71.3.5/24"], [], SERVED)
    assert [r.code for r in risks] == ["host_as_network"]
    assert "10.71.3.0/24" in risks[0].message and "10.71.3.5/32" in risks[0].message


def test_covered_share() -> None:
    assert covered_share([], "10.71.1.0/24") == 1.0
    assert covered_share(["10.71.0.0/16"], "10.71.1.0/24") == 1.0
    assert covered_share(["10.71.1.0/25", "10.71.1.128/26"], "10.71.1.0/24") == 0.75
    assert covered_share(["fd71:1::/64"], "10.71.1.0/24") == 0.0


def test_policy_check_leaves_builtins_and_narrow_rules_alone() -> None:
    esp = BypassRule(name="ipsec-esp", builtin=True, protocol="esp")
    narrow = BypassRule(name="vpn", builtin=False, protocol="any", cidrs=["203.0.113.7/32"])
    assert bypass_issues([esp, narrow], SERVED) == []


def test_preview_against_what_runs_leaves_pending_versions_out(operator: TestClient) -> None:
    first = operator.get("/api/v1/versions").json()["latest_version_id"]
    assert operator.post(f"/api/v1/versions/{first}/apply", json={"comment": ""}).json()["ok"] is True
    pending = operator.get("/api/v1/config").json()["config"]
    pending["splitter"]["idle_timeout_s"] = 30
    assert operator.put("/api/v1/config", json={"config": pending, "comment": "pending"}).status_code == 200
    running = operator.get("/api/v1/config/running").json()
    assert running["version_id"] == first and not running["in_sync"]
    edit = running["config"]
    edit["splitter"]["max_flows"] = 5000
    body = {"config": edit, "comment": ""}
    against_running = operator.post("/api/v1/config/preview", params={"against": "running"}, json=body).json()
    assert against_running["base_version_id"] == first
    assert [c["path"] for c in against_running["changes"]] == ["$.splitter.max_flows"]
    # Against the desired version the same edit would also undo the pending timeout: that is what it shows.
    against_desired = operator.post("/api/v1/config/preview", json=body).json()
    assert {c["path"] for c in against_desired["changes"]} == {"$.splitter.max_flows", "$.splitter.idle_timeout_s"}


GEO_BOD = {
    "forward_rate_bps": 50_000_000,
    "return_cra_bps": 1_000_000,
    "return_rbdc_max_bps": 4_000_000,
    "superframe_ms": 26.5,
    "allocation_delay_ms": 250,
    "base_rtt_ms": 560,
    "terminal_buffer_bytes": 262_144,
}


def test_bod_base_rtt_is_bounded_by_what_the_config_holds(operator: TestClient) -> None:
    r = operator.post("/api/v1/bod/derive", json={"name": "x", "inputs": {**GEO_BOD, "base_rtt_ms": 60_000}})
    assert r.status_code == 422, r.text
    assert r.json()["error"]["message"] == "Inputs › base RTT (ms): must be at most 10,000"


def test_bod_derive_names_config_refusals_and_link_physics(viewer: TestClient, admin: TestClient) -> None:
    # A viewer sees the derivations too (nothing is stored), and a preview is not audited.
    body = {"name": "x", "inputs": {**GEO_BOD, "forward_rate_bps": 100_000_000_000}, "overrides": {}}
    r = viewer.post("/api/v1/bod/derive", json=body)
    assert r.status_code == 200, r.text
    out = r.json()
    assert out["config_problems"] == []
    overridable = {k for k, d in out["values"].items() if d["overridable"]}
    assert overridable == set(OVERRIDABLE) and "shaping_overhead_bytes" not in overridable
    assert any("100 Gbit/s is beyond any satellite carrier" in x for x in out["link_risks"]), out["link_risks"]
    # An override the config cannot hold is named before anything is written.
    r = viewer.post("/api/v1/bod/derive", json={**body, "inputs": GEO_BOD, "overrides": {"sndbuf_bytes": 2e9}})
    assert r.json()["link_risks"] == []
    assert r.json()["config_problems"] == ["Satellite › sndbuf (bytes): must be at most 1,073,741,824"]
    assert admin.get("/api/v1/audit", params={"action": "derive"}).json()["total"] == 0


def test_bod_write_to_config_outside_the_links_physics_needs_confirming(operator: TestClient) -> None:
    inputs = {**GEO_BOD, "forward_rate_bps": 100_000_000_000}
    prof = operator.post("/api/v1/bod/profiles", json={"name": "huge", "inputs": inputs}).json()
    before = total(operator)
    r = operator.post(f"/api/v1/bod/profiles/{prof['id']}/apply-to-config", json={})
    assert r.status_code == 409 and r.json()["error"]["code"] == "confirm_required", r.text
    assert "beyond any satellite carrier" in r.json()["error"]["details"]["risks"][0]["message"]
    assert total(operator) == before
    r = operator.post(f"/api/v1/bod/profiles/{prof['id']}/apply-to-config", json={"confirm": True})
    assert r.status_code == 200 and total(operator) == before + 1


def test_audit_log_describes_actions(operator: TestClient, admin: TestClient) -> None:
    body = {"name": "web", "priority": 100, "action": "accelerate", "match": {"protocol": "tcp"}}
    assert operator.post("/api/v1/policy/classes", json=body).status_code == 201
    assert operator.patch("/api/v1/policy/classes/web", json={"priority": 110}).status_code == 200
    entries = admin.get("/api/v1/audit", params={"action": "classes"}).json()["entries"]
    assert [e["description"] for e in entries] == ["edited traffic class web", "added a traffic class"]
