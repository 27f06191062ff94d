"""BoD profiles → derived satellite-leg tuning (see perigee_api/tuning.py for the formulas)."""

from __future__ import annotations

import math
import time
from typing import Any

from fastapi import APIRouter, Request
from pydantic import ValidationError
from sqlalchemy import select

from perigee_api.api.deps import Ctx, Db, Id, Operator, Viewer, audit_info, change_out, read_only
from perigee_api.core.errors import ApiError, ErrorResponse
from perigee_api.models import BodProfile
from perigee_api.schemas.api import BodApplyIn, BodDeriveOut, BodProfileIn, BodProfileOut, ChangeOut, DiffEntry
from perigee_api.services import bod_check, versions
from perigee_api.tuning import CWND_MAX_MAX, OVERRIDABLE, SHAPING_MIN_BPS, BodInputs, Tuning, derive, write_config

router = APIRouter(
    prefix="/bod",
    tags=["bod"],
    responses={401: {"model": ErrorResponse}, 403: {"model": ErrorResponse}, 422: {"model": ErrorResponse}},
)


def _check_overrides(overrides: dict[str, float]) -> None:
    for key, value in overrides.items():
        if key not in OVERRIDABLE:
            raise ApiError(
                422,
                "bad_override",
                f"overrides.{key}: not overridable (allowed: {', '.join(OVERRIDABLE)})",
                f"overrides.{key}",
            )
        if not math.isfinite(value) or value < 0 or value > 1e11:
            raise ApiError(422, "bad_override", f"overrides.{key}: must be within 0..1e11", f"overrides.{key}")
        if key == "hybla_cwnd_max" and (value > CWND_MAX_MAX or not float(value).is_integer()):
            raise ApiError(
                422,
                "bad_override",
                f"overrides.{key}: must be a whole number of segments within 0..{CWND_MAX_MAX} (0 = no ceiling)",
                f"overrides.{key}",
            )
        if key == "shaping_rate_bps" and 0 < value < SHAPING_MIN_BPS:
            raise ApiError(
                422,
                "bad_override",
                f"overrides.{key}: must be 0 (shaping off) or at least {SHAPING_MIN_BPS} bit/s",
                f"overrides.{key}",
            )


def _derived(p: BodProfile) -> tuple[BodInputs, Tuning | None, str | None]:
    """The stored profile's inputs and tuning, or why it cannot be derived. A row saved under older, looser rules
    (or edited by hand) must not turn every listing into a 500: it is shown with its problem, to fix or delete."""
    try:
        inputs = BodInputs.model_validate(p.inputs)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(x) for x in first.get("loc", ())) or "inputs"
        raw = p.inputs if isinstance(p.inputs, dict) else {}
        return BodInputs.model_construct(**raw), None, f"stored inputs are not valid: {where}: {first.get('msg')}"
    try:
        _check_overrides(p.overrides)
        return inputs, derive(inputs, p.overrides), None
    except ApiError as exc:
        return inputs, None, f"stored overrides are not valid: {exc.message}"
    except (ArithmeticError, ValueError) as exc:
        return inputs, None, f"tuning cannot be derived: {exc}"


def _out(p: BodProfile) -> BodProfileOut:
    inputs, tuning, problem = _derived(p)
    return BodProfileOut(
        id=p.id,
        name=p.name,
        inputs=inputs,
        overrides=p.overrides,
        tuning=tuning,
        problem=problem,
        created_at=p.created_at,
        updated_at=p.updated_at,
    )


@router.post("/derive", response_model=BodDeriveOut, summary="Derive tuning without saving (preview; not audited)")
def preview(body: BodProfileIn, who: Viewer, db: Db, ctx: Ctx, request: Request) -> BodDeriveOut:
    read_only(request)
    _check_overrides(body.overrides)
    tuning = derive(body.inputs, body.overrides)
    desired = versions.latest(db).config
    after, problems = bod_check.written(desired, body.inputs, tuning)
    strip = {"revision"}
    changes = versions.diff(
        {k: v for k, v in desired.items() if k not in strip}, {k: v for k, v in after.items() if k not in strip}
    )
    return BodDeriveOut(
        **tuning.model_dump(),
        config_problems=problems,
        link_risks=bod_check.link_risks(body.inputs, ctx.running.config),
        config_changes=[DiffEntry(**d) for d in changes],
    )


