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


# --- the API's user owns the directory: a link it plants never makes root write or read elsewhere ---------------


@pytest.fixture
def victim(tmp_path: Path) -> Path:
    """A root file outside the directory (as /etc/shadow would be) that a planted link points at."""
    v = tmp_path / "root-file"
    v.write_text("root's own content\n")
    return v


@pytest.mark.parametrize("planted", ["cert.pem.rejected", "key.pem.rejected", ".key.pem.restore", ".cert.pem.restore"])
def test_a_planted_link_where_a_copy_goes_is_replaced_not_followed(
    env: dict[str, str], victim: Path, planted: str
) -> None:
    tls, _ = files(env)
    (tls / "cert.pem").write_text("old cert")
    (tls / "key.pem").write_text("old key")
    upload(tls, "new cert", "REFUSE key", "admin")
    (tls / planted).symlink_to(victim)
    assert run(env).returncode == 1
    assert victim.read_text() == "root's own content\n", "root wrote through the link"
    assert (tls / "key.pem").read_text() == "old key", "the previous pair is back all the same"
    assert (tls / "key.pem.rejected").read_text() == "REFUSE key"
    assert not (tls / "key.pem.rejected").is_symlink()


def test_a_planted_link_as_the_status_file_is_replaced(env: dict[str, str], victim: Path) -> None:
    tls, _ = files(env)
    upload(tls, "new cert", "new key", "admin")
    (tls / "reload-status").symlink_to(victim)
    assert run(env).returncode == 0
    assert victim.read_text() == "root's own content\n"
    assert status(tls)[0] == "ok" and not (tls / "reload-status").is_symlink()


@pytest.mark.parametrize("linked", ["cert.pem", "key.pem"])
def test_a_pair_that_is_a_link_is_never_handed_to_nginx(env: dict[str, str], victim: Path, linked: str) -> None:
    """nginx's master reads the pair as root: a key.pem linked to a root-only key must not be loaded."""
    tls, bin_dir = files(env)
    upload(tls, "new cert", "new key", "admin")
    (tls / linked).unlink()
    (tls / linked).symlink_to(victim)
    assert run(env).returncode == 1
    lines = status(tls)
    assert lines[0] == "failed" and f"{linked} in" in lines[1] and "not a regular file" in lines[1]
    assert not (bin_dir / "calls").exists(), "nginx was run"
    assert victim.read_text() == "root's own content\n"


def test_a_previous_pair_that_is_a_link_is_not_restored(env: dict[str, str], victim: Path) -> None:
    tls, _ = files(env)
    (tls / "cert.pem").write_text("old cert")
    (tls / "key.pem").write_text("old key")
    upload(tls, "new cert", "REFUSE key", "admin")
    (tls / "key.pem.prev").unlink()
    (tls / "key.pem.prev").symlink_to(victim)
    assert run(env).returncode == 1
    assert "no previous certificate" in status(tls)[1]
    assert "root's own" not in (tls / "key.pem").read_text(), "a root file became nginx's key"


def test_a_linked_directory_is_refused(env: dict[str, str], tmp_path: Path) -> None:
    tls, bin_dir = files(env)
    upload(tls, "new cert", "new key", "admin")
    link = tmp_path / "tls-link"
    link.symlink_to(tls)
    r = subprocess.run(
        [str(APPLY), str(link), "/run/nginx.conf"],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert r.returncode == 2 and "perigee-tls-apply" in r.stderr
    assert (tls / "reload-request").exists() and not (bin_dir / "calls").exists()


def test_install_puts_a_first_pair_in_place_over_planted_links(
    env: dict[str, str], victim: Path, tmp_path: Path
) -> None:
    """The first start's self-signed pair (perigee-tls-init, the web container, the demo) goes in the same way."""
    tls, _ = files(env)
    made = tmp_path / "made"
    made.mkdir(mode=0o700)
    (made / "cert.pem").write_text("fresh cert")
    (made / "key.pem").write_text("fresh key")
    for name in ("cert.pem", "key.pem"):
        (tls / name).symlink_to(victim)
    r = subprocess.run(
        [str(APPLY), "--install", str(tls), str(made / "cert.pem"), str(made / "key.pem")],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert r.returncode == 0, r.stderr
    assert victim.read_text() == "root's own content\n"
    assert (tls / "key.pem").read_text() == "fresh key" and not (tls / "key.pem").is_symlink()
    assert oct((tls / "key.pem").stat().st_mode & 0o777) == "0o600"
    assert oct((tls / "cert.pem").stat().st_mode & 0o777) == "0o644"
    assert (tls / "key.pem").stat().st_uid == tls.stat().st_uid
    assert not [p for p in tls.iterdir() if p.name.startswith(".")]
