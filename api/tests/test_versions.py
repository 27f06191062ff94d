from __future__ import annotations

from fastapi.testclient import TestClient

from perigee_fakes.fake_gateway import FakeGateway

WEB = {"name": "web", "priority": 100, "action": "accelerate", "match": {"protocol": "tcp", "dports": ["80"]}}


def test_every_change_makes_a_version_and_diff(operator: TestClient) -> None:
    first = operator.get("/api/v1/versions").json()["latest_version_id"]
    r = operator.post("/api/v1/policy/classes", json={**WEB, "comment": "web first"})
    v2 = r.json()["version_id"]
    assert v2 == first + 1
    r = operator.patch("/api/v1/policy/classes/web", json={"priority": 50})
    v3 = r.json()["version_id"]
    listing = operator.get("/api/v1/versions").json()
    assert [v["id"] for v in listing["versions"][:3]] == [v3, v2, first]
    assert listing["versions"][1]["author"] == "otto" and listing["versions"][1]["comment"] == "web first"
    full = operator.get(f"/api/v1/versions/{v3}").json()
    assert full["config"]["revision"] == f"v{v3}" and full["config"]["classes"][0]["priority"] == 50
    d = operator.get("/api/v1/versions/diff", params={"a": v2, "b": v3}).json()["changes"]
    assert d == [{"path": "$.classes[0].priority", "op": "changed", "old": 100, "new": 50}]
    d = operator.get("/api/v1/versions/diff", params={"a": first, "b": v2}).json()["changes"]
    assert d[0]["path"] == "$.classes[0]" and d[0]["op"] == "added"
    assert operator.get("/api/v1/versions/diff", params={"a": 1, "b": 999}).status_code == 404


def test_dry_run_and_apply(operator: TestClient, fake_gw: FakeGateway) -> None:
    v = operator.post("/api/v1/policy/classes", json=WEB).json()["version_id"]
    r = operator.post(f"/api/v1/versions/{v}/validate")
    assert r.status_code == 200 and r.json()["ok"] is True and "nft" in r.json()["rendered"]
    assert fake_gw.config is None  # a dry run changes nothing
    r = operator.post(f"/api/v1/versions/{v}/apply")
    assert r.status_code == 200 and r.json()["ok"] is True, r.text
    assert fake_gw.revision == f"v{v}" and fake_gw.config["classes"][0]["name"] == "web"
    active = operator.get("/api/v1/config/active").json()
    assert active["id"] == v and active["apply_status"] == "applied" and active["active"] is True


def test_gateway_rejection_marks_version_failed_active_unchanged(operator: TestClient, fake_gw: FakeGateway) -> None:
    good = operator.post("/api/v1/policy/classes", json=WEB).json()["version_id"]
    assert operator.post(f"/api/v1/versions/{good}/apply").json()["ok"] is True
    bad = operator.patch("/api/v1/policy/classes/web", json={"action": "bypass"}).json()["version_id"]
    fake_gw.fail_next_apply("nft")
    r = operator.post(f"/api/v1/versions/{bad}/apply")
    assert r.status_code == 200
    body = r.json()
    assert body["ok"] is False and body["active_version_id"] == good
    assert body["error"]["code"] == "apply_failed" and "nft" in body["error"]["message"]
    v = operator.get(f"/api/v1/versions/{bad}").json()
    assert v["apply_status"] == "failed" and v["apply_result"]["ok"] is False
    assert operator.get("/api/v1/config/active").json()["id"] == good
    assert fake_gw.revision == f"v{good}" and fake_gw.config["classes"][0]["action"] == "accelerate"


def test_rollback_makes_new_version_equal_to_old(operator: TestClient, fake_gw: FakeGateway) -> None:
    v1 = operator.post("/api/v1/policy/classes", json=WEB).json()["version_id"]
    operator.post(f"/api/v1/versions/{v1}/apply")
    v2 = operator.delete("/api/v1/policy/classes/web").json()["version_id"]
    operator.post(f"/api/v1/versions/{v2}/apply")
    assert fake_gw.config["classes"] == []
    r = operator.post(f"/api/v1/versions/{v1}/rollback")
    assert r.status_code == 200, r.text
    new = r.json()["new_version_id"]
    assert new > v2 and r.json()["apply"]["ok"] is True
    assert operator.get("/api/v1/versions/diff", params={"a": v1, "b": new}).json()["changes"] == []
    assert fake_gw.config["classes"][0]["name"] == "web" and fake_gw.revision == f"v{new}"
    assert operator.get("/api/v1/versions/99/rollback").status_code == 405
    assert operator.post("/api/v1/versions/999/rollback").status_code == 404


def test_gateway_unreachable_is_502_and_nothing_marked(operator: TestClient, fake_gw: FakeGateway) -> None:
    v = operator.post("/api/v1/policy/classes", json=WEB).json()["version_id"]
    fake_gw.stop()
    r = operator.post(f"/api/v1/versions/{v}/validate")
    assert r.status_code == 502 and r.json()["error"]["code"] == "gateway_unreachable"
    r = operator.post(f"/api/v1/versions/{v}/apply")
    assert r.json()["ok"] is False and r.json()["error"]["code"] == "gateway_unreachable"
    h = operator.get("/api/v1/health").json()
    assert h["status"] == "degraded" and h["gateway_reachable"] is False


def test_put_whole_config_validates_everything(operator: TestClient) -> None:
    cfg = operator.get("/api/v1/config").json()["config"]
    before = operator.get("/api/v1/versions").json()["total"]
    bad = {**cfg, "sysctls": {"kernel.panic": "1"}}
    r = operator.put("/api/v1/config", json={"config": bad})
    assert r.status_code == 422 and "sysctls" in r.json()["error"]["field"]
    bad = {**cfg, "served_subnets": ["10.71.1.0/33"]}
    r = operator.put("/api/v1/config", json={"config": bad})
    assert r.status_code == 422 and "served_subnets" in r.json()["error"]["field"]
    assert operator.get("/api/v1/versions").json()["total"] == before
    cfg["splitter"]["max_flows"] = 5000
    r = operator.put("/api/v1/config", json={"config": cfg, "comment": "fewer flows"})
    assert r.status_code == 200
    assert operator.get("/api/v1/config").json()["config"]["splitter"]["max_flows"] == 5000


def test_preview_diffs_against_the_desired_config_and_stores_nothing(operator: TestClient, viewer: TestClient) -> None:
    desired = operator.get("/api/v1/config").json()
    cfg = desired["config"]
    before = operator.get("/api/v1/versions").json()["total"]
    cfg["splitter"]["idle_timeout_s"] = 601
    cfg["satellite"]["congestion_control"] = "cubic"
    cfg["revision"] = "anything"  # never a change of substance
    r = operator.post("/api/v1/config/preview", json={"config": cfg})
    assert r.status_code == 200, r.text
    out = r.json()
    assert out["base_version_id"] == desired["id"]
    assert out["changes"] == [
        {"path": "$.satellite.congestion_control", "op": "changed", "old": "hybla_ld", "new": "cubic"},
        {"path": "$.splitter.idle_timeout_s", "op": "changed", "old": 600, "new": 601},
    ]
    bad = {**cfg, "interfaces": {"lan": ["lan0"], "satellite": "a/b"}}
    r = operator.post("/api/v1/config/preview", json={"config": bad})
    assert r.status_code == 422 and r.json()["error"]["field"].startswith("body.config.interfaces.satellite")
    assert viewer.post("/api/v1/config/preview", json={"config": cfg}).status_code == 403
    assert operator.get("/api/v1/versions").json()["total"] == before
