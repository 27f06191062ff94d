//! squid.conf rendering: a pure function of policy, served subnets, paths and Squid's version.

use std::fmt::Write as _;
use std::net::IpAddr;
use std::path::{Path, PathBuf};

use crate::access_log::{LOGFORMAT_NAME, LOGFORMAT_SPEC};
use crate::config::{CacheConfig, RefreshPattern, Store};
use crate::version::{collapsed_forwarding_safe, SquidVersion, COLLAPSED_FORWARDING_ADVISORY};
use perigee_types::Cidr;

/// Where this Squid instance keeps everything. Nothing here points at the system's /etc/squid.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SquidPaths {
    /// Persistent: squid.conf, cache store, logs (default /var/lib/perigee/squid).
    pub state_dir: PathBuf,
    /// Volatile: pid file (default /run/perigee/squid).
    pub run_dir: PathBuf,
    /// Squid's `-n` service name: keeps our shared-memory segments and IPC sockets apart from
    /// any system Squid.
    pub service_name: String,
    /// cache_effective_user: Squid drops to it after binding (keeping CAP_NET_ADMIN for TPROXY).
    pub effective_user: String,
}

impl Default for SquidPaths {
    fn default() -> Self {
        SquidPaths {
            state_dir: PathBuf::from("/var/lib/perigee/squid"),
            run_dir: PathBuf::from("/run/perigee/squid"),
            service_name: "perigee".into(),
            effective_user: "proxy".into(),
        }
    }
}

impl SquidPaths {
    pub fn conf(&self) -> PathBuf {
        self.state_dir.join("squid.conf")
    }
    /// Where apply writes a candidate before the program's check (the supervisor's choice).
    pub fn candidate_conf(&self) -> PathBuf {
        perigee_child::candidate_of(&self.conf())
    }
    pub fn pid_file(&self) -> PathBuf {
        self.run_dir.join("squid.pid")
    }
    pub fn cache_root(&self) -> PathBuf {
        self.state_dir.join("cache")
    }
    pub fn store_dir(&self, store: Store) -> PathBuf {
        self.cache_root().join(store.as_str())
    }
    pub fn log_dir(&self) -> PathBuf {
        self.state_dir.join("logs")
    }
    pub fn access_log(&self) -> PathBuf {
        self.log_dir().join("access.log")
    }
    pub fn cache_log(&self) -> PathBuf {
        self.log_dir().join("cache.log")
    }
}

/// The `http_port` name of the TPROXY port; ACLs and the access log key on it.
pub const INTERCEPT_PORT_NAME: &str = "perigee_tproxy";
/// Squid's visible_hostname; also the host part of cache manager URLs.
pub const VISIBLE_HOSTNAME: &str = "perigee-cache";
/// The `http_port` name of the loopback admin port (cache manager, PURGE).
pub const ADMIN_PORT_NAME: &str = "perigee_admin";

/// Built-in refresh rules, tried after the operator's. Package files never change once
/// published, so they are kept long; repository indexes change and are revalidated.
pub fn default_refresh_patterns() -> Vec<RefreshPattern> {
    let p = |regex: &str, ci: bool, min: u32, pct: u32, max: u32, opts: &[&str]| RefreshPattern {
        regex: regex.into(),
        case_insensitive: ci,
        min_minutes: min,
        percent: pct,
        max_minutes: max,
        options: opts.iter().map(|s| s.to_string()).collect(),
    };
    vec![
        // Repository indexes: short freshness, revalidate with If-Modified-Since.
        p(
            r"/(Packages|Sources|Release|InRelease|Contents-[^/]*|repomd\.xml|[^/]*\.db)(\.(gz|bz2|xz|lz4|zst))?$",
            false,
            0,
            20,
            60,
            &["refresh-ims"],
        ),
        // Update and package payloads: immutable once published.
        p(
            r"\.(deb|udeb|rpm|drpm|apk|msi|msu|cab|exe|psf|esd|appx|appxbundle|dmg|pkg|iso|img|zip|7z|tar|tgz|gz|xz|bz2|zst|whl|crate|jar)$",
            true,
            10080,
            100,
            129600,
            &["refresh-ims"],
        ),
        // Dynamic content without explicit freshness is never heuristically cached.
        p(r"(/cgi-bin/|\?)", true, 0, 0, 0, &[]),
        p(r"^ftp:", false, 1440, 20, 10080, &[]),
        p(".", false, 0, 20, 4320, &[]),
    ]
}

fn refresh_line(out: &mut String, p: &RefreshPattern) {
    let ci = if p.case_insensitive { "-i " } else { "" };
    let _ = write!(
        out,
        "refresh_pattern {ci}{} {} {}% {}",
        p.regex, p.min_minutes, p.percent, p.max_minutes
    );
    for o in &p.options {
        let _ = write!(out, " {o}");
    }
    out.push('\n');
}

