//! What the control socket answers (docs/control-protocol.md): health, counters, flow lists,
//! the resolver's stats as the daemon completes them, apply and validate results, errors. Typed
//! here so that the answers and the JSON Schema the API's models are generated from
//! (`perigee schema reports`, gateway/schema/reports.schema.json) are one thing.
use super::config::Role;
use super::telemetry::Flow;
use perigee_dns::{DnsStats, ProbeResult};
use perigee_hybla::HyblaStatus;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
#[schemars(transform = perigee_types::flat_enum)]
pub enum HealthStatus {
    /// Nothing to fix.
    Ok,
    /// At least one problem is listed.
    Degraded,
}

/// GET /v1/health.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Health {
    pub status: HealthStatus,
    /// The daemon's version.
    pub version: String,
    pub uptime_s: f64,
    /// The running config's role; null while no config is installed.
    pub role: Option<Role>,
    /// The running config's `revision` ("" when it has none); null while no config is
    /// installed (the daemon intercepts nothing until one is).
    pub config_revision: Option<String>,
    /// True while new connections pass unsplit (no listening worker, or above max_flows).
    pub fail_open: bool,
    pub hybla: HyblaStatus,
    /// What an operator should fix, one sentence each; empty when all is well.
    pub problems: Vec<String>,
    /// What works as configured but exposes more than it could, one sentence each (the status
    /// stays ok): e.g. DNS crossing the satellite in clear while the peer path is off. (Absent
    /// from gateways older than it.)
    #[serde(default)]
    pub notices: Vec<String>,
    /// The peer path's state summed over the workers; null when it is off.
    pub peer: Option<PeerHealth>,
    pub workers: Vec<WorkerHealth>,
    /// CPU, memory, disks and interfaces of the box.
    pub host: HostStats,
    pub services: Services,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct PeerHealth {
    /// Terminal: warm connections ready for new flows.
    pub ready: u64,
    /// Terminal: how many are ready when every worker's pools are full (behind a hub cluster, a
    /// pool to each gateway).
    pub full: u64,
    /// Terminal: the gateways its pools go to (each of a hub cluster's once its table arrived).
    pub gateways: u64,
    /// Hub: the peer listener is bound.
    pub listening: bool,
    /// Terminal: why the last connection attempt failed.
    pub error: Option<String>,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct WorkerHealth {
    pub alive: bool,
    pub pid: i32,
    /// Split flows it holds.
    pub live: u64,
    pub restarts: u64,
    pub pipes_in_use: u64,
}

/// Bytes and flows the splitter relayed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SplitCounters {
    pub bytes_up: u64,
    pub bytes_down: u64,
    pub flows: u64,
    /// Satellite-leg segments retransmitted.
    #[serde(default)]
    pub retrans_segments: u64,
    /// Satellite-leg data segments sent, the retransmitted ones included: with
    /// `retrans_segments`, the leg's loss as its senders repaired it.
    #[serde(default)]
    pub segments: u64,
}

/// What crossed the satellite link. `interface` is the link itself: every frame the satellite
/// interface carried (split, cached, bypassed, unsplit, UDP, ICMP). The other fields are the
/// intercepted part only, split flows and the cache's connections together (docs/splitter.md,
/// *Rates*): payload, and the wire estimate with headers.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct LinkCounters {
    /// Intercepted connections' bytes with headers (an estimate from their sockets).
    pub forward_bytes: u64,
    pub return_bytes: u64,
    pub forward_payload_bytes: u64,
    pub return_payload_bytes: u64,
    /// The satellite interface's own counters; null while no config is installed or the
    /// interface is missing.
    #[serde(default)]
    pub interface: Option<LinkInterface>,
}

/// The satellite interface's counters in the link's directions (forward: hub to terminal).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct LinkInterface {
    pub name: String,
    /// Frame bytes, link-layer header included (as the kernel and satlab's emulator count).
    pub forward_bytes: u64,
    pub return_bytes: u64,
    pub forward_packets: u64,
    pub return_packets: u64,
    /// Frames the kernel dropped at the interface, per direction.
    pub forward_dropped: u64,
    pub return_dropped: u64,
    /// Receive and transmit errors.
    pub errors: u64,
}

