//! The `peer` and `egress` sections' rules: who pins whom, which terminals a hub serves and
//! for which prefixes, where the hub's listener binds.
use super::limits::*;
use super::validate::at_most;
use super::{err, ConfigError, GatewayConfig, Role};
use std::collections::{HashMap, HashSet};
use std::net::IpAddr;

/// A key's fingerprint as the config writes it: `sha256:` and 64 lowercase hex digits.
pub fn check_fingerprint(s: &str) -> Result<(), String> {
    let hex = s.strip_prefix("sha256:").unwrap_or("");
    if hex.len() != 64 || !hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
        return Err(format!(
            "'{s}' is not a fingerprint: sha256: followed by 64 lowercase hex digits"
        ));
    }
    Ok(())
}

impl GatewayConfig {
    pub(super) fn validate_peer(&self) -> Result<(), ConfigError> {
        let p = &self.peer;
        if !(1..=65535).contains(&p.port) {
            return Err(err("peer.port", "must be 1..65535"));
        }
        if !p.hub.is_empty() {
            // An address literal only: a name would need DNS across the satellite at start.
            let hub: IpAddr = p.hub.parse().map_err(|_| {
                err(
                    "peer.hub",
                    format!("'{}' is not an IPv4/IPv6 address literal", p.hub),
                )
            })?;
            if hub.is_unspecified() || hub.is_multicast() || hub.is_loopback() {
                return Err(err("peer.hub", "must be the hub's unicast address"));
            }
            if self.role == Role::Hub {
                return Err(err(
                    "peer.hub",
                    "only a terminal names its hub; leave it empty at a hub",
                ));
            }
        } else if p.enabled && self.role == Role::Terminal {
            return Err(err(
                "peer.hub",
                "required at a terminal with the peer path enabled: the hub's address",
            ));
        }
        self.validate_hub_fingerprints()?;
        self.validate_listen()?;
        self.validate_terminals()?;
        if !PEER_POOL_SIZE.contains(&p.pool_size) {
            return Err(err(
                "peer.pool_size",
                format!(
                    "must be {}..{}",
                    PEER_POOL_SIZE.start(),
                    PEER_POOL_SIZE.end()
                ),
            ));
        }
        let r = &p.redundancy;
        for (value, max, field) in [
            (
                r.forward_bytes,
                PEER_REDUNDANT_BYTES_MAX,
                "peer.redundancy.forward_bytes",
            ),
            (
                r.return_bytes,
                PEER_REDUNDANT_BYTES_MAX,
                "peer.redundancy.return_bytes",
            ),
            (r.link_ms, PEER_REDUNDANT_MS_MAX, "peer.redundancy.link_ms"),
        ] {
            if value > max {
                return Err(err(field, format!("must be 0..{max}")));
            }
        }
        // The hub binds the port: it must not be one of our own listeners.
        if self.role == Role::Hub {
            let taken = [
                (self.splitter.tproxy_port, "splitter.tproxy_port"),
                (u32::from(self.cache.port), "cache.port"),
                (u32::from(self.cache.admin_port), "cache.admin_port"),
            ];
            if let Some((_, name)) = taken.iter().find(|(port, _)| *port == p.port) {
                return Err(err("peer.port", format!("already used by {name}")));
            }
        }
        at_most("egress.allow", self.egress.allow.len(), MAX_CIDRS)?;
        at_most("egress.deny", self.egress.deny.len(), MAX_CIDRS)?;
        Ok(())
    }

    fn validate_hub_fingerprints(&self) -> Result<(), ConfigError> {
        let p = &self.peer;
        at_most(
            "peer.hub_fingerprints",
            p.hub_fingerprints.len(),
            MAX_HUB_FINGERPRINTS,
        )?;
        let mut seen = HashSet::new();
        for (i, f) in p.hub_fingerprints.iter().enumerate() {
            let field = format!("peer.hub_fingerprints[{i}]");
            check_fingerprint(f).map_err(|m| err(&field, m))?;
            if !seen.insert(f) {
                return Err(err(field, format!("{f} is listed twice")));
            }
        }
        if self.role == Role::Hub && !p.hub_fingerprints.is_empty() {
            return Err(err(
                "peer.hub_fingerprints",
                "only a terminal pins its hub; leave it empty at a hub",
            ));
        }
        if self.role == Role::Terminal && p.enabled && p.hub_fingerprints.is_empty() {
            return Err(err(
                "peer.hub_fingerprints",
                "required at a terminal with the peer path enabled: the hub's fingerprint \
                 (GET /v1/identity at the hub)",
            ));
        }
        Ok(())
    }

