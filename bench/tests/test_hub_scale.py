"""hub-scale's own code: the bucket hash against the kernel's choices, the simulated terminal's OPEN frame, and the
summaries (bench/hubstats.py) doing what they say. No timing is asserted: the inputs are made up."""

from __future__ import annotations

import json
import struct
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import serialization

from bench import hubnet, hubsim, hubstats, run, scenarios
from satlab.cluster import bucket

# Buckets Linux 6.18 chose (gateway/crates/perigee/src/gateway/cluster/hash.rs, FORWARDED): seed, src, dst, bucket.
KERNEL = """
5eed0000 10.96.51.231:29514 10.97.72.185:11295 51
5eed0001 10.96.77.44:10417 10.97.254.181:14001 1
5eed0002 10.98.0.1:6563 10.97.206.52:29848 21
5eed0009 10.96.255.255:15921 10.97.112.193:32742 18
deadbeef 10.96.61.66:7077 10.97.68.89:26027 0
deadbeef 10.96.216.1:19920 10.97.27.228:31365 59
"""


def test_the_python_bucket_is_the_kernels():
    for line in KERNEL.split("\n"):
        if not line.strip():
            continue
        seed, src, dst, want = line.split()
        (s, sp), (d, dp) = src.split(":"), dst.split(":")
        assert bucket.bucket(int(seed, 16), s, int(sp), d, int(dp)) == int(want), line
        # Symmetric: the answer's direction picks the same bucket.
        assert bucket.bucket(int(seed, 16), d, int(dp), s, int(sp)) == int(want), line


def test_a_table_is_checked_against_its_flows():
    seed = 0xDEADBEEF
    owners = ["gw1", "gw2", "gw3", "gw1"] * 16
    checks = [{"src": "10.96.61.66:7077", "dst": "10.97.68.89:26027", "member": owners[0]}]
    table = {"seed": seed, "buckets": owners, "checks": checks}
    assert bucket.agrees(table)
    assert bucket.owner(table, "10.96.216.1", 19920, "10.97.27.228", 31365) == owners[59]
    assert not bucket.agrees({**table, "checks": [{**checks[0], "member": "gw2"}]})
    assert not bucket.agrees({**table, "checks": []})


def test_open_frame_layout():
    f = hubsim.open_flow("10.90.1.2", 40000, "10.71.3.10", 5001)
    assert len(f) == 44 and f[:4] == b"PGPO"
    kind, dscp, cport, sport, fam, _ = struct.unpack("!BBHHBB", f[4:12])
    assert (kind, dscp, cport, sport, fam) == (1, 0, 40000, 5001, 4)
    assert f[12:28] == bytes(10) + b"\xff\xff" + bytes([10, 90, 1, 2])
    assert f[28:44] == bytes(10) + b"\xff\xff" + bytes([10, 71, 3, 10])
    assert len(hubsim.OPEN_TABLE) == 44 and hubsim.OPEN_TABLE[4] == 3


def test_identities_are_distinct_and_fingerprinted(tmp_path: Path):
    ids = hubnet.identities(tmp_path, 3)
    assert [t["client"] for t in ids] == ["10.90.0.0", "10.90.0.1", "10.90.0.2"]
    assert hubnet.client_of(257) == "10.90.1.1"
    assert len({t["fingerprint"] for t in ids}) == 3
    pem = Path(ids[0]["pem"]).read_bytes()
    assert b"PRIVATE KEY" in pem
    der = x509.load_pem_x509_certificate(pem).public_bytes(serialization.Encoding.DER)
    assert hubsim.fingerprint(der) == ids[0]["fingerprint"]


def test_pct_and_setup_summary():
    assert hubstats.pct([], 50) is None
    assert hubstats.pct([3.0, 1.0, 2.0], 50) == 2.0
    assert hubstats.pct([float(i) for i in range(101)], 99) == 99.0
    events = [
        {"t0": 100.0, "ready_at": [101.0, 102.0], "handshake_s": [0.01, 0.03], "failed": 1, "errors": {"pin": 1}},
        {"t0": 100.5, "ready_at": [104.0], "handshake_s": [0.02], "failed": 0, "errors": {"pin": 2}},
    ]
    s = hubstats.setup_summary(events)
    assert s["connections"] == 3 and s["failed"] == 1 and s["errors"] == {"pin": 3}
    assert s["wall_s"] == 4.0 and s["rate_per_s"] == 0.75  # from the first start to the last ready
    assert s["handshake_p50_ms"] == 20.0


def flow(t: float, result: str, gw: str = "gw1", first: float | None = None, cport: int = 30000) -> dict[str, object]:
    f = {"t_start": t, "result": result, "gw": gw, "client": "10.90.0.1", "cport": cport}
    if first is not None:
        f["t_first"] = t + first
    return f


def test_first_byte_counts_only_completed_flows():
    fb = hubstats.first_byte_summary(
        [flow(0, "ok", first=0.010), flow(1, "ok", "gw2", first=0.030), flow(2, "no_conn"), flow(3, "ok", first=0.020)]
    )
    assert fb["results"] == {"ok": 3, "no_conn": 1} and fb["flows"] == 4
    assert round(fb["p50_ms"], 6) == 20.0 and round(fb["p99_ms"], 6) == 30.0
    assert fb["per_gateway"] == {"gw1": 2, "gw2": 1}


