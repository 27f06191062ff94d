//! The `dns` section of GatewayConfig: types, defaults and validation.
//!
//! Every value that reaches unbound.conf is checked here first: addresses are parsed into
//! `IpAddr`s and numbers are bounded, so nothing an operator writes can add a directive.

use crate::zone::Zone;
use perigee_types::{Cidr, IpAddrSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::borrow::Cow;
use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;

/// The `dns` section. Every field has a default, so `{}` is a valid (disabled) section.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
#[schemars(rename = "Dns")]
pub struct DnsConfig {
    /// false: no resolver runs and DNS from the served subnets passes untouched.
    pub enabled: bool,
    /// Resolvers the cache forwards to ("192.0.2.53", "2001:db8::53", "192.0.2.53@5353"),
    /// tried in unbound's order (fastest first). Also Squid's nameservers when `enabled` is
    /// false and the cache is on.
    #[schemars(length(max = MAX_UPSTREAMS))]
    pub upstream: Vec<Upstream>,
    /// true: queries from the served subnets to port 53 (UDP and TCP) of a resolver the operator
    /// lists (`upstream` entries on port 53, and `intercept_for`) are answered by the gateway's
    /// resolver, from the address asked. A query to any other address goes where it was sent,
    /// untouched: a customer's own resolver stays theirs. false: only queries addressed to the
    /// gateway itself are answered.
    pub intercept: bool,
    /// More resolver addresses the gateway answers for (with `intercept`): the ones the site's
    /// clients are given or have configured that the operator runs (the hub's resolver under
    /// another address, a public resolver the operator chose to answer for).
    #[schemars(with = "Vec<IpAddrSchema>", length(max = MAX_INTERCEPT_FOR))]
    pub intercept_for: Vec<IpAddr>,
    /// Refuse private-network addresses (RFC 1918, CGNAT, loopback, link-local, ULA) in answers
    /// for names outside `private_domains`: a public name that resolves into the site's LAN is
    /// DNS rebinding. The address is removed from the answer.
    pub rebind_protection: bool,
    /// The operator's internal zones: their names may resolve to private addresses, and they are
    /// not checked against the public DNSSEC chain (the public DNS does not know them).
    /// `test.`, `home.arpa.` and `internal.` (reserved for such use) always are.
    #[schemars(length(max = MAX_PRIVATE_DOMAINS))]
    pub private_domains: Vec<Zone>,
    /// Validate DNSSEC with the root trust anchor: a signed answer that does not verify is
    /// refused (SERVFAIL), a verified one carries the AD bit. Each new zone costs the
    /// upstream one or two more queries (its DS and DNSKEY), across the satellite at a
    /// terminal; the upstream must return signatures (any validating resolver does).
    pub dnssec_validation: bool,
    /// Memory for cached answers, MB: one third for whole messages, two thirds for RRsets.
    #[schemars(range(min = *CACHE_MB.start(), max = *CACHE_MB.end()))]
    pub cache_mb: u32,
    /// Refresh a popular name in the background when a query arrives in the last tenth of
    /// its TTL, so it never expires while in use.
    pub prefetch: bool,
    /// Serve expired answers (RFC 8767) instead of waiting for the upstream.
    pub serve_stale: bool,
    /// How long past its expiry an answer may still be served (RFC 8767 "maximum stale timer").
    #[schemars(range(min = *STALE_TTL_S.start(), max = *STALE_TTL_S.end()))]
    pub stale_ttl_s: u32,
    /// The TTL a stale answer carries to the client (RFC 8767 recommends 30 s).
    #[schemars(range(min = *STALE_REPLY_TTL_S.start(), max = *STALE_REPLY_TTL_S.end()))]
    pub stale_reply_ttl_s: u32,
    /// How long to try the upstream before answering stale; 0 answers stale at once and
    /// refreshes in the background (RFC 8767's "client response timer").
    #[schemars(range(min = *STALE_CLIENT_TIMEOUT_MS.start(), max = *STALE_CLIENT_TIMEOUT_MS.end()))]
    pub stale_client_timeout_ms: u32,
    /// Lower bound on a cached TTL (cache-min-ttl); 0 keeps the origin's.
    #[schemars(range(min = *MIN_TTL_S.start(), max = *MIN_TTL_S.end()))]
    pub min_ttl_s: u32,
    /// Upper bound on a cached TTL (cache-max-ttl).
    #[schemars(range(min = *MAX_TTL_S.start(), max = *MAX_TTL_S.end()))]
    pub max_ttl_s: u32,
    /// Upper bound on how long a negative answer (NXDOMAIN, NODATA) is cached.
    #[schemars(range(min = *MAX_NEGATIVE_TTL_S.start(), max = *MAX_NEGATIVE_TTL_S.end()))]
    pub max_negative_ttl_s: u32,
    /// Queries per second one client address may send (unbound's ip-ratelimit); 0 = no limit.
    #[schemars(range(min = *CLIENT_QPS_LIMIT.start(), max = *CLIENT_QPS_LIMIT.end()))]
    pub client_qps_limit: u32,
    /// How long the gateway waits for an upstream's answer to its health probe before
    /// counting the probe as failed (the port-80 cache steps aside after two in a row).
    #[schemars(range(min = *PROBE_TIMEOUT_MS.start(), max = *PROBE_TIMEOUT_MS.end()))]
    pub probe_timeout_ms: u32,
}

impl Default for DnsConfig {
    fn default() -> Self {
        DnsConfig {
            enabled: false,
            upstream: Vec::new(),
            intercept: true,
            intercept_for: Vec::new(),
            rebind_protection: true,
            private_domains: Vec::new(),
            dnssec_validation: true,
            cache_mb: 64,
            prefetch: true,
            serve_stale: true,
            stale_ttl_s: 86_400,
            stale_reply_ttl_s: 30,
            stale_client_timeout_ms: 0,
            min_ttl_s: 0,
            max_ttl_s: 86_400,
            max_negative_ttl_s: 3_600,
            client_qps_limit: 0,
            probe_timeout_ms: 3_000,
        }
    }
}

use perigee_types::config_error as err;
pub use perigee_types::ConfigError;

/// One upstream resolver: an IP literal and a port (53 unless written as `addr@port`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Upstream {
    pub addr: IpAddr,
    pub port: u16,
}