fn path_str(p: &Path) -> String {
    p.display().to_string()
}

/// How long Squid waits for its resolver, and between retransmissions to it. Squid's defaults
/// (30 s, 5 s) are what an intercepted request stalls for when the resolver is gone; the
/// gateway's own probe steps the cache aside within a few seconds, this bounds the requests
/// caught in between. A legitimate lookup (a local cache, or one satellite round trip to the
/// hub's resolver) takes well under a second.
pub const DNS_TIMEOUT_S: u32 = 5;
pub const DNS_RETRANSMIT_S: u32 = 1;
/// How long Squid tries to open a connection to an origin (Squid's default: 1 minute). Across
/// a geostationary hop a handshake takes 0.6 s, with two SYN retransmissions about 4 s.
pub const CONNECT_TIMEOUT_S: u32 = 10;

/// Renders squid.conf. `cfg` must have passed `validate()`; `served` comes from
/// `served::check_served_subnets` (checked, merged); `nameservers` are Squid's resolvers (at
/// least one). `version` decides whether collapsed forwarding may be switched on.
pub fn render(
    cfg: &CacheConfig,
    served: &[Cidr],
    nameservers: &[IpAddr],
    paths: &SquidPaths,
    version: Option<SquidVersion>,
) -> String {
    let mut o = String::with_capacity(4096);
    let w = &mut o;
    w.push_str("# Rendered by perigee-squid from the gateway's cache policy. Do not edit: the next apply replaces it.\n\n");

    w.push_str("# --- process and files (own pid, logs and store; never the system squid's) ---\n");
    let _ = writeln!(w, "pid_filename {}", path_str(&paths.pid_file()));
    let _ = writeln!(w, "cache_effective_user {}", paths.effective_user);
    let _ = writeln!(w, "coredump_dir {}", path_str(&paths.state_dir));
    let _ = writeln!(w, "cache_log stdio:{}", path_str(&paths.cache_log()));
    w.push_str("cache_store_log none\n");
    let _ = writeln!(w, "netdb_filename none");
    w.push_str(
        "logfile_rotate 0\nworkers 1\nshutdown_lifetime 2 seconds\nmax_filedescriptors 16384\n\n",
    );

    w.push_str(
        "# --- ports: TPROXY for intercepted port-80 traffic, loopback-only admin port ---\n",
    );
    let _ = writeln!(
        w,
        "http_port {} tproxy name={INTERCEPT_PORT_NAME}",
        cfg.port
    );
    let _ = writeln!(
        w,
        "http_port 127.0.0.1:{} name={ADMIN_PORT_NAME}",
        cfg.admin_port
    );
    w.push_str("icp_port 0\nhtcp_port 0\nsnmp_port 0\n\n");

    w.push_str(
        "# --- resolver: always explicit, never the /etc/resolv.conf or /etc/hosts the gateway's\n",
    );
    w.push_str("# mount namespace happens to show; short timeouts so a dead resolver cannot stall a request ---\n");
    w.push_str("dns_nameservers");
    for n in nameservers {
        let _ = write!(w, " {n}");
    }
    w.push('\n');
    w.push_str("hosts_file none\n");
    let _ = writeln!(w, "dns_timeout {DNS_TIMEOUT_S} seconds");
    let _ = writeln!(w, "dns_retransmit_interval {DNS_RETRANSMIT_S} seconds");
    let _ = writeln!(w, "connect_timeout {CONNECT_TIMEOUT_S} seconds\n");

    w.push_str("# --- access: only the served subnets, never an open proxy ---\n");
    w.push_str("acl perigee_served src");
    for c in served {
        let _ = write!(w, " {c}");
    }
    w.push('\n');
    w.push_str("acl perigee_localhost src 127.0.0.1/32\n");
    let _ = writeln!(w, "acl perigee_intercept myportname {INTERCEPT_PORT_NAME}");
    let _ = writeln!(w, "acl perigee_admin myportname {ADMIN_PORT_NAME}");
    w.push_str("acl perigee_purge method PURGE\n");
    w.push_str("acl perigee_connect method CONNECT\n");
    w.push_str("http_access allow manager perigee_localhost perigee_admin\n");
    w.push_str("http_access deny manager\n");
    w.push_str("http_access allow perigee_purge perigee_localhost perigee_admin\n");
    w.push_str("http_access deny perigee_purge\n");
    w.push_str("http_access deny perigee_connect\n");
    w.push_str("http_access allow perigee_served perigee_intercept\n");
    w.push_str("http_access deny all\n");
    w.push_str("http_reply_access allow all\n\n");

    w.push_str(
        "# --- headers: transparent to origins (they see the client's address via TPROXY) ---\n",
    );
    w.push_str("forwarded_for transparent\nhttpd_suppress_version_string on\n");
    // No Via: with a gateway at each end, the hub's Squid intercepts the terminal's misses and
    // would see its own visible_hostname in Via and refuse them as a forwarding loop (403). An
    // intercepting cache cannot loop (its own connections are never intercepted by its gateway).
    w.push_str("via off\n");
    let _ = writeln!(w, "visible_hostname {VISIBLE_HOSTNAME}\n");

    w.push_str("# --- storage ---\n");
    let _ = writeln!(w, "cache_mem {} MB", cfg.memory_mb);
    let _ = writeln!(w, "maximum_object_size {} MB", cfg.max_object_mb);
    let _ = writeln!(
        w,
        "maximum_object_size_in_memory {} MB",
        cfg.max_memory_object_mb
    );
    if cfg.disk_mb > 0 {
        let dir = path_str(&paths.store_dir(cfg.store));
        match cfg.store {
            Store::Rock => {
                let max_bytes = u64::from(cfg.max_object_mb) * 1024 * 1024;
                let _ = writeln!(
                    w,
                    "cache_dir rock {dir} {} max-size={max_bytes}",
                    cfg.disk_mb
                );
            }
            Store::Aufs => {
                let _ = writeln!(w, "cache_dir aufs {dir} {} 16 256", cfg.disk_mb);
            }
        }
    } else {
        w.push_str("# disk_mb 0: memory-only cache\n");
    }
    w.push_str("cache_replacement_policy heap LFUDA\nmemory_replacement_policy heap GDSF\n\n");

    w.push_str("# --- what is cached ---\n");
    let domains = cfg.never_cache_dstdomains();
    if !domains.is_empty() {
        w.push_str("acl perigee_never_cache dstdomain");
        for d in &domains {
            let _ = write!(w, " {d}");
        }
        w.push('\n');
        w.push_str("cache deny perigee_never_cache\n");
    }
    w.push_str(
        "# operator refresh patterns first (first match wins), then the built-in defaults\n",
    );
    for p in cfg
        .refresh_patterns
        .iter()
        .chain(default_refresh_patterns().iter())
    {
        refresh_line(w, p);
    }
    w.push('\n');

    w.push_str(
        "# --- large updates: range requests fetch the whole object so it can be cached ---\n",
    );
    match cfg.range_offset_limit_mb {
        -1 => w.push_str("range_offset_limit none\n"),
        0 => w.push_str("range_offset_limit 0\n"),
        n => {
            let _ = writeln!(w, "range_offset_limit {n} MB");
        }
    }
    // Keep fetching an object the client abandoned when a range fetch or an update needs it.
    if cfg.range_offset_limit_mb != 0 {
        w.push_str("quick_abort_min -1 KB\n");
    }
    w.push('\n');

    w.push_str("# --- collapsed forwarding ---\n");
    let adv = &COLLAPSED_FORWARDING_ADVISORY;
    let version_s = version.map_or_else(|| "unknown".to_string(), |v| v.to_string());
    if cfg.collapsed_forwarding && collapsed_forwarding_safe(version) {
        let _ = writeln!(w, "# Squid {version_s} is not affected by {}", adv.id);
        w.push_str("collapsed_forwarding on\n");
    } else if cfg.collapsed_forwarding {
        let _ = writeln!(
            w,
            "# requested, but Squid {version_s} is affected by {} ({} <= v <= {}.{}; fixed in {}): left off",
            adv.id, adv.first_affected, adv.last_affected.major, adv.last_affected.minor, adv.fixed_in
        );
    } else {
        w.push_str("# off by policy (no collapsed_forwarding line at all)\n");
    }
    w.push('\n');

    w.push_str("# --- access log: one machine-parseable line per intercepted request ---\n");
    let _ = writeln!(w, "logformat {LOGFORMAT_NAME} {LOGFORMAT_SPEC}");
    // on-error=drop: a record that cannot be written (a full disk) is lost, where the default
    // (die) kills the worker, and Squid does not start another one: the cache stops serving.
    let _ = writeln!(
        w,
        "access_log stdio:{} logformat={LOGFORMAT_NAME} on-error=drop perigee_intercept",
        path_str(&paths.access_log())
    );
    w.push_str("access_log none\n");
    w.push_str("buffered_logs off\nstrip_query_terms on\n");
    o
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::served::{parse_served_subnets, ServedLimits};

    fn check_snapshot(name: &str, text: &str) {
        perigee_testkit::check_snapshot(env!("CARGO_MANIFEST_DIR"), name, text);
    }

    fn test_paths() -> SquidPaths {
        SquidPaths {
            state_dir: "/var/lib/perigee/squid".into(),
            run_dir: "/run/perigee/squid".into(),
            service_name: "perigee".into(),
            effective_user: "proxy".into(),
        }
    }

    fn served() -> Vec<Cidr> {
        parse_served_subnets(
            &["10.71.1.0/24".into(), "fd71:1::/64".into()],
            &ServedLimits::default(),
        )
        .unwrap()
    }

    fn ns() -> Vec<IpAddr> {
        vec![IpAddr::from([127, 0, 0, 1])]
    }

    #[test]
    fn default_policy_snapshot() {
        let cfg = CacheConfig {
            enabled: true,
            ..CacheConfig::default()
        };
        let text = render(
            &cfg,
            &served(),
            &ns(),
            &test_paths(),
            Some(SquidVersion::new(5, 7, 0)),
        );
        check_snapshot("default.conf", &text);
    }

    #[test]
    fn operator_policy_snapshot() {
        let cfg: CacheConfig = serde_json::from_str(
            r#"{"enabled": true, "port": 3300, "admin_port": 3301, "memory_mb": 64, "disk_mb": 10240,
                "store": "aufs", "max_object_mb": 512, "max_memory_object_mb": 4,
                "refresh_patterns": [{"regex": "^http://updates\\.example/.*\\.bin$", "case_insensitive": false,
                   "min_minutes": 60, "percent": 50, "max_minutes": 1440, "options": ["override-expire", "max-stale=60"]}],
                "never_cache_domains": ["Bank.Example", "www.bank.example", "intranet.test"],
                "range_offset_limit_mb": 64, "collapsed_forwarding": true}"#,
        )
        .unwrap();
        cfg.validate().unwrap();
        let text = render(
            &cfg,
            &served(),
            &ns(),
            &test_paths(),
            Some(SquidVersion::new(6, 6, 0)),
        );
        check_snapshot("operator.conf", &text);
    }

    #[test]
    fn collapsed_forwarding_follows_the_advisory() {
        let cfg = CacheConfig {
            enabled: true,
            collapsed_forwarding: true,
            ..CacheConfig::default()
        };
        let affected = render(
            &cfg,
            &served(),
            &ns(),
            &test_paths(),
            Some(SquidVersion::new(5, 9, 0)),
        );
        assert!(!affected.contains("\ncollapsed_forwarding on"));
        assert!(affected.contains("affected by CVE-2023-49288"));
        let unknown = render(&cfg, &served(), &ns(), &test_paths(), None);
        assert!(!unknown.contains("\ncollapsed_forwarding on"));
        let fixed = render(
            &cfg,
            &served(),
            &ns(),
            &test_paths(),
            Some(SquidVersion::new(6, 0, 1)),
        );
        assert!(fixed.contains("\ncollapsed_forwarding on\n"));
    }

    #[test]
    fn never_open_proxy() {
        let text = render(
            &CacheConfig::default(),
            &served(),
            &ns(),
            &test_paths(),
            None,
        );
        let access: Vec<&str> = text
            .lines()
            .filter(|l| l.starts_with("http_access"))
            .collect();
        assert_eq!(access.last(), Some(&"http_access deny all"));
        // The only general allow is served subnets on the intercept port.
        let allows: Vec<&&str> = access
            .iter()
            .filter(|l| l.starts_with("http_access allow"))
            .collect();
        for a in &allows {
            assert!(
                a.contains("perigee_localhost") || a.contains("perigee_served perigee_intercept"),
                "{a}"
            );
        }
        assert!(text.contains("acl perigee_served src 10.71.1.0/24 fd71:1::/64\n"));
        assert!(text.contains("http_port 127.0.0.1:3130 name=perigee_admin\n"));
    }

    #[test]
    fn the_resolver_is_explicit_with_short_timeouts() {
        let two = vec![
            "10.71.3.53".parse::<IpAddr>().unwrap(),
            "fd71:3::53".parse::<IpAddr>().unwrap(),
        ];
        let text = render(
            &CacheConfig::default(),
            &served(),
            &two,
            &test_paths(),
            None,
        );
        assert!(
            text.contains("\ndns_nameservers 10.71.3.53 fd71:3::53\n"),
            "{text}"
        );
        assert!(text.contains("\nhosts_file none\n"));
        assert!(text.contains("\ndns_timeout 5 seconds\n"));
        assert!(text.contains("\nconnect_timeout 10 seconds\n"));
    }

    #[test]
    fn memory_only_and_range_settings() {
        let cfg = CacheConfig {
            disk_mb: 0,
            range_offset_limit_mb: 0,
            ..CacheConfig::default()
        };
        let text = render(&cfg, &served(), &ns(), &test_paths(), None);
        assert!(!text.contains("cache_dir"));
        assert!(text.contains("range_offset_limit 0\n"));
        assert!(!text.contains("quick_abort_min"));
    }
}