/// One network interface's counters since it came up (/proc/net/dev of the daemon's namespace).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct InterfaceCounters {
    pub name: String,
    pub rx_bytes: u64,
    pub tx_bytes: u64,
    pub rx_packets: u64,
    pub tx_packets: u64,
    pub rx_errors: u64,
    pub tx_errors: u64,
    pub rx_dropped: u64,
    pub tx_dropped: u64,
}

/// The box's resources (/proc and statvfs), as an appliance's health page shows them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct HostStats {
    pub cpus: u64,
    /// CPU time spent busy (everything but idle and iowait), and idle, summed over CPUs,
    /// seconds since boot: a rate of the two gives the busy share.
    pub cpu_busy_seconds: f64,
    pub cpu_idle_seconds: f64,
    pub load_1m: f64,
    pub load_5m: f64,
    pub load_15m: f64,
    pub memory_total_bytes: u64,
    /// What can be had without swapping (MemAvailable).
    pub memory_available_bytes: u64,
    /// The filesystems the gateway writes: its root and, when the cache is on, Squid's store.
    pub disks: Vec<DiskUsage>,
    /// Every interface's counters but loopback's.
    pub interfaces: Vec<InterfaceCounters>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct DiskUsage {
    /// The path asked about (its filesystem is what is counted).
    pub path: String,
    pub total_bytes: u64,
    /// Free for unprivileged users (f_bavail).
    pub available_bytes: u64,
}

/// Whether one of the gateway's helpers (Squid, the resolver) is on and serving.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ServiceState {
    /// The config turns it on.
    pub enabled: bool,
    /// Its traffic goes to it now (nft sends port 80 to Squid, port 53 to the resolver).
    pub serving: bool,
    /// Why an enabled one is not serving; null when it is (or is off).
    pub problem: Option<String>,
}

/// Squid's and the resolver's state.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Services {
    pub squid: ServiceState,
    pub resolver: ServiceState,
}

/// One site's satellite-leg usage and what the cache saved it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SiteCounters {
    #[serde(flatten)]
    pub usage: SplitCounters,
    pub cache_saved_bytes: u64,
}

/// Where a bypass counter comes from: a bypass entry, or a class whose action is bypass.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum BypassRuleKind {
    Bypass,
    Class,
}

/// The traffic one bypass rule let through untouched.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct BypassRuleCounters {
    pub name: String,
    pub kind: BypassRuleKind,
    pub builtin: bool,
    #[serde(flatten)]
    pub counted: PacketCounters,
}

/// The `cache` action: what the splitter carried while Squid was down, and Squid's own side
/// (from its access log).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CacheCounters {
    #[serde(flatten)]
    pub split: SplitCounters,
    pub requests: u64,
    pub hits: u64,
    pub misses: u64,
    pub denied: u64,
    /// Bytes Squid sent to clients.
    pub bytes: u64,
    /// Body bytes Squid fetched from origins.
    pub bytes_from_origin: u64,
    /// Bytes served from the cache (not fetched over the satellite).
    pub bytes_saved: u64,
}

