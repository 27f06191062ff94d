"""The BoD scenarios' pieces that need no lab: series summaries, records, the gateway config helper
(against the gateway test double, perigee_fakes, on a Unix socket) and the API's BoD derivation for geo-skyplex."""

from collections.abc import Iterator
from pathlib import Path

import pytest

from bench import bod
from bench.profiles import figures
from bench.scenarios import bod_tuning as bt
from bench.scenarios import caini_bod as cb
from bench.scenarios import web_pages
from bench.tests.fake_hub import HUB_CONFIG
from bench.tools import gwconfig
from bench.tools.ss_parse import busiest_per_sample
from bench.transfer import Transfer
from perigee_fakes.fake_gateway import FakeGateway

RATE = 1_144_000.0


def ramp(t_full: float, duration: float, rate: float = RATE, slow: float = 44_000.0):
    """Cumulative bytes every 0.1 s: `slow` bit/s until t_full, then `rate`."""
    out, total = [], 0.0
    for i in range(1, round(duration * 10) + 1):
        t = i / 10
        total += (rate if t > t_full else slow) / 8 * 0.1
        out.append((t, total))
    return out


def with_gap(samples, start: float, end: float):
    """The same series with nothing received in (start, end]: a stall."""
    out, lost = [], 0.0
    prev = 0.0
    for t, b in samples:
        if start < t <= end:
            lost += b - prev
        prev = b
        out.append((t, b - lost))
    return out


def test_window_goodput_is_bytes_over_the_window():
    s = ramp(0.0, 10.0)
    assert bod.window_goodput_bps(s, 2.0, 6.0, RATE) == pytest.approx(RATE)
    with pytest.raises(ValueError):
        bod.window_goodput_bps(s, 3.0, 3.0, RATE)


def test_recovery_counts_from_the_event_end():
    s = with_gap(ramp(0.0, 30.0), 10.0, 20.0)
    assert bod.time_to_fraction_after(s, RATE, 20.0) == pytest.approx(1.0, abs=0.11)
    never = with_gap(ramp(0.0, 30.0), 10.0, 30.0)
    assert bod.time_to_fraction_after(never, RATE, 20.0) is None


def test_gateway_roles():
    assert bod.gateway_roles(None) == []
    assert bod.gateway_roles("hub") == ["hub"]
    assert bod.gateway_roles("both") == ["hub", "terminal"]


def test_check_run_refuses_unsplit_or_wrong_cc():
    run = bod.FlowRun(samples=[(1.0, 100.0)], cc_actual="cubic")
    assert bod.check_run(run, "cubic", gateway=False) is None
    assert "not reno" in (bod.check_run(run, "reno", gateway=False) or "")
    assert "gateway" in (bod.check_run(run, "reno", gateway=True) or "")
    run.cwnd = [(1.0, 10.0)]
    assert bod.check_run(run, "reno", gateway=True) is None
    assert "no data" in (bod.check_run(bod.FlowRun(samples=[], cc_actual="x"), "x", False) or "")


def test_variant_names_and_paper_keys():
    assert cb.variant_name("clean", "e2e", "reno") == "clean/e2e/reno"
    assert cb.variant_name("udp-spike", "gateway-hub", "reno") == "udp-spike/gateway-hub"
    assert cb.paper_key("clean/e2e/reno") == "e2e/reno"
    assert cb.PAPER_T90[cb.paper_key("clean/gateway-hub")] == ("PEPsal", 16.0)
    assert cb.disturbance("clean", 20) is None
    spike = cb.disturbance("udp-spike", 20)
    assert spike == {
        "kind": "udp-spike",
        "at_s": 20,
        "rate_bps": 9_500_000,
        "length_s": 10.0,
    }
    assert cb.disturbance("wired-tcp", 5)["flows"] == 5
    with pytest.raises(ValueError):
        cb.disturbance("solar-flare", 1)


def test_full_runs_cover_every_condition_and_variant():
    runs = cb.PARAMS["full"]["runs"]
    assert len(runs) == 18 and len({tuple(r) for r in runs}) == 18
    assert {r[0] for r in runs} == {"clean", "udp-spike", "wired-tcp"}


