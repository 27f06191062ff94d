//! `GatewayConfig`: the serde types of docs/control-protocol.md and their strict validation.
//! Every error names the JSON path of the offending field so the API can point at it.
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashSet};
use std::net::IpAddr;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    pub field: String,
    pub message: String,
}

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.field, self.message)
    }
}

fn err(field: impl Into<String>, message: impl Into<String>) -> ConfigError {
    ConfigError {
        field: field.into(),
        message: message.into(),
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    Hub,
    Terminal,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GatewayConfig {
    /// Only 1 exists; a missing `schema` means 1 (the API sends it anyway).
    #[serde(default = "schema_one")]
    pub schema: u32,
    /// Absent = none; JSON null is refused like any other null (the API never sends one).
    #[serde(default, deserialize_with = "present")]
    pub revision: Option<String>,
    pub role: Role,
    pub interfaces: Interfaces,
    pub served_subnets: Vec<String>,
    #[serde(default)]
    pub splitter: Splitter,
    #[serde(default)]
    pub satellite: Satellite,
    #[serde(default)]
    pub terrestrial: Terrestrial,
    #[serde(default)]
    pub hybla: Hybla,
    #[serde(default)]
    pub classes: Vec<Class>,
    #[serde(default)]
    pub bypass: Vec<Bypass>,
    #[serde(default)]
    pub cache: Cache,
    #[serde(default)]
    pub shaping: Shaping,
    #[serde(default)]
    pub sysctls: BTreeMap<String, String>,
}

fn schema_one() -> u32 {
    1
}

/// `Option` fields whose absence means None but whose explicit `null` is a type error, so that
/// the gateway and the API's pydantic model agree on what a valid document is.
fn present<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    T::deserialize(d).map(Some)
}

fn tcp() -> Option<String> {
    Some("tcp".into())
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Interfaces {
    pub lan: Vec<String>,
    pub satellite: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Splitter {
    pub enabled: bool,
    pub tproxy_port: u32,
    pub max_flows: u32,
    pub connect_timeout_ms: u64,
    pub idle_timeout_s: u64,
    pub relay_buffer_bytes: u32,
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
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SatRoute {
    pub dst: String,
    pub via: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Satellite {
    pub congestion_control: String,
    pub sndbuf_bytes: u64,
    pub rcvbuf_bytes: u64,
    pub pacing_rate_bps: u64,
    pub initcwnd: u32,
    pub initrwnd: u32,
    pub routes: Vec<SatRoute>,
}

impl Default for Satellite {
    fn default() -> Self {
        Satellite {
            congestion_control: "hybla".into(),
            sndbuf_bytes: 4 << 20,
            rcvbuf_bytes: 4 << 20,
            pacing_rate_bps: 0,
            initcwnd: 10,
            initrwnd: 10,
            routes: Vec::new(),
        }
    }
}

/// The other leg of each split flow: the client side at a terminal, the server side at a hub.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Terrestrial {
    /// Congestion control of the terrestrial socket; "" (default) = the namespace's default
    /// (net.ipv4.tcp_congestion_control), which a container usually cannot change itself.
    pub congestion_control: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Hybla {
    pub rtt0_ms: u32,
    pub base_rtt_ms: u32,
    /// Operator cwnd ceiling in segments for Perigee's BPF Hybla (docs/hybla.md); 0 = none
    /// (only the built-in 65536). The kernel's tcp_hybla cannot honour a nonzero value.
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

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Action {
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

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Match {
    pub src: Vec<String>,
    pub dst: Vec<String>,
    /// tcp | udp | any; absent = tcp (the API's default), null refused.
    #[serde(deserialize_with = "present")]
    pub protocol: Option<String>,
    pub dports: Vec<String>,
    pub sports: Vec<String>,
    pub dscp: Vec<u32>,
    pub iifname: Vec<String>,
}

impl Default for Match {
    fn default() -> Self {
        Match {
            src: Vec::new(),
            dst: Vec::new(),
            protocol: tcp(),
            dports: Vec::new(),
            sports: Vec::new(),
            dscp: Vec::new(),
            iifname: Vec::new(),
        }
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ClassSatellite {
    pub congestion_control: Option<String>,
    pub buffer_bytes: u64,
    pub pacing_rate_bps: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Class {
    pub name: String,
    /// Required: the evaluation order is too important to default.
    pub priority: u32,
    #[serde(rename = "match", default)]
    pub matcher: Match,
    pub action: Action,
    #[serde(default)]
    pub satellite: ClassSatellite,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Bypass {
    pub name: String,
    #[serde(default)]
    pub builtin: bool,
    pub protocol: String,
    #[serde(default)]
    pub cidrs: Vec<String>,
    #[serde(default)]
    pub ports: Vec<String>,
}

/// The `cache` section is the Squid crate's own policy type (same JSON, validated there too).
pub type Cache = perigee_squid::CacheConfig;

/// Aggregate egress shaper on `interfaces.satellite` (`tc`, docs/control-protocol.md *Shaping*):
/// an HTB root whose one class holds everything leaving the interface to `rate_bps`, over a
/// FIFO leaf. Per-socket pacing caps each flow at the link rate, so N flows together send N
/// times it and overflow the modem's queue; this caps their sum, so the queue that builds is
/// the gateway's own, where TCP small queues hold each local socket to a couple of packets.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Shaping {
    /// Default false: the interface keeps the qdisc it had, nothing is shaped.
    pub enabled: bool,
    /// Default 0 (none); required when enabled: 8000..100000000000 bit/s, counted over each
    /// packet as the interface sends it (an Ethernet frame without preamble and FCS) plus
    /// `overhead_bytes`. Set it to the modem's rate for this direction, not above.
    pub rate_bps: u64,
    /// Default 0: bytes added to every packet's length when charging it against `rate_bps`
    /// (the framing the modem adds and counts, e.g. its encapsulation), 0..256.
    pub overhead_bytes: u32,
    /// Default 1000 (the kernel's txqueuelen): the leaf FIFO's length in packets, 16..100000.
    /// Local TCP senders keep only ~2 packets each in it (TCP small queues), so it fills only
    /// with forwarded traffic or thousands of flows; when full, new packets are dropped.
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

/// `shaping` bounds (the API's model has the same ones).
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

/// An IPv4 or IPv6 prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cidr {
    pub addr: IpAddr,
    pub len: u8,
}

impl Cidr {
    pub fn is_v4(&self) -> bool {
        self.addr.is_ipv4()
    }

    /// The prefix with its host bits cleared ("10.0.0.7/24" → "10.0.0.0/24").
    pub fn network(&self) -> Cidr {
        let addr = match self.addr {
            IpAddr::V4(a) => {
                let mask = u32::MAX.checked_shl(32 - u32::from(self.len)).unwrap_or(0);
                IpAddr::V4((u32::from(a) & mask).into())
            }
            IpAddr::V6(a) => {
                let mask = u128::MAX
                    .checked_shl(128 - u32::from(self.len))
                    .unwrap_or(0);
                IpAddr::V6((u128::from(a) & mask).into())
            }
        };
        Cidr {
            addr,
            len: self.len,
        }
    }

    pub fn contains(&self, ip: IpAddr) -> bool {
        match (self.addr, ip) {
            (IpAddr::V4(n), IpAddr::V4(a)) => {
                let mask = if self.len == 0 {
                    0
                } else {
                    u32::MAX << (32 - self.len)
                };
                u32::from(n) & mask == u32::from(a) & mask
            }
            (IpAddr::V6(n), IpAddr::V6(a)) => {
                let mask = if self.len == 0 {
                    0
                } else {
                    u128::MAX << (128 - self.len)
                };
                u128::from(n) & mask == u128::from(a) & mask
            }
            _ => false,
        }
    }
}

impl std::fmt::Display for Cidr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.addr, self.len)
    }
}

pub fn parse_cidr(s: &str) -> Result<Cidr, String> {
    let (a, l) = match s.split_once('/') {
        Some((a, l)) => (a, Some(l)),
        None => (s, None),
    };
    let addr: IpAddr = a
        .parse()
        .map_err(|_| format!("'{s}' is not an IPv4/IPv6 CIDR"))?;
    let max = if addr.is_ipv4() { 32 } else { 128 };
    // Digits only: u8's parser would also take "+24".
    let len = match l {
        None => max,
        Some(l) => Some(l)
            .filter(|l| (1..=3).contains(&l.len()) && l.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|l| l.parse::<u8>().ok())
            .filter(|l| *l <= max)
            .ok_or(format!("'{s}': bad prefix length"))?,
    };
    Ok(Cidr { addr, len })
}

/// An inclusive port range; a single port is `lo == hi`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PortRange {
    pub lo: u16,
    pub hi: u16,
}

impl PortRange {
    pub fn contains(&self, p: u16) -> bool {
        self.lo <= p && p <= self.hi
    }
}

impl std::fmt::Display for PortRange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.lo == self.hi {
            write!(f, "{}", self.lo)
        } else {
            write!(f, "{}-{}", self.lo, self.hi)
        }
    }
}

pub fn parse_ports(s: &str) -> Result<PortRange, String> {
    // 1-5 ASCII digits: no spaces, no sign (the API's pattern is the same).
    let one = |p: &str| {
        Some(p)
            .filter(|p| (1..=5).contains(&p.len()) && p.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|p| p.parse::<u16>().ok())
            .filter(|p| *p > 0)
            .ok_or(format!("'{s}' is not a port or range"))
    };
    let r = match s.split_once('-') {
        Some((a, b)) => PortRange {
            lo: one(a)?,
            hi: one(b)?,
        },
        None => {
            let p = one(s)?;
            PortRange { lo: p, hi: p }
        }
    };
    if r.lo > r.hi {
        return Err(format!("'{s}': range start is above its end"));
    }
    Ok(r)
}

/// Interface names go into nft text verbatim, so allow only what the kernel allows and nft can quote.
fn valid_ifname(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 15
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "._-@:".contains(c))
}

/// Class and bypass names: 1-64 of [A-Za-z0-9_.-], starting with a letter or digit.
fn valid_name(s: &str) -> bool {
    s.len() <= 64
        && s.chars().next().is_some_and(|c| c.is_ascii_alphanumeric())
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "_-.".contains(c))
}

fn valid_revision(s: &str) -> bool {
    s.len() <= 64
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "_.:-".contains(c))
}

/// Upper bounds on list lengths (the API's model has the same ones).
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
/// Pacing caps, bit/s (100 Gbit/s).
pub const MAX_PACING_BPS: u64 = 100_000_000_000;
pub const MAX_PRIORITY: u32 = 65_535;

fn at_most(field: &str, len: usize, max: usize) -> Result<(), ConfigError> {
    if len > max {
        return Err(err(field, format!("at most {max} entries")));
    }
    Ok(())
}

/// The congestion controls policy may choose for the satellite leg (the API offers the same set).
pub const SUPPORTED_CCS: [&str; 5] = ["hybla", "hybla_ld", "cubic", "bbr", "reno"];

pub fn valid_cc_name(s: &str) -> bool {
    SUPPORTED_CCS.contains(&s)
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
        if let Some(r) = &self.revision {
            if !valid_revision(r) {
                return Err(err("revision", "at most 64 of [A-Za-z0-9_.:-]"));
            }
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
            if !valid_ifname(n) {
                return Err(err(
                    format!("interfaces.lan[{i}]"),
                    format!("'{n}' is not an interface name"),
                ));
            }
            if !seen.insert(n) {
                return Err(err(
                    format!("interfaces.lan[{i}]"),
                    format!("duplicate interface '{n}'"),
                ));
            }
        }
        if !valid_ifname(&self.interfaces.satellite) {
            return Err(err("interfaces.satellite", "not an interface name"));
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
        cidrs("served_subnets", &self.served_subnets)?;
        self.validate_splitter()?;
        self.validate_satellite()?;
        let t = &self.terrestrial.congestion_control;
        if !t.is_empty() && !valid_cc_name(t) {
            return Err(err(
                "terrestrial.congestion_control",
                "must be empty (system default) or one of hybla, hybla_ld, cubic, bbr, reno",
            ));
        }
        if !(1..=10_000).contains(&self.hybla.rtt0_ms) {
            return Err(err("hybla.rtt0_ms", "must be 1..10000"));
        }
        if self.hybla.base_rtt_ms > 10_000 {
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
        self.validate_shaping()?;
        for (k, v) in &self.sysctls {
            let f = format!("sysctls.{k}");
            if !SYSCTL_ALLOW.contains(&k.as_str()) {
                return Err(err(f, "key is not in the sysctl allow-list"));
            }
            if v.is_empty()
                || v.len() > 64
                || !v
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || " \t._-".contains(c))
            {
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
        if !(1..=1_000_000).contains(&s.max_flows) {
            return Err(err("splitter.max_flows", "must be 1..1000000"));
        }
        if !(100..=600_000).contains(&s.connect_timeout_ms) {
            return Err(err("splitter.connect_timeout_ms", "must be 100..600000"));
        }
        if !(1..=604_800).contains(&s.idle_timeout_s) {
            return Err(err("splitter.idle_timeout_s", "must be 1..604800"));
        }
        if !(4096..=(64 << 20)).contains(&s.relay_buffer_bytes) {
            return Err(err("splitter.relay_buffer_bytes", "must be 4096..67108864"));
        }
        Ok(())
    }

    fn validate_satellite(&self) -> Result<(), ConfigError> {
        let s = &self.satellite;
        if !valid_cc_name(&s.congestion_control) {
            return Err(err(
                "satellite.congestion_control",
                "must be one of hybla, hybla_ld, cubic, bbr, reno",
            ));
        }
        for (name, v) in [
            ("sndbuf_bytes", s.sndbuf_bytes),
            ("rcvbuf_bytes", s.rcvbuf_bytes),
        ] {
            if v > (1 << 30) {
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
        for (name, v) in [("initcwnd", s.initcwnd), ("initrwnd", s.initrwnd)] {
            if v > 1000 {
                return Err(err(
                    format!("satellite.{name}"),
                    "must be 0..1000 (0 = kernel default)",
                ));
            }
        }
        at_most("satellite.routes", s.routes.len(), MAX_ROUTES)?;
        let mut dsts = HashSet::new();
        for (i, r) in s.routes.iter().enumerate() {
            let dst =
                parse_cidr(&r.dst).map_err(|m| err(format!("satellite.routes[{i}].dst"), m))?;
            let via: IpAddr = r
                .via
                .parse()
                .map_err(|_| err(format!("satellite.routes[{i}].via"), "not an IP address"))?;
            if via.is_ipv4() != dst.is_v4() {
                return Err(err(
                    format!("satellite.routes[{i}].via"),
                    "address family differs from dst",
                ));
            }
            // Host bits do not make a different route.
            if !dsts.insert(dst.network().to_string()) {
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
            if !valid_name(&c.name) {
                return Err(err(f("name"), "names are 1-64 of [A-Za-z0-9_.-]"));
            }
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
            cidrs(&f("match.src"), &m.src)?;
            cidrs(&f("match.dst"), &m.dst)?;
            let proto = m.protocol.as_deref().unwrap_or("any");
            if !["tcp", "udp", "any"].contains(&proto) {
                return Err(err(f("match.protocol"), "must be tcp, udp or any"));
            }
            ports(&f("match.dports"), &m.dports)?;
            ports(&f("match.sports"), &m.sports)?;
            if proto == "any" && !(m.dports.is_empty() && m.sports.is_empty()) {
                return Err(err(f("match.protocol"), "ports need protocol tcp or udp"));
            }
            if c.action == Action::Cache && proto != "tcp" {
                return Err(err(f("match.protocol"), "action cache needs protocol tcp"));
            }
            if let Some(j) = m.dscp.iter().position(|d| *d > 63) {
                return Err(err(
                    format!("classes[{i}].match.dscp[{j}]"),
                    "DSCP is 0..63",
                ));
            }
            if let Some(j) = m.iifname.iter().position(|n| !valid_ifname(n)) {
                return Err(err(
                    format!("classes[{i}].match.iifname[{j}]"),
                    "not an interface name",
                ));
            }
            // null = inherit; an empty string is refused like in the API.
            if let Some(cc) = &c.satellite.congestion_control {
                if !valid_cc_name(cc) {
                    return Err(err(
                        f("satellite.congestion_control"),
                        "must be one of hybla, hybla_ld, cubic, bbr, reno",
                    ));
                }
            }
            if c.satellite.buffer_bytes > (1 << 30) {
                return Err(err(f("satellite.buffer_bytes"), "must be at most 1 GiB"));
            }
            if c.satellite.pacing_rate_bps > MAX_PACING_BPS {
                return Err(err(
                    f("satellite.pacing_rate_bps"),
                    "must be at most 100000000000 (0 = inherit)",
                ));
            }
        }
        Ok(())
    }

    fn validate_bypass(&self) -> Result<(), ConfigError> {
        at_most("bypass", self.bypass.len(), MAX_BYPASS)?;
        let mut names = HashSet::new();
        for (i, b) in self.bypass.iter().enumerate() {
            let f = |x: &str| format!("bypass[{i}].{x}");
            if !valid_name(&b.name) {
                return Err(err(f("name"), "names are 1-64 of [A-Za-z0-9_.-]"));
            }
            if !names.insert(b.name.clone()) {
                return Err(err(
                    f("name"),
                    format!("duplicate bypass name '{}'", b.name),
                ));
            }
            if !["tcp", "udp", "esp", "ah", "icmp", "any"].contains(&b.protocol.as_str()) {
                return Err(err(f("protocol"), "must be tcp, udp, esp, ah, icmp or any"));
            }
            at_most(&f("cidrs"), b.cidrs.len(), MAX_BYPASS_CIDRS)?;
            at_most(&f("ports"), b.ports.len(), MAX_PORTS)?;
            cidrs(&f("cidrs"), &b.cidrs)?;
            ports(&f("ports"), &b.ports)?;
            if !b.ports.is_empty() && !["tcp", "udp"].contains(&b.protocol.as_str()) {
                return Err(err(f("ports"), "ports need protocol tcp or udp"));
            }
            if b.protocol == "any" && b.cidrs.is_empty() {
                return Err(err(
                    f("cidrs"),
                    "protocol any needs cidrs (it would bypass everything)",
                ));
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
        if self.cache.enabled {
            // Squid's ACL refuses /0 (it would make the cache an open proxy).
            perigee_squid::parse_served_subnets(&self.served_subnets)
                .map_err(|e| err(e.field, e.message))?;
        }
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

    pub fn served(&self) -> Vec<Cidr> {
        self.served_subnets
            .iter()
            .filter_map(|s| parse_cidr(s).ok())
            .collect()
    }
}

fn cidrs(field: &str, list: &[String]) -> Result<Vec<Cidr>, ConfigError> {
    list.iter()
        .enumerate()
        .map(|(i, s)| parse_cidr(s).map_err(|m| err(format!("{field}[{i}]"), m)))
        .collect()
}

fn ports(field: &str, list: &[String]) -> Result<Vec<PortRange>, ConfigError> {
    list.iter()
        .enumerate()
        .map(|(i, s)| parse_ports(s).map_err(|m| err(format!("{field}[{i}]"), m)))
        .collect()
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

    #[test]
    fn enabled_cache_refuses_a_served_slash_zero() {
        let mut j = example_json();
        j["cache"]["enabled"] = true.into();
        j["served_subnets"] = serde_json::json!(["10.71.1.0/24", "0.0.0.0/0"]);
        assert_eq!(from_value(j).unwrap_err().field, "served_subnets[1]");
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
            cfg.terrestrial.congestion_control, "",
            "default: system default"
        );
        let e = with(&["terrestrial", "congestion_control"], "vegas".into()).unwrap_err();
        assert_eq!(e.field, "terrestrial.congestion_control");
        let cfg = with(&["terrestrial", "congestion_control"], "cubic".into()).unwrap();
        assert_eq!(cfg.terrestrial.congestion_control, "cubic");
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
        assert_eq!(c.classes[0].matcher.protocol.as_deref(), Some("tcp"));
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
