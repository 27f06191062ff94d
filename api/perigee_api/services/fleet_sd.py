"""Prometheus file-based service discovery for the fleet: one target group per gateway, labelled `gateway`.

Prometheus re-reads the file when it changes (images/prometheus/prometheus.yml points its `file_sd_configs` at
it), so registering or removing a gateway adds or drops its scrape target without touching Prometheus' config.
The file is replaced atomically: a reader never sees half of it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from sqlalchemy.orm import Session

from perigee_api.core.config import Settings
from perigee_api.services import fleet


def target_groups(settings: Settings, db: Session) -> list[dict[str, Any]]:
    groups = [{"targets": [settings.local_metrics_address], "labels": {"gateway": fleet.LOCAL}}]
    for g in fleet.registered(db):
        host = f"[{g.host}]" if ":" in g.host else g.host
        groups.append({"targets": [f"{host}:{g.metrics_port}"], "labels": {"gateway": g.name}})
    return groups


def write(settings: Settings, db: Session) -> Path:
    path = settings.sd_file
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(target_groups(settings, db), indent=2) + "\n")
    os.chmod(tmp, 0o644)  # Prometheus runs as another user
    os.replace(tmp, path)
    return path
