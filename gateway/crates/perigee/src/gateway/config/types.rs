//! The top level of `GatewayConfig`: role, interfaces, the served subnets, the sections (their
//! types live in the sibling modules) and the kernel settings.
use super::limits::*;
use super::{
    from_value, Bypass, Cidr, Class, Egress, Hybla, IfName, Peer, Satellite, Shaping, Site,
};
use super::{Splitter, Terrestrial};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::net::IpAddr;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    Hub,
    Terminal,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GatewayConfig {
    /// The config format's version: only 1 exists; absent means 1.
    #[serde(default = "schema_one")]
    #[schemars(range(min = 1, max = 1))]
    pub schema: u32,
    /// Who wrote this config: the API's version ("v12"), an operator's label; "" = none.
    #[serde(default)]
    #[schemars(regex(pattern = REVISION_PATTERN), length(max = MAX_REVISION_LEN))]
    pub revision: String,
    pub role: Role,
    pub interfaces: Interfaces,
    /// The clients this gateway serves: their flows are split, their DNS answered, their web
    /// requests cached. Together at most `served_limits` of address space; never a /0.
    #[schemars(length(min = 1, max = MAX_SUBNETS))]
    pub served_subnets: Vec<Cidr>,
    /// The most address space the served subnets may cover together (perigee_squid::served).
    #[serde(default)]
    pub served_limits: ServedLimits,
    #[serde(default)]
    pub splitter: Splitter,
    #[serde(default)]
    pub satellite: Satellite,
    #[serde(default)]
    pub terrestrial: Terrestrial,
    #[serde(default)]
    pub hybla: Hybla,
    /// Traffic classes, evaluated by priority (lowest first); the first that matches decides.
    #[serde(default)]
    #[schemars(length(max = MAX_CLASSES))]
    pub classes: Vec<Class>,
    /// Traffic that is never touched (evaluated before any class); the IPsec entries are built in.
    #[serde(default)]
    #[schemars(length(max = MAX_BYPASS), extend("x-builtin" = super::builtin_bypass()))]
    pub bypass: Vec<Bypass>,
    #[serde(default)]
    pub cache: Cache,
    #[serde(default)]
    pub dns: Dns,
    #[serde(default)]
    pub shaping: Shaping,
    #[serde(default)]
    pub peer: Peer,
    /// Hub: where the connections it opens for its terminals may go (`Egress`).
    #[serde(default)]
    pub egress: Egress,
    /// What happens to QUIC (UDP 443) from the served subnets; see `QuicPolicy`.
    #[serde(default = "default_quic")]
    pub quic: QuicPolicy,
    /// Remote sites by client prefix, for the per-site stats (a hub serving many terminals);
    /// clients no site covers count under "other".
    #[serde(default)]
    #[schemars(length(max = MAX_SITES))]
    pub sites: Vec<Site>,
    /// Kernel settings the gateway writes (allow-listed keys, short plain values).
    #[serde(default)]
    #[schemars(schema_with = "sysctls_schema")]
    pub sysctls: BTreeMap<String, String>,
}

fn schema_one() -> u32 {
    1
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Interfaces {
    /// The interfaces toward the served clients (terminal) or the servers (hub).
    #[schemars(length(min = 1, max = MAX_LAN))]
    pub lan: Vec<IfName>,
    /// The interface toward the satellite modem; not one of `lan`.
    pub satellite: IfName,
}

/// The `cache` section is the Squid crate's own policy type (same JSON, validated there too).
pub type Cache = perigee_squid::CacheConfig;
/// `served_limits`: the Squid crate judges the served set as address space for its ACL; the same
/// check guards the splitter's sets.
pub type ServedLimits = perigee_squid::ServedLimits;

/// The `dns` section is the resolver crate's own policy type (same JSON, validated there too).
pub type Dns = perigee_dns::DnsConfig;

/// QUIC (UDP 443) from the served subnets: `pass` forwards it untouched (end to end, not
/// accelerated: a PEP cannot split QUIC); `fallback` answers it with an ICMP port-unreachable
/// so browsers switch to TCP at once (which is then split and accelerated).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum QuicPolicy {
    Pass,
    Fallback,
}