/// As the config writes it: "addr", or "addr@port" when the port is not 53.
impl Serialize for Upstream {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if self.port == 53 {
            s.collect_str(&self.addr)
        } else {
            s.collect_str(&format_args!("{}@{}", self.addr, self.port))
        }
    }
}

impl<'de> Deserialize<'de> for Upstream {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

impl JsonSchema for Upstream {
    fn schema_name() -> Cow<'static, str> {
        "Upstream".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "maxLength": 64,
            "pattern": format!("^{}(@{})?$", perigee_types::ip_pattern(), perigee_types::port_pattern()),
            "description": "An upstream resolver: an IP literal, with \"@port\" when not 53 (\"192.0.2.53\", \"2001:db8::53\", \"192.0.2.53@5353\"); unicast, and not a loopback address on port 53 (the gateway's own resolver)",
        })
    }
}

impl FromStr for Upstream {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let (addr_s, port) = match s.split_once('@') {
            None => (s, 53),
            Some((a, p)) => {
                let port = Some(p)
                    .filter(|p| (1..=5).contains(&p.len()) && p.bytes().all(|b| b.is_ascii_digit()))
                    .and_then(|p| p.parse::<u16>().ok())
                    .filter(|p| *p > 0)
                    .ok_or_else(|| format!("{s:?}: the port after '@' must be 1-65535"))?;
                (a, port)
            }
        };
        let addr: IpAddr = addr_s.parse().map_err(|_| {
            format!("{s:?} is not an IP address (write \"192.0.2.53\", \"2001:db8::53\" or \"192.0.2.53@5353\"; names cannot be resolved before the resolver exists)")
        })?;
        if addr.is_unspecified() || addr.is_multicast() {
            return Err(format!("{s:?} is not a unicast address"));
        }
        if addr.is_loopback() && port == 53 {
            return Err(format!(
                "{s:?} is the gateway's own resolver (it listens on port 53 of every local address): forwarding there would loop"
            ));
        }
        Ok(Upstream { addr, port })
    }
}