/// An nft counter.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct PacketCounters {
    pub packets: u64,
    pub bytes: u64,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ActionCounters {
    pub accelerate: SplitCounters,
    pub cache: CacheCounters,
    /// Packets the bypass rules let through untouched.
    pub bypass: PacketCounters,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct PeerCounters {
    /// Flows started on the peer path.
    pub flows: u64,
    /// Flows that took the direct path after all: their warm connection refused OPEN's first
    /// byte (provably nothing reached the hub).
    pub fallbacks: u64,
    /// Peer connections and peer flows the hub refused.
    pub refused: u64,
    /// Terminal: peer flows reset because their connection to the hub failed (a flow is
    /// never replayed on another path).
    #[serde(default)]
    pub failed: u64,
    /// Terminal: flows that found no ready connection to their hub and took the direct path
    /// (a burst of new flows beyond what `peer.pool_size` keeps ready, or the hub out of
    /// reach): each paid the satellite handshake the peer path saves.
    #[serde(default)]
    pub pool_empty: u64,
    /// What this gateway sent twice of its peer connections' first bytes (`peer.redundancy`),
    /// by the duplicate rule's nft counter: the copies, since the last apply.
    #[serde(default)]
    pub redundant: PacketCounters,
}

/// GET /v1/counters: totals since the daemon started (the nft ones since the last apply).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Counters {
    pub flows_live: u64,
    pub flows_total: u64,
    /// SYNs routed unsplit above max_flows.
    pub flows_unsplit_overflow: u64,
    pub flows_failed_connect: u64,
    pub bytes_up: u64,
    pub bytes_down: u64,
    pub link: LinkCounters,
    pub by_action: ActionCounters,
    /// Satellite-leg usage per traffic class ("default" for flows no class matched).
    pub by_class: BTreeMap<String, SplitCounters>,
    /// Per site of the client (`sites` in the config; "other" for clients no site covers).
    pub by_site: BTreeMap<String, SiteCounters>,
    /// Split flows per congestion control their satellite leg ran (docs/hybla.md, *What the
    /// operator sees*).
    #[serde(default)]
    pub by_congestion_control: BTreeMap<String, SplitCounters>,
    /// Split flows per reason their satellite leg runs its congestion control: "default",
    /// "class", "fallback".
    #[serde(default)]
    pub by_cc_reason: BTreeMap<String, SplitCounters>,
    /// Per bypass entry and bypass class, in config order.
    pub bypass_rules: Vec<BypassRuleCounters>,
    /// Satellite sockets left on the system default congestion control.
    pub cc_fallback: u64,
    /// Closed flows dropped because nobody collected them in time.
    pub closed_dropped: u64,
    pub peer: PeerCounters,
    /// QUIC packets answered with port-unreachable (quic: fallback).
    pub quic_rejected: PacketCounters,
}

/// GET /v1/flows and POST /v1/flows/collect.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct FlowList {
    pub flows: Vec<Flow>,
    /// The daemon's clock when it answered (GET /v1/flows), Unix seconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub now: Option<f64>,
}

/// GET /v1/dns/stats: the resolver's counters with what the daemon knows about it.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct DnsReport {
    #[serde(flatten)]
    pub stats: DnsStats,
    /// Queries to the listed resolvers (dns.upstream on port 53, dns.intercept_for) are answered
    /// here (dns.enabled and dns.intercept); queries to any other address pass untouched.
    pub intercept: bool,
    /// The addresses whose port-53 queries are answered here (empty when `intercept` is off).
    #[serde(default)]
    pub intercepted_resolvers: Vec<String>,
    /// Port 53 goes to the resolver now.
    pub serving: bool,
    /// DNS packets handed to the resolver since the last apply.
    pub intercepted_packets: u64,
    /// The upstream probe's verdict (the cache's port-80 gate depends on it).
    pub upstream_healthy: bool,
    /// The last probe round, one result per upstream.
    pub upstream_probe: Vec<ProbeResult>,
}

/// GET /v1/routing: the BGP sessions and their BFD state, as the FRR running beside the gateway
/// reports them (read from its bgpd and bfdd vty sockets, `--frr-vty-dir`).
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct RoutingReport {
    /// True when bgpd answered. False on a box without FRR (no vty socket): the normal case of a
    /// gateway on its own.
    pub available: bool,
    /// Why `available` is false, or what else could not be read (bfdd); null when all was read.
    pub reason: Option<String>,
    /// The directory of the vty sockets read.
    pub vty_dir: String,
    /// bgpd's neighbors, by address.
    pub neighbors: Vec<BgpNeighbor>,
    /// One sentence per session that is not Established, or whose BFD is not up; empty when
    /// every session is.
    pub problems: Vec<String>,
}

/// A BGP session's finite-state-machine state (RFC 4271), as bgpd names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[schemars(transform = perigee_types::flat_enum)]
pub enum BgpState {
    Idle,
    Connect,
    Active,
    OpenSent,
    OpenConfirm,
    Established,
    /// bgpd is tearing the session down.
    Clearing,
    Deleted,
    /// A state this daemon does not know (a newer FRR).
    Unknown,
}

