//! What happens to which traffic: the classes (matched by priority), the bypass entries and the
//! remote sites the stats count by.
use super::limits::*;
use super::{Cidr, CongestionControl, IfName, ObjectName, PortRange};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

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
    pub const ALL: [BypassProtocol; 6] = [
        BypassProtocol::Tcp,
        BypassProtocol::Udp,
        BypassProtocol::Esp,
        BypassProtocol::Ah,
        BypassProtocol::Icmp,
        BypassProtocol::Any,
    ];

    /// Whether the protocol has ports to match.
    pub fn has_ports(self) -> bool {
        matches!(self, BypassProtocol::Tcp | BypassProtocol::Udp)
    }

    /// The protocols whose entries may list ports (emitted into the schema as `x-protocols` on
    /// `BypassRule.ports`, so forms ask the schema instead of restating it).
    pub fn with_ports() -> Vec<BypassProtocol> {
        Self::ALL.into_iter().filter(|p| p.has_ports()).collect()
    }
}

/// The IPsec entries every config carries (`builtin: true`): ESP, AH, IKE, NAT-T and IKE over TCP.
/// The one list: the schema carries it (`x-builtin` on `GatewayConfig.bypass`), and the control
/// plane, satlab and the dashboard read it from there.
pub fn builtin_bypass() -> Vec<Bypass> {
    let rule = |name: &str, protocol, port: Option<u16>| Bypass {
        name: name.parse().expect("a valid object name"),
        builtin: true,
        protocol,
        cidrs: Vec::new(),
        ports: port
            .map(|p| PortRange { lo: p, hi: p })
            .into_iter()
            .collect(),
    };
    vec![
        rule("ipsec-esp", BypassProtocol::Esp, None),
        rule("ipsec-ah", BypassProtocol::Ah, None),
        rule("ike", BypassProtocol::Udp, Some(500)),
        rule("nat-t", BypassProtocol::Udp, Some(4500)),
        rule("ike-tcp", BypassProtocol::Tcp, Some(4500)),
    ]
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
    #[schemars(length(max = MAX_PORTS), extend("x-protocols" = BypassProtocol::with_ports()))]
    pub ports: Vec<PortRange>,
}
