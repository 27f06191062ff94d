//! Pure rendering of a `GatewayConfig` into kernel state: the nftables ruleset (one table,
//! `inet perigee`), the policy-routing and satellite routes (as `ip` argument vectors) and sysctls.
use super::config::{
    Action, BypassProtocol, Cidr, CongestionControl, GatewayConfig, IfName, MatchProtocol,
    PortRange, QuicPolicy, Role,
};
use super::reports::RenderedReport;
use std::collections::BTreeMap;
use std::fmt::Write;
use std::net::IpAddr;

pub const TABLE: &str = "perigee";
/// fwmark bit set on diverted SYNs and on packets of our transparent sockets.
pub const FW_MARK: u32 = 0x4000_0000;
/// Routing table (and rule priority) with the `local` default route that delivers marked packets.
pub const ROUTE_TABLE: u32 = 171;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RouteOp {
    /// `ip rule add fwmark MARK/MARK lookup TABLE priority TABLE`
    MarkRule { v6: bool },
    /// `ip route replace local default dev lo table TABLE`
    LocalRoute { v6: bool },
    /// A satellite route with per-route congestion control and initial windows; `via` None is a
    /// host route on the satellite link itself (the peer path's, to the other gateway).
    SatRoute {
        dst: String,
        via: Option<String>,
        dev: String,
        cc: Option<String>,
        initcwnd: u32,
        initrwnd: u32,
    },
}

/// An owned argv from its words (each one argv element, never split on spaces).
fn argv(words: &[&str]) -> Vec<String> {
    words.iter().map(|w| w.to_string()).collect()
}

impl RouteOp {
    fn fam(v6: bool) -> &'static str {
        if v6 {
            "-6"
        } else {
            "-4"
        }
    }

    pub fn is_v6(&self) -> bool {
        match self {
            RouteOp::MarkRule { v6 } | RouteOp::LocalRoute { v6 } => *v6,
            RouteOp::SatRoute { dst, .. } => dst.contains(':'),
        }
    }

    /// `ip route <verb> local <default> dev lo table TABLE`: LocalRoute's add and del.
    fn local_route_argv(v6: bool, verb: &str) -> Vec<String> {
        let default = if v6 { "::/0" } else { "0.0.0.0/0" };
        let table = ROUTE_TABLE.to_string();
        argv(&[
            Self::fam(v6),
            "route",
            verb,
            "local",
            default,
            "dev",
            "lo",
            "table",
            &table,
        ])
    }

    /// The `ip` argv that installs this (idempotent for routes; rules are deleted first by apply).
    pub fn add_argv(&self) -> Vec<String> {
        let table = ROUTE_TABLE.to_string();
        match self {
            RouteOp::MarkRule { v6 } => argv(&[
                Self::fam(*v6),
                "rule",
                "add",
                "fwmark",
                &format!("{FW_MARK:#x}/{FW_MARK:#x}"),
                "lookup",
                &table,
                "priority",
                &table,
            ]),
            RouteOp::LocalRoute { v6 } => Self::local_route_argv(*v6, "replace"),
            RouteOp::SatRoute {
                dst,
                via,
                dev,
                cc,
                initcwnd,
                initrwnd,
            } => {
                let mut v = argv(&[Self::fam(self.is_v6()), "route", "replace", dst]);
                if let Some(via) = via {
                    v.extend(argv(&["via", via]));
                }
                v.extend(argv(&["dev", dev]));
                if let Some(cc) = cc {
                    v.extend(argv(&["congctl", cc]));
                }
                if *initcwnd > 0 {
                    v.extend(argv(&["initcwnd", &initcwnd.to_string()]));
                }
                if *initrwnd > 0 {
                    v.extend(argv(&["initrwnd", &initrwnd.to_string()]));
                }
                v
            }
        }
    }

    /// The argv that removes it again.
    pub fn del_argv(&self) -> Vec<String> {
        match self {
            RouteOp::MarkRule { v6 } => argv(&[
                Self::fam(*v6),
                "rule",
                "del",
                "priority",
                &ROUTE_TABLE.to_string(),
            ]),
            RouteOp::LocalRoute { v6 } => Self::local_route_argv(*v6, "del"),
            RouteOp::SatRoute { dst, dev, .. } => {
                argv(&[Self::fam(self.is_v6()), "route", "del", dst, "dev", dev])
            }
        }
    }

    pub fn describe(&self) -> String {
        format!("ip {}", self.add_argv().join(" "))
    }
}

/// Major handle of our root qdisc on the satellite interface (tc reads it as hex, 0x5047 =
/// "PG"): how apply tells the shaper it installed from one somebody else did.
pub const SHAPER_HANDLE: &str = "5047:";
/// The HTB class that carries everything else (the root's `default`), and its FIFO leaf.
pub const SHAPER_CLASS: &str = "5047:1";
pub const SHAPER_LEAF: &str = "5048:";
/// The network-control class and its FIFO leaf: packets marked IP precedence 6 or 7 (DSCP 48..63,
/// CS6/CS7: what routing protocols such as BGP and BFD send) wait only behind their own kind.
pub const SHAPER_CONTROL_CLASS: &str = "5047:2";
pub const SHAPER_CONTROL_LEAF: &str = "5049:";
/// Packets the network-control leaf holds: keepalives and hellos, never a bulk queue.
const CONTROL_QUEUE_PACKETS: u32 = 64;
/// The network-control class's floor (bit/s): a BFD session at 200 ms sends ~3 kbit/s.
const CONTROL_RATE_FLOOR_BPS: u64 = 32_000;

/// The aggregate egress shaper (`shaping` in the config): an HTB root on `dev` whose default
/// class, for every packet but network control, sends at most `rate_bps`, over a `pfifo` leaf.
/// HTB + FIFO because fq, fq_codel and cake are not built into every kernel the appliance
/// must run on; with the gateway's sockets behind TCP small queues, each keeps ~2 packets in the
/// FIFO, so they take turns at the head and share the link.
///
/// Network control (IP precedence 6/7) has a class of its own beside it, capped at
/// `control_rate_bps`: behind a full FIFO (a second or more at the link rate) a routing
/// protocol's hellos arrive too late or are dropped, and a BFD session that loses four in a row
/// declares the gateway dead while it is busy serving.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shaper {
    pub dev: String,
    pub rate_bps: u64,
    pub overhead_bytes: u32,
    pub queue_packets: u32,
}

