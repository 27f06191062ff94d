"""The lab's HTTPS web pages: built here, deterministically, nothing downloaded.

Three pages the size of today's web (object counts, bytes and origins like the pages measured on
the live web): `blog` (15 objects, 0.3 MiB, 2 origins), `news` (56 objects, 1.8 MiB, 6 origins)
and `shop` (123 objects, 4.9 MiB, 6 origins). Each object is found only when its parent arrives,
as on a real page:

    depth 0  HTML (www)
    depth 1  stylesheets, head scripts, images in the HTML, a third-party async script
    depth 2  background images (named by a stylesheet), scripts inserted by a head script, the
             third party's images (inserted by its script)
    depth 3  images inserted by those scripts, a JSON request (fetch) to the API origin
    depth 4  images listed in the JSON

Bodies have exact sizes: text objects are padded with a comment, images are valid PNGs of noise.
(No web fonts: a browser drops a font it cannot decode, and a valid font of an exact size is more
than this lab needs; stylesheet-named background images stand for the CSS dependency.)
Host names carry the load's label (satlab.webnames), whose
length is fixed, so the sizes hold for every label.
"""

from __future__ import annotations

import functools
import hashlib
import json
import random
import struct
import zlib
from dataclasses import dataclass

from .webnames import LABEL_LEN, ORIGIN_BY_KEY, host_of

KIB = 1024
MIB = 1024 * KIB
CONTENT_TYPES = {
    "html": "text/html; charset=utf-8",
    "css": "text/css; charset=utf-8",
    "js": "text/javascript; charset=utf-8",
    "json": "application/json",
    "img": "image/png",
}
EXTENSIONS = {"html": "html", "css": "css", "js": "js", "json": "json", "img": "png"}


class PageError(ValueError):
    pass


@dataclass(frozen=True)
class Group:
    """`count` objects of one kind on one origin, named by the objects of group `parent`."""

    gid: str
    kind: str
    origin: str
    count: int
    weight: float  # share of the page's bytes
    parent: str | None
    how: str  # link | script | async-script | img | bg | insert-script | insert-img | fetch | json-img


@dataclass(frozen=True)
class PageSpec:
    name: str
    total_bytes: int
    groups: tuple[Group, ...]


@dataclass(frozen=True)
class WebObject:
    path: str  # under /p/<page>/ ("" for the HTML)
    origin: str
    kind: str
    size: int
    parent: str | None  # the path of the object that names it (None: the HTML)
    how: str
    depth: int


@dataclass(frozen=True)
class Page:
    name: str
    objects: tuple[WebObject, ...]

    @property
    def total_bytes(self) -> int:
        return sum(o.size for o in self.objects)

    @property
    def origins(self) -> list[str]:
        return sorted({o.origin for o in self.objects})

    def by_path(self) -> dict[str, WebObject]:
        return {o.path: o for o in self.objects}

    def children(self, path: str) -> list[WebObject]:
        return [o for o in self.objects if o.parent == path]

    def url(self, obj: WebObject, label: str) -> str:
        return f"https://{host_of(obj.origin, label)}/p/{self.name}/{obj.path}"


G = Group
SPECS: dict[str, PageSpec] = {
    "blog": PageSpec("blog", 3 * MIB // 10, (
        G("html", "html", "www", 1, 6, None, "root"),
        G("css", "css", "static", 2, 8, "html", "link"),
        G("js", "js", "static", 2, 14, "html", "script"),
        G("img", "img", "static", 6, 50, "html", "img"),
        G("bg", "img", "static", 1, 8, "css", "bg"),
        G("dynjs", "js", "static", 1, 6, "js", "insert-script"),
        G("jsimg", "img", "static", 2, 8, "dynjs", "insert-img"),
    )),
    "news": PageSpec("news", 18 * MIB // 10, (
        G("html", "html", "www", 1, 3, None, "root"),
        G("css", "css", "static", 3, 5, "html", "link"),
        G("js", "js", "static", 2, 9, "html", "script"),
        G("lib", "js", "cdn", 2, 8, "html", "script"),
        G("ads", "js", "ads", 1, 2, "html", "async-script"),
        G("img", "img", "img", 20, 38, "html", "img"),
        G("bg", "img", "img", 6, 7, "css", "bg"),
        G("dynjs", "js", "static", 2, 8, "js", "insert-script"),
        G("adimg", "img", "ads", 4, 3, "ads", "insert-img"),
        G("jsimg", "img", "img", 8, 10, "dynjs", "insert-img"),
        G("json", "json", "api", 1, 0.5, "dynjs", "fetch"),
        G("jsonimg", "img", "img", 6, 8, "json", "json-img"),
    )),
    "shop": PageSpec("shop", 49 * MIB // 10, (
        G("html", "html", "www", 1, 2, None, "root"),
        G("css", "css", "static", 4, 4, "html", "link"),
        G("js", "js", "static", 3, 7, "html", "script"),
        G("lib", "js", "cdn", 3, 7, "html", "script"),
        G("ads", "js", "ads", 2, 1.5, "html", "async-script"),
        G("img", "img", "img", 50, 45, "html", "img"),
        G("bg", "img", "img", 12, 6, "css", "bg"),
        G("dynjs", "js", "static", 4, 6, "js", "insert-script"),
        G("adimg", "img", "ads", 4, 2, "ads", "insert-img"),
        G("jsimg", "img", "img", 20, 10, "dynjs", "insert-img"),
        G("json", "json", "api", 2, 0.5, "dynjs", "fetch"),
        G("jsonimg", "img", "img", 18, 9, "json", "json-img"),
    )),
}
PAGE_NAMES = tuple(SPECS)


