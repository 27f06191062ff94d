//! How split flows are carried: the splitter, the satellite and terrestrial legs, Hybla and the
//! satellite interface's shaper.
use super::limits::*;
use super::Cidr;
use perigee_types::IpAddrSchema;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::net::IpAddr;

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

impl CongestionControl {
    /// What a leg runs when this one is not registered: hybla_ld's own algorithm without loss
    /// differentiation (a kernel whose verifier refuses hybla_ld still takes hybla).
    pub fn fallback(self) -> Option<CongestionControl> {
        match self {
            CongestionControl::HyblaLd => Some(CongestionControl::Hybla),
            _ => None,
        }
    }
}

impl std::fmt::Display for CongestionControl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
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
    /// The satellite leg's congestion control (classes may choose another). hybla_ld by default:
    /// Hybla's growth, and a link's bit errors (a rain fade, a LEO path change) do not halve it
    /// (docs/hybla.md, *The default*); where it cannot be registered the leg runs hybla.
    #[schemars(extend(
        "x-short-path-rtt-ms" = SHORT_PATH_RTT_US / 1000,
        "x-short-path-cc" = SHORT_PATH_CC,
        "x-ld-rho-min" = perigee_hybla::fixed::LD_RHO_MIN
    ))]
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
    /// Initial receive window advertised on the satellite routes, segments; 0 = the kernel's: as
    /// much as the receive buffer holds, so the far end's first flights are not held to a few
    /// segments (docs/hybla.md, *The default*: on a DAMA link they are what the first grant is
    /// requested from).
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
            congestion_control: CongestionControl::HyblaLd,
            sndbuf_bytes: 4 << 20,
            rcvbuf_bytes: 4 << 20,
            pacing_rate_bps: 0,
            initcwnd: 10,
            initrwnd: 0,
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

impl Default for Hybla {
    fn default() -> Self {
        Hybla {
            rtt0_ms: 25,
            base_rtt_ms: 0,
            cwnd_max: 0,
        }
    }
}

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
    #[schemars(range(max = MAX_PACING_BPS), extend("x-minimum-nonzero" = MIN_SHAPING_BPS))]
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