impl Shaper {
    /// The `tc` argvs that install (or, run again, change in place) the shaper, in order.
    /// `replace` with our fixed handles changes an existing qdisc/class of the same kind
    /// instead of grafting a new one, so a re-apply does not flush the queue.
    pub fn install_argvs(&self) -> Vec<Vec<String>> {
        let rate = format!("{}bit", self.rate_bps);
        let dev = self.dev.as_str();
        let mut class = argv(&[
            "class",
            "replace",
            "dev",
            dev,
            "parent",
            SHAPER_HANDLE,
            "classid",
            SHAPER_CLASS,
            "htb",
            "rate",
            &rate,
            "ceil",
            &rate,
        ]);
        if self.overhead_bytes > 0 {
            class.extend(argv(&["overhead", &self.overhead_bytes.to_string()]));
        }
        let control_rate = format!("{}bit", self.control_rate_bps());
        let mut control = argv(&[
            "class",
            "replace",
            "dev",
            dev,
            "parent",
            SHAPER_HANDLE,
            "classid",
            SHAPER_CONTROL_CLASS,
            "htb",
            "rate",
            &control_rate,
            "ceil",
            &control_rate,
            // One full packet per round: at a low rate HTB's derived quantum would be below an MTU.
            "quantum",
            "1514",
        ]);
        if self.overhead_bytes > 0 {
            control.extend(argv(&["overhead", &self.overhead_bytes.to_string()]));
        }
        // A u32 match of the precedence bits (the top two of the TOS / traffic class byte).
        let control_filter = |protocol: &str, prio: &str, field: &[&str]| {
            let mut a = argv(&[
                "filter",
                "add",
                "dev",
                dev,
                "parent",
                SHAPER_HANDLE,
                "protocol",
                protocol,
                "prio",
                prio,
                "u32",
                "match",
            ]);
            a.extend(argv(field));
            a.extend(argv(&["0xc0", "0xc0", "classid", SHAPER_CONTROL_CLASS]));
            a
        };
        vec![
            argv(&[
                "qdisc",
                "replace",
                "dev",
                dev,
                "root",
                "handle",
                SHAPER_HANDLE,
                "htb",
                "default",
                "1",
            ]),
            class,
            argv(&[
                "qdisc",
                "replace",
                "dev",
                dev,
                "parent",
                SHAPER_CLASS,
                "handle",
                SHAPER_LEAF,
                "pfifo",
                "limit",
                &self.queue_packets.to_string(),
            ]),
            control,
            argv(&[
                "qdisc",
                "replace",
                "dev",
                dev,
                "parent",
                SHAPER_CONTROL_CLASS,
                "handle",
                SHAPER_CONTROL_LEAF,
                "pfifo",
                "limit",
                &CONTROL_QUEUE_PACKETS.to_string(),
            ]),
            // u32 filters have no stable replace without kernel-chosen handles: drop ours
            // (none on a new root) and add them again, so a re-apply leaves exactly two.
            argv(&["filter", "del", "dev", dev, "parent", SHAPER_HANDLE]),
            control_filter("ip", "1", &["ip", "tos"]),
            control_filter("ipv6", "2", &["ip6", "priority"]),
        ]
    }

    /// The network-control class's cap: 1% of the rate, at least 32 kbit/s (a quarter of the
    /// rate on links slower than 128 kbit/s). It is on top of `rate_bps`, and used only by what
    /// is marked network control: a few kbit/s of hellos and keepalives.
    pub fn control_rate_bps(&self) -> u64 {
        (self.rate_bps / 100).max(CONTROL_RATE_FLOOR_BPS.min(self.rate_bps / 4))
    }

    /// The `tc` argv that removes it: the kernel then attaches the device's default qdisc.
    pub fn remove_argv(&self) -> Vec<String> {
        remove_root_qdisc_argv(&self.dev)
    }

    pub fn describe(&self) -> Vec<String> {
        self.install_argvs()
            .iter()
            .map(|a| format!("tc {}", a.join(" ")))
            .collect()
    }
}

/// The `tc` argv that deletes `dev`'s root qdisc (callers check first that it is ours).
pub fn remove_root_qdisc_argv(dev: &str) -> Vec<String> {
    argv(&["qdisc", "del", "dev", dev, "root"])
}

/// The shaper for `cfg`, or None when shaping is off.
pub fn render_shaper(cfg: &GatewayConfig) -> Option<Shaper> {
    let s = &cfg.shaping;
    s.enabled.then(|| Shaper {
        dev: cfg.interfaces.satellite.to_string(),
        rate_bps: s.rate_bps,
        overhead_bytes: s.overhead_bytes,
        queue_packets: s.queue_packets,
    })
}

#[derive(Debug, Clone)]
pub struct Rendered {
    pub nft: String,
    pub routes: Vec<RouteOp>,
    pub sysctls: BTreeMap<String, String>,
    /// None: shaping off (no qdisc of ours on the satellite interface).
    pub shaper: Option<Shaper>,
    /// `interfaces.satellite`: where the first apply looks for a shaper a killed daemon left.
    pub satellite: String,
}

impl Rendered {
    /// The control protocol's view (Squid's and unbound's files are added by the caller).
    pub fn report(&self) -> RenderedReport {
        RenderedReport {
            nft: self.nft.clone(),
            routes: self.routes.iter().map(|r| r.describe()).collect(),
            sysctls: self.sysctls.clone(),
            shaping: self.shaper.as_ref().map(|s| s.describe()),
            squid_conf: None,
            unbound_conf: None,
        }
    }

    pub fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self.report()).unwrap_or_default()
    }
}

/// The congestion control to use on the satellite: the configured one when the kernel has it,
/// else None (the system default).
pub fn effective_cc(wanted: CongestionControl, available: &[String]) -> Option<String> {
    available
        .iter()
        .any(|a| a == wanted.as_str())
        .then(|| wanted.to_string())
}

