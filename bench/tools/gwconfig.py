"""Read and replace a running Perigee gateway's config over its control socket (docs/control-protocol.md).

satlab starts each gateway with its own config and a control socket at
`/run/satlab/<prefix>/gw-<prefix><role>.sock`; a scenario that needs other settings (BoD tuning, the
daemon's untuned defaults) GETs the active config, changes it and PUTs it back, exactly as the API does.
The BoD tuning is the API's own derivation (api/perigee_api/tuning.py) fed with the satlab link's DAMA
figures, so the benchmark measures what an operator gets from the dashboard's BoD page.

CLI (inside nothing: the socket is a file on the host):
    python -m bench.tools.gwconfig get  --prefix pc- [--role hub]
    python -m bench.tools.gwconfig put  --prefix pc- [--role hub] FILE.json
    python -m bench.tools.gwconfig tune --prefix pc- [--role hub] --profile geo-skyplex [--dry-run]
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
from typing import Any

from perigee_control import bod
from perigee_control.client import GatewayClient, GatewayError

RUN_ROOT = "/run/satlab"


class GatewayConfigError(RuntimeError):
    pass


def socket_path(prefix: str, role: str, run_root: str = RUN_ROOT) -> str:
    return f"{run_root}/{prefix}/gw-{prefix}{role}.sock"


def get_config(sock_path: str) -> dict[str, Any]:
    """The active GatewayConfig (its `revision` included: PUTting it back unchanged is valid)."""
    try:
        return GatewayClient(sock_path).get_config()
    except GatewayError as exc:
        raise GatewayConfigError(f"GET /v1/config: HTTP {exc.status}: {exc.code}: {exc.message}") from exc


def put_config(sock_path: str, config: dict[str, Any]) -> dict[str, Any]:
    """Apply a config; the gateway answers only once it is installed (or rolled back: an error)."""
    try:
        return GatewayClient(sock_path, timeout_s=60.0).json.apply_config(config)
    except GatewayError as exc:
        raise GatewayConfigError(f"PUT /v1/config: HTTP {exc.status}: {exc.code}: {exc.message}") from exc


def with_settings(config: dict[str, Any], settings: dict[str, dict[str, Any]], revision: str) -> dict[str, Any]:
    """A copy of `config` with the given section fields replaced and a new revision."""
    cfg = copy.deepcopy(config)
    for section, fields in settings.items():
        cfg.setdefault(section, {}).update(fields)
    cfg["revision"] = revision
    return cfg


def untuned(config: dict[str, Any]) -> dict[str, Any]:
    """`config` with the daemon's defaults (the gateway schema's) for everything BoD tuning would set."""
    return with_settings(config, bod.untuned_settings(), "bench-untuned")


def bod_inputs(
    forward_bps: float,
    ret_bps: float,
    ret_bod: dict[str, Any],
    base_rtt_ms: float,
    terminal_buffer_bytes: int,
    role: str = "hub",
) -> dict[str, Any]:
    """The API's BodInputs (perigee_api.tuning.BodInputs fields) for a link's return DAMA profile.

    The carrier caps what RBDC can add to CRA (the emulator sends at min(CRA + RBDC, rate)), so
    the RBDC maximum given to the API is what is left of the carrier above CRA.
    """
    cra = int(ret_bod["cra_bps"])
    rbdc = max(0, min(int(ret_bod["rbdc_max_bps"]), int(ret_bps) - cra))
    return {
        "forward_rate_bps": int(forward_bps),
        "return_cra_bps": cra,
        "return_rbdc_max_bps": rbdc,
        "superframe_ms": float(ret_bod["superframe_ms"]),
        "allocation_delay_ms": float(ret_bod["allocation_delay_ms"]),
        "base_rtt_ms": float(base_rtt_ms),
        "terminal_buffer_bytes": int(terminal_buffer_bytes),
        "role": role,
    }


def profile_bod_inputs(profile: str, role: str = "hub") -> dict[str, Any]:
    """BodInputs for a satlab profile with BoD: the operator's profile is the link's own figures."""
    from satlab.profiles import PROFILES

    prof = PROFILES[profile]
    if not prof.ret.get("bod"):
        raise GatewayConfigError(f"profile {profile} has no BoD on its return link")
    return bod_inputs(
        prof.forward["rate_bps"],
        prof.ret["rate_bps"],
        prof.ret["bod"],
        prof.forward["delay_ms"] + prof.ret["delay_ms"],
        prof.ret["buffer_bytes"],
        role,
    )


# A superframe for links without DAMA: with no allocation delay it only sizes the terminal-buffer
# warning (the DVB-RCS2 value the BoD page starts from).
PLAIN_SUPERFRAME_MS = 26.5


def plain_link_inputs(profile: str, ber: float = 0.0, role: str = "hub") -> dict[str, Any]:
    """BodInputs for a satlab profile without BoD (its return carrier as the CRA, no allocation
    delay) at bit error rate `ber`: what an operator enters for such a link."""
    from satlab.profiles import PROFILES

    prof = PROFILES[profile]
    return {
        "forward_rate_bps": int(prof.forward["rate_bps"]),
        "return_cra_bps": int(prof.ret["rate_bps"]),
        "return_rbdc_max_bps": 0,
        "superframe_ms": PLAIN_SUPERFRAME_MS,
        "allocation_delay_ms": 0.0,
        "base_rtt_ms": float(prof.forward["delay_ms"] + prof.ret["delay_ms"]),
        "terminal_buffer_bytes": int(prof.ret["buffer_bytes"]),
        "role": role,
        "ber": float(ber),
    }


def _derive(inputs: dict[str, Any]) -> Any:
    from perigee_api.tuning import (
        BodInputs,
        derive,
    )

    return derive(BodInputs.model_validate(inputs))


def derive_tuning(inputs: dict[str, Any]) -> dict[str, float]:
    """The API's own BoD derivation, so the benchmark tests what users get."""
    return {key: float(d.value) for key, d in _derive(inputs).values.items()}


