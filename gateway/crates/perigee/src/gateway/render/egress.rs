//! The hub's egress policy in the kernel (docs/splitter.md, *Where the hub connects*): the same
//! line as the daemon's check (`egress`), on the hub's own output, so a daemon bug cannot cross
//! it. What it catches is what the hub opens for others: a new TCP connection from an address that
//! is not the hub's own (a transparent socket bound to a client's address: the splitter's and
//! Squid's re-originated connections), matched by the kernel's view of the packet, not by a mark
//! the daemon would have to remember to set. Denied SYNs are dropped (they never leave; TCP
//! retries them until its connect times out) and counted in `egress_denied`.
use super::super::config::{Cidr, GatewayConfig, Role};
use std::fmt::Write;

/// The named counter of SYNs the kernel refused.
pub const EGRESS_DENIED: &str = "egress_denied";

/// Loopback, link-local, multicast, broadcast, the unspecified network.
const BUILTIN_DENY4: &[&str] = &[
    "0.0.0.0/8",
    "127.0.0.0/8",
    "169.254.0.0/16",
    "224.0.0.0/4",
    "255.255.255.255/32",
];
const BUILTIN_DENY6: &[&str] = &["::/128", "::1/128", "fe80::/10", "ff00::/8"];

fn elements(items: &[String]) -> String {
    if items.is_empty() {
        String::new()
    } else {
        format!(" elements = {{ {} }};", items.join(", "))
    }
}

fn family(list: &[Cidr], v4: bool) -> Vec<String> {
    list.iter()
        .filter(|c| c.is_v4() == v4)
        .map(|c| c.to_string())
        .collect()
}

/// The sets, the counter and the chains of the egress policy (a hub only; empty otherwise).
pub fn render_egress(t: &mut String, cfg: &GatewayConfig) {
    if cfg.role != Role::Hub {
        return;
    }
    let sites: Vec<&Cidr> = cfg
        .peer
        .terminals
        .iter()
        .flat_map(|t| t.prefixes.iter())
        .collect();
    let _ = writeln!(t, "\tcounter {EGRESS_DENIED} {{}}");
    for (v4, ty, builtin) in [
        (true, "ipv4_addr", BUILTIN_DENY4),
        (false, "ipv6_addr", BUILTIN_DENY6),
    ] {
        let n = if v4 { 4 } else { 6 };
        let mut deny: Vec<String> = builtin.iter().map(|s| s.to_string()).collect();
        deny.extend(family(&cfg.egress.deny, v4));
        let own: Vec<Cidr> = sites.iter().map(|c| **c).collect();
        // A flow's own site: (client prefix . destination prefix) of the same terminal.
        let same: Vec<String> = cfg
            .peer
            .terminals
            .iter()
            .flat_map(|t| {
                let mine = family(&t.prefixes, v4);
                mine.iter()
                    .flat_map(|a| mine.iter().map(move |b| format!("{a} . {b}")))
                    .collect::<Vec<_>>()
            })
            .collect();
        let _ = writeln!(
            t,
            "\tset egress_allow{n} {{ type {ty}; flags interval; auto-merge;{} }}",
            elements(&family(&cfg.egress.allow, v4))
        );
        let _ = writeln!(
            t,
            "\tset egress_deny{n} {{ type {ty}; flags interval; auto-merge;{} }}",
            elements(&deny)
        );
        let _ = writeln!(
            t,
            "\tset egress_sites{n} {{ type {ty}; flags interval; auto-merge;{} }}",
            elements(&family(&own, v4))
        );
        let _ = writeln!(
            t,
            "\tset egress_same{n} {{ type {ty} . {ty}; flags interval;{} }}",
            elements(&same)
        );
    }
    let _ = writeln!(
        t,
        "\tchain egress {{\n\t\ttype filter hook output priority filter; policy accept;\n\
         \t\tmeta l4proto tcp ct state new fib saddr type != local jump egress_check comment \"a connection the hub opens for others\"\n\t}}"
    );
    let _ = writeln!(t, "\tchain egress_check {{");
    for ip in ["ip", "ip6"] {
        let n = if ip == "ip" { 4 } else { 6 };
        let _ = writeln!(
            t,
            "\t\t{ip} daddr @egress_allow{n} return comment \"egress.allow\""
        );
    }
    let _ = writeln!(
        t,
        "\t\tfib daddr type local counter name {EGRESS_DENIED} drop comment \"the hub's own addresses\""
    );
    for ip in ["ip", "ip6"] {
        let n = if ip == "ip" { 4 } else { 6 };
        let _ = writeln!(
            t,
            "\t\t{ip} daddr @egress_deny{n} counter name {EGRESS_DENIED} drop comment \"built in and egress.deny\""
        );
        let _ = writeln!(
            t,
            "\t\t{ip} saddr . {ip} daddr @egress_same{n} return comment \"the flow's own site\""
        );
        let _ = writeln!(
            t,
            "\t\t{ip} daddr @egress_sites{n} counter name {EGRESS_DENIED} drop comment \"another site's prefix\""
        );
    }
    let _ = writeln!(t, "\t}}");
}