pub fn render(cfg: &GatewayConfig, available_cc: &[String]) -> Rendered {
    let routes = render_routes(cfg, available_cc);
    Rendered {
        nft: render_nft(cfg),
        routes,
        sysctls: cfg.sysctls.clone(),
        shaper: render_shaper(cfg),
        satellite: cfg.interfaces.satellite.to_string(),
    }
}

pub fn render_routes(cfg: &GatewayConfig, available_cc: &[String]) -> Vec<RouteOp> {
    let mut ops = vec![
        RouteOp::MarkRule { v6: false },
        RouteOp::MarkRule { v6: true },
        RouteOp::LocalRoute { v6: false },
        RouteOp::LocalRoute { v6: true },
    ];
    let cc = effective_cc(cfg.satellite.congestion_control, available_cc);
    let routes = cfg
        .satellite
        .routes
        .iter()
        .map(|r| (r.dst, Some(r.via)))
        .chain(peer_routes(cfg));
    for (dst, via) in routes {
        ops.push(RouteOp::SatRoute {
            dst: dst.to_string(),
            via: via.map(|v| v.to_string()),
            dev: cfg.interfaces.satellite.to_string(),
            cc: cc.clone(),
            initcwnd: cfg.satellite.initcwnd,
            initrwnd: cfg.satellite.initrwnd,
        });
    }
    ops
}

/// Host routes that give the peer path's connections the satellite leg's route settings
/// (initcwnd, congctl). The other gateway's address is usually on the satellite link's own
/// connected route, which has none. A terminal routes to its hub (via the satellite route that
/// covers it, else on the link); a hub routes to the next hops of its satellite routes, which
/// are its terminals' satellite addresses. Prefixes a satellite route already covers exactly
/// are left to it.
pub fn peer_routes(cfg: &GatewayConfig) -> Vec<(Cidr, Option<IpAddr>)> {
    if !cfg.peer.enabled {
        return Vec::new();
    }
    let sat: Vec<(Cidr, IpAddr)> = cfg
        .satellite
        .routes
        .iter()
        .map(|r| (r.dst, r.via))
        .collect();
    let mut out: Vec<(Cidr, Option<IpAddr>)> = Vec::new();
    let mut add = |ip: IpAddr, via: Option<IpAddr>| {
        let dst = Cidr::host(ip);
        let taken = sat.iter().any(|(c, _)| *c == dst) || out.iter().any(|(d, _)| *d == dst);
        if !taken {
            out.push((dst, via));
        }
    };
    match cfg.role {
        Role::Terminal => {
            if let Some(hub) = cfg.peer.hub_addr() {
                let via = sat
                    .iter()
                    .filter(|(c, _)| c.contains(hub))
                    .max_by_key(|(c, _)| c.len)
                    .map(|(_, via)| *via);
                add(hub, via);
            }
        }
        Role::Hub => {
            for (_, via) in &sat {
                add(*via, None);
            }
        }
    }
    out
}

fn set_of<T: std::fmt::Display>(items: &[T]) -> String {
    let v: Vec<String> = items.iter().map(|x| x.to_string()).collect();
    if v.len() == 1 {
        v[0].clone()
    } else {
        format!("{{ {} }}", v.join(", "))
    }
}

fn quoted_set(items: &[IfName]) -> String {
    let quoted: Vec<String> = items.iter().map(|x| format!("\"{x}\"")).collect();
    set_of(&quoted)
}

fn split_family(list: &[Cidr]) -> (Vec<Cidr>, Vec<Cidr>) {
    list.iter().partition(|c| c.is_v4())
}

/// Address-family specific pieces of a rule.
struct Fam {
    ip: &'static str,
    served: &'static str,
    v4: bool,
}

const FAMS: [Fam; 2] = [
    Fam {
        ip: "ip",
        served: "@served4",
        v4: true,
    },
    Fam {
        ip: "ip6",
        served: "@served6",
        v4: false,
    },
];

/// nft set that holds `tcp` while Squid is up (see `apply::set_cache_up`).
pub const CACHE_UP_SET: &str = "cache_up";
/// nft set that holds `udp` and `tcp` while the resolver is up (see `apply::set_dns_up`).
pub const DNS_UP_SET: &str = "dns_up";
const DNS_UP: &str = "meta l4proto @dns_up";
const CACHE_UP: &str = "meta l4proto @cache_up";

const SYN_ONLY: &str = "tcp flags & (fin | syn | rst | ack) == syn";

fn tproxy(f: &Fam, port: u32) -> String {
    format!(
        "tproxy {} to :{port} meta mark set meta mark | {FW_MARK:#x} accept",
        f.ip
    )
}