def derive_congestion_control(inputs: dict[str, Any]) -> str:
    """The satellite congestion control the API's derivation names for these inputs."""
    return str(_derive(inputs).congestion_control.value)


def apply_tuning(config: dict[str, Any], inputs: dict[str, Any]) -> dict[str, Any]:
    """The config the API's "write to config" makes of a BoD profile's inputs: the same derivation written through
    the same mapping (perigee_control.bod)."""
    from perigee_api.tuning import BodInputs, write_config

    checked = BodInputs.model_validate(inputs)
    cfg = with_settings(config, {}, "bench-bod-tuned")
    write_config(cfg, checked, _derive(inputs))
    return cfg


def tuned_settings(config: dict[str, Any]) -> dict[str, int]:
    """The BoD-relevant fields of a config, flat (for records and logs)."""
    return bod.tuned_settings(config)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench.tools.gwconfig")
    parser.add_argument("cmd", choices=("get", "put", "tune"))
    parser.add_argument("file", nargs="?", help="put: the config JSON to apply")
    parser.add_argument("--prefix", required=True, help="satlab prefix, e.g. pc-")
    parser.add_argument("--role", default="hub", choices=("hub", "terminal"))
    parser.add_argument("--profile", help="tune: the satlab profile whose BoD to use")
    parser.add_argument("--dry-run", action="store_true", help="tune: print, no PUT")
    args = parser.parse_args(argv)
    sock = socket_path(args.prefix, args.role)
    try:
        if args.cmd == "get":
            out: Any = get_config(sock)
        elif args.cmd == "put":
            if not args.file:
                parser.error("put needs FILE")
            with open(args.file) as f:
                out = put_config(sock, json.load(f))
        else:
            if not args.profile:
                parser.error("tune needs --profile")
            cfg = apply_tuning(get_config(sock), profile_bod_inputs(args.profile, args.role))
            out = cfg if args.dry_run else put_config(sock, cfg)
    except (OSError, GatewayConfigError) as exc:
        print(f"gwconfig: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