@router.get("/profiles", response_model=list[BodProfileOut])
def list_profiles(who: Viewer, db: Db) -> list[BodProfileOut]:
    return [_out(p) for p in db.scalars(select(BodProfile).order_by(BodProfile.id))]


def _profile(db: Db, profile_id: Id) -> BodProfile:
    p = db.get(BodProfile, profile_id)
    if p is None:
        raise ApiError(404, "profile_not_found", f"BoD profile {profile_id} does not exist", "profile_id")
    return p


@router.get("/profiles/{profile_id}", response_model=BodProfileOut)
def get_profile(profile_id: Id, who: Viewer, db: Db) -> BodProfileOut:
    return _out(_profile(db, profile_id))


@router.post("/profiles", response_model=BodProfileOut, status_code=201, responses={409: {"model": ErrorResponse}})
def create_profile(body: BodProfileIn, who: Operator, db: Db) -> BodProfileOut:
    _check_overrides(body.overrides)
    if db.scalar(select(BodProfile).where(BodProfile.name == body.name)):
        raise ApiError(409, "duplicate_name", f"profile '{body.name}' already exists", "name")
    now = time.time()
    p = BodProfile(
        name=body.name,
        inputs=body.inputs.model_dump(mode="json"),
        overrides=body.overrides,
        created_at=now,
        updated_at=now,
    )
    db.add(p)
    db.commit()
    return _out(p)


@router.put("/profiles/{profile_id}", response_model=BodProfileOut, responses={409: {"model": ErrorResponse}})
def update_profile(profile_id: Id, body: BodProfileIn, who: Operator, db: Db) -> BodProfileOut:
    _check_overrides(body.overrides)
    p = _profile(db, profile_id)
    other = db.scalar(select(BodProfile).where(BodProfile.name == body.name, BodProfile.id != profile_id))
    if other:
        raise ApiError(409, "duplicate_name", f"profile '{body.name}' already exists", "name")
    p.name = body.name
    p.inputs = body.inputs.model_dump(mode="json")
    p.overrides = body.overrides
    p.updated_at = time.time()
    db.commit()
    return _out(p)


@router.delete("/profiles/{profile_id}", status_code=204)
def delete_profile(profile_id: Id, who: Operator, db: Db) -> None:
    db.delete(_profile(db, profile_id))
    db.commit()


@router.post(
    "/profiles/{profile_id}/apply-to-config",
    response_model=ChangeOut,
    summary="Write the derived tuning into the desired config (new version; apply it separately)",
)
def apply_to_config(profile_id: Id, body: BodApplyIn, who: Operator, db: Db, ctx: Ctx, request: Request) -> ChangeOut:
    p = _profile(db, profile_id)
    _inputs, tuning, problem = _derived(p)
    if tuning is None:
        raise ApiError(422, "invalid_profile", f"BoD profile {p.name}: {problem}; fix or delete it", "profile_id")
    role = str(versions.latest(db).config.get("role", "hub"))
    inputs = BodInputs.model_validate({**p.inputs, "role": role})
    tuning = derive(inputs, p.overrides)
    risks = bod_check.link_risks(inputs, ctx.running.config)
    if risks and not body.confirm:
        raise ApiError(
            409,
            "confirm_required",
            "; ".join(risks),
            None,
            {"risks": [{"code": "link_physics", "message": r} for r in risks]},
        )

    def mutate(cfg: dict[str, Any]) -> None:
        write_config(cfg, inputs, tuning)

    stored = versions.change(db, who.name, body.comment or f"BoD profile {p.name}", mutate)
    db.commit()
    audit_info(request, version_id=stored.version.id, profile=p.name, changed=stored.changed)
    return change_out(stored)
