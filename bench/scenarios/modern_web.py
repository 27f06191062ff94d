"""Today's web over geo-hts: HTTPS pages of 2-6 origins, names resolved behind the satellite, a
fresh Chromium per load; no gateway, Perigee at the hub, at both ends, each mechanism off alone,
and HTTP/3 end to end or through the gateways; both ends with the hub a cluster of 3 gateways.

Four labs run side by side (no gateway, hub, both ends, both ends with a 3-gateway hub cluster),
one per satlab prefix; loads are serial and interleaved: every repetition runs each (page, variant,
DNS state) once, in an order rotated per repetition, so slow drifts of the shared machine spread
over all variants alike.
"""

from __future__ import annotations

import copy
import json
import secrets
import statistics
import time
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import Any

from bench import hybla, lab, plots, procs, records, webfloor
from bench.context import Context
from bench.profiles import LinkFigures, figures
from bench.tools import gwconfig
from bench.webload import (
    PHASES,
    LoadError,
    ModernDriver,
    PageLoad,
    median_breakdown,
    parse_result,
)

NAME = "modern-web"
KIND = "https-web"
TITLE = "Today's web: HTTPS multi-origin pages on geo-hts, DNS behind the satellite, HTTP/2 and HTTP/3"
DESCRIPTION = (
    "Three pages built by satlab (`lab/satlab/webpages.py`, docs/lab.md): `blog` 15 objects, 0.3 MiB, "
    "2 origins; `news` 56 objects, 1.8 MiB, 6 origins; `shop` 123 objects, 4.9 MiB, 6 origins, with "
    "dependency chains (HTML → stylesheets and head scripts → inserted scripts and CSS background "
    "images → inserted images and a JSON fetch → images the JSON names). Each origin has its own "
    "address and name in the server namespace, served over HTTPS with HTTP/2 (Hypercorn) and HTTP/3 "
    "(aioquic, CUBIC); the names are resolved by the lab's DNS server behind the satellite (NSD, "
    "10.71.3.53, TTL 300 s). `geo-hts`: 50/5 Mbit/s, 600 ms RTT. Each load is a new headless Chromium "
    "(Debian's, via playwright-core, `bench/browser/load_modern.js`) with a fresh profile and a fresh "
    "NSS store that trusts the lab's CA; every load uses its own name label (`<label>.www.site.test`), "
    "so its names are **cold** at every resolver; **warm** = the same names asked from the client "
    "namespace just before the load (`bench/tools/dnsq.py`: A, AAAA, HTTPS), so a resolver at the "
    "terminal holds them while the browser's own cache is empty. The Squid cache plays no part (HTTPS "
    "is not cached); a gateway's other state is its config, set per variant through `PUT /v1/config` "
    "and given 2 s to settle, so loads meet warm gateways (the peer path's pool of open satellite "
    "connections full); a gateway's very first flows after it starts are not measured. "
    "**Load time** = from the HTML's request to the later of the load event and the last object's "
    "last byte (a page's JSON-named images may finish after its load event), from the browser's own "
    "network timing (DevTools protocol: per request DNS, connect, TLS, request sent, headers, last byte; "
    "Resource Timing leaves out what a cross-origin stylesheet fetches). Breakdown columns: `dns`, "
    "`tcp`, `tls` = mean over the connections a load opened (over QUIC the handshake shows as `tcp`); "
    "`first_byte` (request sent to response headers) and `transfer` (headers to last byte) = mean over "
    "all requests; each the median over repetitions. **Floor** (`bench/webfloor.py`): what no browser, "
    "gateway or protocol can beat without the page in advance: every object found only when its "
    "parent arrives (the HTML's first byte for what the HTML names, the whole parent otherwise), 1 RTT "
    "for its request, 1 RTT for its origin's TLS 1.3 (or QUIC) handshake and, with cold DNS, 1 RTT for "
    "its origin's name, both from when the origin is first needed; TCP handshakes cost nothing (a "
    "splitting gateway answers them locally and can hold satellite connections open); every byte "
    "crosses once at 50 Mbit/s in full frames; floor = max(that critical path, the HTML's first byte "
    "+ all bytes at the link rate). `ratio_to_floor` uses the floor of the load's DNS state; "
    "`vs_no_gateway` = load time / no gateway's (cold DNS, same page, same run). Variants: `no-gateway`; "
    "`hub` (satlab `--gateway hub`, its defaults); `both` (`--gateway both`, its defaults); `both-nodelay-off` "
    "/ `both-peer-off` / `both-dns-off` (both ends with `splitter.nodelay`, `peer.enabled` or `dns.enabled` "
    "false: each mechanism's gain alone); `h3-no-gateway` (HTTP/3 end to end: Chromium forced to QUIC "
    "for the page's origins, as a browser that learned h3 before); `h3-both-pass` (the same through both "
    "gateways with `quic: pass`); `tcp-both-fallback` (both gateways with `quic: fallback`, Chromium's "
    "QUIC on and the names' HTTPS records offering h3, so it tries QUIC first and must fall back to TCP); "
    "`no-gateway-ber1e-06` / `both-ber1e-06` (the link at BER 1e-6 both ways, 1.2% of full frames lost, "
    "as in a rain fade, every setting at its default: nobody told the gateways the BER; vs_no_gateway "
    "divides by no gateway on the same lossy link; `both-ber1e-06-redundancy-off`: the same with the peer "
    "path's redundancy off at both ends (`peer.redundancy` 0 both ways, docs/splitter.md: its gain alone); in "
    "the full run the lossy variants have `lossy_reps` more repetitions after the others, taking turns, as "
    "their loads vary most); `both-cluster3` "
    "(`--hub-gateways 3 --gateway both`, docs/cluster.md: the hub is 3 gateways behind ECMP routers, "
    "the terminal keeps a warm pool to each and starts each flow on the gateway that holds its bucket; "
    "satlab's defaults otherwise: each hub gateway shapes at the carrier's rate, as the single hub; the "
    "benchmark's TCP sysctls, set in the single hub's namespace, are set in each gateway's; a lab of its own; "
    "`vs_single_hub` = load time / `both`'s, same page, DNS state and run). "
    "A variant whose config the gateway refuses is listed as skipped with the gateway's answer; each "
    "gateway variant's note names the mechanisms' values the gateway reported. Targets: both ends ≤ 0.6× "
    "no gateway with cold DNS, ≤ 0.45× with warm terminal DNS; hub ≤ 0.85×; at BER 1e-6 both ends ≤ 0.6×; "
    "both ends through the 3-gateway cluster within 5% of `both` (`vs_single_hub` ≤ 1.05, cold and warm DNS)."
)
PROFILE = "geo-hts"
# (variant, DNS state) -> the bound on its ratio (target_metric(variant): to no gateway, or for a
# cluster variant to its single hub).
TARGETS = {
    ("both", "cold"): 0.6,
    ("both", "warm"): 0.45,
    ("hub", "cold"): 0.85,
    ("both-ber1e-06", "cold"): 0.6,
    ("both-cluster3", "cold"): 1.05,
    ("both-cluster3", "warm"): 1.05,
}
MECHANISMS = ("splitter.nodelay", "peer.enabled", "peer.redundancy", "dns.enabled", "quic")


