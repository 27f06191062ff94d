"""Names and addresses of the lab's web: HTTPS origins and the DNS server in the server namespace.

Each origin has its own address (so a browser opens one connection per origin, as it does on the
internet) and its own host name under the zone `test.` (RFC 6761: never delegated on the internet).
A page is always loaded under a per-load *label*: `https://<label>.www.site.test/p/news/` names
its objects `<label>.static.site.test`, `<label>.img.site.test`, ... (the DNS zone has a wildcard
under each origin, the certificate a wildcard SAN). A label nobody has asked for is a cold name at
every resolver, so a benchmark gets cold DNS without flushing anyone's cache, and the same label
asked again is warm wherever it was cached.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

ZONE = "test"
DNS_V4 = "10.71.3.53"
DNS_V6 = "fd71:3::53"
HTTPS_PORT = 443
# Records' TTL: a common value for CDN-hosted names (long enough to matter for a cache, short
# enough that real resolvers refresh them often).
DNS_TTL_S = 300
LABEL_LEN = 8
LABEL_RE = re.compile(rf"^[a-z0-9]{{{LABEL_LEN}}}$")


@dataclass(frozen=True)
class Origin:
    key: str  # short name used by the page generator
    host: str  # the host name without the per-load label
    v4: str
    v6: str


ORIGINS: tuple[Origin, ...] = (
    Origin("www", "www.site.test", "10.71.3.21", "fd71:3::21"),
    Origin("static", "static.site.test", "10.71.3.22", "fd71:3::22"),
    Origin("img", "img.site.test", "10.71.3.23", "fd71:3::23"),
    Origin("api", "api.site.test", "10.71.3.24", "fd71:3::24"),
    Origin("cdn", "cdn.libs.test", "10.71.3.25", "fd71:3::25"),
    Origin("ads", "ads.adnet.test", "10.71.3.26", "fd71:3::26"),
)
ORIGIN_BY_KEY = {o.key: o for o in ORIGINS}
ORIGIN_BY_HOST = {o.host: o for o in ORIGINS}
# Addresses the server namespace carries besides its own (10.71.3.10 / fd71:3::10).
SERVER_EXTRA_V4 = tuple(o.v4 for o in ORIGINS) + (DNS_V4,)
SERVER_EXTRA_V6 = tuple(o.v6 for o in ORIGINS) + (DNS_V6,)


class WebNameError(ValueError):
    """A host name that is not one of the lab's origins (with or without a label)."""


def check_label(label: str) -> str:
    if not LABEL_RE.match(label):
        raise WebNameError(f"label must be {LABEL_LEN} characters a-z 0-9, not {label!r}")
    return label


def host_of(origin_key: str, label: str) -> str:
    """`<label>.<origin host>`: the name a page loaded under `label` uses for that origin."""
    return f"{check_label(label)}.{ORIGIN_BY_KEY[origin_key].host}"


def split_host(host: str) -> tuple[Origin, str]:
    """(origin, label) of a request's host (a `Host:` or `:authority`, port allowed)."""
    name = host.rsplit(":", 1)[0] if host.count(":") == 1 else host
    name = name.strip().lower().rstrip(".")
    label, _, rest = name.partition(".")
    origin = ORIGIN_BY_HOST.get(rest)
    if origin is None or not LABEL_RE.match(label):
        raise WebNameError(f"not a lab origin name: {host!r}")
    return origin, label


def page_url(page: str, label: str) -> str:
    return f"https://{host_of('www', label)}/p/{page}/"
