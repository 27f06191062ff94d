//! unbound.conf from the `dns` policy: a forwarding cache on port 53 of every local address,
//! answering only the served subnets and the gateway itself.

use std::fmt::Write;
use std::path::{Path, PathBuf};

use crate::config::{DnsConfig, Upstream};
use perigee_types::Cidr;

/// Where this gateway's unbound keeps its files (never the system's /etc/unbound).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnboundPaths {
    /// Persistent: unbound.conf and its log (default /var/lib/perigee/dns).
    pub state_dir: PathBuf,
    /// Volatile: pid file and control socket (default /run/perigee/dns).
    pub run_dir: PathBuf,
    /// The user unbound drops to once its sockets are open; "" keeps root (used only where
    /// the system has no such user).
    pub user: String,
}

impl Default for UnboundPaths {
    fn default() -> Self {
        UnboundPaths {
            state_dir: PathBuf::from("/var/lib/perigee/dns"),
            run_dir: PathBuf::from("/run/perigee/dns"),
            user: DEFAULT_USER.into(),
        }
    }
}

/// Debian's unbound package creates this user.
pub const DEFAULT_USER: &str = "unbound";

impl UnboundPaths {
    pub fn conf(&self) -> PathBuf {
        self.state_dir.join("unbound.conf")
    }
    /// Where apply writes a candidate before the program's check (the supervisor's choice).
    pub fn candidate_conf(&self) -> PathBuf {
        perigee_child::candidate_of(&self.conf())
    }
    pub fn log(&self) -> PathBuf {
        self.state_dir.join("unbound.log")
    }
    pub fn pid_file(&self) -> PathBuf {
        self.run_dir.join("unbound.pid")
    }
    pub fn control_socket(&self) -> PathBuf {
        self.run_dir.join("unbound.ctl")
    }
}

/// The port the resolver listens on. Fixed: intercepted queries are handed to the listening
/// socket unchanged (TPROXY), so the answer leaves from the port the client asked, which is 53;
/// and Squid's `dns_nameservers` has no port either.
pub const LISTEN_PORT: u16 = 53;

/// How long unbound waits for a server it has no RTT for yet before it retransmits. Its
/// default (376 ms) is below one geostationary round trip, so the first query to an upstream
/// across the satellite would always be sent twice; unbound's documentation suggests 1128 for
/// satellite links.
pub const UNKNOWN_SERVER_TIME_LIMIT_MS: u32 = 1128;

/// Special-use zones unbound would answer locally (NXDOMAIN) although the upstream may serve
/// them: `test.` (RFC 6761; labs, satlab's web among them) and `home.arpa.` (RFC 8375, the
/// site's own names). `localhost.`, `invalid.` and `onion.` stay answered locally.
pub const FORWARDED_SPECIAL_ZONES: [&str; 2] = ["test.", "home.arpa."];

fn quoted(p: &Path) -> String {
    // Paths are the daemon's own (command-line options), never operator strings from the API;
    // a quote in one would end the value, so it is refused by the manager before rendering.
    format!("\"{}\"", p.display())
}