    fn validate_listen(&self) -> Result<(), ConfigError> {
        let p = &self.peer;
        at_most("peer.listen", p.listen.len(), MAX_PEER_LISTEN)?;
        if self.role == Role::Terminal && !p.listen.is_empty() {
            return Err(err(
                "peer.listen",
                "only a hub listens for the peer path; leave it empty at a terminal",
            ));
        }
        let mut seen = HashSet::new();
        for (i, ip) in p.listen.iter().enumerate() {
            let field = format!("peer.listen[{i}]");
            if ip.is_unspecified() || ip.is_multicast() {
                return Err(err(
                    field,
                    "must be one of the hub's unicast addresses (its satellite side's)",
                ));
            }
            if !seen.insert(ip) {
                return Err(err(field, format!("{ip} is listed twice")));
            }
        }
        Ok(())
    }

    fn validate_terminals(&self) -> Result<(), ConfigError> {
        let p = &self.peer;
        at_most("peer.terminals", p.terminals.len(), MAX_TERMINALS)?;
        if self.role == Role::Terminal && !p.terminals.is_empty() {
            return Err(err(
                "peer.terminals",
                "only a hub enrolls terminals; leave it empty at a terminal",
            ));
        }
        let mut names = HashSet::new();
        let mut keys: HashMap<&str, usize> = HashMap::new();
        let mut prefixes: Vec<(usize, &super::Cidr)> = Vec::new();
        for (i, t) in p.terminals.iter().enumerate() {
            let f = |x: &str| format!("peer.terminals[{i}].{x}");
            if !names.insert(&t.name) {
                return Err(err(
                    f("name"),
                    format!("terminal '{}' is enrolled twice", t.name),
                ));
            }
            if t.fingerprints.is_empty() || t.fingerprints.len() > MAX_TERMINAL_FINGERPRINTS {
                return Err(err(
                    f("fingerprints"),
                    format!(
                        "1 to {MAX_TERMINAL_FINGERPRINTS} fingerprints (two while its key rotates)"
                    ),
                ));
            }
            for (j, key) in t.fingerprints.iter().enumerate() {
                let field = format!("peer.terminals[{i}].fingerprints[{j}]");
                check_fingerprint(key).map_err(|m| err(&field, m))?;
                if let Some(other) = keys.insert(key, i) {
                    let whose = &p.terminals[other].name;
                    return Err(err(
                        field,
                        format!("{key} is already terminal '{whose}''s: one key, one terminal"),
                    ));
                }
            }
            if t.prefixes.is_empty() {
                return Err(err(
                    f("prefixes"),
                    "a terminal needs the prefixes of its site",
                ));
            }
            at_most(&f("prefixes"), t.prefixes.len(), MAX_SITE_PREFIXES)?;
            for (j, c) in t.prefixes.iter().enumerate() {
                if c.len == 0 {
                    return Err(err(
                        format!("peer.terminals[{i}].prefixes[{j}]"),
                        "a terminal's prefix is never a /0",
                    ));
                }
                // Also within one terminal: its own prefixes are one set (nft merges nothing).
                if let Some((other, o)) = prefixes.iter().find(|(_, o)| o.overlaps(c)) {
                    return Err(err(
                        format!("peer.terminals[{i}].prefixes[{j}]"),
                        format!(
                            "{c} overlaps {o} of terminal '{}': a client belongs to one terminal",
                            p.terminals[*other].name
                        ),
                    ));
                }
                prefixes.push((i, c));
            }
        }
        Ok(())
    }
}
