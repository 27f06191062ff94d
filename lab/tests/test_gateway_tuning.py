"""satlab's default gateway config: satellite-leg tuning derived from the link profile."""

from __future__ import annotations

import json
import math
import stat
import subprocess
from pathlib import Path

import pytest

from perigee_control.config import Hybla
from perigee_control.limits import bound
from satlab import gateway
from satlab.profiles import PROFILES


def _geo_hts() -> tuple[dict[str, float], dict[str, float]]:
    p = PROFILES["geo-hts"]
    return dict(p.forward), dict(p.ret)


def test_hub_sends_forward_paced_with_a_bdp_first_flight() -> None:
    fwd, ret = _geo_hts()
    t = gateway.link_tuning("hub", fwd, ret)
    # Paced in payload bytes: 2% above the link's 50 Mbit/s once headers are on the wire.
    assert t["pacing_rate_bps"] * gateway.WIRE_FRAME / gateway.MSS == pytest.approx(51_000_000, rel=1e-6)
    # 2 x BDP of the 50 Mbit/s, 600 ms direction; it receives the 5 Mbit/s return link, whose four
    # windows are less than that.
    assert t["sndbuf_bytes"] == t["rcvbuf_bytes"] == 7_500_000
    # Hybla scales the initial window by rho = 600 / 25: initcwnd x rho ~ one forward BDP.
    assert 2400 <= t["initcwnd"] * 24 <= 2600
    # No route initrwnd: the receive window starts as the whole 2 x BDP buffer.
    assert t["initrwnd"] == 0
    # All its flows together leave at the forward rate, no faster.
    assert t["shaping_rate_bps"] == 50_000_000


def test_a_leo_leg_starts_at_one_bdp_with_hybla_lds_rho_floor() -> None:
    p = PROFILES["leo"]
    t = gateway.link_tuning("hub", dict(p.forward), dict(p.ret))
    # 100 Mbit/s x 30 ms = 259 segments; hybla_ld's rho there is its floor, 6 (RTT / 25 ms is 1.2),
    # so initcwnd x 6 is about one BDP (BDP / 1.2 = 216 would start a five-BDP flight).
    bdp_segments = 100_000_000 * 0.030 / 8 / gateway.MSS
    assert gateway.LD_RHO_MIN == 6
    assert t["initcwnd"] == int(bdp_segments / 6) == 43


def test_terminal_opens_the_forward_window_at_once() -> None:
    fwd, ret = _geo_hts()
    t = gateway.link_tuning("terminal", fwd, ret)
    assert t["pacing_rate_bps"] == gateway.pacing_rate(5_000_000) == 4_877_675
    assert t["sndbuf_bytes"] == 7_500_000
    # A route initrwnd could only lower the window, and the config's bound (1000 segments) is
    # below the forward BDP (2590): none, so the hub's first flight fills the pipe.
    assert t["initrwnd"] == 0
    # Four forward windows to receive into: a loss in every window (BER 1e-6) never closes it.
    assert t["rcvbuf_bytes"] == 4 * 3_750_000
    assert t["initcwnd"] == 10
    assert t["shaping_rate_bps"] == 5_000_000  # the terminal sends on the return link


def test_hybla_ceiling_is_two_bdps_of_the_sending_direction() -> None:
    # Written into each gateway's own namespace entry, so a lab's value caps only its own flows.
    fwd, ret = _geo_hts()
    # 2 x 50 Mbit/s x 600 ms / 1448 B (perigee_hybla::cwnd_ceiling_for_link's geo-hts example).
    assert gateway.link_tuning("hub", fwd, ret)["cwnd_max"] == 5180
    assert gateway.link_tuning("terminal", fwd, ret)["cwnd_max"] == 518
    # A BoD direction's flows also wait for grants: the allocation delay counts.
    sky = PROFILES["geo-skyplex"]
    alloc_ms = sky.ret["bod"]["allocation_delay_ms"]
    rtt_ms = sky.forward["delay_ms"] + sky.ret["delay_ms"]
    want = math.ceil(2 * sky.ret["rate_bps"] * (rtt_ms + alloc_ms) / (8 * 1000 * gateway.MSS))
    assert gateway.link_tuning("terminal", dict(sky.forward), dict(sky.ret))["cwnd_max"] == want
    # The gateway's own computation (perigee hybla ceiling), clamped to the config's bound on hybla.cwnd_max.
    assert gateway.cwnd_ceiling(10e9, 10_000) == bound(Hybla, "cwnd_max", "le")
    assert gateway.cwnd_ceiling(1, 1) == 1


