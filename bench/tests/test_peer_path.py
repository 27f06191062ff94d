"""The peer-path scenario's pieces that need no lab: the variants' configs and the records."""

import pytest

from bench.profiles import figures
from bench.scenarios import peer_path as p


def lab_configs():
    def cfg(role):
        return {
            "role": role,
            "splitter": {"enabled": True, "nodelay": True},
            "shaping": {"enabled": True, "rate_bps": 5_000_000},
            "peer": {
                "enabled": True,
                "key": "ab" * 32,
                "hub": "10.71.2.2" if role == "terminal" else "",
            },
        }

    return {"hub": cfg("hub"), "terminal": cfg("terminal")}


def test_each_variant_switches_only_what_it_names():
    base = lab_configs()
    c = {v: p.variant_configs(base, v) for v in p.VARIANTS}
    # No gateway: nothing split and nothing shaped at either end.
    for role in ("hub", "terminal"):
        assert not c["no-gateway"][role]["splitter"]["enabled"]
        assert not c["no-gateway"][role]["shaping"]["enabled"]
    # Hub only: the terminal steps aside entirely.
    assert c["hub"]["hub"]["splitter"]["enabled"] and c["hub"]["hub"]["shaping"]["enabled"]
    assert not c["hub"]["terminal"]["splitter"]["enabled"] and not c["hub"]["terminal"]["shaping"]["enabled"]
    # Both: the same two gateways, the terminal's peer path off and on.
    assert c["both"]["terminal"]["splitter"]["enabled"] and not c["both"]["terminal"]["peer"]["enabled"]
    assert c["both-peer"]["terminal"]["peer"]["enabled"]
    # The lab's own configs are left as they were, and every variant names itself.
    assert base == lab_configs()
    assert c["hub"]["terminal"]["revision"] == "bench-peer-path-hub-terminal"


def test_records_carry_round_trips_and_the_targets():
    link = figures("geo-hts")
    got = {
        "tls_handshake": [0.61, 0.62, 0.60],
        "first_byte": [0.66, 0.70],
        "page2": [2.5],
        "bulk": [9.0],
    }
    recs = {r.metric: r for r in p.variant_records("both-peer", got, link, 50_000_000)}
    assert recs["tls_handshake"].value == 0.61
    assert recs["tls_handshake_rtt"].value == pytest.approx(0.61 / 0.6)
    assert "met" in recs["tls_handshake_rtt"].note
    assert recs["first_byte"].value == pytest.approx(0.68) and "missed" in recs["first_byte_rtt"].note
    assert "target met" in recs["page2_target"].note
    assert recs["bulk_vs_limit"].value == pytest.approx(9.0 / (1.5 * 0.6 + 8.0 + 0.3))
    direct = {r.metric for r in p.variant_records("both", got, link, 50_000_000)}
    assert "page2_target" not in direct
