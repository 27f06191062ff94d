from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from perigee_api import loss_tuning
from perigee_api.tuning import BodInputs, derive

# A typical GEO VSAT: 50 Mbit/s forward, 1 + 4 Mbit/s return, 550 ms base RTT, 250 ms DAMA delay.
GEO = {
    "forward_rate_bps": 50_000_000,
    "return_cra_bps": 1_000_000,
    "return_rbdc_max_bps": 4_000_000,
    "superframe_ms": 26.5,
    "allocation_delay_ms": 250,
    "base_rtt_ms": 550,
    "terminal_buffer_bytes": 256_000,
}


def test_a_new_profile_starts_from_the_models_published_example() -> None:
    # The dashboard's BoD form starts from the schema's example (webui/src/api/examples.gen.ts, generated from
    # api/openapi.json): it must be the model's own starting point, valid, with every defaulted input at its default.
    from perigee_api.export_openapi import openapi_schema

    start = BodInputs.starting()
    assert openapi_schema()["components"]["schemas"]["BodInputs"]["examples"] == [start.model_dump(mode="json")]
    for name, field in BodInputs.model_fields.items():
        if not field.is_required():
            assert getattr(start, name) == field.default, name
    assert not derive(start).warnings


def test_hub_numbers() -> None:
    t = derive(BodInputs(**GEO)).values
    assert t["rtt_eff_ms"].value == 800
    assert t["bdp_forward_bytes"].value == 5_000_000  # 50e6 × 0.8 / 8
    assert t["bdp_return_bytes"].value == 500_000  # 5e6 × 0.8 / 8
    # grant wait = 2 × 26.5 + ceil(250 / 26.5) × 26.5 = 12 × 26.5 = 318 ms; window RTT 550 + 318 = 868 ms
    assert t["grant_wait_ms"].value == 318
    assert t["window_forward_bytes"].value == 5_425_000  # 50e6 × 0.868 / 8
    assert t["window_return_bytes"].value == 542_500  # 5e6 × 0.868 / 8
    assert t["sndbuf_bytes"].value == 10_850_000  # 2 × window_forward
    assert t["rcvbuf_bytes"].value == 2_170_000  # 4 × window_return: receive buffers always hold four
    assert t["pacing_rate_bps"].value == 50_000_000
    assert t["initcwnd"].value == 100  # ceil(5e6 / 5792) = 864 → clamped
    assert t["initrwnd"].value == 375  # ceil(542500 / 1448)
    assert t["hybla_base_rtt_ms"].value == 550  # the base RTT: allocation delay must not inflate ρ
    # ceil(2 × 50e6 × 0.8 / (8 × 1448)) = ceil(6906.08): two forward BDPs (base RTT + allocation delay)
    assert t["hybla_cwnd_max"].value == 6907
    assert "6,907" in t["hybla_cwnd_max"].derivation and "0.8" in t["hybla_cwnd_max"].derivation
    assert t["min_terminal_buffer_bytes"].value == 16_563  # 5e6 × 0.0265 / 8 = 16562.5
    assert "5,000,000" in t["bdp_forward_bytes"].derivation and "0.8" in t["bdp_forward_bytes"].derivation


def test_terminal_pacing_is_bounded_by_modem_buffer_drain() -> None:
    t = derive(BodInputs(**{**GEO, "terminal_buffer_bytes": 50_000, "role": "terminal"})).values
    # drain = CRA + 8 × buffer / delay = 1e6 + 400000 / 0.25 = 2.6e6 < return rate 5e6
    assert t["pacing_return_bps"].value == 2_600_000
    assert t["pacing_rate_bps"].value == 2_600_000
    assert t["sndbuf_bytes"].value == 1_085_000  # terminal sends return: 2 × window_return
    assert t["rcvbuf_bytes"].value == 21_700_000 and t["initrwnd"].value == 1000  # 4 × window_forward; 3747 clamped
    assert "modem buffer drain" in t["pacing_return_bps"].derivation
    # The terminal sends on the return link: ceil(2 × 5e6 × 0.8 / 11584) = ceil(690.6)
    assert t["hybla_cwnd_max"].value == 691