def test_default_config_carries_the_tuning() -> None:
    fwd, ret = _geo_hts()
    cfg = gateway.default_config("hub", tuning=gateway.link_tuning("hub", fwd, ret))
    sat = cfg["satellite"]
    assert (sat["initcwnd"], sat["initrwnd"], sat["pacing_rate_bps"]) == (107, 0, 48_776_750)
    assert cfg["hybla"]["cwnd_max"] == 5180
    assert cfg["shaping"] == {"enabled": True, "rate_bps": 50_000_000}
    untuned = gateway.default_config("hub")  # unknown link: the gateway's defaults, nothing shaped
    assert set(untuned["satellite"]) == {"routes"}
    assert "shaping" not in untuned and "hybla" not in untuned


def test_gateways_stop_in_reverse_start_order(monkeypatch: pytest.MonkeyPatch) -> None:
    # Each daemon restores the host-wide Hybla settings it found at start: the first one started
    # must stop last, or the second's snapshot (the first's values) would be what stays.
    seen: list[tuple[str, str]] = []
    monkeypatch.setattr(gateway, "_start_one",
                        lambda topo, role, timeout, cache, peer=None, configured=True: seen.append(("start", role)))
    monkeypatch.setattr(gateway, "peer_pins", lambda topo: gateway.PeerPins(hub="sha256:" + "0" * 64,
                                                                           terminal="sha256:" + "1" * 64))
    monkeypatch.setattr(gateway, "wait_peer_pool", lambda sock, timeout=15.0: 0)
    monkeypatch.setattr(gateway, "socket_path", lambda topo, role: f"/nonexistent/{role}.sock")
    monkeypatch.setattr(gateway, "_stop_one", lambda topo, role: seen.append(("stop", role)))
    gateway.start(object(), "both", cache=False)  # type: ignore[arg-type]
    gateway.stop(object(), "both")  # type: ignore[arg-type]
    starts = [r for what, r in seen if what == "start"]
    stops = [r for what, r in seen if what == "stop"]
    assert len(starts) == 2 and stops == starts[::-1]


def test_the_terminal_caches_dns_and_both_name_the_lab_resolver() -> None:
    term, hub = gateway.default_config("terminal"), gateway.default_config("hub", cache=True)
    assert term["dns"] == {"enabled": True, "upstream": [gateway.LAB_RESOLVER]}
    # The hub runs no resolver; its Squid resolves through the lab's server directly.
    assert hub["dns"] == {"enabled": False, "upstream": [gateway.LAB_RESOLVER]}