@dataclass(frozen=True)
class Variant:
    name: str
    lab: str  # "none" | "hub" | "both" | "cluster3": which of the labs (LAB_GATEWAY)
    quic: str  # the driver's QUIC mode: off | race | force
    settings: tuple[tuple[str, Any], ...] = ()  # dotted config path -> value, on every gateway of the lab
    dns_states: tuple[str, ...] = ("cold",)
    ber: float = 0.0  # the satellite link's bit error rate (both directions) during the load
    # The same variant with a single hub gateway, for a hub-cluster variant: what vs_single_hub divides by.
    single_hub: str | None = None

    @property
    def baseline(self) -> str:
        """The no-gateway variant on the same link: what vs_no_gateway divides by."""
        return "no-gateway" if not self.ber else f"no-gateway-ber{self.ber:g}"


VARIANTS: tuple[Variant, ...] = (
    Variant("no-gateway", "none", "off"),
    Variant("hub", "hub", "off"),
    Variant("both", "both", "off", dns_states=("cold", "warm")),
    # The hub a cluster of 3 gateways (docs/cluster.md, *The peer path through the cluster*).
    Variant("both-cluster3", "cluster3", "off", dns_states=("cold", "warm"), single_hub="both"),
    Variant("both-nodelay-off", "both", "off", (("splitter.nodelay", False),)),
    Variant("both-peer-off", "both", "off", (("peer.enabled", False),)),
    Variant(
        "both-dns-off",
        "both",
        "off",
        (("dns.enabled", False),),
        dns_states=("cold", "warm"),
    ),
    Variant("h3-no-gateway", "none", "force"),
    Variant("h3-both-pass", "both", "force", (("quic", "pass"),)),
    Variant("tcp-both-fallback", "both", "race", (("quic", "fallback"),)),
    # A lossy day (a rain fade's residual bit errors) with the appliance's defaults: nobody told
    # the gateways the BER.
    Variant("no-gateway-ber1e-06", "none", "off", ber=1e-6),
    Variant("both-ber1e-06", "both", "off", ber=1e-6),
    Variant(
        "both-ber1e-06-redundancy-off",
        "both",
        "off",
        (("peer.redundancy.forward_bytes", 0), ("peer.redundancy.return_bytes", 0)),
        ber=1e-6,
    ),
)
VARIANT_BY_NAME = {v.name: v for v in VARIANTS}
LAB_GATEWAY = {"none": None, "hub": "hub", "both": "both", "cluster3": "both"}
# A lab kind whose hub is a cluster (`satlab up --hub-gateways N`): N; the others have one hub gateway.
LAB_HUB_GATEWAYS = {"cluster3": 3}
PARAMS: dict[str, dict[str, Any]] = {
    # Quick: the six-origin page, both ends (one hub; a 3-gateway hub cluster) against no gateway, cold
    # DNS (about 1 min: the cluster's lab takes ~13 s to start, its load ~8 s).
    "quick": {
        "pages": ["news"],
        "variants": ["no-gateway", "both", "both-cluster3"],
        "dns_states": ["cold"],
        "reps": 1,
        "load_timeout_s": 60,
    },
    "full": {
        "pages": ["blog", "news", "shop"],
        "variants": [v.name for v in VARIANTS],
        # Two interleaved repetitions keep the full run near ten minutes (three took 16).
        "reps": 2,
        # The lossy pair gets three more (their loads vary most: one lost segment of a small page
        # costs a round trip, or a timeout), the pair interleaved: five in all, ~4 min more.
        "lossy_reps": 3,
        "load_timeout_s": 90,
    },
}


