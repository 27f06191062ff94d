"""A new connection's first round trips on geo-hts: TLS handshake, first byte of a small object, the
Bharadwaj page 2 with six connections, and a 50 MB download, with no gateway, Perigee at the hub, at
both ends, and at both ends with the peer path, encrypted (what ships) and plaintext (the
benchmark-only build); then what the peer path guarantees and costs: duplicates among POSTs at BER
1e-5, a capture of the satellite link, and the encrypted hop's throughput and CPU per GB on zero-delay
veth against the plaintext one (docs/splitter.md, *The peer path*)."""

from __future__ import annotations

import json
import os
import statistics
import tempfile
import time
from typing import Any

from bench import hybla, lab, metrics, peercheck, plots, procs, records
from bench.context import Context
from bench.profiles import LinkFigures, figures
from bench.scenarios import web_pages
from satlab import gateway as satlab_gateway

NAME = "peer-path"
KIND = "web"
TITLE = "New connections across GEO: the peer path between two gateways"
DESCRIPTION = (
    "One `geo-hts` lab (50/5 Mbit/s, 600 ms RTT) with Perigee at both ends; each variant is a config "
    "pushed to the two running gateways (`PUT /v1/config`), and the variants take turns in every round "
    "(interleaved): `no-gateway` (both splitters off, no shaper: plain routing), `hub` (the terminal's "
    "splitter off), `both` (both splitters, the terminal's peer path off: it opens its own connection "
    "across the satellite when the client's arrives), `both-peer` (the terminal starts each new flow on "
    "a warm TLS 1.3 connection to the hub) and, in a second lab whose two gateways run the benchmark-only "
    "build `perigee-plaintext` (`make -C gateway build-plaintext`: the same peer path without TLS, its "
    "flows spliced after the frames, as before the peer path was encrypted), `both-peer-plaintext`. "
    "Measured from the client namespace, each on a new "
    "connection: `tls_handshake` (Python's ssl, TLS 1.3, against a TLS server in the server namespace: "
    "connect() to the handshake's end), `first_byte` (connect() to the first byte of a 10 KB answer), "
    "`page2` (`bench/browser/http_page.py`: the Bharadwaj page 2, HTML then 16 images over up to six "
    "HTTP/1.1 connections, no cache) and `bulk` (satlab's 50 MB download). Medians over the rounds; "
    "`*_rtt` in round trips of the link's 600 ms. Targets with the peer path: TLS handshake and first "
    "byte <= 1 RTT + 50 ms, page 2 <= 2.6 s, bulk no slower than `both` (its `vs_limit` against the "
    "download's physical limit, 1.5 RTT + size/rate + 0.5 RTT, which counts a handshake the peer path "
    "no longer pays). "
    "`exactly_once/<variant>`: `posts` HTTP POSTs (600-byte bodies), each on its own connection, 24 at a "
    "time, with the link's BER at 1e-5 both ways, to a server that counts each body by id "
    "(`satlab.countserver`): `duplicates` = ids received more than once (target 0; `no-gateway` is the "
    "end-to-end baseline on the same link), `failed` = POSTs that ended in a reset (the peer path resets a "
    "flow whose connection broke rather than replay it). `capture/<variant>`: tcpdump on the satellite link "
    "while one POST with a marker string crosses; `marker` and `addresses` (the client's and the server's "
    "IPv4 address as 4 bytes) are 1 when found anywhere in the capture (target 0 with the peer path; "
    "`both`, the peer path off, is the baseline that shows the capture sees them). `veth/<build>`: "
    "client -- terminal -- hub -- server over plain veth pairs (no emulator, no delay: `bench/peerveth.py`), "
    "both gateways from the build (`tls`: the shipped daemon; `plaintext`), `veth_downloads` downloads of "
    "`veth_bytes` server -> client on the peer path: `throughput` (median) and `cpu_per_gb` (both daemons' "
    "utime+stime per GB moved; the kernel's softirq work is charged to whichever process it interrupts)."
)
VARIANTS = ("no-gateway", "hub", "both", "both-peer")
PLAINTEXT = "both-peer-plaintext"
ALL_VARIANTS = (*VARIANTS, PLAINTEXT)
PLAINTEXT_BIN = str(procs.REPO / "gateway" / "target" / "release" / "perigee-plaintext")
PARAMS: dict[str, dict[str, Any]] = {
    "quick": {
        "profile": "geo-hts",
        "rounds": 2,
        "samples": 2,
        "bulk_rounds": 1,
        "bulk_bytes": 50_000_000,
        "posts": 1000,
        "veth_bytes": 1_000_000_000,
        "veth_downloads": 3,
    },
    "full": {
        "profile": "geo-hts",
        "rounds": 5,
        "samples": 3,
        "bulk_rounds": 2,
        "bulk_bytes": 50_000_000,
        "posts": 10_000,
        "veth_bytes": 2_000_000_000,
        "veth_downloads": 5,
    },
}
POST_CONCURRENCY = 24
BER = "1e-5"
OBJECT_PORT, TLS_PORT = 9104, 9105
OBJECT_BYTES = 10_240
TARGET_EXTRA_S = 0.050  # the peer path's targets: one round trip plus 50 ms
PAGE2_TARGET_S = 2.6
DOWNLOAD_RTTS_BEFORE_DATA = 1.5