def _split(total: int, count: int, seed: str) -> list[int]:
    """`total` bytes over `count` objects, each 0.5x-1.5x of the mean, summing exactly."""
    rng = random.Random(seed)
    weights = [rng.uniform(0.5, 1.5) for _ in range(count)]
    scale = total / sum(weights)
    sizes = [int(w * scale) for w in weights]
    sizes[0] += total - sum(sizes)
    return sizes


@functools.cache
def page(name: str) -> Page:
    """The page's objects in document order (parents before children), sizes exact."""
    if name not in SPECS:
        raise PageError(f"unknown page {name!r}; one of {', '.join(SPECS)}")
    spec = SPECS[name]
    weight_sum = sum(g.weight for g in spec.groups)
    group_bytes = {g.gid: int(spec.total_bytes * g.weight / weight_sum) for g in spec.groups}
    largest = max(spec.groups, key=lambda g: g.weight).gid
    group_bytes[largest] += spec.total_bytes - sum(group_bytes.values())
    paths: dict[str, list[WebObject]] = {}
    objects: list[WebObject] = []
    for g in spec.groups:
        parents = paths.get(g.parent, []) if g.parent else []
        if g.parent and not parents:
            raise PageError(f"{name}: group {g.gid} names parent {g.parent} before it exists")
        made = []
        for i, size in enumerate(_split(group_bytes[g.gid], g.count, f"{name}/{g.gid}")):
            parent = parents[i % len(parents)] if parents else None
            path = "" if g.kind == "html" else f"{g.gid}/{i}.{EXTENSIONS[g.kind]}"
            made.append(WebObject(path, g.origin, g.kind, size, parent.path if parent else None, g.how,
                                  parent.depth + 1 if parent else 0))
        paths[g.gid] = made
        objects += made
    return Page(name, tuple(objects))


# --- bodies ------------------------------------------------------------------------------------

def _pad(text: str, size: int, open_: str, close: str, what: str) -> bytes:
    raw = text.encode()
    room = size - len(raw) - len(open_) - len(close)
    if room < 0:
        raise PageError(f"{what}: {len(raw)} bytes of content do not fit in {size}")
    return raw + (open_ + _filler(room) + close).encode()


