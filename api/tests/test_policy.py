from __future__ import annotations

from fastapi.testclient import TestClient

from perigee_api.schemas.gateway_config import TrafficClass
from perigee_api.services.policy_check import check_classes, cidrs_cover, ports_cover, ports_overlap


def cls(name: str, prio: int, action: str = "accelerate", **match: object) -> dict[str, object]:
    return {"name": name, "priority": prio, "action": action, "match": {"protocol": "tcp", **match}}


def tc(name: str, prio: int, action: str = "accelerate", **match: object) -> TrafficClass:
    return TrafficClass.model_validate(cls(name, prio, action, **match))


def test_set_algebra() -> None:
    assert ports_overlap(["80", "8000-8080"], ["8080-9000"])
    assert not ports_overlap(["80"], ["81-90"])
    assert ports_cover(["1-100", "101-200"], ["50-150"])
    assert not ports_cover(["1-100"], ["50-150"])
    assert ports_cover([], ["443"]) and not ports_cover(["443"], [])
    assert cidrs_cover(["10.0.0.0/8"], ["10.71.1.0/24"])
    assert not cidrs_cover(["10.0.0.0/8"], ["fd71:1::/64"])
    assert cidrs_cover(["fd71::/16"], ["fd71:1::/64"])


def test_contradiction_same_priority() -> None:
    issues = check_classes([tc("a", 10, "accelerate", dports=["80"]), tc("b", 10, "bypass", dports=["1-100"])])
    assert [i.code for i in issues] == ["contradiction"]
    assert "'a'" in issues[0].message and "'b'" in issues[0].message and "priority 10" in issues[0].message


def test_no_contradiction_when_disjoint_or_same_action() -> None:
    assert check_classes([tc("a", 10, dports=["80"]), tc("b", 10, "bypass", dports=["443"])]) == []
    assert check_classes([tc("a", 10, dst=["10.0.0.0/8"]), tc("b", 10, "bypass", dst=["fd00::/8"])]) == []
    assert check_classes([tc("a", 10, dports=["80"]), tc("b", 10, dports=["80"])]) == []


def test_shadowed_class() -> None:
    issues = check_classes(
        [
            tc("all-web", 10, src=["10.71.0.0/16"]),
            tc("lan1", 20, "cache", src=["10.71.1.0/24"], dports=["80"]),
        ]
    )
    assert [i.code for i in issues] == ["shadowed"]
    assert "'lan1'" in issues[0].message and "'all-web'" in issues[0].message
    # narrower first is fine
    assert check_classes([tc("lan1", 10, src=["10.71.1.0/24"]), tc("all", 20, src=["10.71.0.0/16"])]) == []


def test_api_rejects_duplicates_and_contradictions_and_writes_nothing(operator: TestClient) -> None:
    before = operator.get("/api/v1/versions").json()["total"]
    r = operator.post(
        "/api/v1/policy/classes",
        json=cls("web", 100, dports=["80", "8000-8080"], dst=["10.71.3.0/24", "fd71:3::/64"]),
    )
    assert r.status_code == 201, r.text
    r = operator.post("/api/v1/policy/classes", json=cls("web", 200))
    assert r.status_code == 409 and r.json()["error"]["code"] == "duplicate_name"
    r = operator.post("/api/v1/policy/classes", json=cls("nope", 100, "bypass", dports=["8080"]))
    assert r.status_code == 422 and r.json()["error"]["code"] == "contradiction"
    assert "'web'" in r.json()["error"]["message"]
    assert operator.get("/api/v1/versions").json()["total"] == before + 1
    # shadowed: saved, reported as a warning
    r = operator.post("/api/v1/policy/classes", json=cls("web8080", 300, dports=["8080"], dst=["10.71.3.10/32"]))
    assert r.status_code == 201 and [i["code"] for i in r.json()["issues"]] == ["shadowed"]
    checks = operator.get("/api/v1/policy/check").json()
    assert checks[0]["severity"] == "warning"


