//! `GatewayConfig`: the serde types of docs/control-protocol.md and their strict validation.
//! Every error names the JSON path of the offending field so the API can point at it.
//!
//! These types are the source of the control protocol's JSON Schema (`perigee schema config`,
//! committed as gateway/schema/config.schema.json): the API's models and the dashboard's types
//! are generated from it. Bounds are written once as constants that both the `#[schemars]`
//! attributes and `validate()` use; rules between fields live only in `validate()` (and in the
//! API's cross-field validators, which tests/test_config_contract.py holds to these).
use perigee_types::IpAddrSchema;
pub use perigee_types::{parse_cidr, parse_ports, Cidr, IfName, ObjectName, PortRange};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::IpAddr;

use perigee_types::config_error as err;
pub use perigee_types::ConfigError;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    Hub,
    Terminal,
}

/// The congestion controls policy may choose for a leg (the kernel's names).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum CongestionControl {
    Hybla,
    // Perigee's loss-tolerant Hybla (docs/hybla.md). A plain comment: a doc comment on one
    // variant would make the schema a oneOf instead of one enum.
    #[serde(rename = "hybla_ld")]
    HyblaLd,
    Cubic,
    Bbr,
    Reno,
}

impl CongestionControl {
    pub fn as_str(self) -> &'static str {
        match self {
            CongestionControl::Hybla => "hybla",
            CongestionControl::HyblaLd => "hybla_ld",
            CongestionControl::Cubic => "cubic",
            CongestionControl::Bbr => "bbr",
            CongestionControl::Reno => "reno",
        }
    }
}

impl std::fmt::Display for CongestionControl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Bounds of the top-level lists and values (the schema carries them to the API).
pub const MAX_LAN: usize = 16;
pub const MAX_SUBNETS: usize = 256;
pub const MAX_ROUTES: usize = 256;
pub const MAX_CLASSES: usize = 512;
pub const MAX_BYPASS: usize = 512;
pub const MAX_CIDRS: usize = 256;
pub const MAX_BYPASS_CIDRS: usize = 1024;
pub const MAX_PORTS: usize = 256;
pub const MAX_DSCP: usize = 64;
pub const MAX_IIFNAME: usize = 16;
/// The site of clients no configured site covers (so no configured site may be called that).
pub const OTHER_SITE: &str = "other";
pub const MAX_SITES: usize = 1024;
pub const MAX_SITE_PREFIXES: usize = 256;
/// Pacing caps, bit/s (100 Gbit/s).
pub const MAX_PACING_BPS: u64 = 100_000_000_000;
pub const MAX_PRIORITY: u32 = 65_535;
/// Socket buffers and a class's buffer, bytes (1 GiB).
pub const MAX_BUFFER_BYTES: u64 = 1 << 30;
pub const MAX_INITCWND: u32 = 1000;
pub const MAX_REVISION_LEN: usize = 64;
pub const REVISION_PATTERN: &str = "^[A-Za-z0-9_.:-]{0,64}$";

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
    #[schemars(length(max = MAX_BYPASS))]
    pub bypass: Vec<Bypass>,
    #[serde(default)]
    pub cache: Cache,
    #[serde(default)]
    pub dns: Dns,
    #[serde(default)]
    pub shaping: Shaping,
    #[serde(default)]
    pub peer: Peer,
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

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct Splitter {
    /// false: nothing is intercepted (flows are routed as they are).
    pub enabled: bool,
    /// The TPROXY port intercepted connections are handed to.
    #[schemars(range(min = 1, max = 65_535))]
    pub tproxy_port: u32,
    /// Split flows open at once; above it new flows are routed unsplit.
    #[schemars(range(min = 1, max = MAX_FLOWS))]
    pub max_flows: u32,
    /// How long the connect toward the server may take.
    #[schemars(range(min = *CONNECT_TIMEOUT_MS.start(), max = *CONNECT_TIMEOUT_MS.end()))]
    pub connect_timeout_ms: u64,
    /// A flow with no byte either way for this long is closed.
    #[schemars(range(min = *IDLE_TIMEOUT_S.start(), max = *IDLE_TIMEOUT_S.end()))]
    pub idle_timeout_s: u64,
    /// Per flow and direction, the bytes held inside the gateway (pipe capacity, at most 1 MiB
    /// is used).
    #[schemars(range(min = *RELAY_BUFFER_BYTES.start(), max = *RELAY_BUFFER_BYTES.end()))]
    pub relay_buffer_bytes: u32,
    /// TCP_NODELAY on both legs of every relayed flow (and the peer path's connections), so a
    /// small segment never waits a satellite round trip for the ACK of the one before it
    /// (Nagle). false = the kernel's default (Nagle on), kept as a knob for measurements.
    pub nodelay: bool,
}

pub const MAX_FLOWS: u32 = 1_000_000;
pub const CONNECT_TIMEOUT_MS: std::ops::RangeInclusive<u64> = 100..=600_000;
pub const IDLE_TIMEOUT_S: std::ops::RangeInclusive<u64> = 1..=604_800;
pub const RELAY_BUFFER_BYTES: std::ops::RangeInclusive<u32> = 4096..=(64 << 20);

impl Default for Splitter {
    fn default() -> Self {
        Splitter {
            enabled: true,
            tproxy_port: 7071,
            max_flows: 10_000,
            connect_timeout_ms: 10_000,
            idle_timeout_s: 600,
            relay_buffer_bytes: 1 << 20,
            nodelay: true,
        }
    }
}

