//! Runs unbound as a child of the gateway daemon: apply (checkconf → swap → restart with the
//! cache carried over), stop, flush, and the counters behind `/v1/dns/stats`. The supervision
//! (check, swap, start, ready, reap, stop) is perigee-child's; `Unbound` is what is
//! particular to unbound.

use serde::Serialize;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::config::{check_served_subnets, DnsConfig, Upstream};
use crate::render::{render, UnboundPaths};
use crate::stats::{parse_stats, Accumulator, Totals};
use perigee_child::{lookup_user, Installed, Service, ServiceError, Supervisor};
use perigee_types::Cidr;

/// A failed manager operation, shaped like the control protocol's error object. Codes:
/// invalid_config | unbound_checkconf | unbound_start | unbound_io | not_running | flush_failed
pub type DnsError = ServiceError;

fn io_err(what: &str) -> impl FnOnce(std::io::Error) -> DnsError + '_ {
    ServiceError::io("unbound_io", what)
}

/// How long one unbound-control call may take (a cache dump of a full 16 GB cache is the
/// slowest; anything beyond means unbound is hung).
const CONTROL_TIMEOUT: Duration = Duration::from_secs(60);

#[derive(Debug, Clone)]
pub struct ManagerOptions {
    pub unbound_bin: PathBuf,
    pub checkconf_bin: PathBuf,
    pub control_bin: PathBuf,
    pub paths: UnboundPaths,
    pub ready_timeout: Duration,
}

impl Default for ManagerOptions {
    fn default() -> Self {
        ManagerOptions {
            unbound_bin: PathBuf::from("unbound"),
            checkconf_bin: PathBuf::from("unbound-checkconf"),
            control_bin: PathBuf::from("unbound-control"),
            paths: UnboundPaths::default(),
            ready_timeout: Duration::from_secs(10),
        }
    }
}

/// What apply did: unbound is never reconfigured in place; a changed unbound.conf restarts it
/// with the cache carried over (dump_cache / load_cache).
pub use perigee_child::ApplyAction;

#[derive(Debug, Clone, Serialize)]
pub struct ApplyReport {
    pub action: ApplyAction,
    /// Records moved from the old unbound's cache into the new one (Restarted only).
    pub cache_records_kept: Option<u64>,
    pub unbound_conf: Option<String>,
}

/// GET /v1/dns/stats (the resolver-health fields are filled in by the daemon).
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct DnsStats {
    pub enabled: bool,
    pub running: bool,
    pub unbound_version: Option<String>,
    pub upstreams: Vec<String>,
    pub queries: u64,
    pub cache_hits: u64,
    pub cache_misses: u64,
    /// cache_hits / queries.
    pub hit_ratio: f64,
    /// Answers served from expired records (RFC 8767), part of cache_hits.
    pub stale_answers: u64,
    pub prefetches: u64,
    /// Misses answered by the upstream.
    pub upstream_resolutions: u64,
    pub servfail_answers: u64,
    pub ratelimited_queries: u64,
    /// Mean time a miss waited for the upstream, ms (null before the first miss).
    pub mean_upstream_ms: Option<f64>,
    /// cache_hits × the mean upstream time, s.
    pub satellite_time_saved_s: f64,
    pub cache_memory_used_bytes: Option<u64>,
    pub cache_memory_capacity_bytes: Option<u64>,
    pub problems: Vec<String>,
}

/// unbound as the supervisor runs it, and what the manager knows about it.
struct Unbound {
    opts: ManagerOptions,
    version: Option<String>,
    /// Things the operator should know that do not stop the resolver (e.g. running as root).
    notes: Vec<String>,
    counters: Accumulator,
}

pub struct UnboundManager {
    sup: Supervisor<Unbound>,
}