#[cfg(test)]
mod tests {
    use super::super::render_nft;
    use super::*;
    use crate::gateway::config::{example_json, from_value};

    fn hub() -> GatewayConfig {
        let mut j = example_json();
        j["role"] = "hub".into();
        j["peer"] = serde_json::json!({"enabled": true, "terminals": [
            {"name": "a", "fingerprints": [format!("sha256:{}", "1".repeat(64))],
             "prefixes": ["10.71.1.0/24", "10.71.9.0/24", "fd71:1::/64"]},
            {"name": "b", "fingerprints": [format!("sha256:{}", "2".repeat(64))],
             "prefixes": ["10.72.1.0/24"]}]});
        j["egress"] = serde_json::json!({"allow": ["169.254.10.0/24"], "deny": ["192.168.0.0/16", "fd00:99::/32"]});
        from_value(j).unwrap()
    }

    #[test]
    fn a_hub_refuses_what_the_policy_names_in_its_output_hook() {
        let nft = render_nft(&hub());
        for want in [
            "set egress_allow4 { type ipv4_addr; flags interval; auto-merge; elements = { 169.254.10.0/24 }; }",
            "set egress_deny4 { type ipv4_addr; flags interval; auto-merge; elements = { 0.0.0.0/8, 127.0.0.0/8, 169.254.0.0/16, 224.0.0.0/4, 255.255.255.255/32, 192.168.0.0/16 }; }",
            "set egress_deny6 { type ipv6_addr; flags interval; auto-merge; elements = { ::/128, ::1/128, fe80::/10, ff00::/8, fd00:99::/32 }; }",
            "set egress_sites4 { type ipv4_addr; flags interval; auto-merge; elements = { 10.71.1.0/24, 10.71.9.0/24, 10.72.1.0/24 }; }",
            "elements = { 10.71.1.0/24 . 10.71.1.0/24, 10.71.1.0/24 . 10.71.9.0/24, 10.71.9.0/24 . 10.71.1.0/24, 10.71.9.0/24 . 10.71.9.0/24, 10.72.1.0/24 . 10.72.1.0/24 }",
            "type filter hook output priority filter; policy accept;",
            "meta l4proto tcp ct state new fib saddr type != local jump egress_check",
            "fib daddr type local counter name egress_denied drop",
        ] {
            assert!(nft.contains(want), "{want}\n{nft}");
        }
        // allow first, then the hub's own and the deny list, then a flow's own site before the
        // other sites.
        let at = |s: &str| nft.find(s).unwrap_or_else(|| panic!("{s}"));
        assert!(at("@egress_allow4 return") < at("fib daddr type local counter"));
        assert!(at("fib daddr type local counter") < at("@egress_deny4 counter"));
        assert!(at("@egress_same4 return") < at("@egress_sites4 counter"));
    }

    #[test]
    fn a_terminal_has_no_egress_chain() {
        let mut j = example_json();
        j["role"] = "terminal".into();
        let nft = render_nft(&from_value(j).unwrap());
        assert!(!nft.contains("egress"), "{nft}");
    }
}