def variant_configs(base: dict[str, dict[str, Any]], variant: str) -> dict[str, dict[str, Any]]:
    """The hub's and the terminal's config for a variant, from the lab's own (`both-peer`) ones."""
    out = {role: json.loads(json.dumps(cfg)) for role, cfg in base.items()}
    term, hub = out["terminal"], out["hub"]
    term["peer"]["enabled"] = variant in ("both-peer", PLAINTEXT)
    if variant in ("no-gateway", "hub"):
        term["splitter"]["enabled"] = False
        term["shaping"]["enabled"] = False
    if variant == "no-gateway":
        hub["splitter"]["enabled"] = False
        hub["shaping"]["enabled"] = False
    for role, cfg in out.items():
        cfg["revision"] = f"bench-{NAME}-{variant}-{role}"
    return out


def apply_variant(lb: lab.Lab, base: dict[str, dict[str, Any]], variant: str) -> None:
    cfgs = variant_configs(base, variant)
    for role in ("hub", "terminal"):
        web_pages.control(web_pages.control_socket(lb, role), "PUT", "/v1/config", cfgs[role])
    if variant in ("both-peer", PLAINTEXT):
        ready = satlab_gateway.wait_peer_pool(web_pages.control_socket(lb, "terminal"), timeout=30)
        if not ready:
            raise lab.LabUnavailable("the terminal's peer pool did not come up")
    lb.flush_tcp_metrics()
    time.sleep(0.5)


def probe(lb: lab.Lab, *args: str, timeout: float = 60) -> dict[str, Any]:
    argv = lb.exec_argv(
        "client",
        [
            procs.PYTHON,
            "-m",
            "satlab.probes",
            *args,
        ],
    )
    out = procs.run(argv, timeout=timeout, check=False)
    try:
        result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError) as exc:
        raise procs.ToolError(f"probe {args[0]}: {out.stderr.strip()[-300:]}") from exc
    if not result.get("ok"):
        raise procs.ToolError(f"probe {args[0]}: {result.get('error')}")
    return result


def bulk_s(lb: lab.Lab, size: int) -> float:
    out = lab.satlab("bulk", "client", "get", str(size), "--json", timeout=120, prefix=lb.prefix)
    data = json.loads(out.strip().splitlines()[-1])
    if not data.get("complete"):
        raise procs.ToolError(f"bulk download incomplete: {data}")
    return float(data["duration_s"])


def measure_round(lb: lab.Lab, params: dict[str, Any], variant: str, bulk: bool) -> dict[str, list[float]]:
    got: dict[str, list[float]] = {
        "tls_handshake": [],
        "first_byte": [],
        "page2": [],
        "bulk": [],
    }
    server = web_pages.SERVER.removeprefix("http://")
    for _ in range(int(params["samples"])):
        got["tls_handshake"].append(float(probe(lb, "tls", server, str(TLS_PORT))["handshake_s"]))
        got["first_byte"].append(
            float(
                probe(
                    lb,
                    "first-byte",
                    server,
                    str(OBJECT_PORT),
                    "--size",
                    str(OBJECT_BYTES),
                )["first_byte_s"]
            )
        )
    got["page2"].append(web_pages.http_load(lb, web_pages.page_urls("page2")[0], 30).load_s)
    if bulk:
        got["bulk"].append(bulk_s(lb, int(params["bulk_bytes"])))
    return got


