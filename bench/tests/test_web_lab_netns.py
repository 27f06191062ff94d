"""The lab's web in a real satlab (prefix pw<pid>-, profile leo for speed): the client namespace
resolves through the lab's DNS server, the HTTPS origins speak HTTP/2 with the lab's CA, and the
same objects come over HTTP/3."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from bench import procs
from bench.procs import REPO
from satlab import webnames, webpages

pytestmark = pytest.mark.needs_root("network namespaces")

PREFIX = f"pw{os.getpid() % 1000}-"
SATLAB = str(REPO / "bin/satlab")
LABEL = "smoke001"
CA = f"/run/satlab/{PREFIX}/web-tls/ca.pem"


def client(*argv: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    return procs.run(procs.in_netns(f"{PREFIX}client", list(argv)), timeout=timeout, check=False)


@pytest.fixture(scope="module")
def lab():
    subprocess.run(
        [SATLAB, "--prefix", PREFIX, "down"],
        capture_output=True,
        check=False,
        timeout=60,
    )
    up = subprocess.run(
        [SATLAB, "--prefix", PREFIX, "up", "--profile", "leo"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    try:
        assert up.returncode == 0, up.stderr
        yield
    finally:
        subprocess.run(
            [SATLAB, "--prefix", PREFIX, "down"],
            capture_output=True,
            check=False,
            timeout=60,
        )
        assert not os.path.exists(f"/etc/netns/{PREFIX}client"), "down must remove the client's resolv.conf"


def test_the_client_resolves_through_the_lab_dns_server(lab):
    out = client("getent", "ahostsv4", webnames.host_of("img", LABEL))
    assert out.returncode == 0, out.stderr
    assert webnames.ORIGIN_BY_KEY["img"].v4 in out.stdout
    for server in (webnames.DNS_V4, webnames.DNS_V6):
        q = client(*procs.tool_argv("bench.tools.dnsq", "--server", server, webnames.host_of("www", LABEL)))
        answers = json.loads(q.stdout)["answered"]
        assert q.returncode == 0 and len(answers) == 3
        assert all(a["rcode"] == "NOERROR" and a["answers"] == 1 for a in answers), answers


def test_https_origins_speak_http2_with_the_lab_ca(lab):
    page = webpages.page("news")
    css = next(o for o in page.objects if o.kind == "css")
    fmt = "%{http_version} %{http_code} %{size_download}"
    out = client(
        "curl",
        "-sS",
        "--http2",
        "--cacert",
        CA,
        "-o",
        "/dev/null",
        "-w",
        fmt,
        page.url(css, LABEL),
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["2", "200", str(css.size)]
    head = client(
        "curl",
        "-sS",
        "--cacert",
        CA,
        "-D",
        "-",
        "-o",
        "/dev/null",
        page.url(css, LABEL),
    )
    assert "timing-allow-origin: *" in head.stdout.lower()
    # The object asked from another origin's name is refused: pages really use their origins.
    wrong = page.url(css, LABEL).replace(".static.site.test", ".img.site.test")
    out = client("curl", "-sS", "--cacert", CA, "-o", "/dev/null", "-w", "%{http_code}", wrong)
    assert out.stdout == "421"
    # Without the lab's CA the certificate does not verify.
    assert client("curl", "-sS", "-o", "/dev/null", page.url(css, LABEL)).returncode != 0


def test_the_same_objects_come_over_http3(lab):
    page = webpages.page("news")
    img = next(o for o in page.objects if o.kind == "img")
    out = client(*procs.tool_argv("bench.tools.h3get", page.url(img, LABEL), "--ca", CA))
    result = json.loads(out.stdout)
    assert result["ok"], result
    assert (result["status"], result["bytes"], result["alpn"]) == (200, img.size, "h3")
    assert result["headers"]["content-type"] == "image/png"