impl fmt::Display for Upstream {
    /// unbound's `forward-addr` syntax: `addr@port`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}@{}", self.addr, self.port)
    }
}

impl Upstream {
    pub fn socket_addr(&self) -> std::net::SocketAddr {
        std::net::SocketAddr::new(self.addr, self.port)
    }
}

/// Bounds (the API's model has the same ones).
pub const MAX_UPSTREAMS: usize = 8;
pub const MAX_INTERCEPT_FOR: usize = 16;
pub const MAX_PRIVATE_DOMAINS: usize = 64;
pub const CACHE_MB: std::ops::RangeInclusive<u32> = 4..=16_384;
pub const STALE_TTL_S: std::ops::RangeInclusive<u32> = 60..=604_800;
pub const STALE_REPLY_TTL_S: std::ops::RangeInclusive<u32> = 1..=3_600;
pub const STALE_CLIENT_TIMEOUT_MS: std::ops::RangeInclusive<u32> = 0..=10_000;
pub const MIN_TTL_S: std::ops::RangeInclusive<u32> = 0..=3_600;
pub const MAX_TTL_S: std::ops::RangeInclusive<u32> = 60..=604_800;
pub const MAX_NEGATIVE_TTL_S: std::ops::RangeInclusive<u32> = 0..=86_400;
pub const CLIENT_QPS_LIMIT: std::ops::RangeInclusive<u32> = 0..=100_000;
pub const PROBE_TIMEOUT_MS: std::ops::RangeInclusive<u32> = 100..=30_000;

fn within(
    field: &str,
    value: u32,
    range: std::ops::RangeInclusive<u32>,
    unit: &str,
) -> Result<(), ConfigError> {
    if range.contains(&value) {
        return Ok(());
    }
    Err(err(
        format!("dns.{field}"),
        format!("must be {}..{}{unit}", range.start(), range.end()),
    ))
}

/// A list field holds at most `max` entries.
fn at_most(field: &str, len: usize, max: usize) -> Result<(), ConfigError> {
    if len > max {
        return Err(err(
            format!("dns.{field}"),
            format!("at most {max} entries"),
        ));
    }
    Ok(())
}

impl DnsConfig {
    /// Checks every field; the first problem found is returned with its field path.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.upstreams()?;
        self.check_intercept_for()?;
        self.check_private_domains()?;
        if self.enabled && self.upstream.is_empty() {
            return Err(err(
                "dns.upstream",
                "required when dns is enabled: the resolver(s) to forward to, e.g. the hub's",
            ));
        }
        within("cache_mb", self.cache_mb, CACHE_MB, " MB")?;
        within("stale_ttl_s", self.stale_ttl_s, STALE_TTL_S, " s")?;
        within(
            "stale_reply_ttl_s",
            self.stale_reply_ttl_s,
            STALE_REPLY_TTL_S,
            " s",
        )?;
        within(
            "stale_client_timeout_ms",
            self.stale_client_timeout_ms,
            STALE_CLIENT_TIMEOUT_MS,
            " ms",
        )?;
        within("min_ttl_s", self.min_ttl_s, MIN_TTL_S, " s")?;
        within("max_ttl_s", self.max_ttl_s, MAX_TTL_S, " s")?;
        if self.min_ttl_s > self.max_ttl_s {
            return Err(err("dns.min_ttl_s", "must not exceed dns.max_ttl_s"));
        }
        within(
            "max_negative_ttl_s",
            self.max_negative_ttl_s,
            MAX_NEGATIVE_TTL_S,
            " s",
        )?;
        within(
            "client_qps_limit",
            self.client_qps_limit,
            CLIENT_QPS_LIMIT,
            " queries/s",
        )?;
        within(
            "probe_timeout_ms",
            self.probe_timeout_ms,
            PROBE_TIMEOUT_MS,
            " ms",
        )?;
        Ok(())
    }

    /// The upstreams as parsed addresses (errors name `dns.upstream[i]`).
    pub fn upstreams(&self) -> Result<Vec<Upstream>, ConfigError> {
        at_most("upstream", self.upstream.len(), MAX_UPSTREAMS)?;
        let mut out: Vec<Upstream> = Vec::new();
        for (i, u) in self.upstream.iter().enumerate() {
            if out.contains(u) {
                return Err(err(
                    format!("dns.upstream[{i}]"),
                    format!("\"{u}\" is listed twice"),
                ));
            }
            out.push(*u);
        }
        Ok(out)
    }

    /// `intercept_for`: unicast addresses a client can send to (not loopback), each once.
    fn check_intercept_for(&self) -> Result<(), ConfigError> {
        at_most("intercept_for", self.intercept_for.len(), MAX_INTERCEPT_FOR)?;
        for (i, a) in self.intercept_for.iter().enumerate() {
            let field = format!("dns.intercept_for[{i}]");
            if a.is_unspecified() || a.is_multicast() || a.is_loopback() {
                return Err(err(
                    field,
                    format!("{a} is not a unicast address a client could send a query to"),
                ));
            }
            if self.intercept_for[..i].contains(a) {
                return Err(err(field, format!("{a} is listed twice")));
            }
        }
        Ok(())
    }

    fn check_private_domains(&self) -> Result<(), ConfigError> {
        at_most(
            "private_domains",
            self.private_domains.len(),
            MAX_PRIVATE_DOMAINS,
        )?;
        for (i, z) in self.private_domains.iter().enumerate() {
            if self.private_domains[..i].contains(z) {
                return Err(err(
                    format!("dns.private_domains[{i}]"),
                    format!("\"{z}\" is listed twice"),
                ));
            }
        }
        Ok(())
    }

    /// The resolver addresses whose port-53 queries the gateway answers when `intercept` is on:
    /// the upstreams on port 53 (not loopback) and `intercept_for`, each once.
    pub fn intercepted_resolvers(&self) -> Vec<IpAddr> {
        let mut out: Vec<IpAddr> = Vec::new();
        let upstreams = self
            .upstream
            .iter()
            .filter(|u| u.port == 53 && !u.addr.is_loopback())
            .map(|u| u.addr);
        for a in upstreams.chain(self.intercept_for.iter().copied()) {
            if !out.contains(&a) {
                out.push(a);
            }
        }
        out
    }
}

