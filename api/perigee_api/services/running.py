"""What the gateway runs, and the config version it is.

The API's versions are its record of the gateway's config; that record must hold whatever way a config reached
the gateway: applied through the API, from the gateway's own config file at its first start, with the CLI
(`perigee config apply`), or by a restored machine. `reconcile` asks the gateway what it runs (its revision,
then the config itself) and finds the version it is: the same revision with the same content. When there is
none, the running config is imported as a new version ("imported from the gateway", with the time), recorded as
applied, audited; either way that version becomes the active one. The versions list therefore never shows as
current a config the gateway does not run, and the drift between what runs and the desired (latest) version is
exactly the difference between two versions.
"""

from __future__ import annotations

import copy
import logging
import time
from typing import Any

from pydantic import ValidationError
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from perigee_api.core.observed import Running
from perigee_api.models import ConfigVersion
from perigee_api.schemas.gateway_config import GatewayConfig, is_factory
from perigee_api.services import audit, versions
from perigee_control.client import GatewayClient, GatewayError

__all__ = ["Running", "find_version", "import_running", "needs_setup", "observe", "reconcile"]

log = logging.getLogger("perigee_api.running")

IMPORT_AUTHOR = "gateway"


def _canonical(raw: dict[str, Any]) -> dict[str, Any]:
    """The config as the API stores it (the gateway writes the same canonical form: see the contract test)."""
    return GatewayConfig.model_validate(raw).to_json()


def find_version(db: Session, config: dict[str, Any]) -> ConfigVersion | None:
    """The newest version with exactly this config (its revision included)."""
    revision = config.get("revision", "")
    rows = db.scalars(
        select(ConfigVersion)
        .where(func.json_extract(ConfigVersion.config, "$.revision") == revision)
        .order_by(ConfigVersion.id.desc())
    )
    return next((v for v in rows if v.config == config), None)


def import_running(db: Session, config: dict[str, Any], now: float) -> ConfigVersion:
    """A new version holding the config the gateway runs, its revision kept, recorded as applied."""
    when = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(now))
    revision = config.get("revision", "")
    label = f"revision '{revision}'" if revision else "a config without a revision"
    v = ConfigVersion(
        config=copy.deepcopy(config),
        author=IMPORT_AUTHOR,
        comment=f"imported from the gateway at {when}: it runs {label}, which the API did not apply",
        created_at=now,
        apply_status="applied",
        applied_at=now,
        apply_result={"ok": True, "at": now, "revision": revision, "imported": True},
    )
    db.add(v)
    db.flush()
    audit.record(
        db,
        actor=IMPORT_AUTHOR,
        address="control socket",
        action="import running config",
        target=f"version {v.id}",
        detail={"revision": revision},
    )
    return v


def needs_setup(running: Running) -> bool:
    """The box still needs its setup: the gateway answers and runs no config, or runs the factory config unchanged
    (a new box from the package, the image or the VM). Unknown (the gateway cannot be asked, or runs a config the
    API cannot read) is not "needs setup": the dashboard says those otherwise."""
    if not running.reachable:
        return False
    if running.revision is None:
        return True
    return running.config is not None and is_factory(running.config)


def observe(gw: GatewayClient) -> Running:
    """Ask the gateway what it runs (no database)."""
    now = time.time()
    try:
        revision = gw.health().config_revision
    except GatewayError as exc:
        return Running(checked_at=now, error=exc.message)
    if revision is None:
        return Running(checked_at=now, reachable=True)
    try:
        config = _canonical(gw.get_config())
    except GatewayError as exc:
        return Running(checked_at=now, reachable=True, revision=str(revision), error=exc.message)
    except ValidationError as exc:
        # A gateway newer than this API (a field it does not know) or a rule the API holds more strictly.
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        return Running(
            checked_at=now,
            reachable=True,
            revision=str(revision),
            error=f"the running config does not validate here ({where}: {first['msg']}): not imported",
        )
    return Running(checked_at=now, reachable=True, revision=config.get("revision", ""), config=config)


def reconcile(db: Session, gw: GatewayClient) -> Running:
    """Observe the gateway and make its running config a version, the active one. Caller commits."""
    running = observe(gw)
    if running.config is None:
        return running
    v = find_version(db, running.config)
    if v is None:
        v = import_running(db, running.config, running.checked_at)
        running.imported = True
        log.warning("imported the gateway's running config as version %d (revision %r)", v.id, running.revision)
    elif v.apply_status != "applied":
        # Applied some other way (a backup restored onto a running gateway, the CLI with the same file).
        v.apply_status = "applied"
        v.applied_at = running.checked_at
        v.apply_result = {"ok": True, "at": running.checked_at, "revision": running.revision, "observed": True}
    if versions.active_id(db) != v.id:
        versions.set_active(db, v.id)
    running.version_id = v.id
    return running
