//! The nftables ruleset: one table, `inet perigee`, replaced whole in one transaction (with the
//! peer path's duplicate tables, `redundancy`).
use super::super::config::{
    Action, Bypass, BypassProtocol, Cidr, Class, GatewayConfig, IfName, MatchProtocol, PortRange,
    QuicPolicy, Role,
};
use super::FW_MARK;
use std::fmt::Write;
use std::net::IpAddr;

pub const TABLE: &str = "perigee";

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
    /// The resolvers whose DNS the gateway answers (`dns.intercepted_resolvers`).
    resolvers: &'static str,
    v4: bool,
}

const FAMS: [Fam; 2] = [
    Fam {
        ip: "ip",
        served: "@served4",
        resolvers: "@dns_resolvers4",
        v4: true,
    },
    Fam {
        ip: "ip6",
        served: "@served6",
        resolvers: "@dns_resolvers6",
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
    if cfg.dns.enabled && cfg.dns.intercept {
        render_dns_resolver_sets(&mut t, cfg);
    }
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
            // Only queries addressed to a resolver the operator listed: any other resolver a
            // client asks (the customer's own) gets the query untouched.
            for f in &FAMS {
                let _ = writeln!(
                    t,
                    "\t\tiifname {} meta l4proto {{ udp, tcp }} th dport 53 {} daddr {} jump dns",
                    quoted_set(&ifs),
                    f.ip,
                    f.resolvers
                );
            }
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
    super::egress::render_egress(&mut t, cfg);
    let _ = writeln!(t, "}}");
    super::redundancy::render_redundancy(&mut t, cfg);
    t
}

/// `dns_resolvers4`/`dns_resolvers6`: the addresses whose port-53 queries the resolver answers
/// (the listed upstreams and `dns.intercept_for`); the gateway's own addresses need no rule
/// (the resolver listens on them).
fn render_dns_resolver_sets(t: &mut String, cfg: &GatewayConfig) {
    let (r4, r6): (Vec<IpAddr>, Vec<IpAddr>) = cfg
        .dns
        .intercepted_resolvers()
        .into_iter()
        .partition(IpAddr::is_ipv4);
    for (name, kind, list) in [
        ("dns_resolvers4", "ipv4_addr", r4),
        ("dns_resolvers6", "ipv6_addr", r6),
    ] {
        let elements = if list.is_empty() {
            String::new()
        } else {
            let items: Vec<String> = list.iter().map(IpAddr::to_string).collect();
            format!(" elements = {{ {} }};", items.join(", "))
        };
        let _ = writeln!(t, "\tset {name} {{ type {kind};{elements} }}");
    }
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

fn bypass_rules(b: &Bypass) -> Vec<String> {
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
fn class_rules(cfg: &GatewayConfig, c: &Class, f: &Fam) -> Vec<String> {
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
fn class_rule(cfg: &GatewayConfig, c: &Class, f: &Fam) -> Option<String> {
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
    use super::super::example_cfg as cfg;
    use super::*;
    use crate::gateway::config::{example_json, from_value};

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
        assert!(nft.contains("elements = { 192.0.2.0/24 }"));
        assert!(nft.contains("elements = { 2001:db8:1::/64 }"));
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
        // Only queries addressed to a listed resolver: the upstream (port 53) here.
        assert!(nft.contains(
            "iifname \"lan0\" meta l4proto { udp, tcp } th dport 53 ip daddr @dns_resolvers4 jump dns"
        ));
        assert!(nft.contains(
            "iifname \"lan0\" meta l4proto { udp, tcp } th dport 53 ip6 daddr @dns_resolvers6 jump dns"
        ));
        assert!(
            !nft.contains("th dport 53 jump dns"),
            "never every address: {nft}"
        );
        assert!(nft.contains("set dns_resolvers4 { type ipv4_addr; elements = { 10.71.3.53 }; }"));
        assert!(nft.contains("set dns_resolvers6 { type ipv6_addr; }"));
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
        // The operator's own list joins the upstreams (another port is not a resolver clients ask).
        j["dns"]["upstream"] = serde_json::json!(["10.71.3.53", "10.71.3.54@5353"]);
        j["dns"]["intercept_for"] = serde_json::json!(["192.0.2.1", "2001:db8::1"]);
        let nft = render_nft(&from_value(j.clone()).unwrap());
        assert!(
            nft.contains(
                "set dns_resolvers4 { type ipv4_addr; elements = { 10.71.3.53, 192.0.2.1 }; }"
            ),
            "{nft}"
        );
        assert!(nft.contains("set dns_resolvers6 { type ipv6_addr; elements = { 2001:db8::1 }; }"));
        // Interception off: the resolver only answers what is sent to the gateway.
        j["dns"]["intercept"] = false.into();
        let nft = render_nft(&from_value(j).unwrap());
        assert!(
            !nft.contains("jump dns")
                && !nft.contains("chain dns")
                && !nft.contains("dns_resolvers"),
            "{nft}"
        );
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
}
