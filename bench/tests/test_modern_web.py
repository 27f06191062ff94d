"""modern-web's harness: the page generator, the floor, the load parser, the schedule, the
gateway config handling (a refused config is a skipped variant), the DNS query codec."""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from contextlib import ExitStack
from pathlib import Path

import pytest

from bench import webfloor
from bench.profiles import figures
from bench.scenarios import modern_web as mw
from bench.tests.fake_hub import HUB_CONFIG
from bench.tools import dnsq, gwconfig
from bench.webload import LoadError, PageLoad, parse_result
from perigee_fakes.fake_gateway import FakeGateway
from satlab import webnames, webpages

MIB = 1024 * 1024
LABEL = "k3x9q2aa"


# --- the page generator ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("page", "objects", "mib", "origins"),
    [("blog", 15, 0.3, 2), ("news", 56, 1.8, 6), ("shop", 123, 4.9, 6)],
)
def test_pages_have_the_declared_counts_sizes_and_origins(page, objects, mib, origins):
    pg = webpages.page(page)
    assert len(pg.objects) == objects
    assert abs(pg.total_bytes / MIB - mib) < 0.001
    assert len(pg.origins) == origins
    for obj in pg.objects:
        assert len(webpages.body(page, obj.path, LABEL)) == obj.size, obj.path


def test_bodies_are_deterministic_and_label_length_keeps_sizes():
    for obj in webpages.page("news").objects:
        a = webpages.body("news", obj.path, LABEL)
        assert a == webpages.body("news", obj.path, LABEL)
        assert len(webpages.body("news", obj.path, "00000000")) == len(a)
    digest = hashlib.sha256(webpages.body("shop", "img/7.png", LABEL)).hexdigest()
    assert digest == hashlib.sha256(webpages.body("shop", "img/7.png", "zzzzzzzz")).hexdigest()


@pytest.mark.parametrize("page", webpages.PAGE_NAMES)
def test_every_object_is_named_by_its_parent_only(page):
    """The chains are real: an object's URL appears in its parent's body and in no other
    object's body, so the browser can find it only when the parent has arrived."""
    pg = webpages.page(page)
    bodies = {o.path: webpages.body(page, o.path, LABEL) for o in pg.objects}
    for obj in pg.objects:
        if obj.parent is None:
            assert obj.kind == "html" and obj.depth == 0
            continue
        url = pg.url(obj, LABEL).encode()
        named_by = [p for p, b in bodies.items() if url in b]
        assert named_by == [obj.parent], (obj.path, named_by)
        assert obj.depth == pg.by_path()[obj.parent].depth + 1


def test_chains_reach_depth_four_with_a_json_fetch():
    pg = webpages.page("news")
    kinds_at = {d: {o.kind for o in pg.objects if o.depth == d} for d in range(5)}
    assert kinds_at[0] == {"html"}
    assert {"css", "js", "img"} <= kinds_at[1]
    assert "js" in kinds_at[2] and "json" in kinds_at[3] and kinds_at[4] == {"img"}
    html = webpages.body("news", "", LABEL).decode()
    assert '<meta name="pw-objects" content="56">' in html


def test_images_are_pngs_and_the_json_parses():
    img = webpages.body("news", "img/0.png", LABEL)
    assert img.startswith(b"\x89PNG\r\n\x1a\n") and img.endswith(b"IEND\xaeB`\x82")
    data = json.loads(webpages.body("news", "json/0.json", LABEL))
    assert all(u.startswith(f"https://{LABEL}.img.site.test/") for u in data["images"])


def test_unknown_pages_objects_and_labels_are_refused():
    with pytest.raises(webpages.PageError):
        webpages.page("nope")
    with pytest.raises(webpages.PageError):
        webpages.body("news", "img/999.png", LABEL)
    with pytest.raises(webnames.WebNameError):
        webnames.host_of("www", "UPPER123")
    with pytest.raises(webnames.WebNameError):
        webnames.split_host("www.example.com")
    origin, label = webnames.split_host(f"{LABEL}.cdn.libs.test:443")
    assert origin.key == "cdn" and label == LABEL


