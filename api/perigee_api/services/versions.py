"""Config versions: every change is a new full GatewayConfig; diff, dry-run, apply, roll back."""

from __future__ import annotations

import copy
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from perigee_api.core.errors import ApiError
from perigee_api.models import ConfigVersion, Meta
from perigee_api.schemas.gateway_config import GatewayConfig, default_config
from perigee_api.services import fleet
from perigee_api.services.bypass_risk import bypass_issues
from perigee_api.services.policy_check import Issue, check_classes
from perigee_control.client import GatewayClient, GatewayError

ACTIVE_KEY = "active_version"


def latest_or_none(db: Session) -> ConfigVersion | None:
    return db.scalar(select(ConfigVersion).order_by(ConfigVersion.id.desc()).limit(1))


def latest(db: Session) -> ConfigVersion:
    v = latest_or_none(db)
    if v is None:
        raise ApiError(409, "no_config", "no config version exists yet")
    return v


def get(db: Session, version_id: int) -> ConfigVersion:
    v = db.get(ConfigVersion, version_id)
    if v is None:
        raise ApiError(404, "version_not_found", f"config version {version_id} does not exist", "version_id")
    return v


def active_id(db: Session) -> int | None:
    m = db.get(Meta, ACTIVE_KEY)
    return int(m.value) if m else None


def set_active(db: Session, version_id: int) -> None:
    m = db.get(Meta, ACTIVE_KEY)
    if m is None:
        db.add(Meta(key=ACTIVE_KEY, value=str(version_id)))
    else:
        m.value = str(version_id)


def desired(db: Session) -> GatewayConfig:
    return GatewayConfig.model_validate(latest(db).config)


def create(db: Session, config: GatewayConfig, author: str, comment: str) -> ConfigVersion:
    v = ConfigVersion(config={}, author=author, comment=comment[:1000], created_at=time.time())
    db.add(v)
    db.flush()
    data = config.to_json()
    data["revision"] = f"v{v.id}"
    v.config = data
    return v


def ensure_initial(db: Session, role: str) -> None:
    """A first desired config when there is none and the gateway runs none to import: a proposal, not applied."""
    if db.scalar(select(ConfigVersion.id).limit(1)) is None:
        create(db, default_config(role), "system", "initial default config (proposed: the gateway runs no config yet)")


def policy_errors(config: GatewayConfig) -> tuple[list[Issue], list[Issue]]:
    issues = check_classes(config.classes, config.bypass) + bypass_issues(config.bypass, config.served_subnets)
    return [i for i in issues if i.severity == "error"], [i for i in issues if i.severity == "warning"]


def issues_json(issues: list[Issue]) -> list[dict[str, Any]]:
    return [{"severity": i.severity, "code": i.code, "message": i.message, "classes": list(i.classes)} for i in issues]


@dataclass(frozen=True)
class Stored:
    """The outcome of a change: the version that holds it, the policy's warnings, and whether a new version was
    made (a change that changes nothing makes none: `version` is then the desired one as it was)."""

    version: ConfigVersion
    warnings: list[Issue]
    changed: bool


def change(db: Session, author: str, comment: str, mutate: Callable[[dict[str, Any]], None]) -> Stored:
    """Apply `mutate` to a copy of the desired config JSON, validate all of it, store a new version.

    Raises ApiError (nothing written) when the result is invalid or has policy errors.
    """
    data = copy.deepcopy(latest(db).config)
    mutate(data)
    return store(db, data, author, comment)


def _without_revision(data: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in data.items() if k != "revision"}


def store(db: Session, data: dict[str, Any], author: str, comment: str) -> Stored:
    config = GatewayConfig.model_validate(data)
    errors, warnings = policy_errors(config)
    if errors:
        raise ApiError(422, errors[0].code, errors[0].message, "classes", {"issues": issues_json(errors + warnings)})
    base = latest_or_none(db)
    if base is not None and _without_revision(base.config) == _without_revision(config.to_json()):
        return Stored(base, warnings, changed=False)
    return Stored(create(db, config, author, comment), warnings, changed=True)


# --- diff --------------------------------------------------------------------------------------


def diff(a: Any, b: Any, path: str = "$") -> list[dict[str, Any]]:
    """JSON-path level differences between two JSON documents (lists compared by index)."""
    out: list[dict[str, Any]] = []
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b)):
            sub = f"{path}.{key}"
            if key not in a:
                out.append({"path": sub, "op": "added", "old": None, "new": b[key]})
            elif key not in b:
                out.append({"path": sub, "op": "removed", "old": a[key], "new": None})
            else:
                out.extend(diff(a[key], b[key], sub))
    elif isinstance(a, list) and isinstance(b, list):
        for i in range(max(len(a), len(b))):
            sub = f"{path}[{i}]"
            if i >= len(a):
                out.append({"path": sub, "op": "added", "old": None, "new": b[i]})
            elif i >= len(b):
                out.append({"path": sub, "op": "removed", "old": a[i], "new": None})
            else:
                out.extend(diff(a[i], b[i], sub))
    elif a != b or type(a) is not type(b):
        out.append({"path": path, "op": "changed", "old": a, "new": b})
    return out


# --- gateway -----------------------------------------------------------------------------------


def dry_run(gw: GatewayClient, v: ConfigVersion) -> dict[str, Any]:
    try:
        res = gw.json.validate_config(v.config)
        return {"ok": True, "version_id": v.id, "rendered": res.get("rendered"), "error": None}
    except GatewayError as exc:
        if exc.code == "gateway_unreachable":
            raise
        return {"ok": False, "version_id": v.id, "rendered": None, "error": exc.as_dict()}


def apply(db: Session, ms: list[fleet.Member], v: ConfigVersion) -> dict[str, Any]:
    """Apply the version on every fleet member (services/fleet.py); record the per-gateway result on the version.

    Active changes only when every member applied it; when one failed, the others were rolled back.
    """
    now = time.time()
    ok, results = fleet.apply_all(ms, v.config)
    revision = next((r["revision"] for r in results if r["status"] == "applied"), None)
    if not ok:
        first = next((r for r in results if r["error"]), None)
        error = first["error"] if first else None
        v.apply_status = "failed"
        v.apply_result = {"ok": False, "at": now, "error": error, "gateways": results}
        return {
            "ok": False,
            "version_id": v.id,
            "active_version_id": active_id(db),
            "error": error,
            "gateways": results,
        }
    local = results[0]
    v.apply_status = "applied"
    v.applied_at = float(local.get("applied_at") or now)
    v.apply_result = {"ok": True, "at": now, "revision": local["revision"], "gateways": results}
    set_active(db, v.id)
    return {
        "ok": True,
        "version_id": v.id,
        "active_version_id": v.id,
        "revision": revision,
        "error": None,
        "gateways": results,
    }


def rollback(
    db: Session, ms: list[fleet.Member], target: ConfigVersion, author: str
) -> tuple[ConfigVersion, dict[str, Any]]:
    config = GatewayConfig.model_validate(target.config)
    new = create(db, config, author, f"rollback to v{target.id}")
    return new, apply(db, ms, new)
