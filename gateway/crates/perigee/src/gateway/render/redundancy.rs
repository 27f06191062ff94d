//! The peer path's redundancy: the first bytes of each flow's peer connection leave twice
//! (docs/splitter.md, *Redundancy*). nft's `dup` exists only in the `ip` and `ip6` families, so
//! these are two small tables beside `inet perigee`, replaced in the same transaction.
//!
//! Which packets: those of a socket the daemon marked with `DUP_MARK` when a flow took it (a
//! pool connection's handshake is never duplicated), carrying payload, while conntrack counts
//! fewer than the configured bytes in the direction this gateway sends. The copy is routed like
//! the original and queued right behind it, through the same shaper.
use super::super::config::{GatewayConfig, Role};
use std::fmt::Write;

/// The tables' name (one per family: `ip perigee_dup`, `ip6 perigee_dup`).
pub const DUP_TABLE: &str = "perigee_dup";
/// The socket mark bit of a peer connection that carries a flow (FW_MARK's neighbour; policy
/// routing matches FW_MARK under a mask, so this bit changes no route).
pub const DUP_MARK: u32 = 0x2000_0000;
/// The nft counter of the packets sent twice (each family's table has one).
pub const DUP_COUNTER: &str = "duplicated";

/// Families and what a packet with payload looks like in each: IPv4's total length counts the
/// 20-byte header, IPv6's payload length does not; a bare TCP header is at most 60 bytes.
const FAMILIES: [(&str, &str); 2] = [("ip", "ip length > 80"), ("ip6", "ip6 length > 60")];

/// The bytes this gateway sends twice on each flow's peer connection, and the conntrack
/// direction they travel in (a terminal opens the connection, so its bytes are the original
/// direction's, a hub's the reply's): the direction's cap, or `link_ms` of its rate if that is
/// less. None: nothing to duplicate (off, a cap of 0, or the rate unknown).
pub fn redundant_bytes(cfg: &GatewayConfig) -> Option<(u64, &'static str)> {
    if !cfg.peer.enabled {
        return None;
    }
    let r = &cfg.peer.redundancy;
    let (cap, rate_bps, direction) = match cfg.role {
        Role::Hub => (r.forward_bytes, cfg.satellite.forward_rate_bps, "reply"),
        Role::Terminal => (r.return_bytes, cfg.satellite.return_rate_bps, "original"),
    };
    let by_rate = rate_bps.saturating_mul(u64::from(r.link_ms)) / 8_000;
    let bytes = u64::from(cap).min(by_rate);
    (bytes > 0).then_some((bytes, direction))
}

/// Removes both tables (create-if-missing first, so the delete never fails).
pub fn delete_dup_tables() -> String {
    FAMILIES
        .iter()
        .map(|(fam, _)| format!("table {fam} {DUP_TABLE} {{}}\ndelete table {fam} {DUP_TABLE}\n"))
        .collect()
}

/// The transaction's part for the redundancy: both tables removed, then defined anew when the
/// config duplicates anything.
pub fn render_redundancy(t: &mut String, cfg: &GatewayConfig) {
    t.push_str(&delete_dup_tables());
    let Some((bytes, direction)) = redundant_bytes(cfg) else {
        return;
    };
    for (fam, has_payload) in FAMILIES {
        let _ = writeln!(
            t,
            "table {fam} {DUP_TABLE} {{\n\tcounter {DUP_COUNTER} {{}}"
        );
        let _ = writeln!(
            t,
            "\tchain output {{\n\t\ttype filter hook output priority filter; policy accept;"
        );
        // `ct ... bytes` turns conntrack's byte accounting on in this namespace.
        let _ = writeln!(
            t,
            "\t\tmeta l4proto tcp meta mark & {DUP_MARK:#x} == {DUP_MARK:#x} {has_payload} ct {direction} bytes < {bytes} counter name {DUP_COUNTER} dup to {fam} daddr comment \"peer redundancy\"\n\t}}\n}}"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::super::example_cfg;
    use super::*;

    /// geo-hts: 50 Mbit/s forward, 5 Mbit/s return.
    fn cfg(role: Role, enabled: bool) -> GatewayConfig {
        let mut c = example_cfg();
        c.role = role;
        c.peer.enabled = enabled;
        c.satellite.forward_rate_bps = 50_000_000;
        c.satellite.return_rate_bps = 5_000_000;
        c
    }

    #[test]
    fn a_hub_duplicates_forward_and_a_terminal_return_within_cap_and_link_time() {
        // 40 ms at 50 Mbit/s (250,000 bytes) is under the 256 KiB cap; at 5 Mbit/s, 25,000 is
        // over the 16 KiB one.
        let hub = cfg(Role::Hub, true);
        assert_eq!(redundant_bytes(&hub), Some((250_000, "reply")));
        let term = cfg(Role::Terminal, true);
        assert_eq!(redundant_bytes(&term), Some((16_384, "original")));
        // A slow DAMA link (geo-skyplex, 1.144 Mbit/s forward): 5,720 bytes, 40 ms of it.
        let mut slow = cfg(Role::Hub, true);
        slow.satellite.forward_rate_bps = 1_144_000;
        assert_eq!(redundant_bytes(&slow), Some((5_720, "reply")));
        let mut t = String::new();
        render_redundancy(&mut t, &hub);
        for fam in ["ip", "ip6"] {
            assert!(t.contains(&format!("table {fam} perigee_dup {{\n")), "{t}");
            assert!(t.contains(&format!("dup to {fam} daddr")), "{t}");
        }
        assert!(t.contains("ct reply bytes < 250000"), "{t}");
        assert!(t.contains("meta mark & 0x20000000 == 0x20000000"), "{t}");
        assert!(
            t.contains("ip length > 80") && t.contains("ip6 length > 60"),
            "{t}"
        );
    }

    #[test]
    fn off_a_zero_cap_or_an_unknown_rate_leaves_only_the_deletes() {
        let mut zero = cfg(Role::Terminal, true);
        zero.peer.redundancy.return_bytes = 0;
        let mut unknown = cfg(Role::Hub, true);
        unknown.satellite.forward_rate_bps = 0;
        let mut no_time = cfg(Role::Hub, true);
        no_time.peer.redundancy.link_ms = 0;
        for c in [cfg(Role::Hub, false), zero, unknown, no_time] {
            assert_eq!(redundant_bytes(&c), None);
            let mut t = String::new();
            render_redundancy(&mut t, &c);
            assert_eq!(t, delete_dup_tables());
        }
    }

    #[test]
    fn the_mark_is_not_the_routing_mark() {
        assert_eq!(DUP_MARK & super::super::FW_MARK, 0);
    }
}