def variant_records(variant: str, got: dict[str, list[float]], link: LinkFigures, size: int) -> list[records.Record]:
    out: list[records.Record] = []
    for metric in ("tls_handshake", "first_byte", "page2", "bulk"):
        values = got.get(metric) or []
        if not values:
            continue
        med = statistics.median(values)
        runs = ", ".join(f"{v:.3f}" for v in values)
        out.append(records.measured(NAME, variant, metric, med, "s", f"runs: {runs}"))
        if metric in ("tls_handshake", "first_byte"):
            note = ""
            if variant in ("both-peer", PLAINTEXT):
                target = link.rtt_s + TARGET_EXTRA_S
                note = f"target <= 1 RTT + 50 ms ({target:.3f} s): {'met' if med <= target else 'missed'}"
            out.append(records.measured(NAME, variant, f"{metric}_rtt", med / link.rtt_s, "RTT", note))
        if metric == "page2" and variant in ("both-peer", PLAINTEXT):
            ok = "met" if med <= PAGE2_TARGET_S else "missed"
            out.append(records.measured(NAME, variant, "page2_target", PAGE2_TARGET_S, "s", f"target {ok}"))
        if metric == "bulk":
            limit = metrics.physical_limit_s(size, link.forward_bps, link.rtt_s, DOWNLOAD_RTTS_BEFORE_DATA)
            out.append(
                records.measured(
                    NAME,
                    variant,
                    "bulk_vs_limit",
                    med / limit,
                    "x",
                    f"limit {limit:.2f} s",
                )
            )
    return out


def latency_rounds(
    ctx: Context, lb: lab.Lab, params: dict[str, Any], variants: tuple[str, ...], rounds: int
) -> dict[str, dict[str, list[float]]]:
    """The variants' latency metrics, interleaved round by round, on the running lab."""
    got: dict[str, dict[str, list[float]]] = {v: {} for v in variants}
    base = {r: web_pages.control(web_pages.control_socket(lb, r), "GET", "/v1/config") for r in ("hub", "terminal")}
    server_argv = lb.exec_argv(
        "server",
        [procs.PYTHON, "-m", "satlab.probes", "serve", f"--port={OBJECT_PORT}:object", f"--port={TLS_PORT}:tls"],
    )
    with procs.Background(server_argv) as srv:
        srv.wait_line(json.dumps({"ready": True, "ports": [OBJECT_PORT, TLS_PORT]}), 30)
        for rnd in range(rounds):
            bulk = rnd < int(params["bulk_rounds"])
            for variant in variants:
                ctx.log(f"{NAME}: round {rnd + 1} {variant}")
                apply_variant(lb, base, variant)
                for metric, values in measure_round(lb, params, variant, bulk).items():
                    got[variant].setdefault(metric, []).extend(values)
    # The lab's own configs again (both ends, the peer path on) for what follows.
    apply_variant(lb, base, "both-peer")
    return got


