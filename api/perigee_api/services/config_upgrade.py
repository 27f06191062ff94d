"""Configs written before the peer path had per-terminal identities, brought to today's shape: the shared
`peer.key` (a fleet-wide secret every viewer could read) and `peer.allowed` go. Used by the migration that
scrubbed the stored versions and by restore, for a backup made before it."""

from __future__ import annotations

from typing import Any

NOTE = " [upgrade: the shared peer key was removed from this version"


def scrub_shared_peer_key(config: dict[str, Any]) -> str | None:
    """Removes the shared key in place. Returns None when there was nothing to remove, else what to add to the
    version's comment: a terminal whose peer path the key enabled keeps it configured but off, until its hub's
    identity is pinned (`peer.hub_fingerprints`) and it is enrolled there."""
    peer = config.get("peer")
    if not isinstance(peer, dict) or not ({"key", "allowed"} & peer.keys()):
        return None
    had_key = bool(peer.pop("key", ""))
    peer.pop("allowed", None)
    if not had_key:
        return ""
    if peer.get("enabled") and config.get("role") == "terminal" and not peer.get("hub_fingerprints"):
        peer["enabled"] = False
        return NOTE + "; its peer path is off until the hub's identity is pinned]"
    return NOTE + "]"
