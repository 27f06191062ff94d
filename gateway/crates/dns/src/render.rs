//! unbound.conf from the `dns` policy: a forwarding cache on port 53 of every local address,
//! answering only the served subnets and the gateway itself.

use std::fmt::Write;
use std::path::{Path, PathBuf};

use crate::config::{DnsConfig, Upstream};
use crate::forwarding::{Forwarding, PEER_PATH_RESOLVER};
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
    /// DNSSEC trust anchors (DS or DNSKEY records, zone-file format) instead of the built-in
    /// root anchors (`ROOT_TRUST_ANCHORS`): e.g. Debian's /usr/share/dns/root.ds after a root
    /// key rollover.
    pub trust_anchor_file: Option<PathBuf>,
}

impl Default for UnboundPaths {
    fn default() -> Self {
        UnboundPaths {
            state_dir: PathBuf::from("/var/lib/perigee/dns"),
            run_dir: PathBuf::from("/run/perigee/dns"),
            user: DEFAULT_USER.into(),
            trust_anchor_file: None,
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

/// How long a query to the peer path's local end (DNS over TCP, `forward-tcp-upstream`) waits
/// for its answer. unbound sends a forwarder's TCP queries down one shared stream, and a query
/// whose timer fires closes that stream and fails every query on it, which it then sends again:
/// one more satellite round trip for each of them. Left to itself, unbound times a TCP query by
/// the upstream's RTO whenever the RTO is below `unknown-server-time-limit`, and 1128 ms is
/// above a geostationary RTO (srtt + 4·rttvar: about 620 ms on a steady 600 ms link), so an
/// answer 30 ms later than usual (a cold name at the hub's resolver, a broken domain's SERVFAIL,
/// a burst that queues at the hub) closed the stream under the page's lookups. With the peer
/// path the limit is 0 (nothing is sent over UDP, where it matters) and every query waits this
/// long, unbound's `tcp-auth-query-timeout`: beyond what a resolver takes to give up on a broken
/// domain. Nothing is lost in between: the stream is TCP inside the peer path's TLS, and a peer
/// connection that breaks resets it at once.
pub const PEER_PATH_QUERY_TIMEOUT_MS: u32 = 10_000;

/// Special-use zones unbound would answer locally (NXDOMAIN) although the upstream may serve
/// them: `test.` (RFC 6761; labs, satlab's web among them) and `home.arpa.` (RFC 8375, the
/// site's own names). `localhost.`, `invalid.` and `onion.` stay answered locally.
pub const FORWARDED_SPECIAL_ZONES: [&str; 2] = ["test.", "home.arpa."];

/// Zones that never exist in the public DNS and that the site's resolver may serve: their names
/// may resolve to private addresses and are never validated against the root (which proves
/// they do not exist). RFC 6761's `test.`, RFC 8375's `home.arpa.`, and `internal.` (reserved
/// by ICANN for private use).
pub const SITE_ZONES: [&str; 3] = ["test.", "home.arpa.", "internal."];

/// Addresses no public name may resolve to while `rebind_protection` is on: private
/// (RFC 1918), shared (RFC 6598, where satellite operators number terminals), loopback,
/// link-local, "this network" (0.0.0.0 reaches local services on some systems), IPv4-mapped
/// IPv6 (any of the above in disguise), unique local and link-local IPv6.
pub const REBIND_ADDRESSES: [&str; 13] = [
    "0.0.0.0/8",
    "10.0.0.0/8",
    "100.64.0.0/10",
    "127.0.0.0/8",
    "169.254.0.0/16",
    "172.16.0.0/12",
    "192.168.0.0/16",
    "::/128",
    "::1/128",
    "::ffff:0:0/96",
    "fc00::/7",
    "fe80::/10",
    "fec0::/10",
];

/// The root zone's trust anchors as IANA publishes them (root-anchors.xml): KSK-2017 (key tag
/// 20326) and KSK-2024 (38696). Static: a later rollover needs a release or
/// `trust_anchor_file`.
pub const ROOT_TRUST_ANCHORS: [&str; 2] = [
    ". DS 20326 8 2 E06D44B80B8F1D39A95C0B0D7C65D08458E880409BBC683457104237C7F8EC8D",
    ". DS 38696 8 2 683D2D0ACB8C9B712A1948B27F741219298D0A450D612C483AF444A4C0FB2B16",
];

fn quoted(p: &Path) -> String {
    // Paths are the daemon's own (command-line options), never operator strings from the API;
    // a quote in one would end the value, so it is refused by the manager before rendering.
    format!("\"{}\"", p.display())
}

/// Renders unbound.conf. `cfg` must have passed `validate()`; `served` comes from
/// `check_served_subnets`, `upstreams` from `cfg.upstreams()`; `forwarding` says how the
/// upstream is reached (the peer path replaces `upstreams`).
pub fn render(
    cfg: &DnsConfig,
    served: &[Cidr],
    upstreams: &[Upstream],
    forwarding: Forwarding,
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

    render_rebinding(w, cfg);
    render_dnssec(w, cfg, paths);

    w.push_str(
        "\t# --- upstream: forward only (never iterate from the root across the satellite) ---\n",
    );
    // Allows an upstream on a loopback address (another port); port 53 there is refused by
    // validation, since that is this resolver.
    w.push_str("\tdo-not-query-localhost: no\n");
    match forwarding {
        Forwarding::Direct => {
            let _ = writeln!(
                w,
                "\tunknown-server-time-limit: {UNKNOWN_SERVER_TIME_LIMIT_MS}"
            );
        }
        Forwarding::PeerPath => {
            // Over TCP a query's timer closes the shared stream under every query on it: never
            // the RTO, one fixed wait (PEER_PATH_QUERY_TIMEOUT_MS).
            w.push_str("\tunknown-server-time-limit: 0\n");
            let _ = writeln!(w, "\ttcp-auth-query-timeout: {PEER_PATH_QUERY_TIMEOUT_MS}");
        }
    }
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
    match forwarding {
        Forwarding::Direct => {
            for u in upstreams {
                let _ = writeln!(w, "\tforward-addr: {u}");
            }
        }
        Forwarding::PeerPath => {
            // Never plain UDP across the satellite: TCP to the peer path's local end, which
            // carries each connection encrypted to the hub's resolver. unbound reuses an open
            // upstream connection for later queries (tcp-reuse-timeout, 60 s by default).
            w.push_str(
                "\t# the peer path: DNS over TCP, carried inside its TLS to the hub's resolver\n",
            );
            let _ = writeln!(
                w,
                "\tforward-addr: {}@{}",
                PEER_PATH_RESOLVER.ip(),
                PEER_PATH_RESOLVER.port()
            );
            w.push_str("\tforward-tcp-upstream: yes\n");
        }
    }
    w.push_str("\tforward-first: no\n");
    o
}

/// The zones whose names may answer private addresses and skip validation: the built-in site
/// zones and the operator's private domains, each once, as unbound writes zones.
fn site_zones(cfg: &DnsConfig) -> Vec<String> {
    let mut zones: Vec<String> = SITE_ZONES.iter().map(|z| z.to_string()).collect();
    for z in &cfg.private_domains {
        let fqdn = z.fqdn();
        if !zones.contains(&fqdn) {
            zones.push(fqdn);
        }
    }
    zones
}

/// `rebind_protection`: unbound removes these addresses from answers for names outside the
/// site zones (the answer comes back without them).
fn render_rebinding(w: &mut String, cfg: &DnsConfig) {
    if !cfg.rebind_protection {
        w.push_str("\t# rebind_protection off: any name may answer any address\n\n");
        return;
    }
    w.push_str(
        "\t# --- rebinding: a public name never answers an address of a private network ---\n",
    );
    for a in REBIND_ADDRESSES {
        let _ = writeln!(w, "\tprivate-address: {a}");
    }
    for z in site_zones(cfg) {
        let _ = writeln!(w, "\tprivate-domain: \"{z}\"");
    }
    w.push('\n');
}

/// `dnssec_validation`: the validator with the root's trust anchors; the site zones are not
/// validated (the public chain proves they do not exist).
fn render_dnssec(w: &mut String, cfg: &DnsConfig, paths: &UnboundPaths) {
    if !cfg.dnssec_validation {
        w.push_str(
            "\t# dnssec_validation off: answers are passed on unchecked, never with the AD bit\n",
        );
        w.push_str("\tmodule-config: \"iterator\"\n\n");
        return;
    }
    w.push_str(
        "\t# --- DNSSEC: validated here (unbound never passes an upstream's AD bit on) ---\n",
    );
    w.push_str("\tmodule-config: \"validator iterator\"\n");
    match &paths.trust_anchor_file {
        Some(f) => {
            let _ = writeln!(w, "\ttrust-anchor-file: {}", quoted(f));
        }
        None => {
            for a in ROOT_TRUST_ANCHORS {
                let _ = writeln!(w, "\ttrust-anchor: \"{a}\"");
            }
        }
    }
    // RFC 8145 key-tag reports would cross the satellite for nothing (the upstream is not the root).
    w.push_str("\ttrust-anchor-signaling: no\n");
    // A zone's DNSKEY is fetched as soon as its DS is seen, and refreshed before it expires.
    w.push_str("\tprefetch-key: yes\n");
    // RFC 8198: a cached, validated NSEC proof answers names it covers without the upstream.
    w.push_str("\taggressive-nsec: yes\n");
    for z in site_zones(cfg) {
        let _ = writeln!(w, "\tdomain-insecure: \"{z}\"");
    }
    w.push('\n');
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

    fn rendered_with(cfg: &DnsConfig, forwarding: Forwarding, paths: &UnboundPaths) -> String {
        cfg.validate().unwrap();
        render(cfg, &served(), &cfg.upstreams().unwrap(), forwarding, paths)
    }

    fn rendered(cfg: &DnsConfig) -> String {
        rendered_with(cfg, Forwarding::Direct, &UnboundPaths::default())
    }

    fn on() -> DnsConfig {
        DnsConfig {
            enabled: true,
            upstream: vec!["192.0.2.53".parse().unwrap()],
            ..DnsConfig::default()
        }
    }

    /// The directive lines (tab-indented, comments dropped) that start with `key`.
    fn lines<'a>(text: &'a str, key: &str) -> Vec<&'a str> {
        text.lines()
            .map(str::trim)
            .filter(|l| l.starts_with(key))
            .collect()
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
                "max_ttl_s": 3600, "max_negative_ttl_s": 300, "client_qps_limit": 200,
                "intercept_for": ["192.0.2.1"], "private_domains": ["corp.example.com", "Lan."],
                "dnssec_validation": false}"#,
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

    #[test]
    fn peer_path_snapshot() {
        let cfg = DnsConfig {
            upstream: vec!["10.71.3.53".parse().unwrap()],
            ..on()
        };
        let text = rendered_with(&cfg, Forwarding::PeerPath, &UnboundPaths::default());
        check_snapshot("peer_path.conf", &text);
    }

    #[test]
    fn the_peer_path_carries_every_upstream_query_over_tcp_to_its_local_end() {
        let text = rendered_with(&on(), Forwarding::PeerPath, &UnboundPaths::default());
        assert_eq!(
            lines(&text, "forward-addr:"),
            ["forward-addr: 127.0.0.1@8853"]
        );
        assert_eq!(
            lines(&text, "forward-tcp-upstream:"),
            ["forward-tcp-upstream: yes"]
        );
        assert!(
            !text.contains("192.0.2.53"),
            "the upstream itself is never asked: {text}"
        );
        // Its local end is on loopback: unbound must be allowed to ask there.
        assert!(text.contains("\tdo-not-query-localhost: no\n"));
        let direct = rendered(&on());
        assert_eq!(
            lines(&direct, "forward-addr:"),
            ["forward-addr: 192.0.2.53@53"]
        );
        assert!(lines(&direct, "forward-tcp-upstream:").is_empty());
    }

    #[test]
    fn a_tcp_upstream_query_waits_a_fixed_time_never_the_rto() {
        // unbound times a TCP upstream query by the RTO when the RTO is below
        // unknown-server-time-limit; 0 keeps every query on tcp-auth-query-timeout.
        let text = rendered_with(&on(), Forwarding::PeerPath, &UnboundPaths::default());
        assert_eq!(
            lines(&text, "unknown-server-time-limit:"),
            ["unknown-server-time-limit: 0"]
        );
        assert_eq!(
            lines(&text, "tcp-auth-query-timeout:"),
            ["tcp-auth-query-timeout: 10000"]
        );
        // Over UDP the first query's wait must stay above a satellite round trip.
        let direct = rendered(&on());
        assert_eq!(
            lines(&direct, "unknown-server-time-limit:"),
            ["unknown-server-time-limit: 1128"]
        );
        assert!(lines(&direct, "tcp-auth-query-timeout:").is_empty());
    }

    /// `directive` for each built-in site zone and then corp.example.com, as rendered.
    fn site_zones_with_corp(directive: &str) -> Vec<String> {
        ["test.", "home.arpa.", "internal.", "corp.example.com."]
            .iter()
            .map(|z| format!("{directive}: \"{z}\""))
            .collect()
    }

    #[test]
    fn rebinding_protection_is_on_by_default_and_spares_the_private_domains() {
        let text = rendered(&DnsConfig {
            private_domains: vec!["corp.example.com".parse().unwrap()],
            ..on()
        });
        let private = lines(&text, "private-address:");
        for net in [
            "10.0.0.0/8",
            "172.16.0.0/12",
            "192.168.0.0/16",
            "100.64.0.0/10",
            "127.0.0.0/8",
            "fc00::/7",
            "::ffff:0:0/96",
        ] {
            assert!(
                private.contains(&format!("private-address: {net}").as_str()),
                "{net}: {private:?}"
            );
        }
        assert_eq!(
            lines(&text, "private-domain:"),
            site_zones_with_corp("private-domain")
        );
        let off = rendered(&DnsConfig {
            rebind_protection: false,
            ..on()
        });
        assert!(
            lines(&off, "private-address:").is_empty() && lines(&off, "private-domain:").is_empty()
        );
    }

    #[test]
    fn dnssec_is_validated_with_the_root_anchors_except_in_the_site_zones() {
        let text = rendered(&DnsConfig {
            private_domains: vec!["corp.example.com".parse().unwrap(), "test".parse().unwrap()],
            ..on()
        });
        assert_eq!(
            lines(&text, "module-config:"),
            ["module-config: \"validator iterator\""]
        );
        let anchors = lines(&text, "trust-anchor:");
        assert_eq!(anchors.len(), 2);
        assert!(
            anchors[0].contains(". DS 20326 8 2 E06D44B8")
                && anchors[1].contains(". DS 38696 8 2 683D2D0A")
        );
        // Each zone once, though "test" is both built in and listed.
        assert_eq!(
            lines(&text, "domain-insecure:"),
            site_zones_with_corp("domain-insecure")
        );
        let off = rendered(&DnsConfig {
            dnssec_validation: false,
            ..on()
        });
        assert_eq!(
            lines(&off, "module-config:"),
            ["module-config: \"iterator\""]
        );
        assert!(
            lines(&off, "trust-anchor").is_empty() && lines(&off, "domain-insecure:").is_empty()
        );
    }

    #[test]
    fn a_trust_anchor_file_replaces_the_built_in_anchors() {
        let paths = UnboundPaths {
            trust_anchor_file: Some("/usr/share/dns/root.ds".into()),
            ..UnboundPaths::default()
        };
        let text = rendered_with(&on(), Forwarding::Direct, &paths);
        assert_eq!(
            lines(&text, "trust-anchor-file:"),
            ["trust-anchor-file: \"/usr/share/dns/root.ds\""]
        );
        assert!(lines(&text, "trust-anchor:").is_empty());
    }
}