/// One BGP neighbor of the gateway's bgpd.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct BgpNeighbor {
    /// The peer's address.
    pub address: String,
    /// The peer's hostname, when it advertised one.
    pub hostname: Option<String>,
    pub remote_as: Option<u32>,
    pub local_as: Option<u32>,
    pub state: BgpState,
    /// The session is shut by configuration (`neighbor ... shutdown`).
    pub admin_shutdown: bool,
    /// Seconds since the session came up; null unless Established.
    pub uptime_s: Option<f64>,
    /// Prefixes accepted from the peer, summed over the address families.
    pub prefixes_received: u64,
    /// Prefixes sent to the peer, summed over the address families.
    pub prefixes_sent: u64,
    /// Why the session last went down, in bgpd's words ("Admin. shutdown", "BFD down received").
    pub last_reset: Option<String>,
    /// Seconds since that reset.
    pub last_reset_age_s: Option<f64>,
    /// BFD is configured on this session in bgpd.
    pub bfd_configured: bool,
    /// bfdd's session toward this peer; null when bfdd has none.
    pub bfd: Option<BfdSession>,
}

/// A BFD session's state (RFC 5880), as bfdd names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
#[schemars(transform = perigee_types::flat_enum)]
pub enum BfdStatus {
    Up,
    Down,
    Init,
    /// Shut by configuration (AdminDown).
    Shutdown,
    /// A status this daemon does not know (a newer FRR).
    Unknown,
}

impl BfdStatus {
    /// The name it serializes as.
    pub fn as_str(self) -> &'static str {
        match self {
            BfdStatus::Up => "up",
            BfdStatus::Down => "down",
            BfdStatus::Init => "init",
            BfdStatus::Shutdown => "shutdown",
            BfdStatus::Unknown => "unknown",
        }
    }
}

/// One of bfdd's sessions.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct BfdSession {
    pub peer: String,
    pub local: Option<String>,
    pub interface: Option<String>,
    pub status: BfdStatus,
    /// Seconds in the current status (up or down).
    pub status_age_s: Option<u64>,
    /// Why the local side last went down ("ok", "control detection time expired", ...).
    pub diagnostic: Option<String>,
    /// The same, as the peer reported it.
    pub remote_diagnostic: Option<String>,
    /// Negotiated timers: the local receive and transmit intervals and detect multiplier.
    pub receive_interval_ms: Option<u64>,
    pub transmit_interval_ms: Option<u64>,
    pub detect_multiplier: Option<u64>,
}

/// PUT /v1/config, 200.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Applied {
    pub ok: bool,
    pub revision: String,
    /// Unix seconds.
    pub applied_at: f64,
    /// Whether the config was written to the daemon's `--config` file, which it boots at its
    /// next start. False: it runs now, but a restart boots the older config in that file
    /// (`persist_error` says why).
    pub persisted: bool,
    /// Why the config was not kept (the file could not be written, or the daemon runs without
    /// `--config`); null when it was.
    pub persist_error: Option<String>,
}

/// What a config renders to (POST /v1/config/validate).
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct RenderedReport {
    /// The nftables ruleset, as `nft -f -` reads it.
    pub nft: String,
    /// The `ip` commands of the policy routing and the satellite routes.
    pub routes: Vec<String>,
    pub sysctls: BTreeMap<String, String>,
    /// The `tc` commands of the shaper; null when shaping is off.
    pub shaping: Option<Vec<String>>,
    /// What Squid would get; null when the cache is off.
    pub squid_conf: Option<String>,
    /// What unbound would get; null when the resolver is off.
    pub unbound_conf: Option<String>,
}

/// POST /v1/config/validate, 200.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Validated {
    pub ok: bool,
    pub rendered: RenderedReport,
}

/// Every error answer: `{"error": {...}}` with a 4xx or 5xx status.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct ErrorBody {
    pub error: ErrorDetail,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct ErrorDetail {
    /// invalid_config, apply_failed, bad_request, not_found, method_not_allowed, not_running, ...
    pub code: String,
    pub message: String,
    /// The JSON path of the field at fault ("classes[2].match.dports[0]"), when one is.
    pub field: Option<String>,
    /// apply_failed: the apply step that failed (nft, routes, sysctls, squid, dns, ...).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub step: Option<String>,
}

impl ErrorBody {
    pub fn new(code: &str, message: &str, field: Option<&str>) -> ErrorBody {
        ErrorBody {
            error: ErrorDetail {
                code: code.into(),
                message: message.into(),
                field: field.map(String::from),
                step: None,
            },
        }
    }
}