# --- the floor ---------------------------------------------------------------------------------

RATE, RTT = 50e6, 0.6


def item(path, origin, size, parent, kind="img"):
    return webfloor.Item(path, origin, kind, size, parent)


def test_floor_of_a_lone_html_is_setup_request_and_bytes():
    page = [item("", "www", 14480, None, "html")]
    bytes_s = 14480 * 1514 / 1448 * 8 / RATE
    cold = webfloor.page_floor(page, RATE, RTT, cold_dns=True)
    warm = webfloor.page_floor(page, RATE, RTT, cold_dns=False)
    assert cold.floor_s == pytest.approx(3 * RTT + bytes_s)  # DNS, TLS, request
    assert warm.floor_s == pytest.approx(2 * RTT + bytes_s)


def test_floor_follows_the_chain_and_reuses_an_origins_connection():
    page = [
        item("", "www", 1000, None, "html"),
        item("a.js", "static", 1000, "", "js"),
        item("b.js", "static", 1000, "a.js", "js"),  # same origin: 1 RTT, no new handshake
        item("c.png", "img", 1000, "b.js"),  # new origin: TLS + request (+ DNS when cold)
    ]
    b = 1000 * 1514 / 1448 * 8 / RATE
    f = webfloor.page_floor(page, RATE, RTT, cold_dns=True)
    # html first byte at 3 RTT; a.js: +3 RTT + b; b.js: +1 RTT + b; c.png: +3 RTT + b.
    assert f.arrivals["c.png"] == pytest.approx(10 * RTT + 3 * b)
    assert f.floor_s == pytest.approx(10 * RTT + 3 * b)
    warm = webfloor.page_floor(page, RATE, RTT, cold_dns=False)
    assert f.floor_s - warm.floor_s == pytest.approx(3 * RTT)  # one lookup per new origin on the path


def test_html_children_start_at_its_first_byte_and_bytes_can_dominate():
    big = 50_000_000
    page = [item("", "www", big, None, "html"), item("x.png", "img", 1000, "")]
    f = webfloor.page_floor(page, RATE, RTT, cold_dns=False)
    assert f.arrivals["x.png"] < f.arrivals[""]  # found while the HTML still streams
    assert f.floor_s == pytest.approx(f.bandwidth_s)
    assert f.bandwidth_s == pytest.approx(2 * RTT + (big + 1000) * 1514 / 1448 * 8 / RATE)


def test_an_origin_connects_when_first_needed_by_any_branch():
    page = [
        item("", "www", 1000, None, "html"),
        item("slow.css", "static", 5_000_000, "", "css"),
        item("quick.js", "static", 1000, "", "js"),
        item("late.png", "img", 1000, "slow.css"),
        item("early.png", "img", 1000, "quick.js"),
    ]
    f = webfloor.page_floor(page, RATE, RTT, cold_dns=False)
    # img's connection starts when quick.js arrives, so late.png needs only its request then.
    assert f.arrivals["late.png"] == pytest.approx(f.arrivals["slow.css"] + RTT + 1000 * 1514 / 1448 * 8 / RATE)


def test_floor_rejects_malformed_pages():
    with pytest.raises(ValueError):
        webfloor.page_floor([], RATE, RTT, cold_dns=True)
    with pytest.raises(ValueError):
        webfloor.page_floor(
            [item("", "www", 1, None, "html"), item("x", "img", 1, "missing")],
            RATE,
            RTT,
            True,
        )


def test_floor_of_the_generated_pages_via_the_manifest():
    items = webfloor.items_from_manifest(webpages.manifest("news"))
    cold = webfloor.page_floor(items, RATE, RTT, cold_dns=True)
    warm = webfloor.page_floor(items, RATE, RTT, cold_dns=False)
    # At least: html, head script, inserted script, JSON, image = 5 requests, 2 origins' setup.
    assert cold.floor_s > 5 * RTT + 2 * 2 * RTT
    assert 0 < cold.floor_s - warm.floor_s <= 5 * RTT