def guarantees(ctx: Context, lb: lab.Lab, params: dict[str, Any]) -> list[records.Record]:
    """Duplicates at BER 1e-5 (the peer path, and end to end as the baseline) and the capture (the
    peer path, and the direct path between the same gateways as the baseline)."""
    base = {r: web_pages.control(web_pages.control_socket(lb, r), "GET", "/v1/config") for r in ("hub", "terminal")}
    out: list[records.Record] = []
    for variant in ("both", "both-peer"):
        apply_variant(lb, base, variant)
        cap = peercheck.capture(lb, os.path.join(tempfile.gettempdir(), f"{lb.prefix}{NAME}-{variant}"))
        ctx.raw.setdefault(NAME, {})[f"capture/{variant}"] = cap
        note = f"{cap['bytes']} bytes captured, POST answered: {cap['answered']}"
        out.append(records.measured(NAME, f"capture/{variant}", "marker", int(cap["marker"]), "found", note))
        found = ", ".join(cap["addresses"]) or "none"
        out.append(
            records.measured(
                NAME, f"capture/{variant}", "addresses", int(bool(cap["addresses"])), "found", f"found: {found}"
            )
        )
    first = 100_000
    for variant in ("no-gateway", "both-peer"):
        apply_variant(lb, base, variant)
        ctx.log(f"{NAME}: {params['posts']} POSTs at BER {BER}, {variant}")
        lb.link_set("--ber", BER)
        try:
            eo = peercheck.exactly_once(lb, int(params["posts"]), POST_CONCURRENCY, first)
        finally:
            lb.link_set("--ber", "0")
        first += int(params["posts"])
        ctx.raw.setdefault(NAME, {})[f"exactly_once/{variant}"] = eo
        note = f"{eo['posts']} POSTs: {eo['answered']} answered, {eo['failed']} reset, {eo['received']} bodies received"
        out.append(records.measured(NAME, f"exactly_once/{variant}", "duplicates", eo["duplicates"], "bodies", note))
        out.append(records.measured(NAME, f"exactly_once/{variant}", "failed", eo["failed"], "POSTs", note))
    apply_variant(lb, base, "both-peer")
    return out


def veth_records(ctx: Context, params: dict[str, Any]) -> list[records.Record]:
    """The encrypted hop against the plaintext one on zero-delay veth, the same run."""
    out: list[records.Record] = []
    builds = {"tls": str(procs.REPO / "bin" / "perigee"), "plaintext": PLAINTEXT_BIN}
    for build, binary in builds.items():
        if not os.access(binary, os.X_OK):
            out.append(records.skipped(NAME, f"veth/{build}", f"{binary} not built (make -C gateway build-plaintext)"))
            continue
        ctx.log(f"{NAME}: veth, {build}")
        try:
            cost = peercheck.veth_cost(binary, int(params["veth_bytes"]), int(params["veth_downloads"]), workers=4)
        except (lab.LabUnavailable, procs.ToolError, OSError, ValueError) as exc:
            out.append(records.skipped(NAME, f"veth/{build}", f"{type(exc).__name__}: {exc}"[:300]))
            continue
        ctx.raw.setdefault(NAME, {})[f"veth/{build}"] = cost
        runs = ", ".join(f"{r * 8 / 1e9:.2f}" for r in cost["rates_Bps"])
        out.append(
            records.measured(
                NAME,
                f"veth/{build}",
                "throughput",
                cost["rate_Bps"] * 8 / 1e9,
                "Gbit/s",
                f"runs: {runs}; {cost['peer_flows']} flows on the peer path",
            )
        )
        out.append(
            records.measured(
                NAME, f"veth/{build}", "cpu_per_gb", cost["cpu_s_per_gb"], "s/GB", "both daemons' utime+stime"
            )
        )
    return out


def run(ctx: Context, params: dict[str, Any]) -> list[records.Record]:
    link = figures(params["profile"])
    no_hybla = hybla.ensure()
    if no_hybla:
        return [records.skipped(NAME, v, f"the gateways' satellite legs need hybla: {no_hybla}") for v in ALL_VARIANTS]
    out: list[records.Record] = []
    got: dict[str, dict[str, list[float]]] = {}
    try:
        with lab.running(params["profile"], gateway="both") as lb:
            got.update(latency_rounds(ctx, lb, params, VARIANTS, int(params["rounds"])))
            out += guarantees(ctx, lb, params)
    except (lab.LabUnavailable, procs.ToolError, OSError, ValueError) as exc:
        return [records.skipped(NAME, v, f"{type(exc).__name__}: {exc}"[:300]) for v in ALL_VARIANTS]
    if os.access(PLAINTEXT_BIN, os.X_OK):
        # satlab starts its gateways from this binary while the variable is set.
        os.environ[satlab_gateway.BIN_ENV] = PLAINTEXT_BIN
        try:
            with lab.running(params["profile"], gateway="both") as lb:
                got.update(latency_rounds(ctx, lb, params, (PLAINTEXT,), int(params["rounds"])))
        except (lab.LabUnavailable, procs.ToolError, OSError, ValueError) as exc:
            out.append(records.skipped(NAME, PLAINTEXT, f"{type(exc).__name__}: {exc}"[:300]))
        finally:
            del os.environ[satlab_gateway.BIN_ENV]
    else:
        out.append(records.skipped(NAME, PLAINTEXT, f"{PLAINTEXT_BIN} not built (make -C gateway build-plaintext)"))
    for variant, values in got.items():
        out += variant_records(variant, values, link, int(params["bulk_bytes"]))
        ctx.raw.setdefault(NAME, {})[variant] = values
    out += veth_records(ctx, params)
    plot(ctx, out, link)
    return out