# satlab geo-skyplex (Caini et al.): 1.144 Mbit/s both ways, CRA 44k + RBDC, 820 ms superframe,
# 1346 ms allocation delay, 600 ms base RTT, 1 MB modem buffer (bench/tools/gwconfig.profile_bod_inputs).
SKYPLEX = {
    "forward_rate_bps": 1_144_000,
    "return_cra_bps": 44_000,
    "return_rbdc_max_bps": 1_100_000,
    "superframe_ms": 820,
    "allocation_delay_ms": 1346,
    "base_rtt_ms": 600,
    "terminal_buffer_bytes": 1_000_000,
}


@pytest.mark.parametrize("role", ["hub", "terminal"])
def test_skyplex_receive_window_covers_the_wait_for_the_first_full_grant(role: str) -> None:
    t = derive(BodInputs(**SKYPLEX, role=role)).values
    # One RTT of base + allocation delay (1.946 s: 278,278 B, 193 segments) left goodput dipping at
    # 6-7 s; data must keep arriving until the first full grant: ceil(1346 / 820) = 2 superframes of
    # allocation delay + 2 of request measurement = 3280 ms, window RTT 600 + 3280 = 3.88 s.
    assert t["bdp_forward_bytes"].value == 278_278
    assert t["grant_wait_ms"].value == 3280
    assert "ceil(1,346 / 820) × 820 = 3,280 ms" in t["grant_wait_ms"].derivation
    assert t["window_forward_bytes"].value == t["window_return_bytes"].value == 554_840  # 1.144e6 × 3.88 / 8
    assert t["initrwnd"].value == 384  # ceil(554840 / 1448) = ceil(383.18), was 193
    assert "ceil(554,840 / 1448) = 384" in t["initrwnd"].derivation
    assert t["sndbuf_bytes"].value == 1_109_680  # 2 × window
    assert t["rcvbuf_bytes"].value == 2 * 1_109_680  # 4 × window
    # The cwnd ceiling stays two BDPs (385) and never below the window the peer opens (384).
    assert t["hybla_cwnd_max"].value == 385 and "max(385, 384)" in t["hybla_cwnd_max"].derivation
    assert t["initcwnd"].value == 49  # a quarter BDP: unchanged


def test_no_allocation_delay_means_no_grant_wait() -> None:
    t = derive(BodInputs(**{**SKYPLEX, "allocation_delay_ms": 0})).values
    assert t["grant_wait_ms"].value == 0
    assert t["window_forward_bytes"].value == t["bdp_forward_bytes"].value == 85_800  # 1.144e6 × 0.6 / 8
    assert t["initrwnd"].value == 60  # ceil(85800 / 1448)


def test_cwnd_max_matches_docs_example_and_clamps() -> None:
    # docs/hybla.md: geo-hts, 50 Mbit/s, 600 ms, MSS 1448 -> 5180 segments
    geo_hts = {**GEO, "base_rtt_ms": 560, "allocation_delay_ms": 40}
    assert derive(BodInputs(**geo_hts)).values["hybla_cwnd_max"].value == 5180
    tiny = {**GEO, "forward_rate_bps": 100_000, "base_rtt_ms": 20, "allocation_delay_ms": 0}
    t = derive(BodInputs(**tiny)).values["hybla_cwnd_max"]
    assert t.computed == 10 and "clamped to [10, 65,536]" in t.derivation  # ceil(0.35) = 1 → 10
    huge = {**GEO, "forward_rate_bps": 10_000_000_000, "base_rtt_ms": 700}
    assert derive(BodInputs(**huge)).values["hybla_cwnd_max"].value == 65536
    o = derive(BodInputs(**GEO), {"hybla_cwnd_max": 0}).values["hybla_cwnd_max"]
    assert o.value == 0 and o.overridden and o.computed == 6907


def test_clamps_and_warnings() -> None:
    t = derive(
        BodInputs(
            **{
                **GEO,
                "forward_rate_bps": 1_000_000,
                "base_rtt_ms": 20,
                "allocation_delay_ms": 0,
                "terminal_buffer_bytes": 2000,
            }
        )
    )
    assert t.values["sndbuf_bytes"].value == 65536  # 2 × 2500 clamped up
    assert t.values["initcwnd"].value == 10
    assert any("superframe" in w for w in t.warnings)


def test_overrides_keep_computed_value() -> None:
    t = derive(BodInputs(**GEO), {"sndbuf_bytes": 8_000_000}).values["sndbuf_bytes"]
    assert t.value == 8_000_000 and t.computed == 10_850_000 and t.overridden
    assert t.derivation.startswith("override 8,000,000")