# --- the load parser ---------------------------------------------------------------------------


def req(
    url,
    *,
    dns=(0, 600),
    connect=(600, 1800),
    tls=(1200, 1800),
    send=1800,
    headers=2400,
    end=2500,
    status=200,
    protocol="h2",
    reused=False,
):
    return {
        "url": url,
        "status": status,
        "protocol": protocol,
        "reused": reused,
        "dns_start_ms": dns[0],
        "dns_end_ms": dns[1],
        "connect_start_ms": connect[0],
        "connect_end_ms": connect[1],
        "tls_start_ms": tls[0],
        "tls_end_ms": tls[1],
        "send_start_ms": send,
        "headers_end_ms": headers,
        "end_ms": end,
    }


def answer(requests, load_ms=3000.0):
    return {"ok": True, "url": "https://x/", "load_ms": load_ms, "requests": requests}


def test_parse_breaks_down_new_connections_and_all_requests():
    none = (-1, -1)
    raw = [
        req("https://a/"),
        req(
            "https://a/x",
            dns=none,
            connect=none,
            tls=none,
            send=2600,
            headers=3200,
            end=3900,
        ),
    ]
    ld = parse_result(answer(raw, load_ms=3500), expect=2)
    assert ld.load_s == pytest.approx(3.9)  # the last byte came after the load event
    assert ld.load_event_s == pytest.approx(3.5)
    assert ld.connections == 1
    bd = ld.breakdown()
    assert bd["dns_ms"] == 600 and bd["tcp_ms"] == 600 and bd["tls_ms"] == 600
    assert bd["first_byte_ms"] == pytest.approx((600 + 600) / 2)
    assert bd["transfer_ms"] == pytest.approx((100 + 700) / 2)


def test_parse_counts_quic_handshakes_as_connect_without_tls():
    ld = parse_result(answer([req("https://a/", tls=(-1, -1), protocol="h3")]), expect=1)
    assert ld.breakdown()["tcp_ms"] == 1200 and ld.breakdown()["tls_ms"] is None
    assert ld.protocol_share("h3") == 1.0


def test_a_reused_connection_is_not_a_new_one():
    ld = parse_result(answer([req("https://a/", reused=True)]), expect=1)
    assert ld.connections == 0 and ld.breakdown()["dns_ms"] is None


@pytest.mark.parametrize(
    ("raw", "expect", "why"),
    [
        (
            {"ok": False, "url": "u", "error": "net::ERR_NAME_NOT_RESOLVED"},
            1,
            "ERR_NAME",
        ),
        (answer([req("https://a/", status=404)]), 1, "not 200"),
        (answer([req("https://a/")]), 2, "1 requests, the page has 2"),
        (answer([req("https://a/")], load_ms=-1), 1, "no load event"),
        (answer([req("https://a/", send=2000, headers=1000)]), 1, "out of order"),
    ],
)
def test_parse_refuses_incomplete_or_failed_loads(raw, expect, why):
    with pytest.raises(LoadError, match=why):
        parse_result(raw, expect)


# --- the schedule ------------------------------------------------------------------------------


def test_schedule_interleaves_variants_and_rotates_each_repetition():
    variants = ["no-gateway", "hub", "both"]
    steps = mw.schedule(["news", "shop"], variants, 3)
    combos = {
        ("no-gateway", "cold"),
        ("hub", "cold"),
        ("both", "cold"),
        ("both", "warm"),
    }
    for rep in range(3):
        for page in ("news", "shop"):
            got = [(s.variant, s.dns) for s in steps if s.rep == rep and s.page == page]
            assert sorted(got) == sorted(combos)  # each once per repetition: never a block
    firsts = [next(s for s in steps if s.rep == r).variant + next(s for s in steps if s.rep == r).dns for r in range(3)]
    assert len(set(firsts)) == 3  # the order rotates
    assert len(steps) == 3 * 2 * 4