pub fn render_nft(cfg: &GatewayConfig) -> String {
    let mut t = String::new();
    let served = cfg.served();
    let (s4, s6) = split_family(&served);
    // Replacing the whole table in one transaction: create-if-missing, delete, define anew.
    let _ = writeln!(
        t,
        "table inet {TABLE} {{}}\ndelete table inet {TABLE}\ntable inet {TABLE} {{"
    );
    let _ = writeln!(
        t,
        "\tcounter bypass {{}}\n\tcounter overflow_syns {{}}\n\tcounter split_syns {{}}"
    );
    // Holds `tcp` while the splitter is over max_flows: new SYNs are then routed unsplit.
    let _ = writeln!(t, "\tset overflow {{ type inet_proto; }}");
    // Holds `tcp` while Squid is up; the cache rules need it, so while Squid is down (or not yet
    // started) port 80 fails over to the splitter instead of a dead port.
    let _ = writeln!(t, "\tset {CACHE_UP_SET} {{ type inet_proto; }}");
    let _ = writeln!(t, "\tcounter cache_syns {{}}");
    // Holds `udp` and `tcp` while the resolver runs (dns.enabled): port 53 goes to it only then.
    let _ = writeln!(t, "\tset {DNS_UP_SET} {{ type inet_proto; }}");
    let _ = writeln!(t, "\tcounter dns_intercepted {{}}");
    let _ = writeln!(t, "\tcounter quic_rejected {{}}");
    // One counter per bypass entry and per bypass class, shown per rule (docs/splitter.md).
    for i in 0..cfg.bypass.len() {
        let _ = writeln!(t, "\tcounter {} {{}}", bypass_counter(i));
    }
    for (i, c) in cfg.classes.iter().enumerate() {
        if c.action == Action::Bypass {
            let _ = writeln!(t, "\tcounter {} {{}}", bypass_class_counter(i));
        }
    }
    let _ = writeln!(
        t,
        "\tset served4 {{ type ipv4_addr; flags interval;{} }}",
        elements(&s4)
    );
    let _ = writeln!(
        t,
        "\tset served6 {{ type ipv6_addr; flags interval;{} }}",
        elements(&s6)
    );
    let _ = writeln!(
        t,
        "\tchain prerouting {{\n\t\ttype filter hook prerouting priority mangle; policy accept;"
    );
    let _ = writeln!(
        t,
        "\t\t# 1. bypass: evaluated before anything else, accepted untouched"
    );
    for (i, b) in cfg.bypass.iter().enumerate() {
        for rule in bypass_rules(b) {
            let _ = writeln!(
                t,
                "\t\t{rule} counter name bypass counter name {} accept comment \"bypass {}\"",
                bypass_counter(i),
                b.name
            );
        }
    }
    let mut ifs = cfg.interfaces.lan.clone();
    if cfg.role == Role::Hub {
        ifs.push(cfg.interfaces.satellite.clone());
    }
    let intercept_dns = cfg.dns.enabled && cfg.dns.intercept;
    if cfg.dns.enabled {
        let _ = writeln!(
            t,
            "\t\t# 2. DNS (before the socket rule: the resolver's port-53 listener is transparent and on every address)"
        );
        if intercept_dns {
            let _ = writeln!(
                t,
                "\t\tiifname {} meta l4proto {{ udp, tcp }} th dport 53 jump dns",
                quoted_set(&ifs)
            );
        }
        // A TCP packet to port 53 of another host that no intercepted connection owns (only
        // the resolver's wildcard listener matches it) goes where it was sent, on any
        // interface: the socket rule below would hand it to that listener.
        let _ = writeln!(
            t,
            "\t\ttcp dport 53 fib daddr type != local socket wildcard 1 accept"
        );
    }
    let _ = writeln!(
        t,
        "\t\t# 3. packets of established split flows belong to our transparent sockets"
    );
    let _ = writeln!(
        t,
        "\t\tmeta l4proto tcp socket transparent 1 meta mark set meta mark | {FW_MARK:#x} accept"
    );
    if cfg.splitter.enabled {
        let _ = writeln!(
            t,
            "\t\t# 4. new connections from served subnets entering on the client-facing interfaces"
        );
        let _ = writeln!(
            t,
            "\t\tiifname {} meta l4proto tcp jump intercept",
            quoted_set(&ifs)
        );
    }
    let _ = writeln!(t, "\t}}");
    if intercept_dns {
        // TPROXY keeps the query's destination: the resolver (interface-automatic) answers
        // from the address the client asked, so any resolver address a client uses works.
        // Nothing matched (resolver down, client not served): the query goes where it was sent.
        let _ = writeln!(t, "\tchain dns {{");
        let port = perigee_dns::LISTEN_PORT;
        for f in &FAMS {
            let tp = format!(
                "counter name dns_intercepted tproxy {} to :{port} meta mark set meta mark | {FW_MARK:#x} accept",
                f.ip
            );
            let _ = writeln!(
                t,
                "\t\t{} saddr {} meta l4proto udp {DNS_UP} {tp}",
                f.ip, f.served
            );
            let _ = writeln!(
                t,
                "\t\t{} saddr {} {SYN_ONLY} {DNS_UP} {tp}",
                f.ip, f.served
            );
        }
        let _ = writeln!(t, "\t}}");
    }
    let _ = writeln!(t, "\tchain intercept {{");
    let _ = writeln!(
        t,
        "\t\t{SYN_ONLY} meta l4proto @overflow counter name overflow_syns return"
    );
    // Connections to the gateway's own addresses are its own business, never split.
    let _ = writeln!(t, "\t\tfib daddr type local return");
    for f in &FAMS {
        for c in cfg.sorted_classes() {
            for rule in class_rules(cfg, c, f) {
                let rule = match cfg.classes.iter().position(|x| x.name == c.name) {
                    Some(i) if c.action == Action::Bypass => match rule.strip_suffix(" accept") {
                        Some(head) => {
                            format!("{head} counter name {} accept", bypass_class_counter(i))
                        }
                        None => rule,
                    },
                    _ => rule,
                };
                let _ = writeln!(t, "\t\t{rule} comment \"class {}\"", c.name);
            }
        }
        if cfg.cache.enabled {
            let _ = writeln!(
                t,
                "\t\t{} saddr {} tcp dport 80 {CACHE_UP} {SYN_ONLY} counter name cache_syns {} comment \"cache default\"",
                f.ip,
                f.served,
                tproxy(f, u32::from(cfg.cache.port))
            );
        }
        let _ = writeln!(
            t,
            "\t\t{} saddr {} {SYN_ONLY} counter name split_syns {} comment \"class default\"",
            f.ip,
            f.served,
            tproxy(f, cfg.splitter.tproxy_port)
        );
    }
    let _ = writeln!(t, "\t}}");
    render_own_ports_guard(&mut t, cfg);
    if cfg.quic == QuicPolicy::Fallback {
        render_quic_fallback(&mut t, cfg);
    }
    let _ = writeln!(t, "}}");
    t
}

/// The TPROXY ports (the splitter's, and Squid's while the cache is on) take only what the rules
/// above diverted to them, and a diverted connection keeps its original destination, which is
/// never one of the gateway's own addresses (`fib daddr type local return` above). A connection
/// addressed to such a port on the gateway itself would make the splitter or Squid take the port
/// as the destination and connect to it again, endlessly (Squid runs with `via off`, so it cannot
/// see the loop): it is reset instead. Not by the mark: `socket transparent 1` marks a SYN for the
/// transparent listener too.
fn render_own_ports_guard(t: &mut String, cfg: &GatewayConfig) {
    let mut ports: Vec<u32> = Vec::new();
    if cfg.splitter.enabled {
        ports.push(cfg.splitter.tproxy_port);
    }
    if cfg.cache.enabled {
        ports.push(u32::from(cfg.cache.port));
    }
    if ports.is_empty() {
        return;
    }
    let _ = writeln!(
        t,
        "\tchain own_ports {{\n\t\ttype filter hook input priority filter; policy accept;"
    );
    let _ = writeln!(
        t,
        "\t\tmeta l4proto tcp fib daddr type local tcp dport {} {SYN_ONLY} reject with tcp reset comment \"addressed to a TPROXY port: never relayed to itself\"",
        set_of(&ports)
    );
    let _ = writeln!(t, "\t}}");
}