# --- the schedule ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Step:
    rep: int
    page: str
    variant: str
    dns: str

    @property
    def key(self) -> str:
        return f"{self.page}/{self.variant}/{self.dns}"


def schedule(
    pages: list[str],
    variants: list[str],
    reps: int,
    dns_states: tuple[str, ...] = ("cold", "warm"),
) -> list[Step]:
    """Every repetition runs each (page, variant, DNS state) once; the order of the variants is
    rotated by one per repetition, never a block of one variant. `dns_states` limits the DNS
    states to run (each variant has its own)."""
    combos = [(v, d) for v in variants for d in VARIANT_BY_NAME[v].dns_states if d in dns_states]
    out = []
    for rep in range(reps):
        k = rep % len(combos) if combos else 0
        for page in pages:
            for v, d in combos[k:] + combos[:k]:
                out.append(Step(rep, page, v, d))
    return out


def run_schedule(params: dict[str, Any], variants: list[Variant]) -> list[Step]:
    """`reps` repetitions of every variant, then `lossy_reps` more of the lossy ones (BER > 0)."""
    dns_states = tuple(params.get("dns_states", ("cold", "warm")))
    reps = int(params["reps"])
    steps = schedule(list(params["pages"]), [v.name for v in variants], reps, dns_states)
    lossy = [v.name for v in variants if v.ber]
    extra = schedule(list(params["pages"]), lossy, int(params.get("lossy_reps", 0)), dns_states)
    return steps + [Step(s.rep + reps, s.page, s.variant, s.dns) for s in extra]


# --- gateway config through the control socket -----------------------------------------------


def set_path(config: dict[str, Any], dotted: str, value: Any) -> None:
    """config[a][b] = value for "a.b"; a section that is not an object is an error."""
    *parents, leaf = dotted.split(".")
    node = config
    for p in parents:
        child = node.setdefault(p, {})
        if not isinstance(child, dict):
            raise gwconfig.GatewayConfigError(f"config field {p!r} is not an object")
        node = child
    node[leaf] = value