# --- gateway config: set through the control socket, refusals become skipped variants -------


class FakeLab:
    def __init__(self, prefix: str) -> None:
        self.prefix = prefix


def test_a_refused_config_skips_the_variant_with_the_gateways_error(monkeypatch):
    with tempfile.TemporaryDirectory() as run_root:
        monkeypatch.setattr(gwconfig, "RUN_ROOT", run_root)
        os.makedirs(f"{run_root}/pw-x-")
        # The gateway test double (perigee_fakes): it refuses a field its schema does not know, as the daemon
        # of an older release refuses a setting a newer benchmark names.
        with FakeGateway(Path(f"{run_root}/pw-x-/gw-pw-x-hub.sock"), running=HUB_CONFIG) as gw:
            h = mw.LabHandle("hub", FakeLab("pw-x-"), driver=None, settle_s=0)
            h.base["hub"] = gwconfig.get_config(h.socket("hub"))
            unknown = mw.Variant("hub-newer-off", "hub", "off", (("splitter.newer_setting", False),))
            refused = h.apply(unknown)
            assert refused and "HTTP 422: invalid_config" in refused and "splitter.newer_setting" in refused
            assert gw.applied == []
            assert h.apply(unknown) == refused  # remembered: not asked again
            assert h.apply(mw.VARIANT_BY_NAME["hub"]) is None  # defaults: the base config back
            assert gw.applied[-1]["splitter"] == h.base["hub"]["splitter"]
            assert h.apply(mw.Variant("quic-fallback", "hub", "race", (("quic", "fallback"),))) is None
            assert gw.applied[-1]["quic"] == "fallback"
            assert len(gw.applied) == 2
            assert 'quic="fallback"' in h.note() and "splitter.nodelay=true" in h.note()


def test_a_cluster_lab_configures_the_terminal_and_every_hub_gateway(monkeypatch):
    """In a hub cluster the hub roles are gw1..gw3 (satlab's namespaces), each with its own control
    socket: a variant's settings go to every one of them and to the terminal."""
    roles = ("terminal", "gw1", "gw2", "gw3")
    assert mw.LabHandle("cluster3", FakeLab("pw-c-"), driver=None).roles == list(roles)
    assert mw.LabHandle("both", FakeLab("pw-c-"), driver=None).roles == ["terminal", "hub"]
    assert mw.LabHandle("none", FakeLab("pw-c-"), driver=None).roles == []
    assert mw.lab_overrides("cluster3") == ["--hub-gateways", "3"]
    assert mw.lab_overrides("both") == [] and mw.lab_overrides("none") == []
    assert len(set(mw.lab_prefixes().values())) == len(mw.LAB_GATEWAY)  # a prefix per lab
    with tempfile.TemporaryDirectory() as run_root, ExitStack() as stack:
        monkeypatch.setattr(gwconfig, "RUN_ROOT", run_root)
        os.makedirs(f"{run_root}/pw-c-")
        gws = {
            r: stack.enter_context(FakeGateway(Path(f"{run_root}/pw-c-/gw-pw-c-{r}.sock"), running=HUB_CONFIG))
            for r in roles
        }
        h = mw.LabHandle("cluster3", FakeLab("pw-c-"), driver=None, settle_s=0)
        for r in roles:
            h.base[r] = gwconfig.get_config(h.socket(r))
        assert h.apply(mw.Variant("cluster-nodelay-off", "cluster3", "off", (("splitter.nodelay", False),))) is None
        for r, gw in gws.items():
            assert gw.applied[-1]["splitter"]["nodelay"] is False, r
        assert h.apply(mw.VARIANT_BY_NAME["both-cluster3"]) is None
        for r, gw in gws.items():
            assert gw.applied[-1]["revision"] == "bench-modern-web-both-cluster3", r
        assert [part.split(":")[0] for part in h.note().split("; ")] == list(roles)


