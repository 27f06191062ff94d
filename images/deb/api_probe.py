"""The package upgrade test's client of a running perigee API (images/deb/upgrade-test).

Runs inside the test container on the package's own venv (httpx over the API's Unix socket):
  before STATE   log in with the one-time password, set a new one, add a user, store a config version
  after STATE    check that the password, the user and the version all survived the upgrade
STATE is a JSON file that carries what `before` made to `after`.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import httpx

SOCKET = "/run/perigee-web/api.sock"
ADMIN_PASSWORD = "upgrade-test-admin-pw-1"
OPERATOR = ("upgrade-operator", "upgrade-test-operator-pw-1")
COMMENT = "written before the package upgrade"


def client() -> httpx.Client:
    transport = httpx.HTTPTransport(uds=SOCKET)
    return httpx.Client(transport=transport, base_url="http://localhost/api/v1", timeout=30)


def wait_healthy(c: httpx.Client) -> None:
    deadline = time.monotonic() + 60
    while True:
        try:
            if c.get("/health").status_code == 200:
                return
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline:
            raise SystemExit("the API did not answer on its socket within 60 s")
        time.sleep(0.5)


def initial_password() -> str:
    """The first admin's one-time password, which the API writes at its first start."""
    path = Path("/var/lib/perigee/initial-admin-password")
    deadline = time.monotonic() + 30
    while not path.exists():
        if time.monotonic() > deadline:
            raise SystemExit(f"{path} did not appear within 30 s of the API answering")
        time.sleep(0.2)
    return path.read_text().strip()


def login(c: httpx.Client, username: str, password: str) -> dict[str, str]:
    c.get("/auth/csrf").raise_for_status()
    csrf = c.cookies.get("perigee_csrf") or ""
    r = c.post("/auth/login", json={"username": username, "password": password}, headers={"X-CSRF-Token": csrf})
    if r.status_code != 200:
        raise SystemExit(f"login as {username}: {r.status_code} {r.text[:300]}")
    return {"X-CSRF-Token": r.json()["csrf_token"]}


def ok(r: httpx.Response, what: str) -> Any:
    if r.status_code >= 300:
        raise SystemExit(f"{what}: {r.status_code} {r.text[:300]}")
    return r.json()


def before(state: Path) -> None:
    with client() as c:
        wait_healthy(c)
        one_time = initial_password()
        h = login(c, "admin", one_time)
        ok(
            c.post(
                "/auth/change-password", headers=h, json={"current_password": one_time, "new_password": ADMIN_PASSWORD}
            ),
            "change-password",
        )
        h = login(c, "admin", ADMIN_PASSWORD)
        ok(
            c.post("/users", headers=h, json={"username": OPERATOR[0], "role": "operator", "password": OPERATOR[1]}),
            "create user",
        )
        config = ok(c.get("/config"), "GET /config")["config"]
        # A version that changes nothing is not stored: change one timeout so the upgrade has a new one to keep.
        config["splitter"]["idle_timeout_s"] = config["splitter"].get("idle_timeout_s", 600) + 1
        stored = ok(c.put("/config", headers=h, json={"config": config, "comment": COMMENT}), "PUT /config")
        users = sorted(u["username"] for u in ok(c.get("/users"), "GET /users"))
    state.write_text(json.dumps({"version_id": stored["version_id"], "users": users}))
    print(f"api_probe: before: users {users}, config version {stored['version_id']} ({COMMENT!r})")


def after(state: Path) -> None:
    made = json.loads(state.read_text())
    with client() as c:
        wait_healthy(c)
        login(c, "admin", ADMIN_PASSWORD)
        users = sorted(u["username"] for u in ok(c.get("/users"), "GET /users"))
        if users != made["users"]:
            raise SystemExit(f"users changed across the upgrade: {made['users']} -> {users}")
        version = ok(c.get(f"/versions/{made['version_id']}"), "GET /versions/{id}")
        if version["comment"] != COMMENT:
            raise SystemExit(f"config version {made['version_id']} changed: comment {version['comment']!r}")
    with client() as c:
        login(c, *OPERATOR)
    print(f"api_probe: after: users {users} log in, config version {made['version_id']} intact")


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("before", "after"):
        raise SystemExit("usage: api_probe.py before|after STATE")
    (before if sys.argv[1] == "before" else after)(Path(sys.argv[2]))