def get_path(config: dict[str, Any], dotted: str) -> Any:
    node: Any = config
    for p in dotted.split("."):
        if not isinstance(node, dict) or p not in node:
            return None
        node = node[p]
    return node


def desired_config(base: dict[str, Any], variant: Variant) -> dict[str, Any]:
    cfg = copy.deepcopy(base)
    for dotted, value in variant.settings:
        set_path(cfg, dotted, value)
    cfg["revision"] = f"bench-{NAME}-{variant.name}"
    return cfg


def target_metric(variant: str) -> str:
    """What a target of TARGETS bounds: vs_single_hub for a cluster variant, else vs_no_gateway."""
    return "vs_single_hub" if VARIANT_BY_NAME[variant].single_hub else "vs_no_gateway"


def mechanism_note(config: dict[str, Any]) -> str:
    vals = []
    for m in MECHANISMS:
        v = get_path(config, m)
        vals.append(f"{m}={'absent' if v is None else json.dumps(v)}")
    return ", ".join(vals)


@dataclass
class LabHandle:
    kind: str
    lb: lab.Lab
    driver: ModernDriver
    base: dict[str, dict[str, Any]] = field(default_factory=dict)  # role -> config at start
    current: dict[str, str] = field(default_factory=dict)  # role -> variant whose config is applied
    refused: dict[str, str] = field(default_factory=dict)  # variant -> the gateway's answer
    settle_s: float = 2.0
    ber: float = 0.0  # the link's BER now

    @property
    def roles(self) -> list[str]:
        """The lab's gateways: in a hub cluster the hub is gw1..gwN (satlab's namespace roles)."""
        gw = LAB_GATEWAY[self.kind]
        if gw is None:
            return []
        n = LAB_HUB_GATEWAYS.get(self.kind, 0)
        hub = [f"gw{k}" for k in range(1, n + 1)] if n else ["hub"]
        return ["terminal", *hub] if gw == "both" else hub if gw == "hub" else [gw]

    def socket(self, role: str) -> str:
        return gwconfig.socket_path(self.lb.prefix, role, gwconfig.RUN_ROOT)

    def apply(self, variant: Variant) -> str | None:
        """Put the variant's config on every gateway of this lab; the refusal, if any.

        After a change the gateways get `settle_s` to reach their steady state (the peer path
        refills its pool of warm connections), so no load measures a config switch.
        """
        if variant.name in self.refused:
            return self.refused[variant.name]
        changed = False
        for role in self.roles:
            if self.current.get(role) == variant.name:
                continue
            try:
                gwconfig.put_config(self.socket(role), desired_config(self.base[role], variant))
            except (gwconfig.GatewayConfigError, OSError) as exc:
                self.refused[variant.name] = f"{role} gateway refused the config: {exc}"[:400]
                self.current.pop(role, None)
                return self.refused[variant.name]
            self.current[role] = variant.name
            changed = True
        if changed:
            time.sleep(self.settle_s)
        return None

    def set_ber(self, ber: float) -> None:
        """The satellite link's bit error rate, both directions (a no-op when it already is)."""
        if self.ber != ber:
            self.lb.link_set("--link", "sat", "--dir", "both", "--ber", f"{ber:g}")
            self.ber = ber

    def note(self) -> str:
        parts = []
        for role in self.roles:
            try:
                parts.append(f"{role}: {mechanism_note(gwconfig.get_config(self.socket(role)))}")
            except (gwconfig.GatewayConfigError, OSError) as exc:
                parts.append(f"{role}: config unreadable ({exc})")
        return "; ".join(parts)


def ca_file(lb: lab.Lab) -> str:
    return f"{gwconfig.RUN_ROOT}/{lb.prefix}/web-tls/ca.pem"


# --- one load ----------------------------------------------------------------------------------


def _satlab_web() -> tuple[Any, Any]:
    from satlab import webnames, webpages

    return webnames, webpages


def page_hosts(page: str, label: str) -> list[str]:
    webnames, webpages = _satlab_web()
    return [webnames.host_of(o, label) for o in webpages.page(page).origins]


def warm_names(lb: lab.Lab, hosts: list[str]) -> None:
    """Ask the page's names from the client namespace, as the browser will (A, AAAA, HTTPS)."""
    webnames, _ = _satlab_web()
    argv = lb.exec_argv(
        "client",
        procs.tool_argv("bench.tools.dnsq", "--server", webnames.DNS_V4, *hosts),
    )
    out = procs.run(argv, timeout=30, check=False)
    if out.returncode != 0:
        raise LoadError(f"warming DNS: {out.stdout.strip()[-300:]} {out.stderr.strip()[-300:]}")


