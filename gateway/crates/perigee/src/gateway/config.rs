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
    pub schema: u32,
    #[serde(default)]
    pub revision: Option<String>,
    pub role: Role,
    pub interfaces: Interfaces,
    pub served_subnets: Vec<String>,
    #[serde(default)]
    pub splitter: Splitter,
    #[serde(default)]
    pub satellite: Satellite,
    #[serde(default)]
    pub hybla: Hybla,
    #[serde(default)]
    pub classes: Vec<Class>,
    #[serde(default)]
    pub bypass: Vec<Bypass>,
    #[serde(default)]
    pub cache: Cache,
    #[serde(default)]
    pub sysctls: BTreeMap<String, String>,
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
            relay_buffer_bytes: 262_144,
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

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Hybla {
    pub rtt0_ms: u32,
    pub base_rtt_ms: u32,
}

impl Default for Hybla {
    fn default() -> Self {
        Hybla {
            rtt0_ms: 25,
            base_rtt_ms: 0,
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

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Match {
    pub src: Vec<String>,
    pub dst: Vec<String>,
    pub protocol: Option<String>,
    pub dports: Vec<String>,
    pub sports: Vec<String>,
    pub dscp: Vec<u32>,
    pub iifname: Vec<String>,
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
    #[serde(default)]
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
    let len = match l {
        None => max,
        Some(l) => l
            .parse::<u8>()
            .ok()
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
    let one = |p: &str| {
        p.trim()
            .parse::<u16>()
            .ok()
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

fn valid_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 64
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "_-.".contains(c))
}

/// The congestion controls policy may choose for the satellite leg (the API offers the same set).
pub const SUPPORTED_CCS: [&str; 4] = ["hybla", "cubic", "bbr", "reno"];

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
            if r.len() > 128 {
                return Err(err("revision", "longer than 128 characters"));
            }
        }
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
        cidrs("served_subnets", &self.served_subnets)?;
        self.validate_splitter()?;
        self.validate_satellite()?;
        if !(1..=10_000).contains(&self.hybla.rtt0_ms) {
            return Err(err("hybla.rtt0_ms", "must be 1..10000"));
        }
        if self.hybla.base_rtt_ms > 10_000 {
            return Err(err("hybla.base_rtt_ms", "must be 0..10000"));
        }
        self.validate_classes()?;
        self.validate_bypass()?;
        self.validate_cache()?;
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
        if !(1..=600_000).contains(&s.connect_timeout_ms) {
            return Err(err("splitter.connect_timeout_ms", "must be 1..600000"));
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
                "must be one of hybla, cubic, bbr, reno",
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
        for (name, v) in [("initcwnd", s.initcwnd), ("initrwnd", s.initrwnd)] {
            if v > 1000 {
                return Err(err(
                    format!("satellite.{name}"),
                    "must be 0..1000 (0 = kernel default)",
                ));
            }
        }
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
            if !dsts.insert(dst.to_string()) {
                return Err(err(format!("satellite.routes[{i}].dst"), "duplicate route"));
            }
        }
        Ok(())
    }

    fn validate_classes(&self) -> Result<(), ConfigError> {
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
            let m = &c.matcher;
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
            if let Some(cc) = &c.satellite.congestion_control {
                if !cc.is_empty() && !valid_cc_name(cc) {
                    return Err(err(
                        f("satellite.congestion_control"),
                        "must be one of hybla, cubic, bbr, reno",
                    ));
                }
            }
            if c.satellite.buffer_bytes > (1 << 30) {
                return Err(err(f("satellite.buffer_bytes"), "must be at most 1 GiB"));
            }
        }
        Ok(())
    }

    fn validate_bypass(&self) -> Result<(), ConfigError> {
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
        "hybla": {"rtt0_ms": 25, "base_rtt_ms": 0},
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