def test_the_cluster_variant_runs_beside_both_in_the_full_and_the_quick_run():
    for mode in ("full", "quick"):
        variants = mw.PARAMS[mode]["variants"]
        assert "both-cluster3" in variants and "both" in variants and "no-gateway" in variants, mode
    v = mw.VARIANT_BY_NAME["both-cluster3"]
    assert (v.lab, v.quic, v.settings, v.ber, v.single_hub) == ("cluster3", "off", (), 0.0, "both")
    assert v.dns_states == mw.VARIANT_BY_NAME["both"].dns_states
    steps = mw.schedule(["news"], ["no-gateway", "both", "both-cluster3"], 2)
    for rep in range(2):
        got = [(s.variant, s.dns) for s in steps if s.rep == rep]
        combos = [("no-gateway", "cold"), ("both", "cold"), ("both", "warm")]
        combos += [("both-cluster3", "cold"), ("both-cluster3", "warm")]
        assert sorted(got) == sorted(combos)
    assert steps[0] != steps[5] and steps[0].variant != steps[5].variant  # rotated, never a block


def test_set_path_creates_sections_and_refuses_non_objects():
    cfg = {"splitter": {"enabled": True}, "quic": "pass"}
    mw.set_path(cfg, "peer.enabled", False)
    assert cfg["peer"] == {"enabled": False}
    with pytest.raises(gwconfig.GatewayConfigError):
        mw.set_path(cfg, "quic.mode", "x")


# --- DNS queries -------------------------------------------------------------------------------


def test_dns_query_encoding_and_reply_header():
    q = dnsq.encode_query(0x1234, "ab.site.test", 65)
    assert q[:2] == b"\x12\x34" and b"\x02ab\x04site\x04test\x00" in q and q.endswith(b"\x00\x41\x00\x01")
    reply = b"\x12\x34\x85\x83" + b"\x00\x01\x00\x00\x00\x00\x00\x00"
    assert dnsq.decode_header(reply) == (0x1234, 3, 0)
    with pytest.raises(ValueError):
        dnsq.decode_header(q)  # a query is not a reply
    with pytest.raises(ValueError):
        dnsq.encode_query(1, "x" * 64 + ".test", 1)


# --- records and the doc's target table --------------------------------------------------------


def fake_load(seconds: float) -> PageLoad:
    end = seconds * 1000
    raw = [req(f"https://a/{i}", headers=end - 100, end=end) for i in range(56)]
    return parse_result(answer(raw, load_ms=end - 50), expect=56)


def test_records_compare_each_variant_with_no_gateway_and_the_floor():
    res = mw.Results()
    res.loads = {
        "news/no-gateway/cold": [fake_load(14.0), fake_load(15.0), fake_load(16.0)],
        "news/both/cold": [fake_load(8.0)],
        "news/both/warm": [fake_load(6.0)],
    }
    res.skipped = {"news/hub/cold": "hub gateway refused the config: unknown field `nodelay`"}
    res.notes = {"both": "terminal: splitter.nodelay=true"}
    params = {"pages": ["news"], "variants": ["no-gateway", "hub", "both"]}
    recs = mw.make_records(res, params, figures("geo-hts"))
    by = {(r.variant, r.metric): r for r in recs}
    assert by[("news/no-gateway/cold", "load_time")].value == 15.0
    assert by[("news/both/cold", "vs_no_gateway")].value == pytest.approx(8 / 15)
    floor_cold = by[("news/both/cold", "floor")].value
    floor_warm = by[("news/both/warm", "floor")].value
    assert floor_cold > floor_warm
    assert by[("news/both/warm", "ratio_to_floor")].value == pytest.approx(6 / floor_warm)
    assert by[("news/hub/cold", "skipped")].note.startswith("hub gateway refused")
    assert "splitter.nodelay=true" in by[("news/both/cold", "load_time")].note
    doc = mw.doc_extra(recs)
    assert "0.53×, meets ≤ 0.6×" in doc and "0.40×, meets ≤ 0.45×" in doc
    assert "- `both`: terminal: splitter.nodelay=true" in doc