def test_invalid_inputs_name_the_field() -> None:
    with pytest.raises(ValueError, match="forward_rate_bps"):
        BodInputs(**{**GEO, "forward_rate_bps": 0})


def test_profile_api_and_apply_to_config(operator: TestClient) -> None:
    r = operator.post("/api/v1/bod/profiles", json={"name": "geo", "inputs": GEO, "overrides": {"initcwnd": 40}})
    assert r.status_code == 201, r.text
    prof = r.json()
    assert prof["tuning"]["values"]["initcwnd"]["value"] == 40
    assert prof["tuning"]["values"]["sndbuf_bytes"]["derivation"]
    r = operator.post("/api/v1/bod/profiles", json={"name": "x", "inputs": GEO, "overrides": {"bogus": 1}})
    assert r.status_code == 422 and r.json()["error"]["field"] == "overrides.bogus"
    r = operator.post("/api/v1/bod/profiles", json={"name": "y", "inputs": {**GEO, "superframe_ms": -1}})
    assert r.status_code == 422 and "superframe_ms" in r.json()["error"]["field"]
    r = operator.post(f"/api/v1/bod/profiles/{prof['id']}/apply-to-config", json={})
    assert r.status_code == 200, r.text
    cfg = operator.get("/api/v1/config").json()["config"]
    assert cfg["satellite"]["sndbuf_bytes"] == 10_850_000 and cfg["satellite"]["initcwnd"] == 40
    assert cfg["hybla"]["base_rtt_ms"] == 550  # base RTT, not base + allocation delay
    assert cfg["hybla"]["cwnd_max"] == 6907
    assert cfg["shaping"]["enabled"] and cfg["shaping"]["rate_bps"] == 50_000_000  # a hub sends forward
    # The link's rates go into the config for utilisation and the link alert.
    forward, ret = GEO["forward_rate_bps"], GEO["return_cra_bps"] + GEO["return_rbdc_max_bps"]
    assert (cfg["satellite"]["forward_rate_bps"], cfg["satellite"]["return_rate_bps"]) == (forward, ret)


def test_cwnd_max_override_written_to_config_and_bounded(operator: TestClient) -> None:
    body = {"name": "cap", "inputs": GEO, "overrides": {"hybla_cwnd_max": 4000}}
    r = operator.post("/api/v1/bod/profiles", json=body)
    assert r.status_code == 201, r.text
    t = r.json()["tuning"]["values"]["hybla_cwnd_max"]
    assert t["value"] == 4000 and t["computed"] == 6907 and t["overridden"]
    r = operator.post(f"/api/v1/bod/profiles/{r.json()['id']}/apply-to-config", json={})
    assert r.status_code == 200, r.text
    assert operator.get("/api/v1/config").json()["config"]["hybla"]["cwnd_max"] == 4000
    for bad in (65537, 12.5):
        r = operator.post("/api/v1/bod/derive", json={"name": "x", "inputs": GEO, "overrides": {"hybla_cwnd_max": bad}})
        assert r.status_code == 422 and r.json()["error"]["field"] == "overrides.hybla_cwnd_max", r.text


def test_shaping_hub_shapes_at_the_forward_rate() -> None:
    t = derive(BodInputs(**GEO)).values
    assert t["shaping_rate_bps"].value == 50_000_000
    assert t["shaping_rate_bps"].derivation.startswith("hub: forward rate = 50,000,000")
    assert t["shaping_overhead_bytes"].value == 0
    assert "not in the profile" in t["shaping_overhead_bytes"].derivation


def test_shaping_terminal_shapes_at_the_top_of_the_grant_not_cra() -> None:
    # 256 kB modem buffer: drain = 1e6 + 8 × 256000 / 0.25 = 9.192 Mbit/s, above CRA + RBDC max.
    t = derive(BodInputs(**GEO, role="terminal")).values
    assert t["shaping_rate_bps"].value == 5_000_000  # CRA + RBDC max, not CRA (1 Mbit/s)
    assert "not CRA" in t["shaping_rate_bps"].derivation
    # A small modem buffer bounds the sum of the flows as it bounds one paced flow.
    small = derive(BodInputs(**{**GEO, "terminal_buffer_bytes": 50_000, "role": "terminal"})).values
    assert small["shaping_rate_bps"].value == small["pacing_return_bps"].value == 2_600_000