/// `quic: fallback`: QUIC (UDP 443) from the served subnets is answered with an ICMP
/// port-unreachable, so a browser gives up on it at once and uses TCP, which we split. In the
/// forward hook because `reject` is not allowed at prerouting. Bypass entries and bypass
/// classes that can match UDP come first and are left alone (never reset).
fn render_quic_fallback(t: &mut String, cfg: &GatewayConfig) {
    let _ = writeln!(
        t,
        "\tchain forward {{\n\t\ttype filter hook forward priority filter; policy accept;"
    );
    for b in &cfg.bypass {
        for rule in bypass_rules(b) {
            let _ = writeln!(t, "\t\t{rule} accept comment \"bypass {}\"", b.name);
        }
    }
    for f in &FAMS {
        for c in cfg.sorted_classes() {
            let udp = c.matcher.protocol != MatchProtocol::Tcp;
            if c.action == Action::Bypass && udp {
                if let Some(rule) = class_rule(cfg, c, f) {
                    let _ = writeln!(t, "\t\t{rule} comment \"class {}\"", c.name);
                }
            }
        }
        let _ = writeln!(
            t,
            "\t\t{} saddr {} udp dport 443 counter name quic_rejected reject with icmpx type port-unreachable comment \"quic fallback\"",
            f.ip, f.served
        );
    }
    let _ = writeln!(t, "\t}}");
}

/// The nft counter of bypass entry `i` (config order; names may start with a digit, which an
/// nft identifier may not).
pub fn bypass_counter(i: usize) -> String {
    format!("bypass_entry_{i}")
}

/// The nft counter of class `i` (config order) when its action is bypass.
pub fn bypass_class_counter(i: usize) -> String {
    format!("bypass_class_{i}")
}