/// Renders unbound.conf. `cfg` must have passed `validate()`; `served` comes from
/// `check_served_subnets`, `upstreams` from `cfg.upstreams()`.
pub fn render(
    cfg: &DnsConfig,
    served: &[Cidr],
    upstreams: &[Upstream],
    paths: &UnboundPaths,
) -> String {
    let mut o = String::with_capacity(2048);
    let w = &mut o;
    w.push_str("# Rendered by perigee-dns from the gateway's dns policy. Do not edit: the next apply replaces it.\n");
    w.push_str("server:\n");

    w.push_str("\t# --- process and files (own config, pid, control socket; never the system unbound's) ---\n");
    let _ = writeln!(w, "\tusername: \"{}\"", paths.user);
    w.push_str("\tchroot: \"\"\n");
    let _ = writeln!(w, "\tdirectory: {}", quoted(&paths.state_dir));
    let _ = writeln!(w, "\tpidfile: {}", quoted(&paths.pid_file()));
    // The daemon captures stderr into unbound.log.
    w.push_str("\tuse-syslog: no\n\tlogfile: \"\"\n\tlog-time-ascii: yes\n\tverbosity: 1\n");
    w.push_str("\tnum-threads: 1\n\thide-identity: yes\n\thide-version: yes\n");
    // A second unbound on port 53 (one left by a daemon that was killed) must make the start
    // fail loudly instead of silently sharing the queries.
    w.push_str("\tso-reuseport: no\n\n");

    w.push_str("\t# --- listening: port 53 of every local address; intercepted queries arrive here by TPROXY\n");
    w.push_str("\t# with their original destination, and the answer leaves from the address the client asked ---\n");
    w.push_str("\tinterface: 0.0.0.0\n\tinterface: ::\n");
    let _ = writeln!(w, "\tport: {LISTEN_PORT}");
    w.push_str("\tinterface-automatic: yes\n\tip-transparent: yes\n");
    w.push_str("\tdo-ip4: yes\n\tdo-ip6: yes\n\tdo-udp: yes\n\tdo-tcp: yes\n");
    w.push_str("\tedns-buffer-size: 1232\n\n");

    w.push_str(
        "\t# --- access: the served subnets and the gateway itself, never an open resolver ---\n",
    );
    w.push_str("\taccess-control: 0.0.0.0/0 refuse\n\taccess-control: ::/0 refuse\n");
    w.push_str("\taccess-control: 127.0.0.0/8 allow\n\taccess-control: ::1/128 allow\n");
    for s in served {
        let _ = writeln!(w, "\taccess-control: {s} allow");
    }
    if cfg.client_qps_limit > 0 {
        let _ = writeln!(w, "\tip-ratelimit: {}", cfg.client_qps_limit);
    } else {
        w.push_str("\t# client_qps_limit 0: no per-client rate limit\n");
    }
    w.push('\n');

    w.push_str("\t# --- cache: whole messages get a third, RRsets two thirds ---\n");
    let msg_kb = u64::from(cfg.cache_mb) * 1024 / 3;
    let rrset_kb = u64::from(cfg.cache_mb) * 1024 - msg_kb;
    let _ = writeln!(w, "\tmsg-cache-size: {msg_kb}k");
    let _ = writeln!(w, "\trrset-cache-size: {rrset_kb}k");
    let _ = writeln!(w, "\tcache-min-ttl: {}", cfg.min_ttl_s);
    let _ = writeln!(w, "\tcache-max-ttl: {}", cfg.max_ttl_s);
    let _ = writeln!(w, "\tcache-max-negative-ttl: {}", cfg.max_negative_ttl_s);
    let yes_no = |b: bool| if b { "yes" } else { "no" };
    let _ = writeln!(w, "\tprefetch: {}", yes_no(cfg.prefetch));
    w.push('\n');

    w.push_str("\t# --- serve stale (RFC 8767): an expired name is answered from the cache, not after the satellite ---\n");
    let _ = writeln!(w, "\tserve-expired: {}", yes_no(cfg.serve_stale));
    if cfg.serve_stale {
        let _ = writeln!(w, "\tserve-expired-ttl: {}", cfg.stale_ttl_s);
        w.push_str("\tserve-expired-ttl-reset: no\n");
        let _ = writeln!(w, "\tserve-expired-reply-ttl: {}", cfg.stale_reply_ttl_s);
        let _ = writeln!(
            w,
            "\tserve-expired-client-timeout: {}",
            cfg.stale_client_timeout_ms
        );
    }
    w.push('\n');

    w.push_str("\t# --- names the upstream decides: unbound answers these special-use zones itself by default,\n");
    w.push_str("\t# as an iterating resolver should; a cache in front of the site's resolver defers to it ---\n");
    for zone in FORWARDED_SPECIAL_ZONES {
        let _ = writeln!(w, "\tlocal-zone: \"{zone}\" nodefault");
    }
    // The private-address reverse zones (10.in-addr.arpa, ...): the site's resolver knows the LAN.
    w.push_str("\tunblock-lan-zones: yes\n\tinsecure-lan-zones: yes\n\n");

    w.push_str(
        "\t# --- upstream: forward only (never iterate from the root across the satellite) ---\n",
    );
    w.push_str("\tmodule-config: \"iterator\"\n");
    // Allows an upstream on a loopback address (another port); port 53 there is refused by
    // validation, since that is this resolver.
    w.push_str("\tdo-not-query-localhost: no\n");
    let _ = writeln!(
        w,
        "\tunknown-server-time-limit: {UNKNOWN_SERVER_TIME_LIMIT_MS}"
    );
    // A server marked down is still probed, so the cache notices at once when it is back.
    w.push_str("\tinfra-keep-probing: yes\n");
    w.push_str(
        "\tstatistics-interval: 0\n\tstatistics-cumulative: no\n\textended-statistics: yes\n\n",
    );

    w.push_str("remote-control:\n");
    w.push_str("\tcontrol-enable: yes\n");
    // A Unix socket: no TLS keys to manage, reachable only by root (the daemon).
    let _ = writeln!(
        w,
        "\tcontrol-interface: {}",
        quoted(&paths.control_socket())
    );
    w.push_str("\tcontrol-use-cert: no\n\n");

    w.push_str("forward-zone:\n\tname: \".\"\n");
    for u in upstreams {
        let _ = writeln!(w, "\tforward-addr: {u}");
    }
    w.push_str("\tforward-first: no\n");
    o
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::parse_served_subnets;

    fn check_snapshot(name: &str, text: &str) {
        perigee_testkit::check_snapshot(env!("CARGO_MANIFEST_DIR"), name, text);
    }

    fn served() -> Vec<Cidr> {
        parse_served_subnets(&["10.71.1.0/24".into(), "fd71:1::/64".into()]).unwrap()
    }

    fn rendered(cfg: &DnsConfig) -> String {
        cfg.validate().unwrap();
        render(
            cfg,
            &served(),
            &cfg.upstreams().unwrap(),
            &UnboundPaths::default(),
        )
    }

    #[test]
    fn default_policy_snapshot() {
        let cfg = DnsConfig {
            enabled: true,
            upstream: vec!["10.71.3.53".parse().unwrap()],
            ..DnsConfig::default()
        };
        check_snapshot("default.conf", &rendered(&cfg));
    }

    #[test]
    fn operator_policy_snapshot() {
        let cfg: DnsConfig = serde_json::from_str(
            r#"{"enabled": true, "upstream": ["192.0.2.53", "2001:db8::53@5353"], "intercept": false,
                "cache_mb": 256, "prefetch": false, "serve_stale": true, "stale_ttl_s": 259200,
                "stale_reply_ttl_s": 30, "stale_client_timeout_ms": 1800, "min_ttl_s": 60,
                "max_ttl_s": 3600, "max_negative_ttl_s": 300, "client_qps_limit": 200}"#,
        )
        .unwrap();
        check_snapshot("operator.conf", &rendered(&cfg));
    }

    #[test]
    fn never_an_open_resolver() {
        let text = rendered(&DnsConfig {
            enabled: true,
            upstream: vec!["192.0.2.53".parse().unwrap()],
            ..DnsConfig::default()
        });
        let acl: Vec<&str> = text
            .lines()
            .map(str::trim)
            .filter(|l| l.starts_with("access-control:"))
            .collect();
        assert_eq!(
            acl,
            [
                "access-control: 0.0.0.0/0 refuse",
                "access-control: ::/0 refuse",
                "access-control: 127.0.0.0/8 allow",
                "access-control: ::1/128 allow",
                "access-control: 10.71.1.0/24 allow",
                "access-control: fd71:1::/64 allow",
            ]
        );
    }

    #[test]
    fn special_use_zones_the_upstream_may_serve_are_forwarded() {
        let text = rendered(&DnsConfig {
            enabled: true,
            upstream: vec!["192.0.2.53".parse().unwrap()],
            ..DnsConfig::default()
        });
        assert!(
            text.contains("\tlocal-zone: \"test.\" nodefault\n"),
            "{text}"
        );
        assert!(text.contains("\tlocal-zone: \"home.arpa.\" nodefault\n"));
        assert!(text.contains("\tunblock-lan-zones: yes\n"));
        assert!(
            !text.contains("\"localhost.\""),
            "localhost stays answered locally"
        );
    }

    #[test]
    fn serve_stale_off_renders_no_stale_settings() {
        let text = rendered(&DnsConfig {
            enabled: true,
            upstream: vec!["192.0.2.53".parse().unwrap()],
            serve_stale: false,
            ..DnsConfig::default()
        });
        assert!(text.contains("\tserve-expired: no\n"));
        assert!(!text.contains("serve-expired-ttl"));
    }

    #[test]
    fn cache_memory_is_split_a_third_to_messages() {
        let text = rendered(&DnsConfig {
            enabled: true,
            upstream: vec!["192.0.2.53".parse().unwrap()],
            cache_mb: 96,
            ..DnsConfig::default()
        });
        assert!(text.contains("msg-cache-size: 32768k\n"), "{text}");
        assert!(text.contains("rrset-cache-size: 65536k\n"), "{text}");
    }
}