def by(recs, metric, unit=None):
    return {r.variant: r for r in recs if r.metric == metric and (unit is None or r.unit == unit)}


def test_clean_records_carry_paper_and_target():
    link = figures("geo-skyplex")
    params = cb.PARAMS["full"]
    recs = cb.summarize("clean/gateway-hub", bod.FlowRun(ramp(3.0, 40)), link, params, None)
    t90 = by(recs, "t90", "s")["clean/gateway-hub"]
    assert t90.value == pytest.approx(4.0, abs=0.11)
    assert "PEPsal: 16 s" in t90.note and "target < 6 s: met" in t90.note
    slow = cb.summarize("clean/gateway-hub", bod.FlowRun(ramp(9.0, 40)), link, params, None)
    assert "NOT met" in by(slow, "t90", "s")["clean/gateway-hub"].note
    flat = cb.summarize("clean/e2e/reno", bod.FlowRun(ramp(50.0, 40)), link, params, None)
    assert by(flat, "t90")["clean/e2e/reno"].value is None


def test_spike_records_penalty_and_recovery():
    link = figures("geo-skyplex")
    params = cb.PARAMS["full"]
    clean = bod.FlowRun(ramp(0.0, 40))
    spiked = bod.FlowRun(with_gap(ramp(0.0, 40), 20.0, 30.0), event=(20.0, 30.0))
    recs = cb.summarize("udp-spike/e2e/reno", spiked, link, params, clean)
    assert by(recs, "penalty")["udp-spike/e2e/reno"].value == pytest.approx(50, abs=1)
    assert by(recs, "recovery")["udp-spike/e2e/reno"].value == pytest.approx(1.0, abs=0.11)
    assert by(recs, "goodput_after")["udp-spike/e2e/reno"].value == pytest.approx(0.572, abs=0.01)


def test_doc_extra_puts_the_paper_beside_ours():
    link = figures("geo-skyplex")
    params = cb.PARAMS["full"]
    recs = cb.summarize("clean/gateway-hub", bod.FlowRun(ramp(3.0, 40)), link, params, None)
    recs += cb.summarize("clean/e2e/reno", bod.FlowRun(ramp(50.0, 40)), link, params, None)
    text = cb.doc_extra(recs)
    assert "| clean/gateway-hub | PEPsal 16 s | 3.9 s | < 6 s: met |" in text
    assert "| clean/e2e/reno | SACK 29 s | n/a (not reached in 40 s) |  |" in text


# --- gwconfig ----------------------------------------------------------------------------------


@pytest.fixture
def gateway(tmp_path: Path) -> Iterator[FakeGateway]:
    """The gateway test double (perigee_fakes) on a Unix socket, running the hub's config."""
    gw = FakeGateway(tmp_path / "gw.sock", running=HUB_CONFIG)
    with gw:
        yield gw


def test_get_and_put_over_the_control_socket(gateway):
    path = str(gateway.socket_path)
    cfg = gwconfig.get_config(path)
    assert cfg["revision"] == "satlab-hub"
    cfg["satellite"]["initcwnd"] = 49
    assert gwconfig.put_config(path, cfg)["revision"] == "satlab-hub"
    assert gwconfig.get_config(path)["satellite"]["initcwnd"] == 49
    cfg["satellite"]["initcwnd"] = 5000
    with pytest.raises(gwconfig.GatewayConfigError, match="PUT /v1/config: HTTP 422: invalid_config"):
        gwconfig.put_config(path, cfg)
    # The refused config changed nothing: one apply, the one before it.
    assert [c["satellite"]["initcwnd"] for c in gateway.applied] == [49]
    assert gwconfig.get_config(path)["satellite"]["initcwnd"] == 49


def test_socket_path_follows_satlab_run_dir():
    assert gwconfig.socket_path("pc-", "hub") == "/run/satlab/pc-/gw-pc-hub.sock"


def test_skyplex_bod_inputs_cap_rbdc_at_the_carrier():
    inputs = gwconfig.profile_bod_inputs("geo-skyplex")
    assert inputs["return_cra_bps"] == 44_000
    assert inputs["return_cra_bps"] + inputs["return_rbdc_max_bps"] == 1_144_000
    assert (inputs["base_rtt_ms"], inputs["allocation_delay_ms"]) == (600.0, 1346.0)
    assert inputs["terminal_buffer_bytes"] == 1_000_000
    with pytest.raises(gwconfig.GatewayConfigError):
        gwconfig.profile_bod_inputs("geo-hts")


