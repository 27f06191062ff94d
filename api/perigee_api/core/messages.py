"""Validation errors in an operator's words: the field by its name on the form, once, and what is allowed.

pydantic says `body.ports.0: Value error, '70000' is not a port` or `String should match pattern '^[A-Za-z0-9]...'`;
an operator should read `Ports, item 1: '70000' is not a port` and `Name: use 1-64 of A-Z a-z 0-9 _ . -, ...`.
The field path stays machine-readable in the error's `field` and `details` (the dashboard puts each message under
the field it names); only the words change.
"""

from __future__ import annotations

from typing import Any

from perigee_control.patterns import ALLOWED

# Field names whose words are not their own (units and initialisms); any other is its name with spaces.
_WORDS = {
    "cidrs": "CIDRs",
    "dports": "destination ports",
    "sports": "source ports",
    "src": "source CIDRs",
    "dst": "destination CIDRs",
    "dscp": "DSCP",
    "set_dscp": "DSCP to set",
    "cc": "congestion control",
    "rtt0_ms": "reference RTT (ms)",
    "base_rtt_ms": "base RTT (ms)",
    "cwnd_max": "cwnd ceiling (segments)",
    "mss_bytes": "MSS (bytes)",
    "ber": "bit error rate",
    "iifname": "input interfaces",
    "lan": "LAN interfaces",
    "hybla": "Hybla",
    "bod": "BoD",
}
_UNITS = {"_ms": " (ms)", "_s": " (s)", "_bps": " (bit/s)", "_bytes": " (bytes)", "_mb": " (MB)", "_days": " (days)"}
_WHERE = ("body", "query", "path")


def _word(part: str) -> str:
    if part in _WORDS:
        return _WORDS[part]
    for suffix, unit in _UNITS.items():
        if part.endswith(suffix):
            return part[: -len(suffix)].replace("_", " ") + unit
    return part.replace("_", " ")


def field_label(loc: tuple[Any, ...] | list[Any]) -> str:
    """("body", "match", "dports", 0) -> "Match › destination ports, item 1"."""
    parts = [p for p in loc if p not in _WHERE]
    words: list[str] = []
    for p in parts:
        if isinstance(p, int):
            if words:
                words[-1] += f", item {p + 1}"
            continue
        if not isinstance(p, str) or p.startswith(("function-", "constrained-")) or "[" in p:
            continue  # pydantic's internal validator names
        words.append(_word(p))
    label = " › ".join(words)
    return label[:1].upper() + label[1:] if label else ""


def _number(v: Any) -> str:
    if isinstance(v, float) and v.is_integer():
        v = int(v)
    return f"{v:,}" if isinstance(v, int) else str(v)


def allowed_text(error: dict[str, Any]) -> str:
    """The problem in words, with what is allowed (no field name: the label says which)."""
    kind, ctx, msg = error.get("type", ""), error.get("ctx") or {}, str(error.get("msg", "invalid"))
    if kind == "string_pattern_mismatch":
        allowed = ALLOWED.get(str(ctx.get("pattern", "")))
        return f"must be {allowed[0].lower() + allowed[1:]}" if allowed else "has characters that are not allowed"
    if kind in ("greater_than_equal", "greater_than"):
        return f"must be at least {_number(ctx.get('ge', ctx.get('gt')))}"
    if kind in ("less_than_equal", "less_than"):
        return f"must be at most {_number(ctx.get('le', ctx.get('lt')))}"
    if kind == "extra_forbidden":
        return "is not a setting here"
    if kind == "missing":
        return "is required"
    if kind == "literal_error":
        return f"must be one of {ctx.get('expected', '')}"
    if kind in ("string_too_long", "too_long"):
        return f"is too long (at most {_number(ctx.get('max_length'))})"
    if kind in ("string_too_short", "too_short"):
        return f"is too short (at least {_number(ctx.get('min_length'))})"
    return msg.removeprefix("Value error, ").removeprefix("Assertion failed, ")


def humanize(errors: list[Any]) -> list[dict[str, Any]]:
    """pydantic's errors as {field (path), label, message (what is allowed), type}."""
    out = []
    for e in errors:
        loc = tuple(e.get("loc", ()))
        out.append(
            {
                "field": ".".join(str(p) for p in loc),
                "label": field_label(loc),
                "message": allowed_text(e),
                "type": e.get("type"),
            }
        )
    return out


def headline(details: list[dict[str, Any]]) -> str:
    """One line for the whole error: the first field's label and its problem, and how many more there are."""
    if not details:
        return "invalid request"
    first = details[0]
    text = f"{first['label']}: {first['message']}" if first["label"] else str(first["message"])
    more = len(details) - 1
    return text + (f" (and {more} more {'field' if more == 1 else 'fields'})" if more else "")
