//! Per-flow telemetry: TCP_INFO parsing and the `Flow` record of docs/control-protocol.md.
use super::config::Action;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// One socket's TCP_INFO, as sampled (every second while the flow is open, once at its end).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TcpInfo {
    /// The congestion control the socket runs.
    pub cc: String,
    /// The kernel's TCP state name ("established", "fin_wait1", ...).
    pub state: String,
    pub srtt_us: u32,
    pub rttvar_us: u32,
    pub min_rtt_us: u32,
    pub cwnd: u32,
    pub ssthresh: u32,
    pub mss: u32,
    pub retrans_total: u32,
    pub lost: u32,
    pub delivery_rate_bps: u64,
    pub pacing_rate_bps: u64,
    pub bytes_acked: u64,
    pub bytes_received: u64,
    pub notsent_bytes: u32,
    /// Payload bytes handed to IP, retransmissions included (Linux 4.19+; 0 before).
    #[serde(default)]
    pub bytes_sent: u64,
    #[serde(default)]
    pub bytes_retrans: u64,
    /// Segments sent and received, pure ACKs included; of them, those carrying data.
    #[serde(default)]
    pub segs_out: u32,
    #[serde(default)]
    pub segs_in: u32,
    #[serde(default)]
    pub data_segs_out: u32,
    #[serde(default)]
    pub data_segs_in: u32,
    /// The connection uses TCP timestamps (12 more bytes in every segment's header).
    #[serde(default)]
    pub timestamps: bool,
    /// What this leg delivered per second over the last sample: payload the peer acknowledged
    /// (`bytes_acked` delta), and payload that arrived in order (`bytes_received` delta), bit/s.
    #[serde(default)]
    pub tx_bps: f64,
    #[serde(default)]
    pub rx_bps: f64,
}

fn state_name(s: u8) -> &'static str {
    match s {
        1 => "established",
        2 => "syn_sent",
        3 => "syn_recv",
        4 => "fin_wait1",
        5 => "fin_wait2",
        6 => "time_wait",
        7 => "close",
        8 => "close_wait",
        9 => "last_ack",
        10 => "listen",
        11 => "closing",
        _ => "unknown",
    }
}

fn u32_at(b: &[u8], off: usize) -> u32 {
    b.get(off..off + 4)
        .map(|s| u32::from_ne_bytes(s.try_into().unwrap_or([0; 4])))
        .unwrap_or(0)
}

fn u64_at(b: &[u8], off: usize) -> u64 {
    b.get(off..off + 8)
        .map(|s| u64::from_ne_bytes(s.try_into().unwrap_or([0; 8])))
        .unwrap_or(0)
}

/// Parse the kernel's `struct tcp_info` (include/uapi/linux/tcp.h); fields past the end of an
/// older kernel's shorter struct read as 0. Rates are converted from bytes/s to bits/s.
pub fn parse_tcp_info(b: &[u8], cc: &str) -> TcpInfo {
    TcpInfo {
        cc: cc.to_string(),
        state: state_name(b.first().copied().unwrap_or(0)).to_string(),
        lost: u32_at(b, 32),
        mss: u32_at(b, 16),
        srtt_us: u32_at(b, 68),
        rttvar_us: u32_at(b, 72),
        ssthresh: u32_at(b, 76),
        cwnd: u32_at(b, 80),
        retrans_total: u32_at(b, 100),
        pacing_rate_bps: u64_at(b, 104).saturating_mul(8),
        bytes_acked: u64_at(b, 120),
        bytes_received: u64_at(b, 128),
        notsent_bytes: u32_at(b, 144),
        min_rtt_us: u32_at(b, 148),
        delivery_rate_bps: u64_at(b, 160).saturating_mul(8),
        bytes_sent: u64_at(b, 200),
        bytes_retrans: u64_at(b, 208),
        segs_out: u32_at(b, 136),
        segs_in: u32_at(b, 140),
        data_segs_in: u32_at(b, 152),
        data_segs_out: u32_at(b, 156),
        timestamps: b.get(5).is_some_and(|o| o & TCPI_OPT_TIMESTAMPS != 0),
        tx_bps: 0.0,
        rx_bps: 0.0,
    }
}