impl UnboundManager {
    /// Detects unbound's version and whether its user exists.
    pub fn new(mut opts: ManagerOptions) -> Self {
        let mut notes = Vec::new();
        let version = match Command::new(&opts.unbound_bin)
            .arg("-V")
            .stdin(Stdio::null())
            .output()
        {
            Ok(out) => parse_version(&String::from_utf8_lossy(&out.stdout)),
            Err(e) => {
                notes.push(format!("cannot run {}: {e}", opts.unbound_bin.display()));
                None
            }
        };
        if !opts.paths.user.is_empty() && lookup_user(&opts.paths.user).is_none() {
            notes.push(format!(
                "unbound runs as root: there is no user {:?} to drop to",
                opts.paths.user
            ));
            opts.paths.user.clear();
        }
        UnboundManager {
            sup: Supervisor::new(Unbound {
                opts,
                version,
                notes,
                counters: Accumulator::default(),
            }),
        }
    }

    fn unbound(&self) -> &Unbound {
        self.sup.service()
    }

    pub fn version(&self) -> Option<&str> {
        self.unbound().version.as_deref()
    }

    pub fn paths(&self) -> &UnboundPaths {
        &self.unbound().opts.paths
    }

    pub fn is_running(&mut self) -> bool {
        self.sup.is_running()
    }

    /// Validates and renders without touching anything (for /v1/config/validate).
    pub fn render_checked(
        &self,
        cfg: &DnsConfig,
        served_subnets: &[Cidr],
    ) -> Result<Option<String>, DnsError> {
        Ok(self.rendered(cfg, served_subnets)?.map(|(_, text)| text))
    }

    /// The served subnets as unbound.conf has them, and unbound.conf; None when the resolver
    /// is off. Validates first.
    fn rendered(
        &self,
        cfg: &DnsConfig,
        served_subnets: &[Cidr],
    ) -> Result<Option<(Vec<Cidr>, String)>, DnsError> {
        cfg.validate()?;
        if !cfg.enabled {
            return Ok(None);
        }
        let served = check_served_subnets(served_subnets)?;
        let upstreams: Vec<Upstream> = cfg.upstreams()?;
        let text = render(cfg, &served, &upstreams, &self.unbound().opts.paths);
        Ok(Some((served, text)))
    }

    /// Validates, renders, checks the candidate with `unbound-checkconf`, and only then swaps
    /// it in and (re)starts unbound. On any failure the running unbound and its unbound.conf
    /// stay as they were.
    pub fn apply(
        &mut self,
        cfg: &DnsConfig,
        served_subnets: &[Cidr],
    ) -> Result<ApplyReport, DnsError> {
        let Some((served, text)) = self.rendered(cfg, served_subnets)? else {
            self.sup.disable();
            return Ok(ApplyReport {
                action: ApplyAction::Stopped,
                cache_records_kept: None,
                unbound_conf: None,
            });
        };
        self.unbound().check_paths()?;
        self.install(cfg, served, text)
    }

    /// The second half of `apply`: `text` (what `render` made of `cfg`) goes through
    /// `unbound-checkconf` and only then replaces the running configuration. Public so a test
    /// can hand it a text this unbound refuses, standing in for what validation cannot see
    /// (an unbound older than the renderer, a directive it was built without).
    pub fn install(
        &mut self,
        cfg: &DnsConfig,
        served: Vec<Cidr>,
        text: String,
    ) -> Result<ApplyReport, DnsError> {
        let installed = self
            .sup
            .install(cfg, served.clone(), &text, |sup, old, candidate| {
                // The new unbound starts empty: carry the old one's cache over.
                let dump = sup.service().control(&["dump_cache"], None).ok();
                if let Err(failed) = sup.restart(old, cfg, served, candidate) {
                    // The previous config is back (the supervisor put it back): its cache too.
                    if let (true, Some(d)) = (failed.restored, &dump) {
                        let _ = sup.service().control(&["load_cache"], Some(d));
                    }
                    return Err(failed.error);
                }
                Ok(dump.as_deref().map(|d| {
                    let n = count_cache_records(d);
                    match sup.service().control(&["load_cache"], Some(d)) {
                        Ok(_) => n,
                        Err(_) => 0,
                    }
                }))
            })?;
        let (action, cache_records_kept) = match installed {
            Installed::Unchanged => (ApplyAction::Unchanged, None),
            Installed::Started => (ApplyAction::Started, None),
            Installed::Replaced(kept) => (ApplyAction::Restarted, kept),
        };
        Ok(ApplyReport {
            action,
            cache_records_kept,
            unbound_conf: Some(text),
        })
    }

