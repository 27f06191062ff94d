"""Settings from the environment (PERIGEE_*) or a TOML file named by PERIGEE_SETTINGS_FILE."""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path

from pydantic import Field
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="PERIGEE_", extra="ignore")

    data_dir: Path = Path("/var/lib/perigee")
    gateway_socket: Path = Path("/run/perigee/control.sock")
    gateway_timeout_s: float = 10.0
    secure_cookies: bool = True
    listen: str = "127.0.0.1:8000"  # "host:port" or "unix:/path/to.sock"
    allow_root: bool = False
    # On TCP, the front proxies (addresses or CIDRs, comma-separated) whose X-Real-IP header names the client;
    # on a Unix socket, the one nginx uses, it is always believed. X-Forwarded-For is never read.
    forwarded_allow_ips: str = "127.0.0.1"

    # Background collector (polls the gateway every collect_interval_s).
    collector_enabled: bool = True
    collect_interval_s: float = 1.0

    # Sessions and login throttling (services/throttle.py): failed logins (and wrong current passwords) of one
    # user from one address, and of one address for any user, within the window; past the free ones each
    # further failure doubles the wait before the next attempt, from backoff_base_s up to backoff_max_s.
    session_ttl_s: int = 8 * 3600
    login_window_s: int = 86400
    login_free_failures: int = Field(default=5, ge=1)
    login_free_failures_address: int = Field(default=20, ge=1)
    login_backoff_base_s: float = Field(default=1.0, gt=0)
    login_backoff_max_s: float = Field(default=900.0, gt=0)

    # API tokens: lifetime when the request names none, and the longest allowed.
    token_default_days: int = Field(default=90, ge=1)
    token_max_days: int = Field(default=365, ge=1)

    # Live flow streams (SSE): events per stream at most, concurrent streams per user at most.
    stream_max_events: int = Field(default=3600, ge=1)
    streams_per_user: int = Field(default=4, ge=1)

    # Request limits.
    max_body_bytes: int = 1024 * 1024
    max_restore_bytes: int = 16 * 1024 * 1024  # the backup file; the request may add MULTIPART_SLACK_BYTES
    max_tls_pem_bytes: int = 64 * 1024  # each of the certificate chain and the private key

    # nginx's certificate directory (cert.pem, key.pem): the API writes an uploaded pair there.
    tls_dir: Path = Path("/etc/perigee/tls")

    # Prometheus file-based service discovery of the fleet (services/fleet_sd.py): the file the API keeps
    # current (default <data_dir>/prometheus/fleet.json), and where the local gateway's metrics listen.
    prometheus_sd_file: Path | None = None
    local_metrics_address: str = "127.0.0.1:9464"

    # Retention (seconds) per rollup table and for closed flows.
    retain_1s_s: int = 2 * 3600
    retain_1m_s: int = 8 * 86400
    retain_1h_s: int = 400 * 86400
    retain_flows_s: int = 30 * 86400
    retain_flows_max_rows: int = 1_000_000
    retain_audit_s: int = 365 * 86400

    # Initial desired config (first start only).
    initial_role: str = Field(default="hub", pattern="^(hub|terminal)$")

    # A terminal managed from its hub (services/managed_poll.py): the poll thread runs from startup to shutdown
    # when managed_poll_enabled (it idles until the terminal joins). join_file: zero-touch, a JSON file
    # {hub_url, hub_pin, token} joined at start when not joined yet, then renamed to <file>.used.
    managed_poll_enabled: bool = True
    join_file: Path | None = None
    # A status report to the hub this often when no version arrives; the long poll's wait asked of the hub.
    managed_report_every_s: float = Field(default=30.0, gt=0)
    managed_wait_s: float = Field(default=25.0, ge=0, le=25)

    @property
    def sd_file(self) -> Path:
        return self.prometheus_sd_file or self.data_dir / "prometheus" / "fleet.json"

    @property
    def database_path(self) -> Path:
        return self.data_dir / "perigee.sqlite3"

    @property
    def database_url(self) -> str:
        return f"sqlite:///{self.database_path}"

    @property
    def initial_password_file(self) -> Path:
        return self.data_dir / "initial-admin-password"

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # Precedence: explicit arguments > environment > settings file.
        sources: list[PydanticBaseSettingsSource] = [init_settings, env_settings]
        settings_file = os.environ.get("PERIGEE_SETTINGS_FILE")
        if settings_file:
            sources.append(TomlConfigSettingsSource(settings_cls, toml_file=Path(settings_file)))
        return tuple(sources)


@lru_cache
def get_settings() -> Settings:
    return Settings()
