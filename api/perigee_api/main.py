"""Application factory: settings → database (migrated) → first admin → gateway client → routes."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import APIRouter, FastAPI

from perigee_api import __version__
from perigee_api.api.routes import (
    audit,
    auth,
    backup,
    bod,
    cache,
    config,
    dns,
    exports,
    fleet,
    flows,
    health,
    managed,
    managed_versions,
    peer,
    policy,
    satellite,
    sites,
    system,
    tls,
    users,
)
from perigee_api.core import errors, security
from perigee_api.core.config import Settings, get_settings
from perigee_api.core.context import AppContext
from perigee_api.core.db import Database, owner_only
from perigee_api.middleware import GuardMiddleware
from perigee_api.services import auth as auth_service
from perigee_api.services import fleet_sd, running, versions
from perigee_api.services.collector import Collector
from perigee_api.services.managed_poll import ManagedPoller
from perigee_control.client import GatewayClient

log = logging.getLogger("perigee_api")

API_PREFIX = "/api/v1"


def api_router() -> APIRouter:
    router = APIRouter(prefix=API_PREFIX)
    features = (
        auth,
        users,
        policy,
        bod,
        config,
        flows,
        satellite,
        fleet,
        exports,
        sites,
        peer,
        managed_versions,
        managed,
    )
    appliance = (health, system, cache, dns, backup, audit, tls)  # the appliance's own state and upkeep
    for module in features + appliance:
        router.include_router(module.router)
    return router


# At startup the gateway may be busy starting too: ask it briefly, the collector keeps asking afterwards.
STARTUP_GATEWAY_TIMEOUT_S = 3.0


def prepare(settings: Settings) -> Database:
    """Create the data dir, migrate, create the first admin; then the first config version: the one the gateway
    runs when it runs one (imported), else a proposed default (not applied)."""
    settings.data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    owner_only(settings.database_path)
    db = Database(settings.database_url)
    db.migrate()
    gw = GatewayClient(settings.gateway_socket, min(settings.gateway_timeout_s, STARTUP_GATEWAY_TIMEOUT_S))
    with db.session() as s:
        auth_service.bootstrap_admin(s, settings)
        running.reconcile(s, gw)
        versions.ensure_initial(s, settings.initial_role)
        s.commit()
        fleet_sd.write(settings, s)  # Prometheus' view of the fleet, current from the start
    return db


def create_app(settings: Settings | None = None, *, prepare_db: bool = True) -> FastAPI:
    settings = settings or get_settings()
    database = prepare(settings) if prepare_db else Database(settings.database_url)
    ctx = AppContext(
        settings=settings,
        db=database,
        gateway=GatewayClient(settings.gateway_socket, settings.gateway_timeout_s),
    )
    # The collector exists with the app (readers ask it for fresh live flows); its thread runs from startup to
    # shutdown when collector_enabled, else tests drive it by hand.
    collector = ctx.collector = Collector(ctx)
    # A terminal's poll of its hub: its thread runs from startup to shutdown when managed_poll_enabled.
    poller = ctx.managed_poller = ManagedPoller(ctx)

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        ctx.loop = asyncio.get_running_loop()
        if settings.collector_enabled:
            collector.start()
        if settings.managed_poll_enabled:
            poller.start()
        try:
            yield
        finally:
            poller.stop()
            collector.stop()
            ctx.db.dispose()

    app = FastAPI(
        title="Perigee control plane",
        version=__version__,
        description=(
            "Control plane of the Perigee satellite gateway. Browser clients: GET /api/v1/auth/csrf, then "
            "send the perigee_csrf cookie's value in X-CSRF-Token on every POST/PUT/PATCH/DELETE. "
            "Automation: Authorization: Bearer <API token>. Errors: {error: {code, message, field, details}}."
        ),
        openapi_url=f"{API_PREFIX}/openapi.json",
        # No Swagger UI: it needs a script bundle and an inline script that the dashboard's CSP forbids. The
        # schema is served here and committed as api/openapi.json; docs/api.md describes the routes.
        docs_url=None,
        redoc_url=None,
        lifespan=lifespan,
    )
    app.state.ctx = ctx
    errors.install(app, {path: managed.refusal for path in security.MANAGED_PATHS})
    app.include_router(api_router())
    app.add_middleware(GuardMiddleware, ctx=ctx)
    return app