    /// Restarts unbound with the last applied config if it died. Ok(true) when it restarted.
    pub fn ensure_running(&mut self) -> Result<bool, DnsError> {
        self.sup.ensure_running()
    }

    /// Whether a config with enabled: true is applied (running or due to be restarted).
    pub fn wanted(&self) -> bool {
        self.sup.desired().is_some()
    }

    /// Shuts unbound down (its counters are kept). Idempotent.
    pub fn stop(&mut self) {
        self.sup.stop();
    }

    /// Reads unbound's counters into the accumulator (call it periodically: what a crash
    /// takes with it is at most what came since the last call).
    pub fn refresh_counters(&mut self) {
        refresh_counters(&mut self.sup);
    }

    pub fn totals(&self) -> Totals {
        self.unbound().counters.totals()
    }

    /// Counters plus what the manager knows about the process.
    pub fn stats(&mut self) -> DnsStats {
        self.refresh_counters();
        let t = self.totals();
        let cfg = self.sup.desired().map(|(c, _)| c.clone());
        let unbound = self.unbound();
        let mut problems = unbound.notes.clone();
        if let Some(e) = self.sup.last_exit() {
            problems.push(e.to_string());
        }
        let running = self.sup.running().is_some();
        DnsStats {
            enabled: cfg.is_some(),
            running,
            unbound_version: unbound.version.clone(),
            upstreams: cfg
                .as_ref()
                .map(|c| c.upstream.iter().map(|u| u.to_string()).collect())
                .unwrap_or_default(),
            queries: t.queries,
            cache_hits: t.cache_hits,
            cache_misses: t.cache_misses,
            hit_ratio: t.hit_ratio(),
            stale_answers: t.expired,
            prefetches: t.prefetches,
            upstream_resolutions: t.recursive_replies,
            servfail_answers: t.servfail,
            ratelimited_queries: t.ratelimited,
            mean_upstream_ms: t.mean_upstream_s().map(|s| s * 1000.0),
            satellite_time_saved_s: t.satellite_time_saved_s(),
            cache_memory_used_bytes: if running {
                unbound.counters.current().cache_memory_bytes
            } else {
                None
            },
            cache_memory_capacity_bytes: cfg.map(|c| u64::from(c.cache_mb) * 1024 * 1024),
            problems,
        }
    }

    /// Removes one name (and everything below it) from the cache, or everything.
    pub fn flush(&mut self, name: Option<&str>) -> Result<(), DnsError> {
        if !self.is_running() {
            return Err(DnsError::new("not_running", "the resolver is not running"));
        }
        let zone = match name {
            None => ".".to_string(),
            Some(n) => validate_name(n).map_err(|m| DnsError {
                code: "invalid_request",
                message: m,
                field: Some("name".into()),
            })?,
        };
        let unbound = self.unbound();
        unbound
            .control(&["flush_zone", &zone], None)
            .and_then(|_| {
                // Negative answers and the upstreams' timing too, when everything goes.
                if name.is_none() {
                    unbound.control(&["flush_negative"], None)?;
                    unbound.control(&["flush_infra", "all"], None)?;
                }
                Ok(())
            })
            .map(|_| ())
            .map_err(|m| DnsError::new("flush_failed", m))
    }
}

