//! The hub's destination policy (docs/splitter.md, *Where the hub connects*): where a connection
//! the hub opens on a terminal's behalf (a peer flow, a direct split) may go. Built in it refuses
//! loopback, link-local, multicast and broadcast, the hub's own addresses, and every enrolled
//! terminal's prefixes but the flow's own site's; `egress.deny` adds more (management networks)
//! and `egress.allow` re-opens what it names, before all of that. The same policy is in the
//! kernel (nft, the hub's own output: `render`), so a daemon bug cannot bypass it; this check
//! answers the terminal before any packet is sent and counts who asked.
use super::config::Cidr;
use super::sys;
use std::net::{IpAddr, Ipv4Addr};

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EgressPolicy {
    pub allow: Vec<Cidr>,
    pub deny: Vec<Cidr>,
    /// Each enrolled terminal's prefixes, by its name.
    pub sites: Vec<(String, Cidr)>,
}

impl EgressPolicy {
    /// The terminal whose prefixes hold `client` (a direct split's site).
    pub fn site_of(&self, client: IpAddr) -> Option<&str> {
        self.sites
            .iter()
            .find(|(_, c)| c.contains(client))
            .map(|(n, _)| n.as_str())
    }

    /// Err(why) when a flow of terminal `site` may not go to `dst`.
    pub fn check(&self, site: Option<&str>, dst: IpAddr) -> Result<(), &'static str> {
        self.check_with(site, dst, sys::is_local_address)
    }

    fn check_with(
        &self,
        site: Option<&str>,
        dst: IpAddr,
        is_local: impl Fn(IpAddr) -> bool,
    ) -> Result<(), &'static str> {
        if self.allow.iter().any(|c| c.contains(dst)) {
            return Ok(());
        }
        if let Some(why) = builtin_denial(dst) {
            return Err(why);
        }
        if self.deny.iter().any(|c| c.contains(dst)) {
            return Err("egress.deny");
        }
        if self
            .sites
            .iter()
            .any(|(name, c)| Some(name.as_str()) != site && c.contains(dst))
        {
            return Err("another site's prefix");
        }
        if is_local(dst) {
            return Err("the hub's own address");
        }
        Ok(())
    }
}

fn builtin_denial(dst: IpAddr) -> Option<&'static str> {
    let dst = match dst {
        IpAddr::V6(a) => a.to_ipv4_mapped().map_or(dst, IpAddr::V4),
        v4 => v4,
    };
    if dst.is_loopback() {
        return Some("loopback");
    }
    if dst.is_unspecified() {
        return Some("unspecified");
    }
    if dst.is_multicast() || dst == IpAddr::V4(Ipv4Addr::BROADCAST) {
        return Some("multicast or broadcast");
    }
    let link_local = match dst {
        IpAddr::V4(a) => a.is_link_local(),
        IpAddr::V6(a) => (a.segments()[0] & 0xffc0) == 0xfe80,
    };
    link_local.then_some("link-local")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gateway::config::parse_cidr;

    fn policy() -> EgressPolicy {
        EgressPolicy {
            allow: vec![parse_cidr("10.9.9.9/32").unwrap()],
            deny: vec![parse_cidr("10.9.0.0/16").unwrap()],
            sites: vec![
                ("a".into(), parse_cidr("10.71.1.0/24").unwrap()),
                ("b".into(), parse_cidr("10.72.1.0/24").unwrap()),
            ],
        }
    }

    #[test]
    fn builtins_operator_lists_and_other_sites() {
        let p = policy();
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        for (dst, why) in [
            ("127.0.0.1", "loopback"),
            ("::1", "loopback"),
            ("::ffff:127.0.0.1", "loopback"),
            ("169.254.169.254", "link-local"),
            ("fe80::1", "link-local"),
            ("224.0.0.1", "multicast or broadcast"),
            ("255.255.255.255", "multicast or broadcast"),
            ("10.9.1.1", "egress.deny"),
            ("10.72.1.10", "another site's prefix"),
        ] {
            assert_eq!(p.check(Some("a"), ip(dst)), Err(why), "{dst}");
        }
        // Allowed: re-opened by allow, the flow's own site, anything else.
        assert_eq!(p.check(Some("a"), ip("10.9.9.9")), Ok(()));
        assert_eq!(p.check(Some("a"), ip("10.71.1.20")), Ok(()));
        assert_eq!(p.check(Some("b"), ip("10.72.1.10")), Ok(()));
        assert_eq!(p.check(None, ip("10.71.3.10")), Ok(()));
        assert_eq!(p.site_of(ip("10.72.1.99")), Some("b"));
        assert_eq!(p.site_of(ip("10.73.1.99")), None);
        // A direct split from no site: every site is another's.
        assert!(p.check(None, ip("10.71.1.20")).is_err());
    }

    #[test]
    fn the_hubs_own_addresses_are_refused_unless_allowed() {
        let own: IpAddr = "10.71.3.1".parse().unwrap();
        let local = |ip: IpAddr| ip == own;
        assert_eq!(
            policy().check_with(None, own, local),
            Err("the hub's own address")
        );
        let p = EgressPolicy {
            allow: vec![parse_cidr("10.71.3.1/32").unwrap()],
            ..policy()
        };
        assert_eq!(p.check_with(None, own, local), Ok(()));
        // The real lookup: every loopback address is this namespace's own.
        assert!(sys::is_local_address("127.0.0.2".parse().unwrap()));
    }
}