/// The served subnets from text (tools and tests; the daemon's config holds them parsed).
pub fn parse_served_subnets(subnets: &[String]) -> Result<Vec<Cidr>, ConfigError> {
    let parsed = subnets
        .iter()
        .enumerate()
        .map(|(i, s)| {
            s.parse()
                .map_err(|m: String| err(format!("served_subnets[{i}]"), m))
        })
        .collect::<Result<Vec<Cidr>, ConfigError>>()?;
    check_served_subnets(&parsed)
}

/// The served subnets unbound's access-control admits. Refuses /0 and an empty list: the
/// resolver must never be open to the world (an open resolver is an amplifier).
pub fn check_served_subnets(subnets: &[Cidr]) -> Result<Vec<Cidr>, ConfigError> {
    if subnets.is_empty() {
        return Err(err(
            "served_subnets",
            "the resolver needs at least one served subnet",
        ));
    }
    for (i, c) in subnets.iter().enumerate() {
        if c.len == 0 {
            return Err(err(
                format!("served_subnets[{i}]"),
                "a /0 would make the resolver open to everyone",
            ));
        }
    }
    Ok(subnets.to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field_of(cfg: &DnsConfig) -> String {
        cfg.validate().expect_err("should be rejected").field
    }

    #[test]
    fn defaults_are_valid_and_match_the_protocol_doc() {
        let cfg: DnsConfig = serde_json::from_str("{}").unwrap();
        assert_eq!(cfg, DnsConfig::default());
        cfg.validate().unwrap();
        assert!(!cfg.enabled && cfg.intercept && cfg.prefetch && cfg.serve_stale);
        assert!(cfg.rebind_protection && cfg.dnssec_validation);
        assert!(cfg.intercept_for.is_empty() && cfg.private_domains.is_empty());
        assert_eq!(
            (cfg.cache_mb, cfg.stale_ttl_s, cfg.stale_reply_ttl_s),
            (64, 86_400, 30)
        );
        assert_eq!(
            (cfg.stale_client_timeout_ms, cfg.min_ttl_s, cfg.max_ttl_s),
            (0, 0, 86_400)
        );
        assert_eq!(
            (
                cfg.max_negative_ttl_s,
                cfg.client_qps_limit,
                cfg.probe_timeout_ms
            ),
            (3_600, 0, 3_000)
        );
    }

    #[test]
    fn unknown_fields_are_rejected() {
        let e = serde_json::from_str::<DnsConfig>(r#"{"upstreams": []}"#).unwrap_err();
        assert!(e.to_string().contains("upstreams"), "{e}");
    }

    #[test]
    fn upstreams_parse_with_an_optional_port() {
        let u: Upstream = "192.0.2.53".parse().unwrap();
        assert_eq!((u.to_string(), u.port), ("192.0.2.53@53".into(), 53));
        let u: Upstream = "2001:db8::53@5353".parse().unwrap();
        assert_eq!(u.to_string(), "2001:db8::53@5353");
        assert_eq!(u.socket_addr().to_string(), "[2001:db8::53]:5353");
        let u: Upstream = "127.0.0.1@5300".parse().unwrap();
        assert_eq!(u.port, 5300);
        for bad in [
            "resolver.example",
            "192.0.2.53@",
            "192.0.2.53@0",
            "192.0.2.53@65536",
            "192.0.2.53@+53",
            "0.0.0.0",
            "::",
            "224.0.0.251",
            "127.0.0.1",
            "::1@53",
            "192.0.2.53 ",
            "192.0.2.53\nserver:",
        ] {
            assert!(bad.parse::<Upstream>().is_err(), "{bad:?}");
        }
    }

    fn ups(list: &[&str]) -> Vec<Upstream> {
        list.iter().map(|u| u.parse().unwrap()).collect()
    }

    #[test]
    fn upstreams_deserialize_strictly_and_serialize_as_written() {
        let c: DnsConfig =
            serde_json::from_str(r#"{"upstream": ["192.0.2.53", "192.0.2.54@5353"]}"#).unwrap();
        assert_eq!(
            serde_json::to_value(&c.upstream).unwrap(),
            serde_json::json!(["192.0.2.53", "192.0.2.54@5353"])
        );
        let e = serde_json::from_str::<DnsConfig>(r#"{"upstream": ["192.0.2.53", "nope"]}"#)
            .unwrap_err();
        assert!(e.to_string().contains("not an IP address"), "{e}");
    }

    #[test]
    fn invalid_values_name_their_field() {
        let on = DnsConfig {
            enabled: true,
            upstream: ups(&["192.0.2.53"]),
            ..DnsConfig::default()
        };
        on.validate().unwrap();
        let cases: Vec<(DnsConfig, &str)> = vec![
            (
                DnsConfig {
                    upstream: vec![],
                    ..on.clone()
                },
                "dns.upstream",
            ),
            (
                DnsConfig {
                    upstream: ups(&["192.0.2.53", "192.0.2.53@53"]),
                    ..on.clone()
                },
                "dns.upstream[1]",
            ),
            (
                DnsConfig {
                    upstream: (0..9)
                        .map(|i| format!("192.0.2.{i}").parse().unwrap())
                        .collect(),
                    ..on.clone()
                },
                "dns.upstream",
            ),
            (
                DnsConfig {
                    cache_mb: 3,
                    ..on.clone()
                },
                "dns.cache_mb",
            ),
            (
                DnsConfig {
                    stale_ttl_s: 59,
                    ..on.clone()
                },
                "dns.stale_ttl_s",
            ),
            (
                DnsConfig {
                    stale_reply_ttl_s: 0,
                    ..on.clone()
                },
                "dns.stale_reply_ttl_s",
            ),
            (
                DnsConfig {
                    stale_client_timeout_ms: 10_001,
                    ..on.clone()
                },
                "dns.stale_client_timeout_ms",
            ),
            (
                DnsConfig {
                    min_ttl_s: 3_601,
                    ..on.clone()
                },
                "dns.min_ttl_s",
            ),
            (
                DnsConfig {
                    min_ttl_s: 600,
                    max_ttl_s: 300,
                    ..on.clone()
                },
                "dns.min_ttl_s",
            ),
            (
                DnsConfig {
                    max_ttl_s: 59,
                    ..on.clone()
                },
                "dns.max_ttl_s",
            ),
            (
                DnsConfig {
                    max_negative_ttl_s: 86_401,
                    ..on.clone()
                },
                "dns.max_negative_ttl_s",
            ),
            (
                DnsConfig {
                    client_qps_limit: 100_001,
                    ..on.clone()
                },
                "dns.client_qps_limit",
            ),
            (
                DnsConfig {
                    probe_timeout_ms: 99,
                    ..on.clone()
                },
                "dns.probe_timeout_ms",
            ),
        ];
        for (cfg, field) in cases {
            assert_eq!(field_of(&cfg), field, "{cfg:?}");
        }
        // A disabled section may keep its upstreams (they may feed Squid).
        DnsConfig {
            enabled: false,
            ..on.clone()
        }
        .validate()
        .unwrap();
    }

    #[test]
    fn the_listed_resolvers_are_the_port_53_upstreams_and_intercept_for() {
        let c: DnsConfig = serde_json::from_value(serde_json::json!({
            "upstream": ["192.0.2.53", "192.0.2.54@5353", "127.0.0.1@5300", "2001:db8::53"],
            "intercept_for": ["198.51.100.1", "192.0.2.53"],
        }))
        .unwrap();
        c.validate().unwrap();
        let want: Vec<IpAddr> = ["192.0.2.53", "2001:db8::53", "198.51.100.1"]
            .iter()
            .map(|a| a.parse().unwrap())
            .collect();
        assert_eq!(
            c.intercepted_resolvers(),
            want,
            "another port or loopback is not a resolver clients ask on port 53; each once"
        );
    }

    #[test]
    fn intercept_for_and_private_domains_are_checked_with_field_paths() {
        let field = |v: serde_json::Value| -> String {
            match serde_json::from_value::<DnsConfig>(v) {
                Ok(c) => c.validate().expect_err("should be rejected").field,
                Err(e) => format!("serde: {e}"),
            }
        };
        for bad in ["127.0.0.1", "::1", "0.0.0.0", "224.0.0.1"] {
            assert_eq!(
                field(serde_json::json!({"intercept_for": ["192.0.2.1", bad]})),
                "dns.intercept_for[1]",
                "{bad}"
            );
        }
        assert_eq!(
            field(serde_json::json!({"intercept_for": ["192.0.2.1", "192.0.2.1"]})),
            "dns.intercept_for[1]"
        );
        let many: Vec<String> = (1..=17).map(|i| format!("192.0.2.{i}")).collect();
        assert_eq!(
            field(serde_json::json!({ "intercept_for": many })),
            "dns.intercept_for"
        );
        assert_eq!(
            field(serde_json::json!({"private_domains": ["corp.example", "Corp.Example."]})),
            "dns.private_domains[1]"
        );
        let many: Vec<String> = (0..65).map(|i| format!("z{i}.example")).collect();
        assert_eq!(
            field(serde_json::json!({ "private_domains": many })),
            "dns.private_domains"
        );
        let e = field(serde_json::json!({"private_domains": ["corp example"]}));
        assert!(e.contains("not a zone name"), "{e}");
        let e = field(serde_json::json!({"intercept_for": ["resolver.example"]}));
        assert!(e.starts_with("serde: "), "{e}");
    }

    #[test]
    fn served_subnets_never_open_the_resolver() {
        let s = parse_served_subnets(&["10.71.1.0/24".into(), "fd71:1::/64".into()]).unwrap();
        assert_eq!(s[0].to_string(), "10.71.1.0/24");
        assert_eq!(s[1].to_string(), "fd71:1::/64");
        assert_eq!(
            parse_served_subnets(&["10.0.0.1".into()]).unwrap()[0].len,
            32
        );
        assert_eq!(
            parse_served_subnets(&[]).unwrap_err().field,
            "served_subnets"
        );
        assert_eq!(
            parse_served_subnets(&["10.0.0.0/8".into(), "::/0".into()])
                .unwrap_err()
                .field,
            "served_subnets[1]"
        );
        assert!(parse_served_subnets(&["10.0.0.0/33".into()]).is_err());
        assert!(parse_served_subnets(&["10.0.0.0/+8".into()]).is_err());
    }
}