fn refresh_counters(sup: &mut Supervisor<Unbound>) {
    if !sup.is_running() {
        return;
    }
    if let Ok(text) = sup.service().control(&["stats_noreset"], None) {
        sup.service_mut().counters.update(parse_stats(&text));
    }
}

impl Service for Unbound {
    type Config = DnsConfig;
    const NAME: &'static str = "unbound";
    const IO_CODE: &'static str = "unbound_io";
    const START_CODE: &'static str = "unbound_start";
    const READY_SETTLE: Duration = Duration::ZERO;
    const READY_POLL: Duration = Duration::from_millis(50);
    const STOP_GRACE: Duration = Duration::from_secs(5);
    const STOP_POLL: Duration = Duration::from_millis(20);

    fn conf(&self) -> PathBuf {
        self.opts.paths.conf()
    }

    fn write_conf(&self, path: &Path, text: &str) -> std::io::Result<()> {
        write_readable(path, text)
    }

    /// `unbound-checkconf FILE`: unbound's own verdict on the rendered file.
    fn check(&self, file: &Path) -> Result<(), DnsError> {
        let out = Command::new(&self.opts.checkconf_bin)
            .arg(file)
            .stdin(Stdio::null())
            .output()
            .map_err(|e| {
                DnsError::new(
                    "unbound_checkconf",
                    format!("cannot run {}: {e}", self.opts.checkconf_bin.display()),
                )
            })?;
        if out.status.success() {
            return Ok(());
        }
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stderr),
            String::from_utf8_lossy(&out.stdout)
        );
        let detail: Vec<&str> = text
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .take(4)
            .collect();
        Err(DnsError::new(
            "unbound_checkconf",
            format!(
                "unbound-checkconf rejected the rendered configuration: {}",
                detail.join("; ")
            ),
        ))
    }

    /// Our directories: unbound (after dropping to its user) reads its config from the state
    /// dir, so both are world-traversable; the control socket is unbound's own (root/unbound).
    fn prepare_dirs(&self, _cfg: &DnsConfig) -> Result<(), DnsError> {
        let p = &self.opts.paths;
        for dir in [&p.state_dir, &p.run_dir] {
            std::fs::create_dir_all(dir).map_err(io_err("creating the resolver's directories"))?;
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755))
                .map_err(io_err("setting the resolver's directory permissions"))?;
        }
        Ok(())
    }

    /// An unbound left by an earlier daemon that was killed (same control socket): stop it,
    /// so this one can have port 53.
    fn stop_stale(&self) {
        let sock = self.opts.paths.control_socket();
        if !sock.exists() {
            return;
        }
        if self.control(&["stop"], None).is_ok() {
            let deadline = Instant::now() + Duration::from_secs(5);
            while Instant::now() < deadline && self.control(&["status"], None).is_ok() {
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        self.remove_run_files();
    }

    fn output_log(&self) -> (PathBuf, &'static str) {
        (self.opts.paths.log(), "unbound.log")
    }

    /// -d: stay in the foreground as our child (logging to stderr, i.e. unbound.log).
    fn command(&self) -> Command {
        let mut cmd = Command::new(&self.opts.unbound_bin);
        cmd.arg("-d").arg("-c").arg(self.opts.paths.conf());
        cmd
    }

    /// It answers on its control socket.
    fn ready(&self, _cfg: &DnsConfig) -> bool {
        self.control(&["status"], None).is_ok()
    }

    fn ready_timeout(&self) -> Duration {
        self.opts.ready_timeout
    }

    fn not_ready(&self, _cfg: &DnsConfig) -> String {
        format!(
            "unbound did not answer on {} within {:?}; see {}",
            self.opts.paths.control_socket().display(),
            self.opts.ready_timeout,
            self.opts.paths.log().display()
        )
    }

    fn death_detail(&self) -> String {
        let tail = log_tail(&self.opts.paths.log());
        if tail.is_empty() {
            String::new()
        } else {
            format!(": {tail}")
        }
    }

    fn exit_log(&self) -> PathBuf {
        self.opts.paths.log()
    }

    /// What the dead unbound counted is kept.
    fn exited(&mut self, _child: &Child) {
        self.counters.carry();
    }

    /// Its counters are read one last time and kept.
    fn before_stop(sup: &mut Supervisor<Self>) {
        refresh_counters(sup);
        sup.service_mut().counters.carry();
    }

    fn shutdown(&self) {
        let _ = self.control(&["stop"], None);
    }

    fn kill(&self, child: &mut Child) {
        let _ = child.kill();
    }

    fn stopped(&mut self) {
        self.remove_run_files();
    }
}

impl Unbound {
    /// Runs `unbound-control -c <conf> args...`, stdin from `input`; Ok(stdout) on success.
    fn control(&self, args: &[&str], input: Option<&str>) -> Result<String, String> {
        let mut cmd = Command::new(&self.opts.control_bin);
        cmd.arg("-c")
            .arg(self.opts.paths.conf())
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .stdin(if input.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            });
        let mut child = cmd
            .spawn()
            .map_err(|e| format!("cannot run {}: {e}", self.opts.control_bin.display()))?;
        // A hung unbound must not hang the daemon: feed and reap unbound-control on a thread,
        // and give up (killing it) after CONTROL_TIMEOUT.
        let pid = child.id();
        let stdin = child.stdin.take();
        let text = input.map(str::to_owned);
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            if let (Some(t), Some(mut pipe)) = (text, stdin) {
                let _ = pipe.write_all(t.as_bytes());
            }
            let _ = tx.send(child.wait_with_output());
        });
        let out = match rx.recv_timeout(CONTROL_TIMEOUT) {
            Ok(r) => r.map_err(|e| format!("unbound-control {}: {e}", args.join(" ")))?,
            Err(_) => {
                // SAFETY: kill(2) on the unbound-control child this call started.
                unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
                return Err(format!(
                    "unbound-control {} did not finish within {CONTROL_TIMEOUT:?}",
                    args.join(" ")
                ));
            }
        };
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        // unbound-control exits 0 for some refusals and prints "error ..." instead.
        if out.status.success() && !stdout.starts_with("error") {
            Ok(stdout)
        } else {
            Err(format!(
                "unbound-control {} failed: {}{}",
                args.join(" "),
                stdout.trim(),
                String::from_utf8_lossy(&out.stderr).trim()
            ))
        }
    }

    /// The paths go into unbound.conf between double quotes: refuse a quote or newline.
    fn check_paths(&self) -> Result<(), DnsError> {
        let p = &self.opts.paths;
        for path in [&p.state_dir, &p.run_dir] {
            let s = path.to_string_lossy();
            if s.contains(['"', '\n', '\r']) || !path.is_absolute() {
                return Err(DnsError::new(
                    "unbound_io",
                    format!("{s:?}: the resolver's directories must be absolute paths without quotes or newlines"),
                ));
            }
        }
        if !p
            .user
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_-.".contains(&b))
        {
            return Err(DnsError::new("unbound_io", "bad unbound user name"));
        }
        Ok(())
    }

    fn remove_run_files(&self) {
        let _ = std::fs::remove_file(self.opts.paths.pid_file());
        let _ = std::fs::remove_file(self.opts.paths.control_socket());
    }
}