@pytest.mark.parametrize("role", ["terminal", "hub"])
@pytest.mark.parametrize("cache", [False, True])
def test_default_configs_pass_the_gateway_validator(role: str, cache: bool, tmp_path: Path) -> None:
    perigee = gateway.REPO / "gateway" / "target" / "release" / "perigee"
    if not perigee.exists():
        pytest.skip(f"{perigee} not built (make -C gateway build)")
    path = tmp_path / "gw.json"
    path.write_text(json.dumps(gateway.default_config(role, cache=cache)))
    p = subprocess.run([str(perigee), "config", "check", str(path)], capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, p.stderr


@pytest.mark.parametrize(("argv", "role", "cache"),
                         [(["hub", "--cache"], "hub", True), (["terminal"], "terminal", False)])
def test_gateway_config_prints_the_labs_config(argv: list[str], role: str, cache: bool,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    # What the image test applies to the gateway container (images/test): the config satlab gives its own
    # gateway at that end, never a copy of the lab's addresses kept elsewhere. No lab, no root needed.
    from satlab.cli import main

    assert main(["gateway-config", *argv]) == 0
    assert json.loads(capsys.readouterr().out) == gateway.default_config(role, cache=cache)


def test_the_hub_enrolls_the_terminal_and_the_terminal_pins_the_hub(tmp_path: Path) -> None:
    perigee = gateway.REPO / "gateway" / "target" / "release" / "perigee"
    if not perigee.exists():
        pytest.skip(f"{perigee} not built (make -C gateway build)")

    class Topo:
        def ns(self, role: str) -> str:
            return f"t-{role}"

        def path(self, name: str) -> str:
            return str(tmp_path / name)

    pins = gateway.peer_pins(Topo())
    assert pins["hub"] != pins["terminal"] and all(p.startswith("sha256:") for p in pins.values())
    # Made once per gateway and kept: the key file is the owner's only, in an owner-only directory.
    assert gateway.peer_pins(Topo()) == pins
    key_dir = Path(gateway.peer_dir(Topo(), "terminal"))
    assert stat.S_IMODE(key_dir.stat().st_mode) == 0o700
    assert stat.S_IMODE((key_dir / "identity.pem").stat().st_mode) == 0o600
    term = gateway.default_config("terminal", peer=pins)["peer"]
    hub = gateway.default_config("hub", peer=pins)["peer"]
    assert term["enabled"] and term["hub"] == "10.71.2.2" and term["hub_fingerprints"] == [pins["hub"]]
    assert term["terminals"] == [] and term["listen"] == []
    assert hub["enabled"] and hub["hub"] == "" and hub["hub_fingerprints"] == []
    assert hub["terminals"] == [{"name": gateway.SITE_NAME, "fingerprints": [pins["terminal"]],
                                 "prefixes": gateway.CLIENT_SUBNETS}]
    # Both pass the gateway's own validator.
    for role, cfg in (("terminal", term), ("hub", hub)):
        path = tmp_path / f"{role}.json"
        path.write_text(json.dumps({**gateway.default_config(role, peer=pins), "peer": cfg}))
        p = subprocess.run([str(perigee), "config", "check", str(path)], capture_output=True, text=True, timeout=30)
        assert p.returncode == 0, p.stderr
    # One gateway only: no peer path.
    alone = gateway.default_config("terminal")
    assert alone["peer"]["enabled"] is False and alone["peer"]["hub_fingerprints"] == []
    # Nothing the lab does not decide: nodelay, quic and the rest are the gateway's defaults.
    assert "splitter" not in alone and "quic" not in alone


GATEWAY_SCHEMA = json.loads(
    (Path(__file__).resolve().parents[2] / "gateway" / "schema" / "config.schema.json").read_text()
)


def test_the_lab_config_carries_the_gateways_builtin_bypass_entries() -> None:
    # The one list is the gateway's (x-builtin in its schema); the lab never keeps a copy of its own.
    emitted = GATEWAY_SCHEMA["properties"]["bypass"]["x-builtin"]
    for role in ("hub", "terminal"):
        assert gateway.default_config(role)["bypass"] == emitted


def test_the_lab_tuning_uses_the_gateways_numbers() -> None:
    defs = GATEWAY_SCHEMA["$defs"]
    assert gateway.RTT0_MS == defs["Hybla"]["properties"]["rtt0_ms"]["default"]
    assert gateway.LD_RHO_MIN == defs["Satellite"]["properties"]["congestion_control"]["x-ld-rho-min"]
    assert gateway.ROUTE_WINDOW_MAX == defs["Satellite"]["properties"]["initcwnd"]["maximum"]
    assert gateway.ROUTE_WINDOW_MIN == defs["Satellite"]["properties"]["initcwnd"]["default"]