def plot(ctx: Context, recs: list[records.Record], link: LinkFigures) -> None:
    by = {(r.variant, r.metric): r.value for r in recs}
    metrics_shown = ("tls_handshake", "first_byte", "page2")
    plots.grouped_bars(
        ctx.plot_path(f"{NAME}-latency"),
        f"New connections on {link.name}: median time (s)",
        "seconds",
        [m.replace("_", " ") for m in metrics_shown],
        {v: [by.get((v, m)) for m in metrics_shown] for v in ALL_VARIANTS},
    )


def doc_extra(recs: list[records.Record]) -> str:
    by = {(r.variant, r.metric): r.value for r in recs}
    rows = [
        ("TLS handshake", "tls_handshake", "s"),
        ("first byte of 10 KB", "first_byte", "s"),
        ("page 2, six connections", "page2", "s"),
        ("50 MB download", "bulk", "s"),
        ("50 MB vs its limit", "bulk_vs_limit", "x"),
    ]
    lines = ["| | " + " | ".join(ALL_VARIANTS) + " |", "|---|" + "---|" * len(ALL_VARIANTS)]
    for label, metric, unit in rows:
        cells = []
        for v in ALL_VARIANTS:
            val = by.get((v, metric))
            if val is None:
                cells.append("not run")
            elif unit == "x":
                cells.append(f"{val:.2f}×")
            else:
                rtt = by.get((v, f"{metric}_rtt"))
                cells.append(f"{val:.3f} s" + (f" ({rtt:.2f} RTT)" if rtt is not None else ""))
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    checks = [
        (
            "bodies received twice (POSTs at BER 1e-5)",
            "exactly_once/no-gateway",
            "exactly_once/both-peer",
            "duplicates",
        ),
        ("POSTs reset", "exactly_once/no-gateway", "exactly_once/both-peer", "failed"),
        ("marker string in the satellite capture", "capture/both", "capture/both-peer", "marker"),
        ("client/server address in the capture", "capture/both", "capture/both-peer", "addresses"),
    ]
    guard = ["| | baseline | peer path |", "|---|---|---|"]
    for label, base, ours, metric in checks:
        pair = [by.get((base, metric)), by.get((ours, metric))]
        guard.append(f"| {label} | " + " | ".join("not run" if c is None else f"{c:g}" for c in pair) + " |")
    veth = ["| zero-delay veth, both gateways | plaintext | TLS |", "|---|---|---|"]
    for label, metric, fmt in (
        ("throughput (Gbit/s)", "throughput", "{:.2f}"),
        ("both daemons' CPU per GB (s)", "cpu_per_gb", "{:.2f}"),
    ):
        pair = [by.get((f"veth/{b}", metric)) for b in ("plaintext", "tls")]
        veth.append(f"| {label} | " + " | ".join("not run" if c is None else fmt.format(c) for c in pair) + " |")
    return (
        "Medians, variants interleaved in each round (`both-peer-plaintext` in its own lab right after):\n\n"
        + "\n".join(lines)
        + "\n\nThe peer path's guarantees, with their baselines from the same run (`no-gateway` end to end; "
        "`both`, the peer path off):\n\n"
        + "\n".join(guard)
        + "\n\nThe encrypted hop's cost, same run:\n\n"
        + "\n".join(veth)
    )