def _filler(n: int) -> str:
    unit = "perigee lab content "
    return (unit * (n // len(unit) + 1))[:n]


def _html(pg: Page, obj: WebObject, label: str) -> bytes:
    head, body = [], []
    for child in pg.children(obj.path):
        url = pg.url(child, label)
        if child.how == "link":
            head.append(f'<link rel="stylesheet" href="{url}">')
        elif child.how == "script":
            head.append(f'<script src="{url}"></script>')
        elif child.how == "async-script":
            body.append(f'<script async src="{url}"></script>')
        elif child.how == "img":
            body.append(f'<img src="{url}" width="64" height="48" alt="">')
    # Elements the stylesheets style: a box per background image.
    for o in pg.objects:
        if o.how == "bg":
            body.append(f'<div class="{_css_class(o)}"></div>')
    text = ("<!DOCTYPE html><html><head><meta charset=\"utf-8\">"
            f'<meta name="pw-objects" content="{len(pg.objects)}"><title>satlab {pg.name}</title>'
            # No favicon request: the page's objects are exactly the generated ones.
            '<link rel="icon" href="data:,">'
            + "".join(head) + "</head><body>" + "".join(body))
    return _pad(text, obj.size - len("</body></html>\n"), "<!--", "-->", f"{pg.name} html") \
        + b"</body></html>\n"


def _css_class(o: WebObject) -> str:
    return "c-" + o.path.replace("/", "-").replace(".", "-")


def _css(pg: Page, obj: WebObject, label: str) -> bytes:
    rules = []
    for child in pg.children(obj.path):
        url = pg.url(child, label)
        cls = _css_class(child)
        if child.how == "bg":
            rules.append(f'.{cls}{{background-image:url("{url}");width:32px;height:24px}}')
    return _pad("".join(rules), obj.size, "/*", "*/", f"{pg.name} {obj.path}")


def _js(pg: Page, obj: WebObject, label: str) -> bytes:
    lines = []
    for child in pg.children(obj.path):
        url = json.dumps(pg.url(child, label))
        if child.how == "insert-script":
            lines.append(f"(function(){{var s=document.createElement('script');s.src={url};"
                         "document.head.appendChild(s);})();")
        elif child.how == "insert-img":
            lines.append(f"(function(){{var i=new Image(32,24);i.src={url};"
                         "(document.body||document.documentElement).appendChild(i);})();")
        elif child.how == "fetch":
            lines.append(f"fetch({url}).then(function(r){{return r.json();}}).then(function(d){{"
                         "d.images.forEach(function(u){var i=new Image(32,24);i.src=u;});});")
    return _pad("".join(lines), obj.size, "/*", "*/", f"{pg.name} {obj.path}")


def _json(pg: Page, obj: WebObject, label: str) -> bytes:
    images = [pg.url(c, label) for c in pg.children(obj.path)]
    head = json.dumps({"images": images})[:-1] + ',"pad":"'
    return _pad(head, obj.size - 2, "", "", f"{pg.name} {obj.path}") + b'"}'


def png_noise(size: int, seed: str, width: int = 128) -> bytes:
    """A valid RGB PNG of exactly `size` bytes: noise rows (stored deflate, so the size is known)
    and a tEXt chunk taking up the rest."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    row = 1 + 3 * width
    # Signature 8, IHDR 25, IDAT framing 12, zlib 6 + 5 per 64 KiB block, tEXt 12 + keyword, IEND 12.
    overhead = 8 + 25 + 12 + 6 + 12 + len(b"Comment\0") + 12
    height = 0
    while overhead + (height + 1) * row + 5 * (((height + 1) * row) // 65535 + 1) <= size:
        height += 1
    if height == 0:
        raise PageError(f"image of {size} bytes is too small for one row")
    noise = hashlib.shake_128(b"pw-img:" + seed.encode()).digest(height * 3 * width)
    raw = b"".join(b"\0" + noise[y * 3 * width:(y + 1) * 3 * width] for y in range(height))
    body = (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw, 0)))
    pad = size - len(body) - 12 - len(b"Comment\0") - 12
    if pad < 0:
        raise PageError(f"png budget miscomputed for {size}")
    out = body + chunk(b"tEXt", b"Comment\0" + _filler(pad).encode()) + chunk(b"IEND", b"")
    if len(out) != size:
        raise PageError(f"png of {len(out)} bytes, wanted {size}")
    return out


@functools.lru_cache(maxsize=512)
def _binary(page_name: str, path: str) -> bytes:
    obj = page(page_name).by_path()[path]
    return png_noise(obj.size, f"{page_name}/{path}")


def body(page_name: str, path: str, label: str) -> bytes:
    """The exact bytes of one object of a page loaded under `label`."""
    pg = page(page_name)
    obj = pg.by_path().get(path)
    if obj is None:
        raise PageError(f"{page_name} has no object {path!r}")
    if len(label) != LABEL_LEN:
        raise PageError(f"label must have {LABEL_LEN} characters")
    if obj.kind == "img":
        return _binary(page_name, path)
    render = {"html": _html, "css": _css, "js": _js, "json": _json}[obj.kind]
    return render(pg, obj, label)


def manifest(page_name: str) -> dict[str, object]:
    """The page's structure as JSON-ready data (for the benchmark's floor and checks)."""
    pg = page(page_name)
    return {"page": pg.name, "objects": len(pg.objects), "bytes": pg.total_bytes, "origins": pg.origins,
            "items": [{"path": o.path, "origin": o.origin, "kind": o.kind, "size": o.size,
                       "parent": o.parent, "depth": o.depth} for o in pg.objects],
            "hosts": {k: ORIGIN_BY_KEY[k].host for k in pg.origins}}
