"""The lab's web pieces without namespaces: the DNS zone and config (checked by NSD's own tools),
the TLS material (checked by openssl), and the origins' request routing."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile

from satlab import dnsserver, webnames, webpages, webserver, webtls
from satlab.testing import cannot_run

LABEL = "test0001"


def test_zone_has_every_origin_with_wildcard_and_https_records() -> None:
    zone = dnsserver.zone_text()
    for o in webnames.ORIGINS:
        rel = o.host.removesuffix(".test")
        assert f"*.{rel} IN A {o.v4}" in zone and f"*.{rel} IN AAAA {o.v6}" in zone
        assert f'*.{rel} IN HTTPS 1 . alpn="h3,h2"' in zone
    assert f"$TTL {webnames.DNS_TTL_S}" in zone


def test_nsd_accepts_the_config_and_zone() -> None:
    if shutil.which("nsd-checkconf") is None:
        cannot_run("nsd not installed (scripts/apt/lab.txt)")
    with tempfile.TemporaryDirectory() as d:
        argv = dnsserver.prepare(d)
        conf = argv[argv.index("-c") + 1]
        subprocess.run(["nsd-checkconf", conf], check=True, capture_output=True, timeout=30)
        out = subprocess.run(["nsd-checkzone", "test", os.path.join(d, "test.zone")], capture_output=True,
                             text=True, timeout=30)
        assert out.returncode == 0 and "ok" in out.stdout, out.stdout + out.stderr


def test_tls_chain_verifies_for_every_origin_name() -> None:
    with tempfile.TemporaryDirectory() as d:
        files = webtls.create(os.path.join(d, "tls"))
        for name in (webnames.ORIGINS[0].host, webnames.host_of("cdn", LABEL)):
            out = subprocess.run(["openssl", "verify", "-CAfile", files.ca_cert, "-verify_hostname", name,
                                  files.chain], capture_output=True, text=True, timeout=30)
            assert out.returncode == 0, out.stderr
        bad = subprocess.run(["openssl", "verify", "-CAfile", files.ca_cert, "-verify_hostname", "evil.test",
                              files.chain], capture_output=True, text=True, timeout=30)
        assert bad.returncode != 0
        assert oct(os.stat(files.key).st_mode & 0o777) == "0o600"
        assert len(webtls.spki_sha256(files.ca_cert)) == 44


def test_origins_serve_their_own_objects_only() -> None:
    pg = webpages.page("blog")
    html = webserver.answer("GET", webnames.host_of("www", LABEL), "/p/blog/")
    assert html.status == 200 and len(html.body) == pg.objects[0].size
    assert ("timing-allow-origin", "*") in html.headers
    assert webserver.answer("GET", webnames.host_of("static", LABEL), "/p/blog/").status == 421
    assert webserver.answer("GET", "www.site.test", "/p/blog/").status == 421  # no label
    assert webserver.answer("GET", webnames.host_of("www", LABEL), "/p/nope/").status == 404
    assert webserver.answer("POST", webnames.host_of("www", LABEL), "/p/blog/").status == 405
    head = webserver.answer("HEAD", webnames.host_of("www", LABEL), "/p/blog/")
    assert head.status == 200 and head.body == b"" and ("content-length", str(len(html.body))) in head.headers