/// A route across the satellite: `dst` via the other side's satellite address.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "Route")]
pub struct SatRoute {
    pub dst: Cidr,
    /// The next hop, of the same family as dst.
    #[schemars(with = "IpAddrSchema")]
    pub via: IpAddr,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct Satellite {
    /// The satellite leg's congestion control (classes may choose another).
    pub congestion_control: CongestionControl,
    /// 0 = kernel autotuning.
    #[schemars(range(max = MAX_BUFFER_BYTES))]
    pub sndbuf_bytes: u64,
    /// 0 = kernel autotuning.
    #[schemars(range(max = MAX_BUFFER_BYTES))]
    pub rcvbuf_bytes: u64,
    /// Per-socket pacing cap, bit/s; 0 = none.
    #[schemars(range(max = MAX_PACING_BPS))]
    pub pacing_rate_bps: u64,
    /// Initial congestion window of the satellite routes, segments; 0 = kernel default.
    #[schemars(range(max = MAX_INITCWND))]
    pub initcwnd: u32,
    /// Initial receive window advertised on the satellite routes, segments; 0 = kernel default.
    #[schemars(range(max = MAX_INITCWND))]
    pub initrwnd: u32,
    /// Destinations across the satellite; no two with the same dst.
    #[schemars(length(max = MAX_ROUTES))]
    pub routes: Vec<SatRoute>,
    /// The link's capacity, bit/s, forward (hub → terminal) and return, as the satellite
    /// interface counts it (whole frames): for utilisation figures and the link alert
    /// (docs/operations.md, *Metrics*). 0 = unknown. Nothing is shaped or paced by it.
    #[schemars(range(max = MAX_PACING_BPS))]
    pub forward_rate_bps: u64,
    #[schemars(range(max = MAX_PACING_BPS))]
    pub return_rate_bps: u64,
}

impl Default for Satellite {
    fn default() -> Self {
        Satellite {
            congestion_control: CongestionControl::Hybla,
            sndbuf_bytes: 4 << 20,
            rcvbuf_bytes: 4 << 20,
            pacing_rate_bps: 0,
            initcwnd: 10,
            initrwnd: 10,
            routes: Vec::new(),
            forward_rate_bps: 0,
            return_rate_bps: 0,
        }
    }
}

/// The other leg of each split flow: the client side at a terminal, the server side at a hub.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct Terrestrial {
    /// Congestion control of the terrestrial socket; "" (default) = the namespace's default
    /// (net.ipv4.tcp_congestion_control), which a container usually cannot change itself.
    #[serde(with = "system_default_cc")]
    #[schemars(schema_with = "system_default_cc::schema")]
    pub congestion_control: Option<CongestionControl>,
}

/// `""` on the wire for "the system's default", a name otherwise.
mod system_default_cc {
    use super::CongestionControl;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub fn serialize<S: Serializer>(
        cc: &Option<CongestionControl>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        cc.map(CongestionControl::as_str).unwrap_or("").serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<CongestionControl>, D::Error> {
        let name = String::deserialize(d)?;
        if name.is_empty() {
            return Ok(None);
        }
        CongestionControl::deserialize(serde::de::value::StrDeserializer::<D::Error>::new(&name))
            .map(Some)
    }

    pub fn schema(g: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let named = g.subschema_for::<CongestionControl>();
        schemars::json_schema!({
            "anyOf": [named, {"type": "string", "const": ""}],
            "default": "",
        })
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct Hybla {
    /// Hybla's reference RTT, ms: a flow grows its window as fast as one with this RTT would.
    #[schemars(range(min = *RTT0_MS.start(), max = *RTT0_MS.end()))]
    pub rtt0_ms: u32,
    /// The RTT Hybla assumes before it has measured one, ms; 0 = measure.
    #[schemars(range(max = MAX_BASE_RTT_MS))]
    pub base_rtt_ms: u32,
    /// Operator cwnd ceiling in segments for Perigee's BPF Hybla (docs/hybla.md); 0 = none
    /// (only the built-in 65536). The kernel's tcp_hybla cannot honour a nonzero value.
    #[schemars(range(max = perigee_hybla::MAX_CWND_CEILING))]
    pub cwnd_max: u32,
}

pub const RTT0_MS: std::ops::RangeInclusive<u32> = 1..=10_000;
pub const MAX_BASE_RTT_MS: u32 = 10_000;

impl Default for Hybla {
    fn default() -> Self {
        Hybla {
            rtt0_ms: 25,
            base_rtt_ms: 0,
            cwnd_max: 0,
        }
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    #[default]
    Accelerate,
    Cache,
    Bypass,
}

impl Action {
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Accelerate => "accelerate",
            Action::Cache => "cache",
            Action::Bypass => "bypass",
        }
    }
}

/// The transport a class matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum MatchProtocol {
    #[default]
    Tcp,
    Udp,
    Any,
}

impl MatchProtocol {
    pub fn as_str(self) -> &'static str {
        match self {
            MatchProtocol::Tcp => "tcp",
            MatchProtocol::Udp => "udp",
            MatchProtocol::Any => "any",
        }
    }
}

/// What a class matches; an empty list matches anything.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct Match {
    #[schemars(length(max = MAX_CIDRS))]
    pub src: Vec<Cidr>,
    #[schemars(length(max = MAX_CIDRS))]
    pub dst: Vec<Cidr>,
    /// tcp (default), udp or any; ports need tcp or udp.
    pub protocol: MatchProtocol,
    #[schemars(length(max = MAX_PORTS))]
    pub dports: Vec<PortRange>,
    #[schemars(length(max = MAX_PORTS))]
    pub sports: Vec<PortRange>,
    #[schemars(length(max = MAX_DSCP), inner(range(max = 63)))]
    pub dscp: Vec<u32>,
    #[schemars(length(max = MAX_IIFNAME))]
    pub iifname: Vec<IfName>,
}

/// A class's own satellite-leg settings; each left at its default inherits the global one.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct ClassSatellite {
    /// null = the satellite section's.
    pub congestion_control: Option<CongestionControl>,
    /// Socket buffers of the satellite leg, bytes; 0 = inherit.
    #[schemars(range(max = MAX_BUFFER_BYTES))]
    pub buffer_bytes: u64,
    /// Pacing cap, bit/s; 0 = inherit.
    #[schemars(range(max = MAX_PACING_BPS))]
    pub pacing_rate_bps: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "TrafficClass")]
