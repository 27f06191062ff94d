//! The bounds of the config's lists and values, written once: the `#[schemars]` attributes carry
//! them to the schema (so to the API) and `validate()` enforces them.

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

/// `splitter` bounds.
pub const MAX_FLOWS: u32 = 1_000_000;
pub const CONNECT_TIMEOUT_MS: std::ops::RangeInclusive<u64> = 100..=600_000;
pub const IDLE_TIMEOUT_S: std::ops::RangeInclusive<u64> = 1..=604_800;
pub const RELAY_BUFFER_BYTES: std::ops::RangeInclusive<u32> = 4096..=(64 << 20);

/// `hybla` bounds.
pub const RTT0_MS: std::ops::RangeInclusive<u32> = 1..=10_000;
pub const MAX_BASE_RTT_MS: u32 = 10_000;

/// `peer` bounds.
pub const FINGERPRINT_PATTERN: &str = "^sha256:[0-9a-f]{64}$";
pub const MAX_HUB_FINGERPRINTS: usize = 16;
pub const MAX_TERMINAL_FINGERPRINTS: usize = 2;
pub const MAX_TERMINALS: usize = 1024;
pub const MAX_PEER_LISTEN: usize = 16;
pub const PEER_POOL_SIZE: std::ops::RangeInclusive<u32> = 1..=256;
/// `peer.redundancy.*_bytes` at most (16 MiB: a GEO forward link's whole BDP several times over).
pub const PEER_REDUNDANT_BYTES_MAX: u32 = 16 << 20;
/// `peer.redundancy.link_ms` at most (a GEO round trip).
pub const PEER_REDUNDANT_MS_MAX: u32 = 600;

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

/// Below this minimum RTT a path is not geostationary (the shortest GEO round trip is about
/// 480 ms; LEO is 20-60 ms, MEO 120-150 ms): a leg on plain hybla as the default switches to
/// SHORT_PATH_CC, and below it no RTT is read as an allocation delay (satleg_auto.rs).
pub const SHORT_PATH_RTT_US: u32 = 200_000;
/// What plain hybla as the default switches to on a short path (hybla_ld, whose rho has a floor,
/// stays: perigee_hybla::fixed::LD_RHO_MIN).
pub const SHORT_PATH_CC: &str = "bbr";
