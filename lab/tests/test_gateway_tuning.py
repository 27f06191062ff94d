"""satlab's default gateway config: satellite-leg tuning derived from the link profile."""

from __future__ import annotations

import pytest

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
    # 2 x BDP of the 50 Mbit/s, 600 ms direction.
    assert t["sndbuf_bytes"] == t["rcvbuf_bytes"] == 7_500_000
    # Hybla scales the initial window by rho = 600 / 25: initcwnd x rho ~ one forward BDP.
    assert 2400 <= t["initcwnd"] * 24 <= 2600
    # No route initrwnd: the receive window starts as the whole 2 x BDP buffer.
    assert t["initrwnd"] == 0
    # All its flows together leave at the forward rate, no faster.
    assert t["shaping_rate_bps"] == 50_000_000


def test_terminal_opens_the_forward_window_at_once() -> None:
    fwd, ret = _geo_hts()
    t = gateway.link_tuning("terminal", fwd, ret)
    assert t["pacing_rate_bps"] == gateway.pacing_rate(5_000_000) == 4_877_675
    assert t["sndbuf_bytes"] == 7_500_000
    # A route initrwnd could only lower the window, and the config's bound (1000 segments) is
    # below the forward BDP (2590): none, so the hub's first flight fills the pipe.
    assert t["initrwnd"] == 0
    assert t["rcvbuf_bytes"] >= 2 * 3_750_000  # 2 x the forward BDP
    assert t["initcwnd"] == 10
    assert t["shaping_rate_bps"] == 5_000_000  # the terminal sends on the return link


def test_no_host_wide_hybla_ceiling_from_a_profile() -> None:
    # Hybla's cwnd_max is one value per kernel: a lab must not impose its profile's on others.
    for name in ("geo-hts", "leo", "geo-acts-t1"):
        p = PROFILES[name]
        for role in ("hub", "terminal"):
            assert gateway.link_tuning(role, dict(p.forward), dict(p.ret))["cwnd_max"] == 0


def test_default_config_carries_the_tuning() -> None:
    fwd, ret = _geo_hts()
    cfg = gateway.default_config("hub", tuning=gateway.link_tuning("hub", fwd, ret))
    sat = cfg["satellite"]
    assert (sat["initcwnd"], sat["initrwnd"], sat["pacing_rate_bps"]) == (107, 0, 48_776_750)
    assert cfg["hybla"]["cwnd_max"] == 0
    assert cfg["shaping"] == {"enabled": True, "rate_bps": 50_000_000}
    untuned = gateway.default_config("hub")  # unknown link: defaults, nothing shaped
    assert untuned["satellite"]["initcwnd"] == 10
    assert untuned["shaping"] == {"enabled": False}


def test_gateways_stop_in_reverse_start_order(monkeypatch: pytest.MonkeyPatch) -> None:
    # Each daemon restores the host-wide Hybla settings it found at start: the first one started
    # must stop last, or the second's snapshot (the first's values) would be what stays.
    seen: list[tuple[str, str]] = []
    monkeypatch.setattr(gateway, "_start_one", lambda topo, role, timeout, cache: seen.append(("start", role)))
    monkeypatch.setattr(gateway, "_stop_one", lambda topo, role: seen.append(("stop", role)))
    gateway.start(object(), "both", cache=False)  # type: ignore[arg-type]
    gateway.stop(object(), "both")  # type: ignore[arg-type]
    starts = [r for what, r in seen if what == "start"]
    stops = [r for what, r in seen if what == "stop"]
    assert len(starts) == 2 and stops == starts[::-1]
