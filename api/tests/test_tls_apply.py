"""The web side of a certificate upload (images/nginx/perigee-tls-apply), with a stand-in nginx on PATH.

The API writes the pair and a reload-request; this script must test, reload, and put the previous pair back
when nginx refuses the new one.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

APPLY = Path(__file__).resolve().parents[2] / "images" / "nginx" / "perigee-tls-apply"

# Refuses a key containing REFUSE (as `nginx -t` refuses a key it cannot load); `-s reload` fails unless
# the marker file `running` exists. Every call is logged.
FAKE_NGINX = """#!/bin/bash
here=$(dirname "$0")
echo "$*" >>"$here/calls"
case " $* " in
  *" -t "*) if grep -q REFUSE "$TLS/key.pem"; then echo 'nginx: [emerg] cannot load certificate key' >&2; exit 1; fi ;;
  *" -s reload "*) [ -e "$here/running" ] || { echo 'nginx: [error] invalid PID number in nginx.pid' >&2; exit 1; } ;;
esac
exit 0
"""


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    nginx = bin_dir / "nginx"
    nginx.write_text(FAKE_NGINX)
    nginx.chmod(0o755)
    (bin_dir / "running").touch()
    tls = tmp_path / "tls"
    tls.mkdir(mode=0o700)
    return {"PATH": f"{bin_dir}:/usr/bin:/bin", "TLS": str(tls)}


def files(env: dict[str, str]) -> tuple[Path, Path]:
    return Path(env["TLS"]), Path(env["PATH"].split(":")[0])


def upload(tls: Path, cert: str, key: str, who: str) -> None:
    """What the API leaves behind after PUT /system/tls (services/tls.install)."""
    for name in ("cert.pem", "key.pem", "upload.json"):
        if (tls / name).exists():
            (tls / f"{name}.prev").write_bytes((tls / name).read_bytes())
    (tls / "cert.pem").write_text(cert)
    (tls / "key.pem").write_text(key)
    (tls / "upload.json").write_text(f'{{"by": "{who}"}}')
    (tls / "reload-request").write_text("fp\n")


def run(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(APPLY), env["TLS"], "/run/nginx.conf"],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=30,
    )


def status(tls: Path) -> list[str]:
    return (tls / "reload-status").read_text().splitlines()


def test_without_a_request_nothing_runs(env: dict[str, str]) -> None:
    tls, bin_dir = files(env)
    assert run(env).returncode == 0
    assert not (bin_dir / "calls").exists() and not (tls / "reload-status").exists()


def test_accepted_pair_is_reloaded(env: dict[str, str]) -> None:
    tls, bin_dir = files(env)
    (tls / "cert.pem").write_text("old cert")
    (tls / "key.pem").write_text("old key")
    upload(tls, "new cert", "new key", "admin")
    r = run(env)
    assert r.returncode == 0, r.stderr
    assert status(tls)[0] == "ok"
    assert (bin_dir / "calls").read_text().splitlines() == ["-t -q -c /run/nginx.conf", "-s reload -c /run/nginx.conf"]
    assert (tls / "cert.pem").read_text() == "new cert" and not (tls / "reload-request").exists()


def test_refused_pair_is_rolled_back(env: dict[str, str]) -> None:
    tls, bin_dir = files(env)
    (tls / "cert.pem").write_text("old cert")
    (tls / "key.pem").write_text("old key")
    (tls / "upload.json").write_text('{"by": "first"}')
    upload(tls, "new cert", "REFUSE key", "admin")
    r = run(env)
    assert r.returncode == 1
    lines = status(tls)
    assert lines[0] == "failed"
    assert "cannot load certificate key" in lines[1] and "previous one was restored" in lines[1]
    assert (tls / "cert.pem").read_text() == "old cert" and (tls / "key.pem").read_text() == "old key"
    assert (tls / "key.pem.rejected").read_text() == "REFUSE key"
    assert (tls / "upload.json").read_text() == '{"by": "first"}'
    assert not (tls / "reload-request").exists()
    assert not [p for p in tls.iterdir() if p.name.startswith(".")], "temporary files left behind"
    # The restored pair passed `nginx -t` and was reloaded (a no-op if nginx never loaded the refused one).
    assert (bin_dir / "calls").read_text().splitlines()[-1] == "-s reload -c /run/nginx.conf"


def test_refused_without_a_backup_says_so(env: dict[str, str]) -> None:
    tls, _ = files(env)
    upload(tls, "new cert", "REFUSE key", "admin")
    assert run(env).returncode == 1
    lines = status(tls)
    assert lines[0] == "failed" and "no previous certificate" in lines[1]


def test_nginx_not_running_keeps_the_new_pair(env: dict[str, str]) -> None:
    tls, bin_dir = files(env)
    (bin_dir / "running").unlink()
    (tls / "cert.pem").write_text("old cert")
    (tls / "key.pem").write_text("old key")
    upload(tls, "new cert", "new key", "admin")
    assert run(env).returncode == 0
    lines = status(tls)
    assert lines[0] == "ok" and "not running" in lines[1]
    assert (tls / "key.pem").read_text() == "new key"