def test_field_errors_name_the_field(operator: TestClient) -> None:
    # The field's path stays in `field`; the message names it in the form's words, once, with what is allowed.
    cases = [
        (cls("x", 1, dports=["70000"]), "dports", "Match › destination ports, item 1: ", "1-65535"),
        (cls("x", 1, src=["10.0.0.300/24"]), "src", "Match › source CIDRs, item 1: ", "IPv4"),
        (cls("x", 1, dscp=[64]), "dscp", "Match › DSCP, item 1: ", "at most 63"),
        ({**cls("x", 1), "action": "explode"}, "action", "Action: ", "'accelerate', 'cache' or 'bypass'"),
        ({**cls("x", 1), "priority": -1}, "priority", "Priority: ", "at least 0"),
        ({**cls("x", 1), "surprise": 1}, "surprise", "Surprise: ", "not a setting"),
        ({**cls("x", 1), "satellite": {"congestion_control": "vegas"}}, "congestion_control", "", "'hybla'"),
        ({**cls("x", 1), "name": "web traffic"}, "name", "Name: ", "1-64 of A-Z a-z 0-9 _ . -"),
    ]
    before = operator.get("/api/v1/versions").json()["total"]
    for body, field, label, allowed in cases:
        r = operator.post("/api/v1/policy/classes", json=body)
        assert r.status_code == 422, (body, r.text)
        err = r.json()["error"]
        assert field in err["field"] and err["message"].startswith(label) and allowed in err["message"], (field, err)
        assert "body." not in err["message"] and "Value error" not in err["message"], err
        assert err["message"].count(err["details"][0]["message"]) == 1, err
    assert operator.get("/api/v1/versions").json()["total"] == before


def test_builtin_bypass_protected(operator: TestClient, admin: TestClient) -> None:
    rules = {r["rule"]["name"]: r for r in operator.get("/api/v1/policy/bypass").json()["rules"]}
    assert {"ipsec-esp", "ipsec-ah", "ike", "nat-t", "ike-tcp"} <= set(rules)
    assert rules["ike-tcp"]["rule"] == {
        "name": "ike-tcp",
        "builtin": True,
        "protocol": "tcp",
        "cidrs": [],
        "ports": ["4500"],
    }
    assert all(rules[n]["protected"] for n in ("ipsec-esp", "ike"))
    r = operator.delete("/api/v1/policy/bypass/ipsec-esp")
    assert r.status_code == 409 and r.json()["error"]["code"] == "builtin_protected"
    r = operator.delete("/api/v1/policy/bypass/ipsec-esp", params={"force": "true"})
    assert r.status_code == 403
    r = admin.delete("/api/v1/policy/bypass/ipsec-esp")
    assert r.status_code == 409
    r = admin.delete("/api/v1/policy/bypass/ipsec-esp", params={"force": "true"})
    assert r.status_code == 200
    rules = {r["rule"]["name"]: r for r in admin.get("/api/v1/policy/bypass").json()["rules"]}
    assert rules["ipsec-esp"]["enabled"] is False
    audit = admin.get("/api/v1/audit", params={"action": "bypass/ipsec-esp"}).json()["entries"]
    assert audit[0]["actor"] == "admin" and audit[0]["detail"]["forced_builtin"] is True
    assert admin.post("/api/v1/policy/bypass/restore-builtins").status_code == 200
    rules = {r["rule"]["name"]: r for r in admin.get("/api/v1/policy/bypass").json()["rules"]}
    assert rules["ipsec-esp"]["enabled"] is True


def test_custom_bypass(operator: TestClient) -> None:
    r = operator.post(
        "/api/v1/policy/bypass",
        json={"name": "vpn", "protocol": "any", "cidrs": ["203.0.113.7/32", "2001:db8::/32"]},
    )
    assert r.status_code == 201, r.text
    assert operator.post("/api/v1/policy/bypass", json={"name": "ike", "protocol": "udp"}).status_code == 409
    r = operator.post("/api/v1/policy/bypass", json={"name": "p", "protocol": "esp", "ports": ["1"]})
    assert r.status_code == 422
    assert operator.delete("/api/v1/policy/bypass/vpn").status_code == 200