def load_once(h: LabHandle, step: Step, variant: Variant) -> PageLoad:
    webnames, webpages = _satlab_web()
    label = secrets.token_hex(webnames.LABEL_LEN // 2)
    hosts = page_hosts(step.page, label)
    if step.dns == "warm":
        warm_names(h.lb, hosts)
    expect = len(webpages.page(step.page).objects)
    request = {
        "url": webnames.page_url(step.page, label),
        "quic": variant.quic,
        "expect": expect,
        "ca": ca_file(h.lb),
        "hosts": [f"{x}:{webnames.HTTPS_PORT}" for x in hosts],
    }
    return parse_result(h.driver.load(request), expect)


# --- the run -----------------------------------------------------------------------------------


@dataclass
class Results:
    loads: dict[str, list[PageLoad]] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)
    notes: dict[str, str] = field(default_factory=dict)  # variant name -> mechanisms seen


def run_step(
    ctx: Context,
    res: Results,
    handles: dict[str, LabHandle],
    unavailable: dict[str, str],
    step: Step,
    progress: str,
) -> None:
    variant = VARIANT_BY_NAME[step.variant]
    if step.key in res.skipped:
        return
    if variant.lab in unavailable:
        res.skipped[step.key] = f"lab did not come up: {unavailable[variant.lab]}"
        return
    h = handles[variant.lab]
    h.set_ber(variant.ber)
    refused = h.apply(variant)
    if refused:
        res.skipped[step.key] = refused
        return
    if variant.name not in res.notes and h.roles:
        res.notes[variant.name] = h.note()
    ctx.log(f"{NAME}: {progress} rep {step.rep + 1} {step.key}")
    try:
        ld = load_once(h, step, variant)
    except (LoadError, procs.ToolError, ValueError) as exc:
        # One failed load spoils the variant's median: the variant is reported as skipped.
        res.skipped[step.key] = f"load failed: {exc}"[:300]
        res.loads.pop(step.key, None)
        return
    res.loads.setdefault(step.key, []).append(ld)
    ctx.log(f"{NAME}:   {ld.load_s:.2f} s, {ld.connections} connections")


def lab_prefixes() -> dict[str, str]:
    stem = lab.PREFIX.rstrip("-")
    return {kind: f"{stem}{i + 1}-" for i, kind in enumerate(LAB_GATEWAY)}


def lab_overrides(kind: str) -> list[str]:
    """`satlab up` options of the lab kind beyond the profile and the gateway."""
    n = LAB_HUB_GATEWAYS.get(kind, 0)
    return ["--hub-gateways", str(n)] if n else []


def tune_cluster_gateways(h: LabHandle) -> None:
    """In a hub cluster, the TCP sysctls bench.lab sets in the single hub's namespace (lab.TCP_ROLES),
    set in each gateway's namespace instead, where the hub's TCP ends: both hubs run with the same."""
    for role in h.roles:
        if role.startswith("gw"):
            procs.run(h.lb.exec_argv(role, ["sysctl", "-q", "-w", *lab.TCP_SYSCTLS]), timeout=10)
            procs.run(h.lb.exec_argv(role, ["ip", "tcp_metrics", "flush", "all"]), timeout=10, check=False)