def test_tuned_and_untuned_configs():
    base = {
        "schema": 1,
        "revision": "satlab-hub",
        "satellite": {"routes": [1], "initcwnd": 10},
    }
    tuned = gwconfig.apply_tuning(base, gwconfig.profile_bod_inputs("geo-skyplex"))
    flat = gwconfig.tuned_settings(tuned)
    # base RTT, not base RTT + allocation delay, for rho; the carrier rate for pacing;
    # 2 BDPs of (600 + 1346) ms at 1.144 Mbit/s in 1448-byte segments for the ceiling; the receive
    # window and buffers cover 600 ms + the wait for the first full grant (2 + ceil(1346 / 820)
    # superframes of 820 ms): 3.88 s at 1.144 Mbit/s = 554,840 B = 384 segments.
    assert flat["hybla.base_rtt_ms"] == 600
    assert flat["satellite.pacing_rate_bps"] == 1_144_000
    assert flat["hybla.cwnd_max"] == 385
    assert flat["satellite.initrwnd"] == 384
    assert flat["satellite.sndbuf_bytes"] == 1_109_680
    assert flat["satellite.rcvbuf_bytes"] == 2 * 1_109_680  # four windows to receive into
    assert tuned["satellite"]["routes"] == [1] and tuned["revision"] == "bench-bod-tuned"
    assert base["satellite"]["initcwnd"] == 10  # the input is not modified
    plain = gwconfig.tuned_settings(gwconfig.untuned(tuned))
    assert plain == {
        "satellite.sndbuf_bytes": 4194304,
        "satellite.rcvbuf_bytes": 4194304,
        "satellite.pacing_rate_bps": 0,
        "satellite.initcwnd": 10,
        "satellite.initrwnd": 0,
        "hybla.base_rtt_ms": 0,
        "hybla.cwnd_max": 0,
        "shaping.rate_bps": 0,
        "shaping.overhead_bytes": 0,
    }
    assert gwconfig.untuned(tuned)["shaping"]["enabled"] is False
    # The same mapping as the API's "write to config": the congestion control, the shaper and the link's rates too.
    assert tuned["satellite"]["congestion_control"] == gwconfig.derive_congestion_control(
        gwconfig.profile_bod_inputs("geo-skyplex")
    )
    assert tuned["shaping"]["enabled"] is True and flat["shaping.rate_bps"] > 0
    assert tuned["satellite"]["forward_rate_bps"] > 0 and tuned["satellite"]["return_rate_bps"] > 0


# --- bod-tuning --------------------------------------------------------------------------------


TUNED_HUB = {
    "hub": {
        "satellite.initcwnd": 49,
        "satellite.initrwnd": 384,
        "hybla.base_rtt_ms": 600,
        "hybla.cwnd_max": 385,
    }
}


def test_hybla_note_flags_parameters_changed_by_another_gateway():
    entry = {"applied": TUNED_HUB, "hybla_seen": {"base_rtt_ms": 600, "cwnd_max": 385}}
    assert bt.hybla_note(entry) == ""
    entry["hybla_seen"] = {"base_rtt_ms": 0, "cwnd_max": 0}
    assert "WARNING" in bt.hybla_note(entry) and "another gateway" in bt.hybla_note(entry)
    assert bt.hybla_note({"applied": TUNED_HUB, "hybla_seen": {}}) == ""