def test_shaping_overhead_comes_from_the_modem_framing() -> None:
    t = derive(BodInputs(**GEO, modem_overhead_bytes=16)).values
    assert t["shaping_overhead_bytes"].value == 16
    assert t["shaping_overhead_bytes"].derivation == "modem framing per packet = 16 B"
    with pytest.raises(ValueError, match="modem_overhead_bytes"):
        BodInputs(**GEO, modem_overhead_bytes=257)


def test_apply_to_config_writes_shaping_for_this_gateways_direction(operator: TestClient) -> None:
    cfg = operator.get("/api/v1/config").json()["config"]
    cfg["role"] = "terminal"
    cfg["shaping"] = {"enabled": False, "rate_bps": 0, "overhead_bytes": 0, "queue_packets": 300}
    assert operator.put("/api/v1/config", json={"config": cfg}).status_code == 200
    body = {"name": "vsat", "inputs": {**GEO, "modem_overhead_bytes": 12}}
    r = operator.post("/api/v1/bod/profiles", json=body)
    assert r.status_code == 201, r.text
    pid = r.json()["id"]
    assert operator.post(f"/api/v1/bod/profiles/{pid}/apply-to-config", json={}).status_code == 200
    shaping = operator.get("/api/v1/config").json()["config"]["shaping"]
    # The terminal sends return: the top of the grant; the operator's queue length stays.
    assert shaping == {"enabled": True, "rate_bps": 5_000_000, "overhead_bytes": 12, "queue_packets": 300}
    # Overridden to 0: shaping off.
    r = operator.put(f"/api/v1/bod/profiles/{pid}", json={**body, "overrides": {"shaping_rate_bps": 0}})
    assert r.status_code == 200, r.text
    assert operator.post(f"/api/v1/bod/profiles/{pid}/apply-to-config", json={}).status_code == 200
    shaping = operator.get("/api/v1/config").json()["config"]["shaping"]
    assert shaping["enabled"] is False and shaping["rate_bps"] == 0
    r = operator.post("/api/v1/bod/derive", json={**body, "overrides": {"shaping_rate_bps": 7999}})
    assert r.status_code == 422 and r.json()["error"]["field"] == "overrides.shaping_rate_bps", r.text


# satlab geo-hts: 50 Mbit/s forward, 600 ms RTT, no BoD (a constant 5 Mbit/s return as CRA).
HTS = {
    "forward_rate_bps": 50_000_000,
    "return_cra_bps": 5_000_000,
    "return_rbdc_max_bps": 0,
    "superframe_ms": 26.5,
    "allocation_delay_ms": 0,
    "base_rtt_ms": 600,
    "terminal_buffer_bytes": 375_000,
}


def test_loss_formulas() -> None:
    # 1514-byte frames: 12,112 bits; p = 1 − (1 − BER)^bits.
    for ber in (1e-9, 1e-7, 1e-6, 1e-5):
        assert loss_tuning.frame_loss(ber, 1448) == pytest.approx(1 - (1 - ber) ** 12_112, rel=1e-6)
    assert loss_tuning.frame_loss(0, 1448) == 0
    # Hybla's window under loss p: rho × sqrt(3 / 2p), rho = 600 / 25 = 24.
    assert loss_tuning.hybla_loss_window(0.01, 600) == pytest.approx(24 * 12.247, rel=1e-4)
    assert loss_tuning.hybla_loss_window(0.01, 10) == pytest.approx(12.247, rel=1e-4), "rho at least 1"
    assert loss_tuning.hybla_loss_window(0, 600) == 65536
    assert loss_tuning.buffer_factor(0.001, 999) == 2 and loss_tuning.buffer_factor(0.001, 1000) == 4


def test_clean_link_names_the_default_and_sends_from_two_windows() -> None:
    t = derive(BodInputs(**HTS))
    # What the gateway runs by default: a clean link today says nothing of tomorrow's fade.
    assert t.congestion_control.value == "hybla_ld"
    assert "default" in t.congestion_control.derivation
    assert t.values["frame_loss_pct"].value == 0
    assert t.values["sndbuf_bytes"].value == 7_500_000  # 2 × 3.75 MB, as before
    assert t.values["hybla_loss_window"].value == 65536