/// `tcpi_options` bit: timestamps negotiated.
const TCPI_OPT_TIMESTAMPS: u8 = 1;

/// Which of a flow's two sockets faces the satellite.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum LegSide {
    Client,
    #[default]
    Server,
}

/// Both sockets of a split flow.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
pub struct Legs {
    /// The socket toward the client (accepted).
    pub client: TcpInfo,
    /// The socket toward the server (the gateway's own connect).
    pub server: TcpInfo,
    /// Which of the two faces the satellite: the client's at a hub, the server's at a terminal.
    pub satellite: LegSide,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
#[schemars(transform = perigee_types::flat_enum)]
pub enum FlowState {
    /// The connect toward the server (or the hub's answer on the peer path) is under way.
    #[default]
    Connecting,
    /// Both directions relay.
    Established,
    /// One direction has ended.
    HalfClosed,
    /// Ended (closed flows only).
    Closed,
}

/// Which way a flow crossed the satellite: `direct` (the terminal's own connection, intercepted
/// again at a hub), or `peer` (a warm, authenticated connection between the two gateways).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum FlowPath {
    #[default]
    Direct,
    Peer,
}

/// Why a flow's satellite leg runs the congestion control it runs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
#[schemars(transform = perigee_types::flat_enum)]
pub enum CcReason {
    /// `satellite.congestion_control`, the config's default for every flow.
    #[default]
    Default,
    /// The flow's class names one (`classes[].satellite.congestion_control`).
    Class,
    /// The one asked for is not registered here: hybla for hybla_ld, else the system default.
    Fallback,
    /// The default, switched by what the leg measured (docs/hybla.md, *The default*): from
    /// hybla_ld to hybla on a long path whose RTT shows a capacity allocation delay (DAMA/BoD), or
    /// from plain hybla to BBR on a short (non-GEO) path.
    Automatic,
}

impl CcReason {
    pub fn as_str(self) -> &'static str {
        match self {
            CcReason::Default => "default",
            CcReason::Class => "class",
            CcReason::Fallback => "fallback",
            CcReason::Automatic => "automatic",
        }
    }
}

/// A flow's satellite leg over its life so far (docs/hybla.md, *What the operator sees*): what
/// it runs and why, and how much of what this gateway sent on it went twice.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SatelliteLeg {
    /// The congestion control the satellite-facing socket runs for this flow.
    pub cc: String,
    pub cc_reason: CcReason,
    /// Data segments this gateway sent on the leg for this flow (a peer connection's earlier
    /// flows not included), and of them retransmissions.
    pub segments_sent: u64,
    pub segments_retransmitted: u64,
    /// segments_retransmitted / segments_sent, percent (0 before anything was sent): the
    /// leg's loss as the sender repaired it.
    pub retransmit_pct: f64,
}