def test_memory_per_terminal_and_per_connection():
    base = {"gw1": {"pss_kib": 10_000}}
    enrolled = {"gw1": {"pss_kib": 12_000}}
    pooled = {"gw1": {"pss_kib": 52_000}}
    m = hubstats.memory_summary(base, enrolled, pooled, {"gw1": 8000}, 1000)
    g = m["per_gateway"]["gw1"]
    assert g["config_per_terminal_kib"] == 2.0  # 2,000 KiB for 1,000 enrolled terminals
    assert g["per_connection_kib"] == 5.0  # 40,000 KiB for 8,000 connections
    assert g["per_terminal_kib"] == 42.0
    assert m["mean"]["per_connection_kib"] == 5.0


def test_failover_summary():
    seed = 0xDEADBEEF
    owners = ["gw2"] * 64
    old = {"seed": seed, "buckets": owners}
    kill = 100.0
    flows = [
        flow(99.0, "ok", "gw1"),
        flow(99.5, "lost", "gw2"),  # cut by the kill
        flow(100.1, "no_conn", "gw2"),  # aimed at the dead gateway with the old table
        flow(100.6, "no_conn", "gw2"),
        flow(101.0, "ok", "gw3"),  # one of gw2's old buckets, now at a survivor
        flow(101.5, "ok", "gw1"),
    ]
    lost_at = {"gw2": [99.0, 100.01, 100.02], "gw1": []}
    updates = [{"t": 100.4, "members": ["gw1", "gw3"]}, {"t": 50.0, "members": ["gw1", "gw2", "gw3"]}]
    f = hubstats.failover_summary(flows, kill, "gw2", old, "10.71.3.10", 5001, lost_at, updates)
    assert f["pool_lost"] == 2  # from half a second before the kill on
    assert f["in_flight_lost"] == 1 and f["flows_before"] == 2 and f["flows_after"] == 4
    assert f["failed_after"] == 2 and f["failed_after_results"] == {"no_conn": 2}
    # The last failure started 0.6 s after the kill, gw2's buckets completed again from 1.0 s on.
    assert abs(f["recovered_s"] - 1.0) < 1e-9
    assert abs(f["moved_first_s"] - 1.0) < 1e-9 and f["moved_ok"] == 2
    assert abs(f["table_s"] - 0.4) < 1e-9


def test_registered_and_in_the_quick_run():
    registry = scenarios.load_all()
    mod = registry["hub-scale"]
    assert mod.PARAMS["full"]["terminals"] >= 1000
    # A simulated terminal keeps pool x 3 connections: a process of them stays under the 20,000 open files.
    p = mod.PARAMS["full"]
    assert -(-p["terminals"] // p["spaces"]) * p["pool"] * 3 + 1000 < 20_000
    assert "hub-scale" in run.one_of_each_kind(registry)
    json.dumps(mod.PARAMS)


def test_doc_table_has_a_row_per_figure_and_a_column_per_size():
    from bench import records
    from bench.scenarios import hub_scale

    recs = [
        records.measured("hub-scale", "T60", "setup_rate", 600.0, "conn/s", "2 s"),
        records.measured("hub-scale", "T1000", "setup_rate", 400.0, "conn/s", "60 s"),
        records.measured("hub-scale", "T1000", "first_byte_p50", 3.0, "ms"),
        records.skipped("hub-scale", "T300", "no lab"),
    ]
    text = hub_scale.doc_tables(recs)
    lines = text.splitlines()
    assert lines[0] == "| figure | T60 | T1000 | unit | note |"
    assert lines[2].startswith("| setup_rate | 600") and "| conn/s | 60 s |" in lines[2]
    assert lines[3].startswith("| first_byte_p50 |  | 3")
    assert "Skipped T300: no lab" in text


def test_source_addresses_fit_the_plan():
    addrs = hubnet.source_addresses(4, 250)
    assert addrs[0] == "10.91.28.1" and addrs[-1] == "10.91.28.250"
    assert len(set(hubnet.source_addresses(1, 1000))) == 1000


def test_setup_curve_and_flow_series():
    events = [{"t0": 10.0, "ready_at": [11.0, 12.0]}, {"t0": 10.5, "ready_at": [13.0]}]
    assert hubstats.setup_curve(events) == [(0.0, 0), (1.0, 1), (2.0, 2), (3.0, 3)]
    assert hubstats.setup_curve(events, points=1)[-1] == (3.0, 3)
    flows = [flow(99.9, "ok"), flow(100.1, "no_conn"), flow(100.2, "ok"), flow(100.8, "ok")]
    s = hubstats.flow_series(flows, 100.0, 0.5)
    assert s["completed"] == [(-0.5, 1), (0.0, 1), (0.5, 1)]
    assert s["failed"] == [(-0.5, 0), (0.0, 1), (0.5, 0)]
    assert hubstats.flow_series([], 0.0, 1.0) == {"completed": [], "failed": []}
