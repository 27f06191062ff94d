"""Deterministic content served by the lab: a fixed pseudo-random byte stream and the two
Bharadwaj et al. web pages (exact sizes, real PNG images)."""

from __future__ import annotations

import functools
import hashlib
import struct
import zlib
from collections.abc import Iterator

BLOCK = 65536
SEED = b"perigee-satlab-bytes-v1"
MAX_BYTES = 4 * 1024**3  # cap for /bytes/N and bulk transfers


@functools.lru_cache(maxsize=64)
def _block(index: int) -> bytes:
    # SHAKE-128 as a keyed stream generator: random access by 64 KiB block, fast, incompressible.
    return hashlib.shake_128(SEED + index.to_bytes(8, "big")).digest(BLOCK)


def stream_bytes(offset: int, length: int) -> bytes:
    """Bytes [offset, offset+length) of the fixed stream."""
    out = bytearray()
    pos, end = offset, offset + length
    while pos < end:
        idx, inner = divmod(pos, BLOCK)
        take = min(BLOCK - inner, end - pos)
        out += _block(idx)[inner:inner + take]
        pos += take
    return bytes(out)


def iter_stream(offset: int, length: int, chunk: int = 256 * 1024) -> Iterator[bytes]:
    """Generator of chunks covering [offset, offset+length)."""
    pos, end = offset, offset + length
    while pos < end:
        n = min(chunk, end - pos)
        yield stream_bytes(pos, n)
        pos += n


def stream_sha256(length: int) -> str:
    h = hashlib.sha256()
    for part in iter_stream(0, length):
        h.update(part)
    return h.hexdigest()


# --- PNG of an exact size -----------------------------------------------------------------------

def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def png_exact(size: int, seed: str, width: int = 128) -> bytes:
    """A valid RGB PNG of exactly `size` bytes: noise pixels (stored, uncompressed deflate so the
    size is predictable) plus a tEXt padding chunk for the remainder."""
    sig = b"\x89PNG\r\n\x1a\n"
    fixed = len(sig) + 25 + 12 + 12  # signature, IHDR chunk, IDAT framing, IEND chunk
    pad_min = 12 + len(b"Comment\0")
    row = 1 + 3 * width
    budget = size - fixed - pad_min - 64
    height = 1
    while True:  # largest height whose stored-deflate IDAT still fits the budget
        raw_len = (height + 1) * row
        if raw_len + 6 + 5 * (raw_len // 65535 + 1) > budget:
            break
        height += 1
    if budget < row + 11:
        raise ValueError(f"image size {size} too small")
    # Pixels: a per-image tint over noise, so each image looks different and does not compress.
    tint = hashlib.sha256(seed.encode()).digest()[:3]
    noise = hashlib.shake_128(b"png:" + seed.encode()).digest(height * width * 3)
    raw = bytearray()
    for y in range(height):
        raw.append(0)
        line = noise[y * width * 3:(y + 1) * width * 3]
        raw += bytes((b & 0x3F) + (tint[i % 3] & 0xC0) for i, b in enumerate(line))
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    body = sig + _chunk(b"IHDR", ihdr) + _chunk(b"IDAT", zlib.compress(bytes(raw), 0))
    pad = size - len(body) - 12 - 12 - len(b"Comment\0")
    if pad < 0:
        raise AssertionError("png budget miscomputed")
    text = b"Comment\0" + (b"satlab padding " * (pad // 15 + 1))[:pad]
    out = body + _chunk(b"tEXt", text) + _chunk(b"IEND", b"")
    assert len(out) == size
    return out


def png_dimensions(data: bytes) -> tuple[int, int]:
    w, h = struct.unpack(">II", data[16:24])
    return w, h


# --- the two web pages (Bharadwaj, Baras, Butts, CSHCN TR 99-11, Figs. 10 and 11) --------------
# Sizes in KiB (1 KB = 1024 bytes). Page 1: 356 B HTML + one 391 KB image. Page 2: 1.7 KB HTML
# + 16 images of 19..100 KB, 669 KB in all.
KB = 1024
PAGE1_HTML = 356
PAGE1_IMAGES = (391 * KB,)
PAGE2_HTML = 1741  # 1.7 KB
PAGE2_IMAGES = tuple(k * KB for k in (19, 22, 25, 27, 30, 33, 35, 37, 39, 41, 43, 45, 48, 52, 73, 100))
PAGES = {"page1": (PAGE1_HTML, PAGE1_IMAGES), "page2": (PAGE2_HTML, PAGE2_IMAGES)}


def _html(name: str, size: int, images: list[tuple[str, bytes]]) -> bytes:
    tags = "".join(
        f'<img src="{fn}" width="{png_dimensions(d)[0]}" height="{png_dimensions(d)[1]}" alt="">'
        for fn, d in images)
    head = f"<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>satlab {name}</title></head><body>"
    tail = "</body></html>\n"
    core = head + tags + tail
    pad = size - len(core.encode()) - len("<!---->")
    if pad < 0:
        raise ValueError(f"{name}: html too large for {size} bytes")
    out = (head + tags + "<!--" + ("." * pad) + "-->" + tail).encode()
    assert len(out) == size, (len(out), size)
    return out


@functools.lru_cache(maxsize=2)
def page_files(name: str) -> dict[str, bytes]:
    """{"index.html": ..., "imgN.png": ...} for page1 or page2."""
    html_size, sizes = PAGES[name]
    images = [(f"img{i + 1}.png", png_exact(s, f"{name}/img{i + 1}")) for i, s in enumerate(sizes)]
    files = {"index.html": _html(name, html_size, images)}
    files.update(images)
    return files