def test_hybla_params_are_the_hub_namespace_entry_else_host_wide(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    status = {
        "base_rtt_ms": 0,
        "cwnd_max": 0,
        "netns_cookie": 7,
        "netns": [
            {"cookie": 3, "base_rtt_ms": 300, "cwnd_max": 100},
            {"cookie": 7, "base_rtt_ms": 600, "cwnd_max": 385},
        ],
    }
    monkeypatch.setattr(gwconfig, "socket_path", lambda prefix, role: "unused")

    class Answers:
        """The control client, answering GET /v1/hybla with `status`."""

        def __init__(self, sock: str) -> None:
            self.json = self

        def hybla(self) -> dict[str, object]:
            return status

    monkeypatch.setattr(bt, "GatewayClient", Answers)
    lb = type("Lab", (), {"prefix": "t-"})()
    # Perigee's BPF Hybla: the hub's own namespace entry, not another lab's nor the host-wide one.
    assert bt.hybla_params(lb) == {"base_rtt_ms": 600, "cwnd_max": 385}
    # The kernel's tcp_hybla (or no entry): the host-wide values.
    status["netns"] = []
    assert bt.hybla_params(lb) == {"base_rtt_ms": 0, "cwnd_max": 0}


def test_settings_note_names_each_role_and_field():
    note = bt.settings_note(TUNED_HUB)
    assert note.startswith("hub: ") and "base_rtt_ms=600" in note and "initrwnd=384" in note


def test_transfer_records_t90_target_and_skips():
    link = figures("geo-skyplex")
    tr = Transfer("reno", 1 << 40, 0, ramp(3.0, 15), cwnd=[(1.0, 385.0)])
    entry = {"applied": TUNED_HUB, "result": tr, "hybla_seen": {}}
    recs = bt.transfer_records("gateway-both/tuned", entry, link)
    t90 = by(recs, "t90", "s")["gateway-both/tuned"]
    assert t90.value == pytest.approx(3.9, abs=0.11) and "target < 6 s: met" in t90.note
    assert by(recs, "completion")["gateway-both/tuned"].value is None
    done = Transfer("reno", 1_000_000, 1_000_000, [(1.0, 5e5), (8.2, 1e6)], cwnd=[(1.0, 9.0)])
    finished = bt.transfer_records("v", {**entry, "result": done}, link)
    assert by(finished, "completion")["v"].value == 8.2
    tr.cwnd = []
    assert bt.transfer_records("v", entry, link)[0].metric == "skipped"
    entry["result"] = "transfer failed: x"
    assert bt.transfer_records("v", entry, link)[0].note == "transfer failed: x"


def test_page_records_ratio_to_the_physical_limit():
    link = figures("geo-skyplex")
    ld = web_pages.Load(load_s=12.0, html_s=2.0, connections=6, objects=17, hits=0)
    entry = {"applied": TUNED_HUB, "result": ld, "hybla_seen": {}}
    recs = bt.page_records("gateway-hub/tuned", entry, link, "page2")
    limit = web_pages.physical_limit_s("page2", link.forward_bps, link.rtt_s)
    assert by(recs, "page_limit")["gateway-hub/tuned"].value == pytest.approx(limit)
    assert by(recs, "page_vs_limit")["gateway-hub/tuned"].value == pytest.approx(12.0 / limit)
    failed = bt.page_records(
        "v",
        {"applied": {}, "result": "http load: boom", "hybla_seen": {}},
        link,
        "page2",
    )
    assert failed[0].value is None and failed[0].note == "http load: boom"


def test_bod_tuning_doc_table():
    link = figures("geo-skyplex")
    tr = Transfer("reno", 1 << 40, 0, ramp(3.0, 15), cwnd=[(1.0, 385.0)])
    recs = bt.transfer_records(
        "gateway-both/tuned",
        {"applied": TUNED_HUB, "result": tr, "hybla_seen": {}},
        link,
    )
    text = bt.doc_extra(recs)
    assert "| gateway-both/tuned | 3.9 s | n/a | n/a |" in text


def test_the_hub_sample_is_the_socket_that_carried_the_flow() -> None:
    # On the peer path the terminal's idle warm connections share the flow's local port at the hub.
    samples = [
        {"t": 1.0, "local": "10.71.2.2:7072", "cwnd": 10, "bytes_acked": 120},
        {"t": 1.0, "local": "10.71.2.2:7072", "cwnd": 385, "bytes_acked": 90_000},
        {"t": 1.1, "local": "10.71.2.2:7072", "cwnd": 385, "bytes_acked": 150_000},
        {"t": 1.1, "local": "10.71.2.2:7072", "cwnd": 10},
    ]
    picked = busiest_per_sample(samples)
    assert [(s["t"], s["cwnd"]) for s in picked] == [(1.0, 385), (1.1, 385)]