def run(ctx: Context, params: dict[str, Any]) -> list[records.Record]:
    link = figures(PROFILE)
    variants = [VARIANT_BY_NAME[v] for v in params["variants"]]
    needed = [k for k in LAB_GATEWAY if any(v.lab == k for v in variants)]
    steps = run_schedule(params, variants)
    res = Results()
    handles: dict[str, LabHandle] = {}
    unavailable: dict[str, str] = {}  # lab kind -> why it did not come up
    no_hybla = hybla.ensure() if any(LAB_GATEWAY[k] for k in needed) else None
    with ExitStack() as stack:
        for kind in needed:
            try:
                if LAB_GATEWAY[kind] and no_hybla:
                    raise lab.LabUnavailable(f"the gateway's satellite leg needs hybla: {no_hybla}")
                lb = stack.enter_context(
                    lab.running(
                        PROFILE,
                        gateway=LAB_GATEWAY[kind],
                        overrides=lab_overrides(kind),
                        prefix=lab_prefixes()[kind],
                    )
                )
                drv = ModernDriver(lb.exec_argv("client", []), float(params["load_timeout_s"]))
                stack.callback(drv.close)
                h = LabHandle(kind, lb, drv)
                tune_cluster_gateways(h)
                for role in h.roles:
                    h.base[role] = gwconfig.get_config(h.socket(role))
                handles[kind] = h
            except (
                lab.LabUnavailable,
                procs.ToolError,
                gwconfig.GatewayConfigError,
                OSError,
            ) as exc:
                unavailable[kind] = f"{type(exc).__name__}: {exc}"[:300]
        for i, step in enumerate(steps):
            run_step(ctx, res, handles, unavailable, step, f"[{i + 1}/{len(steps)}]")
    out = make_records(res, params, link)
    ctx.raw[NAME] = {
        key: [
            {
                "load_s": ld.load_s,
                "load_event_s": ld.load_event_s,
                "breakdown": ld.breakdown(),
            }
            for ld in loads
        ]
        for key, loads in res.loads.items()
    }
    plot(ctx, params, out)
    return out


# --- records, plots, doc -----------------------------------------------------------------------


def floor_s(page: str, link: LinkFigures, dns: str) -> float:
    _, webpages = _satlab_web()
    items = webfloor.items_from_manifest(webpages.manifest(page))
    return webfloor.page_floor(items, link.forward_bps, link.rtt_s, cold_dns=(dns == "cold")).floor_s


def make_records(res: Results, params: dict[str, Any], link: LinkFigures) -> list[records.Record]:
    out: list[records.Record] = []
    medians = {key: statistics.median(ld.load_s for ld in loads) for key, loads in res.loads.items()}
    states = tuple(params.get("dns_states", ("cold", "warm")))
    for step in schedule(list(params["pages"]), list(params["variants"]), 1, states):
        key = step.key
        if key in res.skipped:
            out.append(records.skipped(NAME, key, res.skipped[key]))
            continue
        loads = res.loads.get(key)
        if not loads:
            continue
        median = medians[key]
        runs = ", ".join(f"{ld.load_s:.2f}" for ld in loads)
        note = f"runs: {runs}" + (f"; {res.notes[step.variant]}" if step.variant in res.notes else "")
        floor = floor_s(step.page, link, step.dns)
        out += [
            records.measured(NAME, key, "load_time", median, "s", note),
            records.measured(NAME, key, "floor", floor, "s"),
            records.measured(NAME, key, "ratio_to_floor", median / floor, "x"),
        ]
        variant = VARIANT_BY_NAME[step.variant]
        base = medians.get(f"{step.page}/{variant.baseline}/cold")
        if base:
            out.append(records.measured(NAME, key, "vs_no_gateway", median / base, "x"))
        else:
            out.append(records.missing(NAME, key, "vs_no_gateway", "x", "no-gateway did not run"))
        if variant.single_hub:
            single = medians.get(f"{step.page}/{variant.single_hub}/{step.dns}")
            if single:
                ratio = median / single
                out.append(records.measured(NAME, key, "vs_single_hub", ratio, "x", f"of {variant.single_hub}"))
            else:
                out.append(records.missing(NAME, key, "vs_single_hub", "x", f"{variant.single_hub} did not run"))
        for phase, value in median_breakdown(loads).items():
            metric = phase.removesuffix("_ms")
            if value is None:
                out.append(records.missing(NAME, key, metric, "ms", "no connection opened"))
            else:
                out.append(records.measured(NAME, key, metric, value, "ms"))
        out.append(
            records.measured(
                NAME,
                key,
                "connections",
                statistics.median(ld.connections for ld in loads),
                "count",
            )
        )
        out.append(
            records.measured(
                NAME,
                key,
                "h3_share",
                100 * statistics.median(ld.protocol_share("h3") for ld in loads),
                "%",
            )
        )
    return out


