//! perigee-dns: the gateway's caching resolver.
//!
//! DNS from the served subnets (UDP and TCP port 53, to any address) is handed by the
//! gateway's nft rules (TPROXY) to an unbound that this crate runs as the daemon's child. It
//! forwards to the operator's upstream resolver(s), prefetches popular names and serves stale
//! answers (RFC 8767), so an expired name never waits for the satellite. This crate owns the
//! `dns` policy and its validation, unbound.conf rendering, running unbound (checkconf → swap →
//! restart with the cache carried over), its counters behind `/v1/dns/*`, and the upstream
//! health probe the cache's port-80 gate uses.

pub mod api;
pub mod config;
pub mod forwarding;
pub mod manager;
pub mod probe;
pub mod render;
pub mod stats;
pub mod wire;
pub mod zone;

pub use config::{check_served_subnets, parse_served_subnets, ConfigError, DnsConfig, Upstream};
pub use forwarding::{Forwarding, PEER_PATH_RESOLVER};
pub use manager::{
    ApplyAction, ApplyReport, DnsError, DnsStats, ManagerOptions, Policy, UnboundManager,
};
pub use perigee_types::Cidr;
pub use probe::{probe_all, probe_route, ProbeResult, ResolverHealth};
pub use render::{render, UnboundPaths, LISTEN_PORT};
pub use stats::Totals;
pub use zone::{validate_name, Zone};