pub struct Class {
    /// Unique among the classes; "default" is reserved.
    pub name: ObjectName,
    /// Required: the evaluation order is too important to default. Lowest first.
    #[schemars(range(max = MAX_PRIORITY))]
    pub priority: u32,
    #[serde(rename = "match", default)]
    pub matcher: Match,
    /// cache needs protocol tcp.
    pub action: Action,
    #[serde(default)]
    pub satellite: ClassSatellite,
    /// The DSCP (0..63) this class's re-originated connections carry instead of the client's.
    /// Absent or null = copy the client's (docs/splitter.md, *DSCP*).
    #[serde(default)]
    #[schemars(range(max = 63))]
    pub set_dscp: Option<u32>,
}

/// A remote site: the client prefixes it serves (a terminal's LAN).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Site {
    /// Not "other": that is where clients no site covers count.
    pub name: ObjectName,
    #[schemars(length(min = 1, max = MAX_SITE_PREFIXES))]
    pub prefixes: Vec<Cidr>,
}

/// The traffic a bypass entry leaves untouched.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum BypassProtocol {
    Tcp,
    Udp,
    Esp,
    Ah,
    Icmp,
    Any,
}

impl BypassProtocol {
    /// Whether the protocol has ports to match.
    pub fn has_ports(self) -> bool {
        matches!(self, BypassProtocol::Tcp | BypassProtocol::Udp)
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "BypassRule")]
pub struct Bypass {
    /// Unique among the bypass entries.
    pub name: ObjectName,
    /// One of the IPsec entries every config carries.
    #[serde(default)]
    pub builtin: bool,
    pub protocol: BypassProtocol,
    /// Addresses either end of the traffic may have; protocol any needs at least one.
    #[serde(default)]
    #[schemars(length(max = MAX_BYPASS_CIDRS))]
    pub cidrs: Vec<Cidr>,
    /// Ports either end may use (tcp and udp only).
    #[serde(default)]
    #[schemars(length(max = MAX_PORTS))]
    pub ports: Vec<PortRange>,
}

/// The `cache` section is the Squid crate's own policy type (same JSON, validated there too).
pub type Cache = perigee_squid::CacheConfig;
/// `served_limits`: the Squid crate judges the served set as address space for its ACL; the same
/// check guards the splitter's sets.
pub type ServedLimits = perigee_squid::ServedLimits;

/// The `dns` section is the resolver crate's own policy type (same JSON, validated there too).
pub type Dns = perigee_dns::DnsConfig;

/// Aggregate egress shaper on `interfaces.satellite` (`tc`, docs/control-protocol.md *Shaping*):
/// an HTB root whose one class holds everything leaving the interface to `rate_bps`, over a
/// FIFO leaf. Per-socket pacing caps each flow at the link rate, so N flows together send N
/// times it and overflow the modem's queue; this caps their sum, so the queue that builds is
/// the gateway's own, where TCP small queues hold each local socket to a couple of packets.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct Shaping {
    /// false (default): the interface keeps the qdisc it had, nothing is shaped.
    pub enabled: bool,
    /// 0 (default) = none; required when enabled: 8000..100000000000 bit/s, counted over each
    /// packet as the interface sends it (an Ethernet frame without preamble and FCS) plus
    /// `overhead_bytes`. Set it to the modem's rate for this direction, not above.
    #[schemars(range(max = MAX_PACING_BPS))]
    pub rate_bps: u64,
    /// Bytes added to every packet's length when charging it against `rate_bps` (the framing
    /// the modem adds and counts, e.g. its encapsulation).
    #[schemars(range(max = MAX_SHAPING_OVERHEAD))]
    pub overhead_bytes: u32,
    /// The leaf FIFO's length in packets (default 1000, the kernel's txqueuelen). Local TCP
    /// senders keep only ~2 packets each in it (TCP small queues), so it fills only with
    /// forwarded traffic or thousands of flows; when full, new packets are dropped.
    #[schemars(range(min = *SHAPING_QUEUE_PACKETS.start(), max = *SHAPING_QUEUE_PACKETS.end()))]
    pub queue_packets: u32,
}

impl Default for Shaping {
    fn default() -> Self {
        Shaping {
            enabled: false,
            rate_bps: 0,
            overhead_bytes: 0,
            queue_packets: 1000,
        }
    }
}

/// The peer path (docs/splitter.md, *The peer path*): a terminal keeps warm, authenticated
/// TCP connections to its hub's peer listener and hands each new flow to one of them, so the
/// client's first bytes cross the satellite at once instead of after a handshake. The hub
/// re-originates the flow to the server from the client's own address, as on the direct path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct Peer {
    pub enabled: bool,
    /// Hub: the TCP port its peer listener binds (all addresses). Terminal: the hub's peer port.
    #[schemars(range(min = 1, max = 65_535))]
    pub port: u32,
    /// Terminal: the hub's unicast address (an IP literal; a name would need DNS across the
    /// satellite at start). Empty at a hub.
    #[schemars(schema_with = "peer_hub_schema")]
    pub hub: String,
    /// The shared secret: 64 hex digits (32 bytes, e.g. `openssl rand -hex 32`). Required when
    /// enabled.
    #[schemars(regex(pattern = PEER_KEY_PATTERN))]
    pub key: String,
    /// Hub: the CIDRs terminals may connect from; empty = any holder of the key.
    #[schemars(length(max = MAX_CIDRS))]
    pub allowed: Vec<Cidr>,
    /// Terminal: warm connections each worker keeps ready (refilled as flows take them).
    #[schemars(range(min = *PEER_POOL_SIZE.start(), max = *PEER_POOL_SIZE.end()))]
    pub pool_size: u32,
}

impl Default for Peer {
    fn default() -> Self {
        Peer {
            enabled: false,
            port: 7072,
            hub: String::new(),
            key: String::new(),
            allowed: Vec::new(),
            pool_size: 8,
        }
    }
}

/// `peer` bounds.
pub const PEER_KEY_HEX_LEN: usize = 64;
pub const PEER_KEY_PATTERN: &str = "^([0-9A-Fa-f]{64})?$";
pub const PEER_POOL_SIZE: std::ops::RangeInclusive<u32> = 1..=256;

