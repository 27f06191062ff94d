"""Pure unit tests: rate/size parsing, profiles and overrides, content generators, reading a capture."""

from __future__ import annotations

import socket
import struct
import zlib

import pytest

from satlab import content, units
from satlab.capture import syn_sources
from satlab.cluster.announcer import RECOVER_POLLS, SLOW, UNANSWERED_S, Verdict
from satlab.httpserver import HttpError, parse_range
from satlab.profiles import PROFILES, Overrides, build_link


@pytest.mark.parametrize("text,bps", [("1536k", 1_536_000), ("50M", 50_000_000), ("1.144M", 1_144_000),
                                      ("64000", 64_000), ("2G", 2_000_000_000), ("10Mbit", 10_000_000)])
def test_parse_rate(text: str, bps: int) -> None:
    assert units.parse_rate(text) == bps


@pytest.mark.parametrize("bad", ["fast", "", "1.2.3M", "-5k"])
def test_parse_rate_rejects(bad: str) -> None:
    with pytest.raises(ValueError):
        units.parse_rate(bad)


def test_parse_size() -> None:
    assert units.parse_size("128KiB") == 131072
    assert units.parse_size("1MB") == 1_000_000
    assert units.parse_size("65536") == 65536


def test_profiles_have_sources_and_the_paper_numbers() -> None:
    for p in PROFILES.values():
        assert p.source and p.summary
    sky = PROFILES["geo-skyplex"]
    for d in (sky.forward, sky.ret):
        assert d["rate_bps"] == 1_144_000 and d["delay_ms"] == 300
        assert d["bod"] == {"cra_bps": 44_000, "rbdc_max_bps": 1_144_000, "superframe_ms": 820,
                            "allocation_delay_ms": 1346, "granularity_bps": 44_000}
    t1 = PROFILES["geo-acts-t1"]
    assert t1.forward["delay_ms"] == t1.ret["delay_ms"] == 290
    assert t1.forward["rate_bps"] == t1.ret["rate_bps"] == 1_536_000
    assert t1.forward["buffer_bytes"] > 1_536_000 * 0.58 / 8  # above the BDP, as in the paper
    hts = PROFILES["geo-hts"]
    assert (hts.forward["rate_bps"], hts.ret["rate_bps"]) == (50_000_000, 5_000_000)
    assert PROFILES["leo"].forward["delay_ms"] + PROFILES["leo"].ret["delay_ms"] == 30


def test_overrides() -> None:
    fwd, ret = build_link("geo-acts-t1", Overrides(rtt_ms=100, fwd_rate=10_000_000, per=0.01,
                                                   bod=True, bod_cra=64_000))
    assert fwd["delay_ms"] == ret["delay_ms"] == 50
    assert fwd["rate_bps"] == 10_000_000 and ret["rate_bps"] == 1_536_000
    assert fwd["per"] == ret["per"] == 0.01
    assert fwd["bod"]["cra_bps"] == 64_000 and fwd["bod"]["rbdc_max_bps"] == 10_000_000
    assert ret["bod"]["rbdc_max_bps"] == 1_536_000
    fwd, ret = build_link("geo-skyplex", Overrides(bod=False))
    assert fwd["bod"] is None and ret["bod"] is None
    fwd, _ = build_link("geo-skyplex", Overrides(bod_delay_ms=500))
    assert fwd["bod"]["allocation_delay_ms"] == 500 and fwd["bod"]["superframe_ms"] == 820
    fwd, ret = build_link("geo-skyplex", Overrides(bod_backlog_ms=0))
    assert fwd["bod"]["backlog_horizon_ms"] == ret["bod"]["backlog_horizon_ms"] == 0
    assert fwd["bod"]["cra_bps"] == 44_000
    with pytest.raises(ValueError):
        build_link("nope", Overrides())


def test_stream_is_deterministic_and_random_access() -> None:
    whole = content.stream_bytes(0, 300_000)
    assert content.stream_bytes(70_000, 100_000) == whole[70_000:170_000]
    assert len(set(whole[:65536])) == 256
    assert zlib.compress(whole, 6).__len__() > len(whole) * 0.99  # incompressible


def _png_chunks(data: bytes) -> list[tuple[bytes, bytes]]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, out = 8, []
    while pos < len(data):
        (n,) = struct.unpack(">I", data[pos:pos + 4])
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + n]
        (crc,) = struct.unpack(">I", data[pos + 8 + n:pos + 12 + n])
        assert crc == zlib.crc32(kind + body)
        out.append((kind, body))
        pos += 12 + n
    return out