def plot(ctx: Context, params: dict[str, Any], recs: list[records.Record]) -> None:
    by = {(r.variant, r.metric): r.value for r in recs}
    pages = list(params["pages"])
    combos = [(v, d) for v in params["variants"] for d in VARIANT_BY_NAME[v].dns_states]
    if not any(by.get((f"{p}/{v}/{d}", "load_time")) for p in pages for v, d in combos):
        return
    series: dict[str, list[float | None]] = {
        "floor (cold DNS)": [by.get((f"{p}/no-gateway/cold", "floor")) or _floor_or_none(p) for p in pages]
    }
    for v, d in combos:
        values = [by.get((f"{p}/{v}/{d}", "load_time")) for p in pages]
        if any(x is not None for x in values):  # skipped variants get no empty slot
            series[f"{v} {d}"] = values
    plots.grouped_bars(
        ctx.plot_path(f"{NAME}-load-time"),
        f"HTTPS pages on {PROFILE}: load time (median) and the floor",
        "page load time [s]",
        pages,
        series,
        legend_outside=True,
    )
    page = "news" if "news" in pages else pages[0]
    groups = [f"{v} {d}" for v, d in combos if by.get((f"{page}/{v}/{d}", "load_time")) is not None]
    breakdown = {
        p.removesuffix("_ms"): [by.get((f"{page}/{g.replace(' ', '/')}", p.removesuffix("_ms"))) for g in groups]
        for p in PHASES
    }
    if groups:
        plots.grouped_bars(
            ctx.plot_path(f"{NAME}-breakdown"),
            f"{page}: per-request phases (DNS/TCP/TLS per new connection, others per request)",
            "ms (median of loads)",
            groups,
            breakdown,
            legend_outside=True,
        )


def _floor_or_none(page: str) -> float | None:
    try:
        return floor_s(page, figures(PROFILE), "cold")
    except (ValueError, KeyError, ImportError):
        return None


def doc_extra(recs: list[records.Record]) -> str:
    by = {(r.variant, r.metric): r for r in recs}
    pages = sorted({r.variant.split("/")[0] for r in recs if r.variant.count("/") == 2})
    lines = [
        "| page | floor (cold / warm DNS) | no gateway | " + " | ".join(f"{v} ({d})" for (v, d) in TARGETS) + " |",
        "|---|---|---|" + "---|" * len(TARGETS),
    ]
    for page in pages:
        fc, fw = (
            by.get((f"{page}/no-gateway/cold", "floor")),
            by.get((f"{page}/both/warm", "floor")),
        )
        base = by.get((f"{page}/no-gateway/cold", "load_time"))
        cells = [page, f"{_v(fc)} / {_v(fw)} s", f"{_v(base)} s"]
        for (v, d), target in TARGETS.items():
            t = by.get((f"{page}/{v}/{d}", "load_time"))
            q = by.get((f"{page}/{v}/{d}", target_metric(v)))
            if t is None or q is None or q.value is None:
                cells.append("not run")
            else:
                verdict = "meets" if q.value <= target else "misses"
                single = VARIANT_BY_NAME[v].single_hub
                of = f" of `{single}`" if single else ""
                cells.append(f"{t.value:.2f} s ({q.value:.2f}×{of}, {verdict} ≤ {target}×)")
        lines.append("| " + " | ".join(cells) + " |")
    return (
        "Targets, each beside no gateway from the same run (median load time, ratio to no gateway; "
        "a hub cluster's ratio to its single hub, same DNS state):\n\n"
        + "\n".join(lines)
        + "\n\nThe QUIC policy: `h3-no-gateway` and `h3-both-pass` (QUIC end to end) "
        "against `both` and `tcp-both-fallback` (TCP through Perigee at both ends) in the table below."
        + gateway_settings(recs)
    )


def gateway_settings(recs: list[records.Record]) -> str:
    """The mechanisms' values each gateway variant ran with, from its load_time note."""
    seen: dict[str, str] = {}
    for r in recs:
        parts = r.variant.split("/")
        if r.metric == "load_time" and len(parts) == 3 and "; " in r.note:
            seen.setdefault(parts[1], r.note.split("; ", 1)[1])
    if not seen:
        return ""
    return (
        "\n\nThe mechanisms' settings each gateway variant ran with (`GET /v1/config`; `absent`: "
        "the gateway has no such setting, i.e. today's behaviour):"
        + "".join(f"\n- `{v}`: {note}" for v, note in seen.items())
    )


def _v(rec: records.Record | None) -> str:
    return "n/a" if rec is None or rec.value is None else f"{rec.value:.2f}"