fn peer_hub_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "string",
        "maxLength": 64,
        "pattern": format!("^({})?$", perigee_types::ip_pattern()),
        "default": "",
    })
}

impl Peer {
    /// The shared key as bytes (None unless it is 64 hex digits: validation guarantees it
    /// when the peer path is enabled).
    pub fn key_bytes(&self) -> Option<[u8; 32]> {
        parse_peer_key(&self.key).ok()
    }

    /// The hub's address (terminal).
    pub fn hub_addr(&self) -> Option<IpAddr> {
        self.hub.parse().ok()
    }
}

/// 64 hex digits -> 32 bytes.
pub fn parse_peer_key(s: &str) -> Result<[u8; 32], String> {
    if s.len() != PEER_KEY_HEX_LEN || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(format!(
            "must be {PEER_KEY_HEX_LEN} hex digits (32 random bytes, e.g. `openssl rand -hex 32`)"
        ));
    }
    let mut key = [0u8; 32];
    for (i, k) in key.iter_mut().enumerate() {
        *k = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).map_err(|e| e.to_string())?;
    }
    Ok(key)
}

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

/// `shaping` bounds.
pub const MIN_SHAPING_BPS: u64 = 8_000;
pub const MAX_SHAPING_OVERHEAD: u32 = 256;
pub const SHAPING_QUEUE_PACKETS: std::ops::RangeInclusive<u32> = 16..=100_000;

/// Sysctl keys the gateway may write; anything else is rejected so the API cannot reach
/// arbitrary kernel knobs through us.
pub const SYSCTL_ALLOW: &[&str] = &[
    "net.ipv4.tcp_slow_start_after_idle",
    "net.ipv4.tcp_no_metrics_save",
    "net.ipv4.tcp_window_scaling",
    "net.ipv4.tcp_sack",
    "net.ipv4.tcp_timestamps",
    "net.ipv4.tcp_rmem",
    "net.ipv4.tcp_wmem",
    "net.ipv4.tcp_mtu_probing",
    "net.ipv4.tcp_ecn",
    "net.ipv4.tcp_notsent_lowat",
    "net.ipv4.tcp_fastopen",
    "net.ipv4.tcp_adv_win_scale",
    "net.core.rmem_max",
    "net.core.wmem_max",
    "net.core.default_qdisc",
    "net.ipv4.ip_forward",
    "net.ipv6.conf.all.forwarding",
];

/// A sysctl value: short plain text (it is written to /proc as it is).
pub const SYSCTL_VALUE_PATTERN: &str = "^[A-Za-z0-9 \\t._-]{1,64}$";

fn valid_sysctl_value(v: &str) -> bool {
    (1..=64).contains(&v.len())
        && v.chars()
            .all(|c| c.is_ascii_alphanumeric() || " \t._-".contains(c))
}

fn sysctls_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "object",
        "propertyNames": {"enum": SYSCTL_ALLOW},
        "additionalProperties": {"type": "string", "pattern": SYSCTL_VALUE_PATTERN},
        "default": {},
    })
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
}

/// Parse JSON text into a config, naming the path of a type error or unknown field.
pub fn parse(text: &str) -> Result<GatewayConfig, ConfigError> {
    let de = &mut serde_json::Deserializer::from_str(text);
    let cfg: GatewayConfig = serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        err(
            if path == "." { String::new() } else { path },
            e.inner().to_string(),
        )
    })?;
    cfg.validate()?;
    Ok(cfg)
}

