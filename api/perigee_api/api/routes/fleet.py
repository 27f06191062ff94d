"""The fleet: gateways registered by address (mutual TLS), their status and live flows in one view."""

from __future__ import annotations

from fastapi import APIRouter, Request

from perigee_api.api.deps import Admin, Ctx, Db, Id, Viewer, audit_info
from perigee_api.core.errors import ErrorResponse
from perigee_api.models import ConfigVersion, FleetGateway
from perigee_api.schemas.api import (
    FleetFlowsOut,
    FleetGatewayList,
    FleetGatewayOut,
    FleetMemberOut,
    FleetStatusOut,
    GatewayCredentials,
    GatewayRegistered,
    GatewayRegisterIn,
)
from perigee_api.schemas.trust import GatewayRemoved, RevocationPush
from perigee_api.services import fleet, fleet_pki, fleet_sd, versions

router = APIRouter(tags=["fleet"], responses={401: {"model": ErrorResponse}, 403: {"model": ErrorResponse}})


def _out(g: FleetGateway) -> FleetGatewayOut:
    return FleetGatewayOut(
        id=g.id,
        name=g.name,
        address=str(fleet.Address(g.host, g.port)),
        metrics_port=g.metrics_port,
        cert_fingerprint=g.cert_fingerprint,
        cert_not_after=g.cert_not_after,
        created_at=g.created_at,
        created_by=g.created_by,
    )


@router.get("/fleet", response_model=FleetStatusOut, summary="Every gateway's health, revision, flows, throughput")
def fleet_status(who: Viewer, db: Db, ctx: Ctx) -> FleetStatusOut:
    aid = versions.active_id(db)
    active = db.get(ConfigVersion, aid) if aid is not None else None
    rows = fleet.status(fleet.members(ctx, db))
    return FleetStatusOut(
        gateways=[FleetMemberOut(**r) for r in rows],
        active_version_id=aid,
        active_revision=str(active.config.get("revision")) if active else None,
    )


@router.get("/fleet/flows", response_model=FleetFlowsOut, summary="Live flows of every gateway, each labelled")
def fleet_flows(who: Viewer, db: Db, ctx: Ctx) -> FleetFlowsOut:
    flows, errors = fleet.live_flows(fleet.members(ctx, db))
    return FleetFlowsOut(flows=flows, errors=errors)


@router.get("/fleet/gateways", response_model=FleetGatewayList)
def list_gateways(who: Viewer, db: Db) -> FleetGatewayList:
    return FleetGatewayList(gateways=[_out(g) for g in fleet.registered(db)])


@router.post(
    "/fleet/gateways",
    response_model=GatewayRegistered,
    status_code=201,
    responses={409: {"model": ErrorResponse}},
    summary="Register a gateway by address; answers its TLS credentials (the key only this once)",
)
def register_gateway(body: GatewayRegisterIn, who: Admin, db: Db, ctx: Ctx, request: Request) -> GatewayRegistered:
    g, pair = fleet.register(ctx, db, body.name, body.address, body.metrics_port, who.name)
    db.flush()
    fleet_sd.write(ctx.settings, db)
    db.commit()
    audit_info(request, gateway=g.name, address=str(fleet.Address(g.host, g.port)), fingerprint=g.cert_fingerprint)
    return GatewayRegistered(
        gateway=_out(g),
        credentials=GatewayCredentials(
            ca_pem=fleet_pki.ca_pem(ctx.settings.data_dir), cert_pem=pair.cert_pem, key_pem=pair.key_pem
        ),
    )


@router.delete(
    "/fleet/gateways/{gateway_id}",
    response_model=GatewayRemoved,
    responses={404: {"model": ErrorResponse}},
    summary="Remove a gateway and revoke its certificate; the revocation list goes to every other gateway",
)
def remove_gateway(gateway_id: Id, who: Admin, db: Db, ctx: Ctx, request: Request) -> GatewayRemoved:
    g = fleet.get(db, gateway_id)
    name, fingerprint = g.name, g.cert_fingerprint
    revoked = fleet.remove(ctx, db, g)
    fleet_sd.write(ctx.settings, db)
    db.commit()
    pushed = fleet.push_revocations(ctx, db, fleet.members(ctx, db))
    db.commit()
    audit_info(
        request,
        gateway=name,
        fingerprint=fingerprint,
        revoked=revoked,
        pushed_to=[p["gateway"] for p in pushed if p["ok"]],
    )
    return GatewayRemoved(ok=True, revoked=revoked, pushed=[RevocationPush(**p) for p in pushed])
