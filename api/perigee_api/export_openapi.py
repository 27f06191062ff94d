"""Prints the OpenAPI schema (JSON) without touching any data dir: `python -m perigee_api.export_openapi`."""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from typing import Any


def openapi_schema() -> dict[str, Any]:
    from perigee_api.core.config import Settings
    from perigee_api.main import create_app

    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(data_dir=Path(tmp), collector_enabled=False, gateway_socket=Path(tmp) / "none.sock")
        app = create_app(settings, prepare_db=False)
        schema: dict[str, Any] = app.openapi()
        app.state.ctx.db.dispose()
        return schema


def render() -> str:
    return json.dumps(openapi_schema(), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def main() -> None:
    sys.stdout.write(render())


if __name__ == "__main__":
    main()
