//! `GatewayConfig::validate()`: every bound and every rule between fields, each error naming the
//! JSON path of the offending field.
use super::limits::*;
use super::{err, parse_peer_key, Action, BypassProtocol, ConfigError, GatewayConfig};
use super::{MatchProtocol, Role};
use std::collections::{HashMap, HashSet};
use std::net::IpAddr;

fn valid_sysctl_value(v: &str) -> bool {
    (1..=64).contains(&v.len())
        && v.chars()
            .all(|c| c.is_ascii_alphanumeric() || " \t._-".contains(c))
}

fn valid_revision(s: &str) -> bool {
    s.len() <= MAX_REVISION_LEN
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_.:-".contains(&b))
}

fn at_most(field: &str, len: usize, max: usize) -> Result<(), ConfigError> {
    if len > max {
        return Err(err(field, format!("at most {max} entries")));
    }
    Ok(())
}

impl GatewayConfig {
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.schema != 1 {
            return Err(err("schema", "only schema 1 is supported"));
        }
        if !valid_revision(&self.revision) {
            return Err(err("revision", "at most 64 of [A-Za-z0-9_.:-]"));
        }
        at_most("interfaces.lan", self.interfaces.lan.len(), MAX_LAN)?;
        if self.interfaces.lan.is_empty() {
            return Err(err(
                "interfaces.lan",
                "at least one LAN interface is required",
            ));
        }
        let mut seen = HashSet::new();
        for (i, n) in self.interfaces.lan.iter().enumerate() {
            if !seen.insert(n) {
                return Err(err(
                    format!("interfaces.lan[{i}]"),
                    format!("duplicate interface '{n}'"),
                ));
            }
        }
        if self.interfaces.lan.contains(&self.interfaces.satellite) {
            return Err(err(
                "interfaces.satellite",
                "also listed as a LAN interface",
            ));
        }
        if self.served_subnets.is_empty() {
            return Err(err(
                "served_subnets",
                "at least one served subnet is required",
            ));
        }
        at_most("served_subnets", self.served_subnets.len(), MAX_SUBNETS)?;
        // As address space: no IPv4-mapped range, at most served_limits of each family together.
        perigee_squid::check_served_subnets(&self.served_subnets, &self.served_limits)
            .map_err(|e| err(e.field, e.message))?;
        self.validate_splitter()?;
        self.validate_satellite()?;
        if !RTT0_MS.contains(&self.hybla.rtt0_ms) {
            return Err(err("hybla.rtt0_ms", "must be 1..10000"));
        }
        if self.hybla.base_rtt_ms > MAX_BASE_RTT_MS {
            return Err(err("hybla.base_rtt_ms", "must be 0..10000"));
        }
        if self.hybla.cwnd_max > perigee_hybla::MAX_CWND_CEILING {
            return Err(err(
                "hybla.cwnd_max",
                format!(
                    "must be 0..{} segments (0 = no ceiling)",
                    perigee_hybla::MAX_CWND_CEILING
                ),
            ));
        }
        self.validate_classes()?;
        self.validate_bypass()?;
        self.validate_cache()?;
        self.validate_dns()?;
        self.validate_shaping()?;
        self.validate_peer()?;
        self.validate_sites()?;
        for (k, v) in &self.sysctls {
            let f = format!("sysctls.{k}");
            if !SYSCTL_ALLOW.contains(&k.as_str()) {
                return Err(err(f, "key is not in the sysctl allow-list"));
            }
            if !valid_sysctl_value(v) {
                return Err(err(f, "value must be short plain text"));
            }
        }
        Ok(())
    }

    fn validate_splitter(&self) -> Result<(), ConfigError> {
        let s = &self.splitter;
        if !(1..=65535).contains(&s.tproxy_port) {
            return Err(err("splitter.tproxy_port", "must be 1..65535"));
        }
        if !(1..=MAX_FLOWS).contains(&s.max_flows) {
            return Err(err("splitter.max_flows", "must be 1..1000000"));
        }
        if !CONNECT_TIMEOUT_MS.contains(&s.connect_timeout_ms) {
            return Err(err("splitter.connect_timeout_ms", "must be 100..600000"));
        }
        if !IDLE_TIMEOUT_S.contains(&s.idle_timeout_s) {
            return Err(err("splitter.idle_timeout_s", "must be 1..604800"));
        }
        if !RELAY_BUFFER_BYTES.contains(&s.relay_buffer_bytes) {
            return Err(err("splitter.relay_buffer_bytes", "must be 4096..67108864"));
        }
        Ok(())
    }

    fn validate_satellite(&self) -> Result<(), ConfigError> {
        let s = &self.satellite;
        for (name, v) in [
            ("sndbuf_bytes", s.sndbuf_bytes),
            ("rcvbuf_bytes", s.rcvbuf_bytes),
        ] {
            if v > MAX_BUFFER_BYTES {
                return Err(err(
                    format!("satellite.{name}"),
                    "must be at most 1 GiB (0 = kernel autotuning)",
                ));
            }
        }
        if s.pacing_rate_bps > MAX_PACING_BPS {
            return Err(err(
                "satellite.pacing_rate_bps",
                "must be at most 100000000000 (0 = no cap)",
            ));
        }
        for (name, v) in [
            ("forward_rate_bps", s.forward_rate_bps),
            ("return_rate_bps", s.return_rate_bps),
        ] {
            if v > MAX_PACING_BPS {
                return Err(err(
                    format!("satellite.{name}"),
                    "must be at most 100000000000 (0 = unknown)",
                ));
            }
        }
        for (name, v) in [("initcwnd", s.initcwnd), ("initrwnd", s.initrwnd)] {
            if v > MAX_INITCWND {
                return Err(err(
                    format!("satellite.{name}"),
                    "must be 0..1000 (0 = kernel default)",
                ));
            }
        }
        at_most("satellite.routes", s.routes.len(), MAX_ROUTES)?;
        let mut dsts = HashSet::new();
        for (i, r) in s.routes.iter().enumerate() {
            if r.via.is_ipv4() != r.dst.is_v4() {
                return Err(err(
                    format!("satellite.routes[{i}].via"),
                    "address family differs from dst",
                ));
            }
            // Host bits were cleared when it was parsed: they do not make a different route.
            if !dsts.insert(r.dst) {
                return Err(err(format!("satellite.routes[{i}].dst"), "duplicate route"));
            }
        }
        Ok(())
    }

    fn validate_classes(&self) -> Result<(), ConfigError> {
        at_most("classes", self.classes.len(), MAX_CLASSES)?;
        let mut names = HashSet::new();
        for (i, c) in self.classes.iter().enumerate() {
            let f = |x: &str| format!("classes[{i}].{x}");
            if c.name == "default" || !names.insert(c.name.clone()) {
                return Err(err(
                    f("name"),
                    format!("duplicate or reserved class name '{}'", c.name),
                ));
            }
            if c.priority > MAX_PRIORITY {
                return Err(err(f("priority"), "must be 0..65535"));
            }
            let m = &c.matcher;
            at_most(&f("match.src"), m.src.len(), MAX_CIDRS)?;
            at_most(&f("match.dst"), m.dst.len(), MAX_CIDRS)?;
            at_most(&f("match.dports"), m.dports.len(), MAX_PORTS)?;
            at_most(&f("match.sports"), m.sports.len(), MAX_PORTS)?;
            at_most(&f("match.dscp"), m.dscp.len(), MAX_DSCP)?;
            at_most(&f("match.iifname"), m.iifname.len(), MAX_IIFNAME)?;
            let proto = m.protocol;
            if proto == MatchProtocol::Any && !(m.dports.is_empty() && m.sports.is_empty()) {
                return Err(err(f("match.protocol"), "ports need protocol tcp or udp"));
            }
            if c.action == Action::Cache && proto != MatchProtocol::Tcp {
                return Err(err(f("match.protocol"), "action cache needs protocol tcp"));
            }
            if let Some(j) = m.dscp.iter().position(|d| *d > 63) {
                return Err(err(
                    format!("classes[{i}].match.dscp[{j}]"),
                    "DSCP is 0..63",
                ));
            }
            if c.satellite.buffer_bytes > MAX_BUFFER_BYTES {
                return Err(err(f("satellite.buffer_bytes"), "must be at most 1 GiB"));
            }
            if c.satellite.pacing_rate_bps > MAX_PACING_BPS {
                return Err(err(
                    f("satellite.pacing_rate_bps"),
                    "must be at most 100000000000 (0 = inherit)",
                ));
            }
            if c.set_dscp.is_some_and(|d| d > 63) {
                return Err(err(f("set_dscp"), "DSCP is 0..63"));
            }
        }
        Ok(())
    }

    fn validate_sites(&self) -> Result<(), ConfigError> {
        at_most("sites", self.sites.len(), MAX_SITES)?;
        let mut names = HashSet::new();
        let mut prefixes: HashMap<String, usize> = HashMap::new();
        for (i, site) in self.sites.iter().enumerate() {
            let f = |x: &str| format!("sites[{i}].{x}");
            if &*site.name == OTHER_SITE || !names.insert(&site.name) {
                return Err(err(
                    f("name"),
                    format!("duplicate or reserved site name '{}'", site.name),
                ));
            }
            if site.prefixes.is_empty() {
                return Err(err(f("prefixes"), "a site needs at least one prefix"));
            }
            at_most(&f("prefixes"), site.prefixes.len(), MAX_SITE_PREFIXES)?;
            for (j, p) in site.prefixes.iter().enumerate() {
                // Canonical already (host bits cleared): one prefix belongs to one site.
                if let Some(other) = prefixes.insert(p.to_string(), i) {
                    return Err(err(
                        format!("sites[{i}].prefixes[{j}]"),
                        format!(
                            "{p} is already a prefix of site '{}'",
                            self.sites[other].name
                        ),
                    ));
                }
            }
        }
        Ok(())
    }

    fn validate_bypass(&self) -> Result<(), ConfigError> {
        at_most("bypass", self.bypass.len(), MAX_BYPASS)?;
        let mut names = HashSet::new();
        for (i, b) in self.bypass.iter().enumerate() {
            let f = |x: &str| format!("bypass[{i}].{x}");
            if !names.insert(b.name.clone()) {
                return Err(err(
                    f("name"),
                    format!("duplicate bypass name '{}'", b.name),
                ));
            }
            at_most(&f("cidrs"), b.cidrs.len(), MAX_BYPASS_CIDRS)?;
            at_most(&f("ports"), b.ports.len(), MAX_PORTS)?;
            if !b.ports.is_empty() && !b.protocol.has_ports() {
                return Err(err(f("ports"), "ports need protocol tcp or udp"));
            }
            if b.protocol == BypassProtocol::Any && b.cidrs.is_empty() {
                return Err(err(
                    f("cidrs"),
                    "protocol any needs cidrs (it would bypass everything)",
                ));
            }
        }
        Ok(())
    }

    fn validate_peer(&self) -> Result<(), ConfigError> {
        let p = &self.peer;
        if !(1..=65535).contains(&p.port) {
            return Err(err("peer.port", "must be 1..65535"));
        }
        if !p.key.is_empty() {
            parse_peer_key(&p.key).map_err(|m| err("peer.key", m))?;
        } else if p.enabled {
            return Err(err(
                "peer.key",
                "required when the peer path is enabled: 64 hex digits shared by hub and terminal",
            ));
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
        at_most("peer.allowed", p.allowed.len(), MAX_CIDRS)?;
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
        // The hub binds the port on every address: it must not be one of our own listeners.
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
        Ok(())
    }

    /// The Squid crate checks the policy itself (field paths `cache.*`); here only what needs
    /// the rest of the config: the cache's ports must not collide with the splitter's.
    fn validate_cache(&self) -> Result<(), ConfigError> {
        self.cache.validate().map_err(|e| err(e.field, e.message))?;
        let tproxy = self.splitter.tproxy_port;
        if u32::from(self.cache.port) == tproxy {
            return Err(err("cache.port", "conflicts with splitter.tproxy_port"));
        }
        if u32::from(self.cache.admin_port) == tproxy {
            return Err(err(
                "cache.admin_port",
                "conflicts with splitter.tproxy_port",
            ));
        }
        Ok(())
    }

    /// The resolver crate checks its section (field paths `dns.*`); here what needs the rest of
    /// the config: the resolver's port against the other listeners, and Squid's resolver.
    fn validate_dns(&self) -> Result<(), ConfigError> {
        self.dns.validate().map_err(|e| err(e.field, e.message))?;
        let upstreams = self.dns.upstreams().map_err(|e| err(e.field, e.message))?;
        if self.dns.enabled {
            // unbound's access-control refuses /0 (it would make the resolver open to all).
            perigee_dns::check_served_subnets(&self.served_subnets)
                .map_err(|e| err(e.field, e.message))?;
            let port = u32::from(perigee_dns::LISTEN_PORT);
            for (field, p) in [
                ("splitter.tproxy_port", self.splitter.tproxy_port),
                ("cache.port", u32::from(self.cache.port)),
                ("cache.admin_port", u32::from(self.cache.admin_port)),
            ] {
                if p == port {
                    return Err(err(
                        field,
                        "conflicts with the resolver (dns.enabled), which listens on port 53",
                    ));
                }
            }
        }
        // Squid's resolver is always explicit: the gateway's own, or the upstreams given.
        if self.cache.enabled && !self.dns.enabled {
            if upstreams.is_empty() {
                return Err(err(
                    "dns.upstream",
                    "the cache needs a resolver: enable dns (Squid then uses the gateway's own) \
                     or list the resolver(s) Squid should use in dns.upstream",
                ));
            }
            if let Some(i) = upstreams.iter().position(|u| u.port != 53) {
                return Err(err(
                    format!("dns.upstream[{i}]"),
                    "Squid can only use resolvers on port 53 (enable dns to forward to another port)",
                ));
            }
        }
        Ok(())
    }

    /// Bounds hold whether or not shaping is enabled (a disabled section is kept as written);
    /// only an enabled one needs a rate.
    fn validate_shaping(&self) -> Result<(), ConfigError> {
        let s = &self.shaping;
        if s.rate_bps > MAX_PACING_BPS || (s.rate_bps != 0 && s.rate_bps < MIN_SHAPING_BPS) {
            return Err(err(
                "shaping.rate_bps",
                format!("must be {MIN_SHAPING_BPS}..{MAX_PACING_BPS} bit/s (0 = none)"),
            ));
        }
        if s.enabled && s.rate_bps == 0 {
            return Err(err(
                "shaping.rate_bps",
                "required when shaping is enabled (the satellite link's rate in bit/s)",
            ));
        }
        if s.overhead_bytes > MAX_SHAPING_OVERHEAD {
            return Err(err(
                "shaping.overhead_bytes",
                format!("must be 0..{MAX_SHAPING_OVERHEAD}"),
            ));
        }
        if !SHAPING_QUEUE_PACKETS.contains(&s.queue_packets) {
            return Err(err(
                "shaping.queue_packets",
                format!(
                    "must be {}..{}",
                    SHAPING_QUEUE_PACKETS.start(),
                    SHAPING_QUEUE_PACKETS.end()
                ),
            ));
        }
        Ok(())
    }
}
