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
                "hub_fingerprints": ["sha256:" + "ab" * 32] if role == "terminal" else [],
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
    # The plaintext build's lab runs the same configs as both-peer.
    plain = p.variant_configs(base, p.PLAINTEXT)
    assert plain["terminal"]["peer"]["enabled"] and plain["hub"]["splitter"]["enabled"]
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


def test_the_guarantees_and_the_cost_sit_beside_their_baselines():
    from bench import records

    recs = [
        records.measured(p.NAME, "exactly_once/no-gateway", "duplicates", 0, "bodies", ""),
        records.measured(p.NAME, "exactly_once/both-peer", "duplicates", 0, "bodies", ""),
        records.measured(p.NAME, "capture/both", "marker", 1, "found", ""),
        records.measured(p.NAME, "capture/both-peer", "marker", 0, "found", ""),
        records.measured(p.NAME, "veth/plaintext", "throughput", 9.5, "Gbit/s", ""),
        records.measured(p.NAME, "veth/tls", "throughput", 3.25, "Gbit/s", ""),
    ]
    text = p.doc_extra(recs)
    assert "| bodies received twice (POSTs at BER 1e-5) | 0 | 0 |" in text
    assert "| marker string in the satellite capture | 1 | 0 |" in text
    assert "| client/server address in the capture | not run | not run |" in text
    assert "| throughput (Gbit/s) | 9.50 | 3.25 |" in text
    assert "both-peer-plaintext" in text.splitlines()[2]
