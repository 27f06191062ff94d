"""Secrets in a gateway config: where they are, how they are shown, and how a shown one is taken back.

A secret is a field the gateway's schema marks `writeOnly` (in Rust `#[schemars(extend("writeOnly" = true))]`;
the generated models keep the mark), or one named in `EXTRA_SECRET_PATHS`. Wherever a config leaves the API
(reads, versions, diffs, drift, backups) each secret is replaced by its fingerprint, `secret:` and 16 hex digits
of a keyed hash the API holds (`fingerprint`), so an operator sees that a secret is set and whether two
versions hold the same one, and nobody reads it. A config sent back with a fingerprint where a secret goes keeps
the secret the fingerprint stands for (`unredact`): a form round-trips without ever holding the secret.

A path is dotted field names, `[]` after a name for every element of a list: `peer.terminals[].psk`.
"""

from __future__ import annotations

import copy
import hashlib
import hmac
import re
from collections.abc import Iterator
from functools import cache
from typing import Any

from pydantic import BaseModel

from perigee_control.config import GatewayConfig

# Secrets the schema does not mark (none today); a path here is treated as one everywhere.
EXTRA_SECRET_PATHS: tuple[str, ...] = ()

FINGERPRINT_RE = re.compile(r"^secret:[0-9a-f]{16}$")


class SecretError(ValueError):
    """A fingerprint sent where a secret goes, that stands for no secret the API holds."""

    def __init__(self, path: str) -> None:
        super().__init__(f"{path}: a secret shown as its fingerprint that this API does not hold; send the value")
        self.path = path


def _marked(schema: dict[str, Any], defs: dict[str, Any], prefix: str, out: set[str], seen: set[str]) -> None:
    ref = schema.get("$ref")
    if isinstance(ref, str):
        name = ref.rsplit("/", 1)[-1]
        if name in seen:
            return
        _marked(defs.get(name, {}), defs, prefix, out, seen | {name})
        return
    for branch in schema.get("anyOf", []) + schema.get("allOf", []) + schema.get("oneOf", []):
        _marked(branch, defs, prefix, out, seen)
    items = schema.get("items")
    if isinstance(items, dict):
        _marked(items, defs, prefix + "[]", out, seen)
    for name, sub in (schema.get("properties") or {}).items():
        path = f"{prefix}.{name}" if prefix else name
        if sub.get("writeOnly") is True:
            out.add(path)
        _marked(sub, defs, path, out, seen)


@cache
def marked_paths(model: type[BaseModel] = GatewayConfig) -> frozenset[str]:
    """The paths of the fields `model`'s schema marks writeOnly."""
    schema = model.model_json_schema(mode="validation")
    out: set[str] = set()
    _marked(schema, schema.get("$defs", {}), "", out, set())
    return frozenset(out)


def secret_paths() -> frozenset[str]:
    """Every secret of a gateway config."""
    return marked_paths() | frozenset(EXTRA_SECRET_PATHS)


def _steps(path: str) -> list[tuple[str, bool]]:
    """`a.b[].c` -> [("a", False), ("b", True), ("c", False)]: a name and whether it is a list to walk."""
    return [(part[:-2], True) if part.endswith("[]") else (part, False) for part in path.split(".")]


def _slots(doc: Any, steps: list[tuple[str, bool]], where: str = "") -> Iterator[tuple[dict[str, Any], str, str]]:
    """Each (object, key, concrete path) where a value of the path lives in `doc`."""
    if not steps or not isinstance(doc, dict):
        return
    (name, is_list), rest = steps[0], steps[1:]
    if name not in doc:
        return
    here = f"{where}.{name}" if where else name
    if not rest:
        if not is_list:
            yield doc, name, here
        return
    value = doc[name]
    if is_list:
        for i, item in enumerate(value if isinstance(value, list) else []):
            yield from _slots(item, rest, f"{here}[{i}]")
    else:
        yield from _slots(value, rest, here)


def fingerprint(key: bytes, value: str) -> str:
    """What a secret is shown as: a keyed hash, so a guessable secret cannot be found from its fingerprint."""
    return "secret:" + hmac.new(key, value.encode(), hashlib.sha256).hexdigest()[:16]


def redact(doc: dict[str, Any], key: bytes, paths: frozenset[str] | None = None) -> dict[str, Any]:
    """A copy of `doc` with every non-empty secret replaced by its fingerprint (an empty one stays: none set)."""
    out = copy.deepcopy(doc)
    for path in secret_paths() if paths is None else paths:
        for obj, name, _ in _slots(out, _steps(path)):
            value = obj[name]
            if isinstance(value, str) and value:
                obj[name] = fingerprint(key, value)
    return out


def held(doc: dict[str, Any], key: bytes, paths: frozenset[str] | None = None) -> dict[str, str]:
    """fingerprint -> secret, for every secret in `doc` (a stored config)."""
    out: dict[str, str] = {}
    for path in secret_paths() if paths is None else paths:
        for obj, name, _ in _slots(doc, _steps(path)):
            value = obj[name]
            if isinstance(value, str) and value:
                out[fingerprint(key, value)] = value
    return out


def unredact(doc: dict[str, Any], known: dict[str, str], paths: frozenset[str] | None = None) -> dict[str, Any]:
    """A copy of `doc` (sent by a client) with each fingerprint where a secret goes replaced by the secret it
    stands for (`known`, from `held`). Raises SecretError for a fingerprint that stands for none."""
    out = copy.deepcopy(doc)
    for path in secret_paths() if paths is None else paths:
        for obj, name, where in _slots(out, _steps(path)):
            value = obj[name]
            if isinstance(value, str) and FINGERPRINT_RE.match(value):
                if value not in known:
                    raise SecretError(where)
                obj[name] = known[value]
    return out
