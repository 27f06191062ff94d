"""Traffic classes and bypass rules. Every change makes a new config version."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query, Request

from perigee_api.api.deps import Db, Operator, Viewer, audit_info, change_out
from perigee_api.core.errors import ApiError, ErrorResponse
from perigee_api.schemas.api import (
    BypassIn,
    BypassListOut,
    BypassOut,
    ChangeOut,
    ClassesOut,
    ClassIn,
    ClassPatch,
    PolicyIssue,
)
from perigee_api.schemas.gateway_config import BUILTIN_BYPASS, BUILTIN_NAMES, BypassRule, TrafficClass
from perigee_api.services import auth as auth_service
from perigee_api.services import versions
from perigee_api.services.bypass_risk import bypass_issues, bypass_risks
from perigee_api.services.policy_check import check_classes

router = APIRouter(
    prefix="/policy",
    tags=["policy"],
    responses={401: {"model": ErrorResponse}, 403: {"model": ErrorResponse}, 422: {"model": ErrorResponse}},
)


def _issues(issues: list[Any]) -> list[PolicyIssue]:
    return [PolicyIssue(**i) for i in versions.issues_json(issues)]


@router.get("/classes", response_model=ClassesOut, summary="Classes of the desired config, with conflicts")
def list_classes(who: Viewer, db: Db) -> ClassesOut:
    v = versions.latest(db)
    cfg = versions.desired(db)
    return ClassesOut(
        classes=cfg.classes,
        issues=_issues(check_classes(cfg.classes, cfg.bypass) + bypass_issues(cfg.bypass, cfg.served_subnets)),
        version_id=v.id,
    )


@router.get("/check", response_model=list[PolicyIssue], summary="Overlaps and contradictions")
def check(who: Viewer, db: Db) -> list[PolicyIssue]:
    cfg = versions.desired(db)
    return _issues(check_classes(cfg.classes, cfg.bypass) + bypass_issues(cfg.bypass, cfg.served_subnets))


def _find(classes: list[dict[str, Any]], name: str) -> int:
    for i, c in enumerate(classes):
        if c.get("name") == name:
            return i
    raise ApiError(404, "class_not_found", f"class '{name}' does not exist", "name")


@router.post("/classes", response_model=ChangeOut, status_code=201, responses={409: {"model": ErrorResponse}})
def create_class(body: ClassIn, who: Operator, db: Db, request: Request) -> ChangeOut:
    cls = TrafficClass.model_validate(body.model_dump(exclude={"comment"}))

    def mutate(cfg: dict[str, Any]) -> None:
        if any(c.get("name") == cls.name for c in cfg["classes"]):
            raise ApiError(409, "duplicate_name", f"class name '{cls.name}' is already used", "name")
        cfg["classes"].append(cls.model_dump(mode="json"))

    stored = versions.change(db, who.name, body.comment or f"add class {cls.name}", mutate)
    db.commit()
    audit_info(request, version_id=stored.version.id, cls=cls.name, changed=stored.changed)
    return change_out(stored)


@router.patch("/classes/{name}", response_model=ChangeOut)
def update_class(name: str, body: ClassPatch, who: Operator, db: Db, request: Request) -> ChangeOut:
    def mutate(cfg: dict[str, Any]) -> None:
        i = _find(cfg["classes"], name)
        patch = body.model_dump(mode="json", exclude_unset=True, exclude={"comment"})
        new_name = patch.get("name", name)
        if new_name != name and any(c.get("name") == new_name for c in cfg["classes"]):
            raise ApiError(409, "duplicate_name", f"class name '{new_name}' is already used", "name")
        cfg["classes"][i].update(patch)

    stored = versions.change(db, who.name, body.comment or f"update class {name}", mutate)
    db.commit()
    audit_info(request, version_id=stored.version.id, cls=name, changed=stored.changed)
    return change_out(stored)


@router.delete("/classes/{name}", response_model=ChangeOut)
def delete_class(name: str, who: Operator, db: Db, request: Request) -> ChangeOut:
    def mutate(cfg: dict[str, Any]) -> None:
        del cfg["classes"][_find(cfg["classes"], name)]

    stored = versions.change(db, who.name, f"delete class {name}", mutate)
    db.commit()
    audit_info(request, version_id=stored.version.id, cls=name, changed=stored.changed)
    return change_out(stored)


# --- bypass -------------------------------------------------------------------------------------


@router.get("/bypass", response_model=BypassListOut, summary="Built-in (IPsec/IKE) and custom bypass rules")
def list_bypass(who: Viewer, db: Db) -> BypassListOut:
    v = versions.latest(db)
    cfg = versions.desired(db)
    present = {r.name for r in cfg.bypass}
    rules = [BypassOut(rule=r, enabled=True, protected=r.builtin) for r in cfg.bypass]
    rules += [BypassOut(rule=r, enabled=False, protected=True) for r in BUILTIN_BYPASS if r.name not in present]
    return BypassListOut(rules=rules, version_id=v.id)


@router.post("/bypass", response_model=ChangeOut, status_code=201, responses={409: {"model": ErrorResponse}})
def create_bypass(body: BypassIn, who: Operator, db: Db, request: Request) -> ChangeOut:
    if body.name in BUILTIN_NAMES:
        raise ApiError(409, "builtin_name", f"'{body.name}' is the name of a built-in rule", "name")
    rule = BypassRule(name=body.name, builtin=False, protocol=body.protocol, cidrs=body.cidrs, ports=body.ports)
    confirmed: list[str] = []

    def mutate(cfg: dict[str, Any]) -> None:
        if any(r.get("name") == rule.name for r in cfg["bypass"]):
            raise ApiError(409, "duplicate_name", f"bypass rule '{rule.name}' already exists", "name")
        existing = [BypassRule.model_validate(r) for r in cfg["bypass"]]
        risks = bypass_risks(rule, body.raw_cidrs, existing, list(cfg["served_subnets"]))
        if risks and not body.confirm:
            raise ApiError(
                409,
                "confirm_required",
                "; ".join(r.message for r in risks),
                None,
                {"risks": [{"code": r.code, "message": r.message} for r in risks]},
            )
        confirmed.extend(r.code for r in risks)
        cfg["bypass"].append(rule.model_dump(mode="json"))

    stored = versions.change(db, who.name, body.comment or f"add bypass {rule.name}", mutate)
    db.commit()
    audit_info(request, version_id=stored.version.id, rule=rule.name, confirmed_risks=confirmed)
    return change_out(stored)


@router.delete(
    "/bypass/{name}",
    response_model=ChangeOut,
    summary="Delete a bypass rule (built-in ones need force=true and role admin)",
)
def delete_bypass(
    name: str,
    who: Operator,
    db: Db,
    request: Request,
    force: bool = Query(default=False, description="required to remove a built-in IPsec/IKE rule"),
) -> ChangeOut:
    if name in BUILTIN_NAMES:
        if not force:
            raise ApiError(
                409,
                "builtin_protected",
                f"'{name}' is a built-in IPsec bypass rule: removing it splits or caches IPsec traffic; "
                "pass force=true as an admin if you really mean it",
                "force",
            )
        if not auth_service.role_at_least(who.role, "admin"):
            raise ApiError(403, "forbidden_role", "removing a built-in bypass rule needs role 'admin'")

    def mutate(cfg: dict[str, Any]) -> None:
        for i, r in enumerate(cfg["bypass"]):
            if r.get("name") == name:
                del cfg["bypass"][i]
                return
        raise ApiError(404, "bypass_not_found", f"bypass rule '{name}' does not exist", "name")

    comment = f"FORCED removal of built-in bypass {name}" if name in BUILTIN_NAMES else f"delete bypass {name}"
    stored = versions.change(db, who.name, comment, mutate)
    db.commit()
    audit_info(
        request, version_id=stored.version.id, rule=name, forced_builtin=name in BUILTIN_NAMES, changed=stored.changed
    )
    return change_out(stored)


@router.post("/bypass/restore-builtins", response_model=ChangeOut, summary="Put back any removed built-in rule")
def restore_builtins(who: Operator, db: Db, request: Request) -> ChangeOut:
    def mutate(cfg: dict[str, Any]) -> None:
        present = {r.get("name") for r in cfg["bypass"]}
        missing = [r.model_dump(mode="json") for r in BUILTIN_BYPASS if r.name not in present]
        cfg["bypass"][:0] = missing

    stored = versions.change(db, who.name, "restore built-in bypass rules", mutate)
    db.commit()
    audit_info(request, version_id=stored.version.id, changed=stored.changed)
    return change_out(stored)