pub fn from_value(v: serde_json::Value) -> Result<GatewayConfig, ConfigError> {
    parse(&v.to_string())
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

    /// Classes sorted by priority (stable: equal priorities keep their listed order).
    pub fn sorted_classes(&self) -> Vec<&Class> {
        let mut v: Vec<&Class> = self.classes.iter().collect();
        v.sort_by_key(|c| c.priority);
        v
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

    /// The served subnets as rendered: normalised (host bits cleared), merged, sorted. Validation
    /// has checked them; an invalid set (never rendered) gives an empty list.
    pub fn served(&self) -> Vec<Cidr> {
        perigee_squid::check_served_subnets(&self.served_subnets, &self.served_limits)
            .unwrap_or_default()
    }
}

/// A sample configuration (the satlab terminal); used by tests and `perigee config` docs.
pub fn example_json() -> serde_json::Value {
    serde_json::json!({
        "schema": 1, "revision": "v1", "role": "terminal",
        "interfaces": {"lan": ["lan0"], "satellite": "sat0"},
        "served_subnets": ["10.71.1.0/24", "fd71:1::/64"],
        "splitter": {"enabled": true, "tproxy_port": 7071, "max_flows": 10000, "connect_timeout_ms": 10000,
                     "idle_timeout_s": 600, "relay_buffer_bytes": 262144},
        "satellite": {"congestion_control": "hybla", "sndbuf_bytes": 4194304, "rcvbuf_bytes": 4194304,
                      "pacing_rate_bps": 0, "initcwnd": 10, "initrwnd": 10,
                      "routes": [{"dst": "10.71.3.0/24", "via": "10.71.2.2"}, {"dst": "fd71:3::/64", "via": "fd71:2::2"}]},
        "hybla": {"rtt0_ms": 25, "base_rtt_ms": 0, "cwnd_max": 0},
        "classes": [{"name": "web", "priority": 100,
                     "match": {"src": ["10.71.1.0/24"], "dst": [], "protocol": "tcp", "dports": ["80", "8000-8080"],
                               "sports": [], "dscp": [], "iifname": []},
                     "action": "accelerate", "satellite": {"congestion_control": "hybla", "buffer_bytes": 0, "pacing_rate_bps": 0}}],
        "bypass": [
            {"name": "ipsec-esp", "builtin": true, "protocol": "esp"},
            {"name": "ipsec-ah", "builtin": true, "protocol": "ah"},
            {"name": "ike", "builtin": true, "protocol": "udp", "ports": ["500"]},
            {"name": "nat-t", "builtin": true, "protocol": "udp", "ports": ["4500"]},
            {"name": "ike-tcp", "builtin": true, "protocol": "tcp", "ports": ["4500"]},
            {"name": "vpn-concentrator", "builtin": false, "protocol": "any", "cidrs": ["203.0.113.7/32"], "ports": []}
        ],
        "cache": {"enabled": false, "port": 3129},
        "dns": {"enabled": false, "upstream": ["10.71.3.53"]},
        "sysctls": {"net.ipv4.tcp_slow_start_after_idle": "0"}
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(path: &[&str], v: serde_json::Value) -> Result<GatewayConfig, ConfigError> {
        let mut j = example_json();
        let mut cur = &mut j;
        for p in &path[..path.len() - 1] {
            cur = match p.parse::<usize>() {
                Ok(i) => &mut cur[i],
                Err(_) => &mut cur[*p],
            };
        }
        let last = path[path.len() - 1];
        match last.parse::<usize>() {
            Ok(i) => cur[i] = v,
            Err(_) => cur[last] = v,
        }
        from_value(j)
    }

    #[test]
    fn example_is_valid() {
        from_value(example_json()).unwrap();
    }

    fn cache_field(cache: serde_json::Value) -> String {
        with(&["cache"], cache).unwrap_err().field
    }

    #[test]
    fn cache_section_is_the_squid_policy_with_field_paths() {
        let ok = with(
            &["cache"],
            serde_json::json!({"enabled": true, "port": 3129, "admin_port": 3131,
                               "max_memory_object_mb": 16, "store": "aufs"}),
        )
        .unwrap();
        assert_eq!(ok.cache.admin_port, 3131);
        // Defaults for what the API does not send.
        let d = with(&["cache"], serde_json::json!({"enabled": true})).unwrap();
        assert_eq!((d.cache.port, d.cache.admin_port), (3129, 3130));
        assert_eq!(
            cache_field(serde_json::json!({"port": 3130, "admin_port": 3130})),
            "cache.admin_port"
        );
        assert_eq!(cache_field(serde_json::json!({"port": 7071})), "cache.port");
        assert_eq!(
            cache_field(serde_json::json!({"admin_port": 7071})),
            "cache.admin_port"
        );
        assert_eq!(
            cache_field(serde_json::json!({"store": "ufs"})),
            "cache.store"
        );
        assert_eq!(cache_field(serde_json::json!({"prot": 1})), "cache.prot");
        assert_eq!(
            cache_field(serde_json::json!({"refresh_patterns": [
                {"regex": "a b", "min_minutes": 0, "percent": 0, "max_minutes": 0}]})),
            "cache.refresh_patterns[0].regex"
        );
        assert_eq!(
            cache_field(serde_json::json!({"max_memory_object_mb": 10000, "max_object_mb": 100})),
            "cache.max_memory_object_mb"
        );
    }

    fn dns_field(dns: serde_json::Value) -> String {
        with(&["dns"], dns).unwrap_err().field
    }

    #[test]
    fn dns_section_is_the_resolver_policy_with_field_paths() {
        let ok = with(
            &["dns"],
            serde_json::json!({"enabled": true, "upstream": ["10.71.3.53", "fd71:3::53@5353"],
                               "cache_mb": 128}),
        )
        .unwrap();
        assert_eq!(ok.dns.cache_mb, 128);
        assert_eq!(
            ok.squid_nameservers(),
            vec![IpAddr::from([127, 0, 0, 1])],
            "Squid resolves through the gateway's own resolver"
        );
        let d = with(&["dns"], serde_json::json!({})).unwrap();
        assert!(!d.dns.enabled && d.dns.upstream.is_empty());
        assert_eq!(
            dns_field(serde_json::json!({"enabled": true})),
            "dns.upstream"
        );
        assert_eq!(
            dns_field(serde_json::json!({"upstream": ["resolver.example"]})),
            "dns.upstream[0]"
        );
        assert_eq!(
            dns_field(serde_json::json!({"cache_mb": 0})),
            "dns.cache_mb"
        );
        assert_eq!(dns_field(serde_json::json!({"cach_mb": 1})), "dns.cach_mb");
        // Port 53 belongs to the resolver when it runs.
        let mut j = example_json();
        j["dns"] = serde_json::json!({"enabled": true, "upstream": ["10.71.3.53"]});
        j["cache"]["admin_port"] = 53.into();
        assert_eq!(from_value(j.clone()).unwrap_err().field, "cache.admin_port");
        j["cache"]["admin_port"] = 3130.into();
        j["splitter"]["tproxy_port"] = 53.into();
        assert_eq!(
            from_value(j.clone()).unwrap_err().field,
            "splitter.tproxy_port"
        );
        // Never an open resolver.
        j["splitter"]["tproxy_port"] = 7071.into();
        j["served_subnets"] = serde_json::json!(["10.71.1.0/24", "::/0"]);
        assert_eq!(from_value(j).unwrap_err().field, "served_subnets[1]");
    }

    #[test]
    fn the_cache_always_has_an_explicit_resolver() {
        let mut j = example_json();
        j["cache"]["enabled"] = true.into();
        j["dns"] = serde_json::json!({});
        let e = from_value(j.clone()).unwrap_err();
        assert_eq!(e.field, "dns.upstream");
        assert!(e.message.contains("needs a resolver"), "{}", e.message);
        // dns off: Squid uses the upstreams themselves, which must be on port 53.
        j["dns"] = serde_json::json!({"upstream": ["10.71.3.53", "fd71:3::53"]});
        let c = from_value(j.clone()).unwrap();
        assert_eq!(
            c.squid_nameservers(),
            vec![
                "10.71.3.53".parse::<IpAddr>().unwrap(),
                "fd71:3::53".parse::<IpAddr>().unwrap()
            ]
        );
        j["dns"] = serde_json::json!({"upstream": ["10.71.3.53", "10.71.3.54@5353"]});
        assert_eq!(from_value(j.clone()).unwrap_err().field, "dns.upstream[1]");
        // dns on: any port upstream is fine, Squid asks the gateway's resolver.
        j["dns"]["enabled"] = true.into();
        from_value(j).unwrap();
    }

    #[test]
    fn enabled_cache_refuses_a_served_slash_zero() {
        let mut j = example_json();
        j["cache"]["enabled"] = true.into();
        j["served_subnets"] = serde_json::json!(["10.71.1.0/24", "0.0.0.0/0"]);
        assert_eq!(from_value(j).unwrap_err().field, "served_subnets[1]");
    }

    #[test]
    fn served_subnets_are_judged_as_address_space_with_or_without_the_cache() {
        for cache in [false, true] {
            let set = |list: serde_json::Value| {
                let mut j = example_json();
                j["cache"]["enabled"] = cache.into();
                j["served_subnets"] = list;
                from_value(j)
            };
            for wide in [
                serde_json::json!(["0.0.0.0/1", "128.0.0.0/1"]),
                serde_json::json!(["8000::/2", "c000::/2"]),
                serde_json::json!(["10.0.0.0/8", "11.0.0.0/8"]),
            ] {
                assert_eq!(
                    set(wide.clone()).unwrap_err().field,
                    "served_subnets",
                    "{wide}"
                );
            }
            for mapped in ["::ffff:0:0/96", "::ffff:10.71.1.0/120", "::/64"] {
                let e = set(serde_json::json!(["10.71.1.0/24", mapped])).unwrap_err();
                assert_eq!(e.field, "served_subnets[1]", "{mapped}");
            }
            let c = set(serde_json::json!([
                "10.71.1.9/24",
                "10.71.0.0/16",
                "fd71:1::5/64"
            ]))
            .unwrap();
            assert_eq!(
                c.served().iter().map(|c| c.to_string()).collect::<Vec<_>>(),
                ["10.71.0.0/16", "fd71:1::/64"]
            );
        }
        // The operator may allow more, within bounds.
        let mut j = example_json();
        j["served_subnets"] = serde_json::json!(["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"]);
        assert_eq!(from_value(j.clone()).unwrap_err().field, "served_subnets");
        j["served_limits"] = serde_json::json!({"ipv4_prefix": 7});
        from_value(j.clone()).unwrap();
        j["served_limits"] = serde_json::json!({"ipv4_prefix": 0});
        assert_eq!(
            from_value(j.clone()).unwrap_err().field,
            "served_limits.ipv4_prefix"
        );
        j["served_limits"] = serde_json::json!({"ipv6_prefix": 129});
        assert_eq!(
            from_value(j).unwrap_err().field,
            "served_limits.ipv6_prefix"
        );
    }

    #[test]
    fn v4_mapped_prefixes_are_refused_wherever_a_cidr_is_written() {
        assert!(parse_cidr("::ffff:10.0.0.0/104").is_err());
        assert!(parse_cidr("::ffff:0:0/96").is_err());
        assert!(parse_cidr("::ffff:10.0.0.1").is_err());
        parse_cidr("::/0").unwrap(); // contains the mapped range, but is not written as one
        let e = with(
            &["classes", "0", "match", "src", "0"],
            "::ffff:10.71.1.0/120".into(),
        )
        .unwrap_err();
        assert_eq!(e.field, "classes[0].match.src[0]");
    }

    #[test]
    fn unsupported_congestion_control_names_field() {
        let e = with(&["satellite", "congestion_control"], "vegas".into()).unwrap_err();
        assert_eq!(e.field, "satellite.congestion_control");
        let e = with(
            &["classes", "0", "satellite", "congestion_control"],
            "westwood".into(),
        )
        .unwrap_err();
        assert_eq!(e.field, "classes[0].satellite.congestion_control");
        with(&["satellite", "congestion_control"], "bbr".into()).unwrap();
        with(&["satellite", "congestion_control"], "hybla_ld".into()).unwrap();
        with(
            &["classes", "0", "satellite", "congestion_control"],
            "hybla_ld".into(),
        )
        .unwrap();
    }

    #[test]
    fn terrestrial_congestion_control_is_empty_or_supported() {
        let cfg = from_value(example_json()).unwrap();
        assert_eq!(
            cfg.terrestrial.congestion_control, None,
            "default: system default"
        );
        let e = with(&["terrestrial", "congestion_control"], "vegas".into()).unwrap_err();
        assert_eq!(e.field, "terrestrial.congestion_control");
        let cfg = with(&["terrestrial", "congestion_control"], "cubic".into()).unwrap();
        assert_eq!(
            cfg.terrestrial.congestion_control,
            Some(CongestionControl::Cubic)
        );
        let back = serde_json::to_value(&cfg.terrestrial).unwrap();
        assert_eq!(back["congestion_control"], "cubic");
        let none = serde_json::to_value(Terrestrial::default()).unwrap();
        assert_eq!(
            none["congestion_control"], "",
            "the system default is written as \"\""
        );
        let e = with(&["terrestrial", "cc"], "cubic".into()).unwrap_err();
        assert!(e.field.starts_with("terrestrial"), "{}", e.field);
    }

    #[test]
    fn bad_cidr_names_field() {
        let e = with(&["served_subnets", "1"], "fd71::1::/64".into()).unwrap_err();
        assert_eq!(e.field, "served_subnets[1]");
        let e = with(&["classes", "0", "match", "src", "0"], "10.0.0.0/33".into()).unwrap_err();
        assert_eq!(e.field, "classes[0].match.src[0]");
    }

    #[test]
    fn bad_port_range_names_field() {
        let e = with(
            &["classes", "0", "match", "dports", "1"],
            "9000-8000".into(),
        )
        .unwrap_err();
        assert_eq!(e.field, "classes[0].match.dports[1]");
        let e = with(&["bypass", "2", "ports", "0"], "70000".into()).unwrap_err();
        assert_eq!(e.field, "bypass[2].ports[0]");
        let e = with(&["splitter", "tproxy_port"], 0.into()).unwrap_err();
        assert_eq!(e.field, "splitter.tproxy_port");
    }

    #[test]
    fn unknown_field_names_path() {
        let e = with(&["splitter", "tproxy_pot"], 1.into()).unwrap_err();
        assert_eq!(e.field, "splitter.tproxy_pot");
        assert!(e.message.contains("tproxy_pot"), "{}", e.message);
        let e = with(&["bogus"], 1.into()).unwrap_err();
        assert!(e.message.contains("bogus"));
    }

    #[test]
    fn duplicate_and_conflicting_names() {
        let mut j = example_json();
        let c = j["classes"][0].clone();
        j["classes"].as_array_mut().unwrap().push(c);
        assert_eq!(from_value(j).unwrap_err().field, "classes[1].name");
        let e = with(&["bypass", "1", "name"], "ipsec-esp".into()).unwrap_err();
        assert_eq!(e.field, "bypass[1].name");
        let e = with(&["interfaces", "satellite"], "lan0".into()).unwrap_err();
        assert_eq!(e.field, "interfaces.satellite");
        let e = with(&["interfaces", "lan"], serde_json::json!(["lan0", "lan0"])).unwrap_err();
        assert_eq!(e.field, "interfaces.lan[1]");
    }

    #[test]
    fn sysctl_allow_list_and_route_family() {
        let e = with(&["sysctls"], serde_json::json!({"kernel.panic": "1"})).unwrap_err();
        assert_eq!(e.field, "sysctls.kernel.panic");
        let e = with(&["satellite", "routes", "0", "via"], "fd71:2::2".into()).unwrap_err();
        assert_eq!(e.field, "satellite.routes[0].via");
        let e = with(&["role"], "satellite".into()).unwrap_err();
        assert_eq!(e.field, "role");
    }

    #[test]
    fn hybla_cwnd_max_bounds() {
        let c = with(&["hybla", "cwnd_max"], 5180.into()).unwrap();
        assert_eq!(c.hybla.cwnd_max, 5180);
        with(&["hybla", "cwnd_max"], 65536.into()).unwrap();
        let e = with(&["hybla", "cwnd_max"], 65537.into()).unwrap_err();
        assert_eq!(e.field, "hybla.cwnd_max");
        let e = with(&["hybla", "cwnd_max"], (-1).into()).unwrap_err();
        assert_eq!(e.field, "hybla.cwnd_max");
        let d = with(&["hybla"], serde_json::json!({})).unwrap();
        assert_eq!(d.hybla.cwnd_max, 0);
    }

    #[test]
    fn strict_numbers_names_and_nulls() {
        // No sign, no spaces, no netmask: the API's parsers are as strict.
        assert!(parse_cidr("10.0.0.0/+8").is_err());
        assert!(parse_ports("+80").is_err());
        assert!(parse_ports(" 80").is_err());
        assert!(parse_ports("000080").is_err());
        let e = with(&["revision"], serde_json::Value::Null).unwrap_err();
        assert_eq!(e.field, "revision");
        let e = with(
            &["classes", "0", "match", "protocol"],
            serde_json::Value::Null,
        )
        .unwrap_err();
        assert_eq!(e.field, "classes[0].match.protocol");
        let e = with(&["classes", "0", "name"], "-web".into()).unwrap_err();
        assert_eq!(e.field, "classes[0].name");
        let e = with(&["classes", "0", "priority"], 65536.into()).unwrap_err();
        assert_eq!(e.field, "classes[0].priority");
        // A missing protocol is tcp (ports allowed), like the API's default.
        let mut j = example_json();
        j["classes"][0]["match"]
            .as_object_mut()
            .unwrap()
            .remove("protocol");
        let c = from_value(j).unwrap();
        assert_eq!(c.classes[0].matcher.protocol, MatchProtocol::Tcp);
        // Host bits do not make a second route to the same prefix.
        let e = with(
            &["satellite", "routes", "1"],
            serde_json::json!({"dst": "10.71.3.7/24", "via": "10.71.2.2"}),
        )
        .unwrap_err();
        assert_eq!(e.field, "satellite.routes[1].dst");
    }

    #[test]
    fn shaping_defaults_off_and_needs_a_rate_when_enabled() {
        let d = from_value(example_json()).unwrap();
        assert_eq!(d.shaping, Shaping::default());
        assert!(!d.shaping.enabled);
        assert_eq!(d.shaping.queue_packets, 1000);
        let e = with(&["shaping"], serde_json::json!({"enabled": true})).unwrap_err();
        assert_eq!(e.field, "shaping.rate_bps");
        assert!(e.message.contains("required"), "{}", e.message);
        let c = with(
            &["shaping"],
            serde_json::json!({"enabled": true, "rate_bps": 1_536_000}),
        )
        .unwrap();
        assert_eq!(
            (c.shaping.rate_bps, c.shaping.overhead_bytes),
            (1_536_000, 0)
        );
        // A disabled section may keep its rate for later.
        with(
            &["shaping"],
            serde_json::json!({"enabled": false, "rate_bps": 50_000_000}),
        )
        .unwrap();
    }

    #[test]
    fn shaping_bounds_name_the_field() {
        let field = |v: serde_json::Value| with(&["shaping"], v).unwrap_err().field;
        for (bad, name) in [
            (serde_json::json!({"rate_bps": 7_999}), "shaping.rate_bps"),
            (
                serde_json::json!({"rate_bps": 100_000_000_001_u64}),
                "shaping.rate_bps",
            ),
            (serde_json::json!({"rate_bps": -1}), "shaping.rate_bps"),
            (
                serde_json::json!({"overhead_bytes": 257}),
                "shaping.overhead_bytes",
            ),
            (
                serde_json::json!({"queue_packets": 15}),
                "shaping.queue_packets",
            ),
            (
                serde_json::json!({"queue_packets": 100_001}),
                "shaping.queue_packets",
            ),
            (serde_json::json!({"enabled": 1}), "shaping.enabled"),
            (serde_json::json!({"rate": 1_536_000}), "shaping.rate"),
        ] {
            assert_eq!(field(bad.clone()), name, "{bad}");
        }
        for good in [
            serde_json::json!({"enabled": true, "rate_bps": 8_000, "queue_packets": 16}),
            serde_json::json!({"enabled": true, "rate_bps": 100_000_000_000_u64,
                               "overhead_bytes": 256, "queue_packets": 100_000}),
        ] {
            with(&["shaping"], good.clone()).unwrap_or_else(|e| panic!("{good}: {e}"));
        }
    }

    const KEY: &str = "00112233445566778899aabbccddeeff00112233445566778899AABBCCDDEEFF";

    fn peer(role: &str, peer: serde_json::Value) -> Result<GatewayConfig, ConfigError> {
        let mut j = example_json();
        j["role"] = role.into();
        j["peer"] = peer;
        from_value(j)
    }

    #[test]
    fn peer_defaults_off_and_a_terminal_needs_key_and_hub() {
        let d = from_value(example_json()).unwrap();
        assert_eq!(d.peer, Peer::default());
        assert_eq!((d.peer.port, d.peer.pool_size), (7072, 8));
        assert!(d.splitter.nodelay, "TCP_NODELAY is on by default");
        assert_eq!(d.quic, QuicPolicy::Fallback, "the benchmark chose fallback");
        let e = peer(
            "terminal",
            serde_json::json!({"enabled": true, "hub": "10.71.2.2"}),
        )
        .unwrap_err();
        assert_eq!(e.field, "peer.key");
        let e = peer("terminal", serde_json::json!({"enabled": true, "key": KEY})).unwrap_err();
        assert_eq!(e.field, "peer.hub");
        let c = peer(
            "terminal",
            serde_json::json!({"enabled": true, "key": KEY, "hub": "fd71:2::2"}),
        )
        .unwrap();
        let k = c.peer.key_bytes().unwrap();
        assert_eq!((k[0], k[1], k[31]), (0x00, 0x11, 0xff));
        assert_eq!(c.peer.hub_addr(), Some("fd71:2::2".parse().unwrap()));
        // A hub needs the key only; it must not name a hub.
        peer(
            "hub",
            serde_json::json!({"enabled": true, "key": KEY, "allowed": ["10.71.2.0/24"]}),
        )
        .unwrap();
        let e = peer(
            "hub",
            serde_json::json!({"enabled": true, "key": KEY, "hub": "10.71.2.2"}),
        )
        .unwrap_err();
        assert_eq!(e.field, "peer.hub");
    }

    #[test]
    fn peer_fields_are_checked_even_when_disabled() {
        let field = |role: &str, v: serde_json::Value| peer(role, v.clone()).unwrap_err().field;
        for (role, bad, name) in [
            ("terminal", serde_json::json!({"key": "abc"}), "peer.key"),
            (
                "terminal",
                serde_json::json!({"key": format!("{}g", &KEY[..63])}),
                "peer.key",
            ),
            (
                "terminal",
                serde_json::json!({"key": format!("{KEY}00")}),
                "peer.key",
            ),
            (
                "terminal",
                serde_json::json!({"hub": "hub.example"}),
                "peer.hub",
            ),
            (
                "terminal",
                serde_json::json!({"hub": "10.71.2.2:7072"}),
                "peer.hub",
            ),
            (
                "terminal",
                serde_json::json!({"hub": "0.0.0.0"}),
                "peer.hub",
            ),
            (
                "terminal",
                serde_json::json!({"hub": "224.0.0.1"}),
                "peer.hub",
            ),
            ("terminal", serde_json::json!({"port": 0}), "peer.port"),
            ("terminal", serde_json::json!({"port": 65536}), "peer.port"),
            (
                "terminal",
                serde_json::json!({"pool_size": 0}),
                "peer.pool_size",
            ),
            (
                "terminal",
                serde_json::json!({"pool_size": 257}),
                "peer.pool_size",
            ),
            (
                "hub",
                serde_json::json!({"allowed": ["10.71.2.0/33"]}),
                "peer.allowed[0]",
            ),
            ("hub", serde_json::json!({"port": 7071}), "peer.port"),
            ("hub", serde_json::json!({"port": 3129}), "peer.port"),
            (
                "terminal",
                serde_json::json!({"enabled": "yes"}),
                "peer.enabled",
            ),
            ("terminal", serde_json::json!({"pool": 8}), "peer.pool"),
        ] {
            assert_eq!(field(role, bad.clone()), name, "{role} {bad}");
        }
        // At a terminal the port is the hub's: it may equal the terminal's own listeners.
        peer("terminal", serde_json::json!({"port": 7071})).unwrap();
    }

    #[test]
    fn quic_policy_and_nodelay_parse_strictly() {
        let c = with(&["quic"], "fallback".into()).unwrap();
        assert_eq!(c.quic, QuicPolicy::Fallback);
        assert_eq!(with(&["quic"], "block".into()).unwrap_err().field, "quic");
        assert_eq!(
            with(&["quic"], serde_json::Value::Null).unwrap_err().field,
            "quic"
        );
        let c = with(&["splitter", "nodelay"], false.into()).unwrap();
        assert!(!c.splitter.nodelay);
        let e = with(&["splitter", "nodelay"], 0.into()).unwrap_err();
        assert_eq!(e.field, "splitter.nodelay");
    }

    #[test]
    fn cidr_and_port_matching() {
        let c = parse_cidr("10.71.1.0/24").unwrap();
        assert!(c.contains("10.71.1.200".parse().unwrap()));
        assert!(!c.contains("10.71.2.1".parse().unwrap()));
        let c6 = parse_cidr("fd71:1::/64").unwrap();
        assert!(c6.contains("fd71:1::10".parse().unwrap()));
        assert!(!c6.contains("10.71.1.1".parse().unwrap()));
        assert!(parse_ports("8000-8080").unwrap().contains(8080));
        assert!(parse_ports("0").is_err());
    }
}