/// One split flow, live or closed (docs/control-protocol.md, *Flow*).
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
pub struct Flow {
    /// Unique within this daemon's run.
    pub id: u64,
    pub state: FlowState,
    /// The class that matched ("default" when none did).
    pub class: String,
    pub action: Action,
    /// "ip:port" ("[v6]:port" for IPv6).
    pub client: String,
    /// The server's "ip:port", the flow's original destination.
    pub server: String,
    /// 4 or 6.
    pub family: u8,
    /// Unix time, seconds.
    pub started_at: f64,
    pub ended_at: Option<f64>,
    /// Why it ended (closed flows): "eof", "reset", "idle", "connect_failed: ...".
    pub end_reason: Option<String>,
    /// Bytes the relay moved from one socket to the other (client → server, server → client).
    pub bytes_up: u64,
    /// Server to client, bytes relayed.
    pub bytes_down: u64,
    /// What crossed the satellite leg over the last sample, bit/s (docs/splitter.md, *Rates*):
    /// toward the server (`up`) and toward the client (`down`), each from the kernel's count of
    /// delivered bytes on the satellite-facing socket, never from bytes written into it.
    pub rate_up_bps: f64,
    pub rate_down_bps: f64,
    pub legs: Legs,
    /// Which way the flow crossed the satellite (docs/splitter.md).
    #[serde(default)]
    pub path: FlowPath,
    /// Who terminated the client's connection: the splitter, or Squid (the cache; its legs are
    /// read from the kernel with sock_diag, docs/cache.md *Live connections*).
    #[serde(default)]
    pub relay: Relay,
    /// The remote site the client belongs to (`sites` in the config; "other" when none matches).
    #[serde(default = "other_site")]
    pub site: String,
    /// The DSCP the re-originated leg's packets carry (the client's, or the class's `set_dscp`);
    /// None when it could not be read.
    #[serde(default)]
    pub dscp: Option<u8>,
    /// Squid's flows: the requests the access log recorded on this client connection so far.
    #[serde(default)]
    pub cache: Option<CacheRequests>,
    /// The satellite leg: its congestion control and why, its retransmissions (Squid's flows:
    /// the congestion control only). None from a gateway that does not report it.
    #[serde(default)]
    pub satellite: Option<SatelliteLeg>,
}

/// The access-log side of a cache flow: what Squid did with the requests of one client
/// connection (docs/cache.md).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CacheRequests {
    pub requests: u64,
    pub hits: u64,
    pub misses: u64,
    /// Host and Squid result code (TCP_HIT, TCP_MISS, ...) of the latest request.
    pub host: String,
    pub result: String,
    /// Bytes Squid sent to the client, of them those served from the cache, and the body bytes
    /// it fetched from origins.
    pub bytes_to_client: u64,
    pub bytes_from_cache: u64,
    pub bytes_from_origin: u64,
}

pub use super::config::OTHER_SITE;

fn other_site() -> String {
    OTHER_SITE.into()
}

/// Who relays a flow's bytes between its two sockets.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Relay {
    #[default]
    Splitter,
    Squid,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_known_offsets() {
        let mut b = vec![0u8; 232];
        b[0] = 1;
        b[16..20].copy_from_slice(&1448u32.to_ne_bytes());
        b[68..72].copy_from_slice(&600_000u32.to_ne_bytes());
        b[76..80].copy_from_slice(&0x7fff_ffffu32.to_ne_bytes());
        b[80..84].copy_from_slice(&10u32.to_ne_bytes());
        b[100..104].copy_from_slice(&3u32.to_ne_bytes());
        b[104..112].copy_from_slice(&1_000_000u64.to_ne_bytes());
        b[148..152].copy_from_slice(&550_000u32.to_ne_bytes());
        b[160..168].copy_from_slice(&125_000u64.to_ne_bytes());
        let t = parse_tcp_info(&b, "hybla");
        assert_eq!(t.state, "established");
        assert_eq!(t.mss, 1448);
        assert_eq!(t.srtt_us, 600_000);
        assert_eq!(t.cwnd, 10);
        assert_eq!(t.retrans_total, 3);
        assert_eq!(t.pacing_rate_bps, 8_000_000);
        assert_eq!(t.min_rtt_us, 550_000);
        assert_eq!(t.delivery_rate_bps, 1_000_000);
        assert_eq!(t.cc, "hybla");
    }

    #[test]
    fn short_struct_reads_zero() {
        let t = parse_tcp_info(&[8u8; 10], "cubic");
        assert_eq!(t.state, "close_wait");
        assert_eq!(t.min_rtt_us, 0);
        assert_eq!(t.delivery_rate_bps, 0);
    }

    #[test]
    fn real_socket_info() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        use std::os::fd::AsRawFd;
        let raw = crate::gateway::sys::tcp_info_raw(c.as_raw_fd()).unwrap();
        let t = parse_tcp_info(&raw, &crate::gateway::sys::get_cc(c.as_raw_fd()));
        assert_eq!(t.state, "established");
        assert!(t.cwnd > 0);
        assert!(!t.cc.is_empty());
    }
}