/// The one place the default QUIC policy is chosen (the schema carries it to the API). `fallback`, by
/// measurement: on geo-hts the modern-web benchmark loaded every page faster over TCP through
/// Perigee at both ends than over QUIC end to end (docs/benchmarks.md, modern-web).
pub const DEFAULT_QUIC: QuicPolicy = QuicPolicy::Fallback;

fn default_quic() -> QuicPolicy {
    DEFAULT_QUIC
}

fn sysctls_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "object",
        "propertyNames": {"enum": SYSCTL_ALLOW},
        "additionalProperties": {"type": "string", "pattern": SYSCTL_VALUE_PATTERN},
        "default": {},
    })
}

impl GatewayConfig {
    /// What a daemon started without a config holds until one is installed: valid, but never
    /// applied nor reported (GET /v1/config answers 404 and /v1/health a null revision meanwhile).
    pub fn unconfigured() -> GatewayConfig {
        from_value(serde_json::json!({
            "role": "hub",
            "interfaces": {"lan": ["lo"], "satellite": "unconfigured"},
            "served_subnets": ["192.0.2.0/24"],
        }))
        .expect("the placeholder config is valid")
    }

    /// Classes sorted by priority (stable: equal priorities keep their listed order).
    pub fn sorted_classes(&self) -> Vec<&Class> {
        let mut v: Vec<&Class> = self.classes.iter().collect();
        v.sort_by_key(|c| c.priority);
        v
    }

    /// The nameservers Squid resolves through: the gateway's own resolver when it runs,
    /// otherwise the configured upstreams (validation guarantees one or the other with the cache on).
    pub fn squid_nameservers(&self) -> Vec<IpAddr> {
        if self.dns.enabled {
            return vec![IpAddr::from([127, 0, 0, 1])];
        }
        self.dns
            .upstreams()
            .map(|u| u.into_iter().map(|u| u.addr).collect())
            .unwrap_or_default()
    }

    /// How the resolver reaches its upstream: a terminal with the peer path on sends its
    /// upstream queries inside it (DNS over TCP to the tunnel's local end), never in clear
    /// across the satellite; otherwise straight to `dns.upstream`.
    pub fn dns_forwarding(&self) -> perigee_dns::Forwarding {
        if self.dns.enabled && self.role == Role::Terminal && self.peer.enabled {
            perigee_dns::Forwarding::PeerPath
        } else {
            perigee_dns::Forwarding::Direct
        }
    }

    /// At a terminal, what of its DNS crosses the satellite in clear (readable, and forgeable
    /// into the resolver's cache or Squid's), in a sentence for `/v1/health` `notices`.
    pub fn dns_in_clear(&self) -> Option<String> {
        if self.role != Role::Terminal {
            return None;
        }
        let ups: Vec<String> = self.dns.upstream.iter().map(|u| u.to_string()).collect();
        if self.dns.enabled && self.dns_forwarding().in_clear() {
            return Some(format!(
                "dns: the resolver's upstream queries cross the satellite in clear (UDP to {}): \
                 anyone on the link can read them and forge answers; the peer path carries them \
                 encrypted",
                ups.join(", ")
            ));
        }
        if self.cache.enabled && !self.dns.enabled {
            return Some(format!(
                "dns: Squid's lookups cross the satellite in clear (UDP to {}): dns is off, so \
                 Squid asks the upstream itself; enable dns (with the peer path on, its queries \
                 cross encrypted)",
                ups.join(", ")
            ));
        }
        None
    }

    /// The served subnets as rendered: normalised (host bits cleared), merged, sorted. Validation
    /// has checked them; an invalid set (never rendered) gives an empty list.
    pub fn served(&self) -> Vec<Cidr> {
        perigee_squid::check_served_subnets(&self.served_subnets, &self.served_limits)
            .unwrap_or_default()
    }
}