@pytest.mark.parametrize(
    ("ber", "cc", "sndbuf"),
    [
        (1e-8, "hybla_ld", 7_500_000),  # 0.012% of frames: 2,671 ≥ 2,590 segments, < 1 loss per window
        (1e-7, "hybla_ld", 15_000_000),  # 0.12%: Hybla's loss window 845 < 2,590; 3 losses per window
        (1e-6, "hybla_ld", 15_000_000),  # 1.2%: 268
        (1e-5, "hybla_ld", 15_000_000),  # 11.4%: 87
    ],
)
def test_bit_errors_choose_the_congestion_control_and_buffers(ber: float, cc: str, sndbuf: int) -> None:
    t = derive(BodInputs(**HTS, ber=ber))
    assert t.congestion_control.value == cc, t.congestion_control.derivation
    assert t.values["sndbuf_bytes"].value == sndbuf
    assert f"{ber:g}" in t.congestion_control.derivation
    assert t.values["frame_loss_pct"].value == pytest.approx(100 * (1 - (1 - ber) ** 12_112), rel=1e-6)


def test_a_short_path_keeps_the_default_and_says_why() -> None:
    leo = {**HTS, "base_rtt_ms": 30.0}
    t = derive(BodInputs(**leo, ber=1e-6))
    assert t.congestion_control.value == "hybla_ld", t.congestion_control.derivation
    assert "30 ms" in t.congestion_control.derivation and "rho 6" in t.congestion_control.derivation
    assert derive(BodInputs(**{**HTS, "base_rtt_ms": 480.0})).congestion_control.value == "hybla_ld"


def test_a_dama_link_runs_hybla_for_both_roles_and_says_why() -> None:
    # Capacity granted on request after a wait: hybla_ld would cut on the delay the grant's ramp adds.
    dama = {**HTS, "return_cra_bps": 44_000, "return_rbdc_max_bps": 1_100_000, "allocation_delay_ms": 1346.0}
    for role in ("hub", "terminal"):
        t = derive(BodInputs(**dama, role=role)).congestion_control
        assert t.value == "hybla", t.derivation
        assert "DAMA" in t.derivation and "hybla_ld" in t.derivation and "BER" not in t.derivation
    lossy = derive(BodInputs(**dama, ber=1e-6)).congestion_control
    assert lossy.value == "hybla" and "BER 1e-06" in lossy.derivation and "halves" in lossy.derivation
    # Capacity fixed (no RBDC), or granted at once: the default.
    assert derive(BodInputs(**{**dama, "return_rbdc_max_bps": 0})).congestion_control.value == "hybla_ld"
    assert derive(BodInputs(**{**dama, "allocation_delay_ms": 0.0})).congestion_control.value == "hybla_ld"


def test_terminal_receives_into_four_forward_windows_whatever_the_ber() -> None:
    for ber in (0.0, 1e-6):
        t = derive(BodInputs(**{**HTS, "role": "terminal"}, ber=ber)).values
        assert t["rcvbuf_bytes"].value == 15_000_000  # 4 × the forward window it receives
        assert "whatever the BER" in t["rcvbuf_bytes"].derivation


def test_ber_bounds_name_the_field(operator: TestClient) -> None:
    for bad in (-1e-9, 1.1e-4):
        r = operator.post("/api/v1/bod/derive", json={"name": "x", "inputs": {**HTS, "ber": bad}})
        assert r.status_code == 422 and "ber" in r.json()["error"]["field"], r.text


def test_apply_to_config_writes_the_congestion_control(operator: TestClient) -> None:
    r = operator.post("/api/v1/bod/profiles", json={"name": "rainy", "inputs": {**HTS, "ber": 1e-6}})
    assert r.status_code == 201, r.text
    assert r.json()["tuning"]["congestion_control"]["value"] == "hybla_ld"
    assert operator.post(f"/api/v1/bod/profiles/{r.json()['id']}/apply-to-config", json={}).status_code == 200
    sat = operator.get("/api/v1/config").json()["config"]["satellite"]
    assert sat["congestion_control"] == "hybla_ld" and sat["sndbuf_bytes"] == 15_000_000
    r = operator.post("/api/v1/bod/profiles", json={"name": "dry", "inputs": HTS})
    assert operator.post(f"/api/v1/bod/profiles/{r.json()['id']}/apply-to-config", json={}).status_code == 200
    assert operator.get("/api/v1/config").json()["config"]["satellite"]["congestion_control"] == "hybla_ld"
