"""Parsing of human-friendly rates and sizes (1536k, 50M, 1.144M, 1MB)."""

from __future__ import annotations

import re

_SUFFIX = {"": 1, "k": 1_000, "m": 1_000_000, "g": 1_000_000_000}
_SIZE_SUFFIX = {
    "": 1, "b": 1,
    "k": 1_000, "kb": 1_000, "kib": 1024,
    "m": 1_000_000, "mb": 1_000_000, "mib": 1024**2,
    "g": 1_000_000_000, "gb": 1_000_000_000, "gib": 1024**3,
}


def parse_rate(text: str | int | float) -> int:
    """A rate in bit/s: plain bps or with a decimal k/M/G suffix (an optional 'bps'/'bit' is ignored)."""
    if isinstance(text, (int, float)):
        return int(text)
    s = text.strip().lower().replace("bit/s", "").replace("bps", "").replace("bit", "")
    m = re.fullmatch(r"([0-9]*\.?[0-9]+(?:e[+-]?[0-9]+)?)\s*([kmg]?)", s)
    if not m:
        raise ValueError(f"not a rate: {text!r} (examples: 1536k, 50M, 1.144M, 64000)")
    return int(round(float(m.group(1)) * _SUFFIX[m.group(2)]))


def parse_size(text: str | int) -> int:
    """A size in bytes: plain, decimal (k, M, G, kB, MB) or binary (KiB, MiB, GiB) suffixes."""
    if isinstance(text, int):
        return text
    s = text.strip().lower()
    m = re.fullmatch(r"([0-9]*\.?[0-9]+)\s*([a-z]*)", s)
    if not m or m.group(2) not in _SIZE_SUFFIX:
        raise ValueError(f"not a size: {text!r} (examples: 65536, 64KiB, 1MB, 2G)")
    return int(round(float(m.group(1)) * _SIZE_SUFFIX[m.group(2)]))


def fmt_rate(bps: float) -> str:
    """Short display of a bit rate."""
    for unit, div in (("Gbit/s", 1e9), ("Mbit/s", 1e6), ("kbit/s", 1e3)):
        if abs(bps) >= div:
            return f"{bps / div:.4g} {unit}"
    return f"{bps:.0f} bit/s"