def test_pages_exact_sizes_and_valid_pngs() -> None:
    p1, p2 = content.page_files("page1"), content.page_files("page2")
    assert len(p1["index.html"]) == 356 and len(p1["img1.png"]) == 391 * 1024
    assert len(p2["index.html"]) == 1741
    imgs = [v for k, v in p2.items() if k.endswith(".png")]
    assert len(imgs) == 16 and sum(map(len, imgs)) == 669 * 1024
    assert min(map(len, imgs)) == 19 * 1024 and max(map(len, imgs)) == 100 * 1024
    for data in [p1["img1.png"], *imgs]:
        chunks = _png_chunks(data)
        assert [k for k, _ in chunks][0] == b"IHDR" and chunks[-1][0] == b"IEND"
        w, h = struct.unpack(">II", chunks[0][1][:8])
        raw = zlib.decompress(b"".join(b for k, b in chunks if k == b"IDAT"))
        assert len(raw) == h * (1 + 3 * w)
    for i in range(1, 17):
        assert f'src="img{i}.png"'.encode() in p2["index.html"]


def test_parse_range() -> None:
    assert parse_range("bytes=0-9", 100) == (0, 9)
    assert parse_range("bytes=90-", 100) == (90, 99)
    assert parse_range("bytes=-10", 100) == (90, 99)
    assert parse_range("bytes=50-500", 100) == (50, 99)
    assert parse_range("bytes=0-1,5-6", 100) is None
    with pytest.raises(HttpError):
        parse_range("bytes=100-", 100)


def _frame(src: str, sport: int, dst: str, dport: int, flags: int) -> bytes:
    tcp = struct.pack("!HHIIBBHHH", sport, dport, 1, 0, 5 << 4, flags, 65535, 0, 0)
    addrs = socket.inet_aton(src), socket.inet_aton(dst)
    iph = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(tcp), 0, 0, 64, 6, 0, *addrs)
    return b"\x00" * 12 + b"\x08\x00" + iph + tcp


def test_syn_sources_counts_each_opened_connection_once() -> None:
    frames = [
        _frame("10.71.1.10", 40000, "10.71.3.10", 8081, 0x02),  # a SYN
        _frame("10.71.1.10", 40000, "10.71.3.10", 8081, 0x02),  # its retransmission
        _frame("10.71.1.10", 40001, "10.71.3.10", 8081, 0x02),  # another connection
        _frame("10.71.3.10", 8081, "10.71.1.10", 40000, 0x12),  # the SYN-ACK
        _frame("10.71.1.10", 40000, "10.71.3.10", 8081, 0x10),  # an ACK
        _frame("10.71.1.10", 40002, "10.71.3.10", 80, 0x02),  # another port
        _frame("10.71.1.10", 40003, "10.71.3.11", 8081, 0x02),  # another server
    ]
    pcap = struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1)
    for f in frames:
        pcap += struct.pack("<IIII", 0, 0, len(f), len(f)) + f
    assert syn_sources(pcap, "10.71.3.10", 8081) == {(bytes([10, 71, 1, 10]), 40000), (bytes([10, 71, 1, 10]), 40001)}


SERVES = {"config_revision": 3, "fail_open": False}


def test_the_announcer_shuts_a_gone_daemon_at_once_and_a_slow_one_only_when_it_stays_silent() -> None:
    v = Verdict()
    assert [v.want(SERVES, 9.0 + 0.1 * i) for i in range(RECOVER_POLLS)][-1] is True  # good polls announce it
    v.announced = True
    v.want(SERVES, 10.0)
    # Slow answers while the daemon still splits: kept, up to UNANSWERED_S after its last answer.
    assert v.want(SLOW, 10.6) is True
    assert v.want(SLOW, 10.0 + UNANSWERED_S - 0.1) is True
    assert v.want(SLOW, 10.0 + UNANSWERED_S + 0.1) is False  # hung: shut
    v = Verdict(announced=True, good=5, answered_at=20.0)
    assert v.want("connection refused", 20.1) is False  # gone (SIGKILL): shut at the first poll
    v = Verdict(announced=True, good=5, answered_at=20.0)
    assert v.want({"config_revision": 3, "fail_open": True}, 20.1) is False  # it says it does not serve
    # Back: a slow poll between good ones restarts the count of good polls in a row.
    v = Verdict(announced=False)
    assert [v.want(SERVES, 30.0), v.want(SLOW, 30.1), v.want(SERVES, 30.2)] == [False, False, False]
    assert v.want(SERVES, 30.3) is True