fn elements(list: &[Cidr]) -> String {
    if list.is_empty() {
        String::new()
    } else {
        format!(
            " elements = {{ {} }};",
            list.iter()
                .map(|c| c.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        )
    }
}

fn bypass_rules(b: &super::config::Bypass) -> Vec<String> {
    let ports: &[PortRange] = &b.ports;
    let cidrs: &[Cidr] = &b.cidrs;
    let proto = match b.protocol {
        BypassProtocol::Any => String::new(),
        BypassProtocol::Icmp => "meta l4proto { icmp, ipv6-icmp }".into(),
        BypassProtocol::Tcp => "meta l4proto tcp".into(),
        BypassProtocol::Udp => "meta l4proto udp".into(),
        BypassProtocol::Esp => "meta l4proto esp".into(),
        BypassProtocol::Ah => "meta l4proto ah".into(),
    };
    let mut addr_parts: Vec<String> = Vec::new();
    let (c4, c6) = split_family(cidrs);
    for (fam, list) in [("ip", &c4), ("ip6", &c6)] {
        if !list.is_empty() {
            addr_parts.push(format!("{fam} saddr {}", set_of(list)));
            addr_parts.push(format!("{fam} daddr {}", set_of(list)));
        }
    }
    if addr_parts.is_empty() {
        addr_parts.push(String::new());
    }
    let mut port_parts: Vec<String> = Vec::new();
    if ports.is_empty() {
        port_parts.push(String::new());
    } else {
        // Both directions of the exchange: to the port and back from it.
        port_parts.push(format!("th dport {}", set_of(ports)));
        port_parts.push(format!("th sport {}", set_of(ports)));
    }
    let mut out = Vec::new();
    for a in &addr_parts {
        for p in &port_parts {
            let parts: Vec<&str> = [proto.as_str(), a.as_str(), p.as_str()]
                .into_iter()
                .filter(|s| !s.is_empty())
                .collect();
            out.push(parts.join(" "));
        }
    }
    out
}

/// The intercept rules of a class for one address family: none when the class cannot match
/// that family or has nothing to do in nft (UDP acceleration); a cache class gets a rule toward
/// Squid (only while it is up) followed by the same match toward the splitter (fail-over).
fn class_rules(cfg: &GatewayConfig, c: &super::config::Class, f: &Fam) -> Vec<String> {
    let Some(rule) = class_rule(cfg, c, f) else {
        return Vec::new();
    };
    if c.action == Action::Cache && cfg.cache.enabled {
        let splitter = format!(
            "counter name split_syns {}",
            tproxy(f, cfg.splitter.tproxy_port)
        );
        let cache = format!(
            "{CACHE_UP} counter name cache_syns {}",
            tproxy(f, u32::from(cfg.cache.port))
        );
        return vec![rule.replace(&splitter, &cache), rule];
    }
    vec![rule]
}

/// One intercept rule for a class and address family (a cache class toward the splitter).
fn class_rule(cfg: &GatewayConfig, c: &super::config::Class, f: &Fam) -> Option<String> {
    let m = &c.matcher;
    let proto = m.protocol;
    let of_family = |list: &[Cidr]| -> Vec<Cidr> {
        list.iter().copied().filter(|c| c.is_v4() == f.v4).collect()
    };
    let (src, dst) = (of_family(&m.src), of_family(&m.dst));
    if (!m.src.is_empty() && src.is_empty()) || (!m.dst.is_empty() && dst.is_empty()) {
        return None;
    }
    let mut parts = vec![format!("{} saddr {}", f.ip, f.served)];
    if !src.is_empty() {
        parts.push(format!("{} saddr {}", f.ip, set_of(&src)));
    }
    if !dst.is_empty() {
        parts.push(format!("{} daddr {}", f.ip, set_of(&dst)));
    }
    if !m.iifname.is_empty() {
        parts.push(format!("iifname {}", quoted_set(&m.iifname)));
    }
    if !m.dscp.is_empty() {
        parts.push(format!("{} dscp {}", f.ip, set_of(&m.dscp)));
    }
    let (dports, sports): (&[PortRange], &[PortRange]) = (&m.dports, &m.sports);
    match c.action {
        Action::Bypass => {
            if proto != MatchProtocol::Any {
                parts.push(format!("meta l4proto {}", proto.as_str()));
            }
            if !dports.is_empty() {
                parts.push(format!("th dport {}", set_of(dports)));
            }
            if !sports.is_empty() {
                parts.push(format!("th sport {}", set_of(sports)));
            }
            parts.push("accept".into());
        }
        Action::Accelerate | Action::Cache => {
            if proto == MatchProtocol::Udp {
                return None;
            }
            if !dports.is_empty() {
                parts.push(format!("tcp dport {}", set_of(dports)));
            }
            if !sports.is_empty() {
                parts.push(format!("tcp sport {}", set_of(sports)));
            }
            parts.push(SYN_ONLY.into());
            parts.push(format!(
                "counter name split_syns {}",
                tproxy(f, cfg.splitter.tproxy_port)
            ));
        }
    }
    Some(parts.join(" "))
}

#[cfg(test)]
mod tests {
    use super::super::config::{example_json, from_value};
    use super::*;

    fn cfg() -> GatewayConfig {
        from_value(example_json()).unwrap()
    }

    #[test]
    fn bypass_comes_before_any_tproxy() {
        let nft = render_nft(&cfg());
        let first_tproxy = nft.find("tproxy").unwrap();
        for needle in [
            "meta l4proto esp",
            "meta l4proto ah",
            "meta l4proto udp th dport 500",
            "th dport 4500",
            "ip saddr 203.0.113.7/32",
        ] {
            let at = nft
                .find(needle)
                .unwrap_or_else(|| panic!("missing {needle} in\n{nft}"));
            assert!(at < first_tproxy, "{needle} after tproxy");
        }
        assert!(nft.find("socket transparent 1").unwrap() < nft.find("jump intercept").unwrap());
        assert!(nft.find("fib daddr type local return").unwrap() < first_tproxy);
    }

    #[test]
    fn own_tproxy_ports_refuse_what_is_addressed_to_them() {
        let guard = |nft: &str| {
            nft.lines()
                .find(|l| l.contains("reject with tcp reset"))
                .map(str::trim)
                .map(String::from)
        };
        let off = guard(&render_nft(&cfg())).expect("a guard while the splitter runs");
        assert!(
            off.starts_with("meta l4proto tcp fib daddr type local tcp dport 7071 "),
            "{off}"
        );
        let mut j = example_json();
        j["cache"]["enabled"] = true.into();
        let on = guard(&render_nft(&from_value(j.clone()).unwrap())).unwrap();
        assert!(on.contains("tcp dport { 7071, 3129 }"), "{on}");
        j["splitter"]["enabled"] = false.into();
        j["cache"]["enabled"] = false.into();
        assert_eq!(guard(&render_nft(&from_value(j).unwrap())), None);
    }

    #[test]
    fn served_sets_are_rendered_normalised_and_merged() {
        let mut j = example_json();
        j["served_subnets"] = serde_json::json!(["10.71.1.9/24", "10.71.0.0/16", "fd71:1::7/64"]);
        let nft = render_nft(&from_value(j).unwrap());
        assert!(
            nft.contains(
                "set served4 { type ipv4_addr; flags interval; elements = { 10.71.0.0/16 }; }"
            ),
            "{nft}"
        );
        assert!(nft.contains("elements = { fd71:1::/64 }"), "{nft}");
    }

    #[test]
    fn both_families_and_syn_only() {
        let nft = render_nft(&cfg());
        assert!(nft.contains("tproxy ip to :7071"));
        assert!(nft.contains("tproxy ip6 to :7071"));
        assert!(nft.contains("elements = { 10.71.1.0/24 }"));
        assert!(nft.contains("elements = { fd71:1::/64 }"));
        for line in nft.lines().filter(|l| l.contains("tproxy")) {
            assert!(line.contains("== syn"), "{line}");
        }
        // The web class only has a v4 source, so it renders once (v4) plus the two defaults.
        assert_eq!(nft.matches("tproxy").count(), 3, "{nft}");
        assert!(nft.contains("tcp dport { 80, 8000-8080 }"));
    }

    #[test]
    fn hub_also_intercepts_on_satellite_and_cache_only_when_enabled() {
        let mut j = example_json();
        j["role"] = "hub".into();
        j["classes"][0]["action"] = "cache".into();
        let c = from_value(j.clone()).unwrap();
        let nft = render_nft(&c);
        assert!(nft.contains("iifname { \"lan0\", \"sat0\" }"));
        assert!(!nft.contains(":3129"));
        j["cache"]["enabled"] = true.into();
        let nft = render_nft(&from_value(j).unwrap());
        assert!(nft.contains("tproxy ip to :3129"));
    }

    #[test]
    fn cache_takes_port_80_only_while_squid_is_up_and_falls_over_to_the_splitter() {
        let mut j = example_json();
        j["classes"] = serde_json::json!([]);
        let nft = render_nft(&from_value(j.clone()).unwrap());
        assert!(!nft.contains("cache default"), "{nft}");
        j["cache"]["enabled"] = true.into();
        let nft = render_nft(&from_value(j).unwrap());
        for ip in ["ip", "ip6"] {
            let cache = nft
                .lines()
                .position(|l| l.contains(&format!("tproxy {ip} to :3129")))
                .unwrap_or_else(|| panic!("no {ip} cache rule in\n{nft}"));
            let line = nft.lines().nth(cache).unwrap();
            assert!(line.contains("tcp dport 80"), "{line}");
            assert!(line.contains("meta l4proto @cache_up"), "{line}");
            assert!(line.contains("@served"), "{line}");
            let split = nft
                .lines()
                .position(|l| l.contains(&format!("tproxy {ip} to :7071")))
                .unwrap();
            assert!(
                cache < split,
                "cache rule must come before the splitter default"
            );
        }
        // Replies to Squid's spoofed sockets come back on the satellite interface: the socket
        // rule is not restricted to any interface.
        let socket_rule = nft
            .lines()
            .find(|l| l.contains("socket transparent 1"))
            .unwrap();
        assert!(!socket_rule.contains("iifname"), "{socket_rule}");
    }

    #[test]
    fn cache_class_falls_over_to_the_splitter_and_accelerate_class_wins_port_80() {
        let mut j = example_json();
        j["cache"]["enabled"] = true.into();
        j["classes"][0]["action"] = "cache".into();
        let nft = render_nft(&from_value(j.clone()).unwrap());
        let class: Vec<&str> = nft.lines().filter(|l| l.contains("class web")).collect();
        assert_eq!(class.len(), 2, "{nft}");
        assert!(class[0].contains("@cache_up") && class[0].contains("to :3129"));
        assert!(!class[1].contains("@cache_up") && class[1].contains("to :7071"));
        // An accelerate class of port 80 keeps it on the splitter even with the cache on.
        j["classes"][0]["action"] = "accelerate".into();
        let nft = render_nft(&from_value(j).unwrap());
        let first_80 = nft.lines().find(|l| l.contains("dport { 80,")).unwrap();
        assert!(first_80.contains("to :7071"), "{first_80}");
    }

    #[test]
    fn dns_goes_to_the_resolver_only_when_enabled_and_before_the_splitter() {
        let nft = render_nft(&cfg());
        assert!(!nft.contains("jump dns"), "{nft}");
        assert!(nft.contains("set dns_up"), "the set always exists");
        let mut j = example_json();
        j["dns"] = serde_json::json!({"enabled": true, "upstream": ["10.71.3.53"]});
        let nft = render_nft(&from_value(j.clone()).unwrap());
        let jump = nft.find("jump dns").unwrap_or_else(|| panic!("{nft}"));
        let socket_rule = nft.find("socket transparent 1").unwrap();
        // The resolver's listener is transparent: new connections to port 53 are sorted out
        // before the socket rule could take them all.
        let guard = nft
            .find("tcp dport 53 fib daddr type != local socket wildcard 1 accept")
            .unwrap_or_else(|| panic!("{nft}"));
        assert!(jump < guard && guard < socket_rule, "{nft}");
        assert!(jump < nft.find("jump intercept").unwrap());
        assert!(nft.contains("iifname \"lan0\" meta l4proto { udp, tcp } th dport 53 jump dns"));
        let chain: Vec<&str> = nft
            .lines()
            .skip_while(|l| !l.contains("chain dns {"))
            .skip(1)
            .take_while(|l| !l.contains('}'))
            .collect();
        assert_eq!(chain.len(), 4, "{nft}");
        for (line, ip) in chain.iter().zip(["ip", "ip", "ip6", "ip6"]) {
            assert!(line.contains(&format!("{ip} saddr @served")), "{line}");
            assert!(line.contains("meta l4proto @dns_up"), "{line}");
            assert!(line.contains(&format!("tproxy {ip} to :53")), "{line}");
        }
        assert!(chain[0].contains("meta l4proto udp"));
        assert!(chain[1].contains("== syn"));
        // Interception off: the resolver only answers what is sent to the gateway.
        j["dns"]["intercept"] = false.into();
        let nft = render_nft(&from_value(j).unwrap());
        assert!(
            !nft.contains("jump dns") && !nft.contains("chain dns"),
            "{nft}"
        );
    }

    #[test]
    fn network_control_class_gets_a_percent_of_the_rate_with_a_floor() {
        let at = |rate_bps| {
            Shaper {
                dev: "sat0".into(),
                rate_bps,
                overhead_bytes: 0,
                queue_packets: 1000,
            }
            .control_rate_bps()
        };
        assert_eq!(at(16_666_000), 166_660);
        assert_eq!(at(1_000_000), 32_000, "the floor: room for BGP and BFD");
        assert_eq!(at(8_000), 2_000, "never more than a quarter of a slow link");
    }

    #[test]
    fn shaper_renders_htb_at_the_rate_over_a_fifo_on_the_satellite_interface() {
        assert_eq!(render_shaper(&cfg()), None, "off by default");
        let mut j = example_json();
        j["interfaces"]["satellite"] = "sat1".into();
        j["shaping"] = serde_json::json!({"enabled": true, "rate_bps": 1_536_000});
        let r = render(&from_value(j.clone()).unwrap(), &[]);
        let shaper = r.shaper.clone().unwrap();
        assert_eq!(
            shaper.describe(),
            vec![
                "tc qdisc replace dev sat1 root handle 5047: htb default 1",
                "tc class replace dev sat1 parent 5047: classid 5047:1 htb rate 1536000bit ceil 1536000bit",
                "tc qdisc replace dev sat1 parent 5047:1 handle 5048: pfifo limit 1000",
                "tc class replace dev sat1 parent 5047: classid 5047:2 htb rate 32000bit ceil 32000bit quantum 1514",
                "tc qdisc replace dev sat1 parent 5047:2 handle 5049: pfifo limit 64",
                "tc filter del dev sat1 parent 5047:",
                "tc filter add dev sat1 parent 5047: protocol ip prio 1 u32 match ip tos 0xc0 0xc0 classid 5047:2",
                "tc filter add dev sat1 parent 5047: protocol ipv6 prio 2 u32 match ip6 priority 0xc0 0xc0 classid 5047:2",
            ]
        );
        assert_eq!(shaper.remove_argv().join(" "), "qdisc del dev sat1 root");
        assert_eq!(r.to_json()["shaping"][0], shaper.describe()[0]);
        // Overhead and queue length when given; every argument is its own argv element.
        j["shaping"] = serde_json::json!({"enabled": true, "rate_bps": 50_000_000,
                                          "overhead_bytes": 24, "queue_packets": 64});
        let shaper = render_shaper(&from_value(j.clone()).unwrap()).unwrap();
        let argvs = shaper.install_argvs();
        assert_eq!(
            argvs[1][argvs[1].len() - 4..],
            ["ceil", "50000000bit", "overhead", "24"]
        );
        assert_eq!(argvs[2][argvs[2].len() - 2..], ["limit", "64"]);
        // Network control: 1% of the rate, with the same overhead.
        assert_eq!(shaper.control_rate_bps(), 500_000);
        assert_eq!(
            argvs[3][argvs[3].len() - 6..],
            ["ceil", "500000bit", "quantum", "1514", "overhead", "24"]
        );
        assert!(argvs.iter().flatten().all(|a| !a.contains(' ')));
        // Disabled with a rate kept: nothing installed.
        j["shaping"]["enabled"] = false.into();
        let r = render(&from_value(j).unwrap(), &[]);
        assert_eq!(r.shaper, None);
        assert!(r.to_json()["shaping"].is_null());
    }

    #[test]
    fn each_bypass_rule_has_its_own_counter() {
        let mut j = example_json();
        j["classes"].as_array_mut().unwrap().push(
            serde_json::json!({"name": "voip", "priority": 5, "action": "bypass",
                "match": {"protocol": "tcp", "dports": ["5060"]}}),
        );
        let nft = render_nft(&from_value(j).unwrap());
        // Six bypass entries in the example, and the class (index 1 in the config).
        for i in 0..6 {
            assert!(
                nft.contains(&format!("counter {} {{}}", bypass_counter(i))),
                "{nft}"
            );
            assert!(nft.contains(&format!(
                "counter name bypass counter name {} accept",
                bypass_counter(i)
            )));
        }
        assert!(!nft.contains(&bypass_counter(6)));
        assert!(nft.contains(&format!("counter {} {{}}", bypass_class_counter(1))));
        let class = nft
            .lines()
            .find(|l| l.contains("comment \"class voip\""))
            .unwrap();
        assert!(
            class.contains(&format!("counter name {} accept", bypass_class_counter(1))),
            "{class}"
        );
        // The web class (accelerate) has none.
        assert!(!nft.contains(&bypass_class_counter(0)));
    }

    #[test]
    fn quic_fallback_rejects_udp_443_from_served_subnets_after_the_bypass() {
        let mut p = example_json();
        p["quic"] = "pass".into();
        let pass = render_nft(&from_value(p).unwrap());
        assert!(
            !pass.contains("reject with icmpx"),
            "pass: no datagram rejected\n{pass}"
        );
        assert!(
            pass.contains("counter quic_rejected"),
            "the counter always exists"
        );
        let mut j = example_json();
        j["quic"] = "fallback".into();
        j["classes"].as_array_mut().unwrap().push(
            serde_json::json!({"name": "quic-ok", "priority": 5, "action": "bypass",
                "match": {"protocol": "udp", "dst": ["198.51.100.0/24"], "dports": ["443"]}}),
        );
        let nft = render_nft(&from_value(j).unwrap());
        let fwd = &nft[nft.find("chain forward").expect("forward chain")..];
        assert!(fwd.contains("hook forward"), "{fwd}");
        for ip in ["ip", "ip6"] {
            let rule = fwd
                .lines()
                .find(|l| l.contains(&format!("{ip} saddr @served")) && l.contains("reject with"))
                .unwrap_or_else(|| panic!("no {ip} reject in\n{fwd}"));
            assert!(rule.contains("udp dport 443"), "{rule}");
            assert!(rule.contains("icmpx type port-unreachable"), "{rule}");
        }
        let first_reject = fwd.find("reject with").unwrap();
        for needle in [
            "meta l4proto esp",
            "th dport 500",
            "ip saddr 203.0.113.7/32",
            "class quic-ok",
        ] {
            let at = fwd
                .find(needle)
                .unwrap_or_else(|| panic!("missing {needle} in\n{fwd}"));
            assert!(at < first_reject, "{needle} must come before the reject");
        }
        // The TCP side is untouched: the forward chain holds no tproxy.
        assert!(!fwd.contains("tproxy"));
    }

    #[test]
    fn peer_routes_carry_the_satellite_settings_to_the_other_gateway() {
        let key = "ab".repeat(32);
        let mut j = example_json();
        j["peer"] = serde_json::json!({"enabled": true, "hub": "10.71.2.2", "key": key});
        let term = render_routes(&from_value(j.clone()).unwrap(), &["hybla".into()]);
        let hub_route = term.last().unwrap().describe();
        assert_eq!(
            hub_route,
            "ip -4 route replace 10.71.2.2/32 dev sat0 congctl hybla initcwnd 10 initrwnd 10"
        );
        // A hub behind a satellite route is reached through that route's next hop.
        j["peer"]["hub"] = "10.71.3.1".into();
        let term = render_routes(&from_value(j.clone()).unwrap(), &[]);
        assert_eq!(
            term.last().unwrap().describe(),
            "ip -4 route replace 10.71.3.1/32 via 10.71.2.2 dev sat0 initcwnd 10 initrwnd 10"
        );
        // A hub: host routes to its terminals, the next hops of its satellite routes.
        j["role"] = "hub".into();
        j["peer"] = serde_json::json!({"enabled": true, "key": key});
        j["satellite"]["routes"] = serde_json::json!([
            {"dst": "10.71.1.0/24", "via": "10.71.2.1"}, {"dst": "fd71:1::/64", "via": "fd71:2::1"},
            {"dst": "10.71.5.0/24", "via": "10.71.2.1"}]);
        let hub = from_value(j.clone()).unwrap();
        assert_eq!(
            peer_routes(&hub),
            vec![
                ("10.71.2.1/32".parse().unwrap(), None),
                ("fd71:2::1/128".parse().unwrap(), None)
            ]
        );
        j["peer"]["enabled"] = false.into();
        assert!(peer_routes(&from_value(j).unwrap()).is_empty());
    }

    #[test]
    fn routes_use_available_cc_only() {
        let c = cfg();
        let r = render_routes(&c, &["cubic".into(), "reno".into()]);
        let sat: Vec<String> = r
            .iter()
            .filter(|o| matches!(o, RouteOp::SatRoute { .. }))
            .map(|o| o.describe())
            .collect();
        assert_eq!(
            sat[0],
            "ip -4 route replace 10.71.3.0/24 via 10.71.2.2 dev sat0 initcwnd 10 initrwnd 10"
        );
        let r = render_routes(&c, &["hybla".into()]);
        assert!(r[5]
            .describe()
            .starts_with("ip -6 route replace fd71:3::/64 via fd71:2::2 dev sat0 congctl hybla"));
        assert_eq!(
            r[0].describe(),
            "ip -4 rule add fwmark 0x40000000/0x40000000 lookup 171 priority 171"
        );
    }
}