/// The config file is read again by unbound after it dropped to its user (on reload), so it
/// is world-readable; it holds nothing secret.
fn write_readable(path: &Path, text: &str) -> std::io::Result<()> {
    std::fs::write(path, text)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o644))
}

/// The last error-looking lines unbound wrote, for start failures.
fn log_tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text
        .lines()
        .rev()
        .filter(|l| l.contains("error") || l.contains("fatal"))
        .take(3)
        .collect();
    lines.into_iter().rev().collect::<Vec<_>>().join("; ")
}

/// Records in a dump_cache text (lines that are neither section markers nor message headers).
fn count_cache_records(dump: &str) -> u64 {
    dump.lines()
        .filter(|l| {
            !l.is_empty()
                && !l.starts_with("START_")
                && !l.starts_with("END_")
                && !l.starts_with(';')
                && !l.starts_with("msg ")
        })
        .count() as u64
}

/// "Version 1.17.1" in `unbound -V` output.
pub fn parse_version(text: &str) -> Option<String> {
    let rest = text.split("Version ").nth(1)?;
    let v: String = rest
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '.')
        .collect();
    (!v.is_empty()).then_some(v)
}

/// A domain name for flush: letters, digits, '-', '_' and dots, 1-253 characters.
pub fn validate_name(name: &str) -> Result<String, String> {
    let n = name.strip_suffix('.').unwrap_or(name).to_ascii_lowercase();
    let ok = !n.is_empty()
        && n.len() <= 253
        && n.split('.').all(|l| {
            !l.is_empty()
                && l.len() <= 63
                && l.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        });
    if ok {
        Ok(n)
    } else {
        Err(format!("{name:?} is not a domain name"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_version() {
        assert_eq!(
            parse_version("\nVersion 1.17.1\n\nConfigure line: ...").as_deref(),
            Some("1.17.1")
        );
        assert_eq!(parse_version("nothing"), None);
    }

    #[test]
    fn flush_names_are_domain_names_only() {
        assert_eq!(validate_name("WWW.Example.").unwrap(), "www.example");
        assert_eq!(validate_name("_dmarc.example").unwrap(), "_dmarc.example");
        for bad in ["", ".", "a..b", "a b", "a;b", "x\nstop", &"a".repeat(64)] {
            assert!(validate_name(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn counts_records_in_a_cache_dump() {
        let dump = "START_RRSET_CACHE\n;rrset 86395 1 0 2 0\na.example.\t86395\tIN\tA\t192.0.2.1\n\
                    END_RRSET_CACHE\nSTART_MSG_CACHE\nmsg a.example. IN A 33152 1 86395 0 1 0 0 -1\n\
                    a.example. IN A 0\nEND_MSG_CACHE\nEOF\n";
        // One RRset record, one message reference, and the EOF line.
        assert_eq!(count_cache_records(dump), 3);
    }

    #[test]
    fn a_manager_without_unbound_reports_why() {
        let dir = std::env::temp_dir().join(format!("pd-mgr-{}", std::process::id()));
        let mut m = UnboundManager::new(ManagerOptions {
            unbound_bin: "/nonexistent/unbound".into(),
            paths: UnboundPaths {
                state_dir: dir.join("state"),
                run_dir: dir.join("run"),
                user: "no-such-user-pd".into(),
            },
            ..ManagerOptions::default()
        });
        assert_eq!(m.version(), None);
        let s = m.stats();
        assert!(!s.running && !s.enabled);
        assert!(
            s.problems.iter().any(|p| p.contains("cannot run")),
            "{:?}",
            s.problems
        );
        assert!(
            s.problems.iter().any(|p| p.contains("runs as root")),
            "{:?}",
            s.problems
        );
        assert_eq!(m.flush(None).unwrap_err().code, "not_running");
        // Disabled: nothing to start, nothing created.
        let r = m.apply(&DnsConfig::default(), &[]).unwrap();
        assert_eq!(r.action, ApplyAction::Stopped);
        assert!(!dir.exists());
        let e = m
            .apply(
                &DnsConfig {
                    enabled: true,
                    ..DnsConfig::default()
                },
                &["10.0.0.0/8".parse().unwrap()],
            )
            .unwrap_err();
        assert_eq!(
            (e.code, e.field.as_deref()),
            ("invalid_config", Some("dns.upstream"))
        );
    }

    #[test]
    fn manager_can_move_between_threads() {
        fn assert_send<T: Send>() {}
        assert_send::<UnboundManager>();
    }
}