def test_the_cluster_is_compared_with_the_single_hub_of_the_same_dns_state():
    res = mw.Results()
    res.loads = {
        "news/no-gateway/cold": [fake_load(15.0)],
        "news/both/cold": [fake_load(8.0), fake_load(8.2)],
        "news/both/warm": [fake_load(6.0)],
        "news/both-cluster3/cold": [fake_load(8.2)],
        "news/both-cluster3/warm": [fake_load(6.6)],
        "shop/no-gateway/cold": [fake_load(20.0)],
        "shop/both-cluster3/cold": [fake_load(9.0)],
    }
    res.skipped = {"shop/both/cold": "load failed: timeout"}
    params = {"pages": ["news", "shop"], "variants": ["no-gateway", "both", "both-cluster3"]}
    recs = mw.make_records(res, params, figures("geo-hts"))
    by = {(r.variant, r.metric): r for r in recs}
    assert by[("news/both-cluster3/cold", "vs_single_hub")].value == pytest.approx(8.2 / 8.1)
    assert by[("news/both-cluster3/warm", "vs_single_hub")].value == pytest.approx(6.6 / 6.0)
    assert by[("news/both-cluster3/cold", "vs_no_gateway")].value == pytest.approx(8.2 / 15)
    assert by[("news/both-cluster3/warm", "vs_no_gateway")].value == pytest.approx(6.6 / 15)
    missing = by[("shop/both-cluster3/cold", "vs_single_hub")]
    assert missing.value is None and "both did not run" in missing.note
    assert by[("shop/both-cluster3/cold", "vs_no_gateway")].value == pytest.approx(9 / 20)
    assert ("news/both/cold", "vs_single_hub") not in by  # only a cluster variant has one
    doc = mw.doc_extra(recs)
    assert "both-cluster3 (cold) | both-cluster3 (warm) |" in doc
    assert "8.20 s (1.01× of `both`, meets ≤ 1.05×)" in doc
    assert "6.60 s (1.10× of `both`, misses ≤ 1.05×)" in doc
    shop = next(line for line in doc.splitlines() if line.startswith("| shop |"))
    assert shop.endswith("| not run | not run |")  # no single-hub figure: no verdict


def test_schedule_can_limit_the_dns_states():
    steps = mw.schedule(["news"], ["no-gateway", "both"], 2, ("cold",))
    assert [(s.variant, s.dns) for s in steps if s.rep == 0] == [
        ("no-gateway", "cold"),
        ("both", "cold"),
    ]
    assert [(s.variant, s.dns) for s in steps if s.rep == 1] == [
        ("both", "cold"),
        ("no-gateway", "cold"),
    ]


def test_the_lossy_pair_gets_its_extra_repetitions_after_the_rest_taking_turns() -> None:
    params = {"pages": ["blog"], "reps": 2, "lossy_reps": 3, "dns_states": ("cold",)}
    variants = [mw.VARIANT_BY_NAME[v] for v in ("no-gateway", "both", "no-gateway-ber1e-06", "both-ber1e-06")]
    steps = mw.run_schedule(params, variants)
    assert len(steps) == 2 * 4 + 3 * 2
    tail = steps[8:]
    assert {s.variant for s in tail} == {"no-gateway-ber1e-06", "both-ber1e-06"}
    assert [s.rep for s in tail] == [2, 2, 3, 3, 4, 4]
    assert tail[0].variant != tail[2].variant, "the pair's order rotates"
    counts = {v.name: sum(s.variant == v.name for s in steps) for v in variants}
    assert counts == {"no-gateway": 2, "both": 2, "no-gateway-ber1e-06": 5, "both-ber1e-06": 5}
    assert mw.run_schedule({**params, "lossy_reps": 0}, variants) == steps[:8]
