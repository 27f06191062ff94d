//! Runs unbound as a child of the gateway daemon: apply (checkconf → swap → restart with the
//! cache carried over), stop, flush, and the counters behind `/v1/dns/stats`.

use serde::Serialize;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::config::{check_served_subnets, ConfigError, DnsConfig, Upstream};
use crate::render::{render, UnboundPaths};
use crate::stats::{parse_stats, Accumulator, Totals};
use perigee_types::Cidr;

/// A failed manager operation, shaped like the control protocol's error object.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, thiserror::Error)]
#[error("{code}: {message}")]
pub struct DnsError {
    /// invalid_config | unbound_checkconf | unbound_start | unbound_io | not_running | flush_failed
    pub code: &'static str,
    pub message: String,
    pub field: Option<String>,
}

impl DnsError {
    pub(crate) fn new(code: &'static str, message: impl Into<String>) -> Self {
        DnsError {
            code,
            message: message.into(),
            field: None,
        }
    }
}

impl From<ConfigError> for DnsError {
    fn from(e: ConfigError) -> Self {
        DnsError {
            code: "invalid_config",
            message: e.message,
            field: Some(e.field),
        }
    }
}

fn io_err(what: &str) -> impl FnOnce(std::io::Error) -> DnsError + '_ {
    move |e| DnsError::new("unbound_io", format!("{what}: {e}"))
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

/// What apply did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ApplyAction {
    Started,
    /// Restarted on the new unbound.conf, the cache carried over (dump_cache / load_cache).
    Restarted,
    Stopped,
    /// Running with exactly this unbound.conf already: nothing touched.
    Unchanged,
}

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

struct Running {
    child: Child,
    config: DnsConfig,
    served: Vec<Cidr>,
}

pub struct UnboundManager {
    opts: ManagerOptions,
    version: Option<String>,
    /// Things the operator should know that do not stop the resolver (e.g. running as root).
    notes: Vec<String>,
    running: Option<Running>,
    /// The last config applied with enabled: true (kept when unbound dies, so
    /// ensure_running can bring it back).
    desired: Option<(DnsConfig, Vec<Cidr>)>,
    last_exit: Option<String>,
    counters: Accumulator,
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
            opts,
            version,
            notes,
            running: None,
            desired: None,
            last_exit: None,
            counters: Accumulator::default(),
        }
    }

    pub fn version(&self) -> Option<&str> {
        self.version.as_deref()
    }

    pub fn paths(&self) -> &UnboundPaths {
        &self.opts.paths
    }

    pub fn is_running(&mut self) -> bool {
        self.reap();
        self.running.is_some()
    }

    /// Validates and renders without touching anything (for /v1/config/validate).
    pub fn render_checked(
        &self,
        cfg: &DnsConfig,
        served_subnets: &[Cidr],
    ) -> Result<Option<String>, DnsError> {
        cfg.validate()?;
        if !cfg.enabled {
            return Ok(None);
        }
        let served = check_served_subnets(served_subnets)?;
        Ok(Some(render(
            cfg,
            &served,
            &cfg.upstreams()?,
            &self.opts.paths,
        )))
    }

    /// Validates, renders, checks the candidate with `unbound-checkconf`, and only then swaps
    /// it in and (re)starts unbound. On any failure the running unbound and its unbound.conf
    /// stay as they were.
    pub fn apply(
        &mut self,
        cfg: &DnsConfig,
        served_subnets: &[Cidr],
    ) -> Result<ApplyReport, DnsError> {
        cfg.validate()?;
        if !cfg.enabled {
            self.stop();
            self.desired = None;
            return Ok(ApplyReport {
                action: ApplyAction::Stopped,
                cache_records_kept: None,
                unbound_conf: None,
            });
        }
        let served = check_served_subnets(served_subnets)?;
        let upstreams: Vec<Upstream> = cfg.upstreams()?;
        self.check_paths()?;
        let text = render(cfg, &served, &upstreams, &self.opts.paths);
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
        self.reap();
        if self.running.is_some()
            && std::fs::read_to_string(self.opts.paths.conf())
                .ok()
                .as_deref()
                == Some(&text)
        {
            if let Some(run) = self.running.as_mut() {
                run.config = cfg.clone();
                run.served = served.clone();
            }
            self.desired = Some((cfg.clone(), served));
            return Ok(ApplyReport {
                action: ApplyAction::Unchanged,
                cache_records_kept: None,
                unbound_conf: Some(text),
            });
        }
        self.prepare_dirs()?;
        let candidate = self.opts.paths.candidate_conf();
        write_readable(&candidate, &text).map_err(io_err("writing candidate unbound.conf"))?;
        if let Err(e) = self.checkconf(&candidate) {
            let _ = std::fs::remove_file(&candidate);
            return Err(e);
        }
        let (action, kept) = match self.running.take() {
            None => {
                self.swap_in(&candidate)?;
                self.spawn(cfg, served.clone())?;
                (ApplyAction::Started, None)
            }
            Some(old) => {
                let (old_cfg, old_served) = (old.config.clone(), old.served.clone());
                self.running = Some(old);
                // The new unbound starts empty: carry the old one's cache over.
                let dump = self.control(&["dump_cache"], None).ok();
                let old_text = std::fs::read_to_string(self.opts.paths.conf()).ok();
                self.stop();
                self.swap_in(&candidate)?;
                if let Err(e) = self.spawn(cfg, served.clone()) {
                    // Put the previous working config back rather than leave DNS down.
                    if let Some(t) = old_text {
                        let _ = write_readable(&self.opts.paths.conf(), &t);
                        if self.spawn(&old_cfg, old_served).is_ok() {
                            if let Some(d) = &dump {
                                let _ = self.control(&["load_cache"], Some(d));
                            }
                        }
                    }
                    return Err(e);
                }
                let kept = dump.as_deref().map(|d| {
                    let n = count_cache_records(d);
                    match self.control(&["load_cache"], Some(d)) {
                        Ok(_) => n,
                        Err(_) => 0,
                    }
                });
                (ApplyAction::Restarted, kept)
            }
        };
        self.desired = Some((cfg.clone(), served));
        Ok(ApplyReport {
            action,
            cache_records_kept: kept,
            unbound_conf: Some(text),
        })
    }

    /// Restarts unbound with the last applied config if it died. Ok(true) when it restarted.
    pub fn ensure_running(&mut self) -> Result<bool, DnsError> {
        self.reap();
        if self.running.is_some() {
            return Ok(false);
        }
        let Some((cfg, served)) = self.desired.clone() else {
            return Ok(false);
        };
        self.spawn(&cfg, served)?;
        Ok(true)
    }

    /// Whether a config with enabled: true is applied (running or due to be restarted).
    pub fn wanted(&self) -> bool {
        self.desired.is_some()
    }

    /// Shuts unbound down (its counters are kept). Idempotent.
    pub fn stop(&mut self) {
        self.refresh_counters();
        self.counters.carry();
        let Some(mut run) = self.running.take() else {
            return;
        };
        let _ = self.control(&["stop"], None);
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = run.child.try_wait() {
                self.remove_run_files();
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = run.child.kill();
        let _ = run.child.wait();
        self.remove_run_files();
    }

    /// Reads unbound's counters into the accumulator (call it periodically: what a crash
    /// takes with it is at most what came since the last call).
    pub fn refresh_counters(&mut self) {
        if !self.is_running() {
            return;
        }
        if let Ok(text) = self.control(&["stats_noreset"], None) {
            self.counters.update(parse_stats(&text));
        }
    }

    pub fn totals(&self) -> Totals {
        self.counters.totals()
    }

    /// Counters plus what the manager knows about the process.
    pub fn stats(&mut self) -> DnsStats {
        self.refresh_counters();
        let t = self.totals();
        let cfg = self.desired.as_ref().map(|(c, _)| c.clone());
        let mut problems = self.notes.clone();
        if let Some(e) = &self.last_exit {
            problems.push(e.clone());
        }
        let running = self.running.is_some();
        DnsStats {
            enabled: cfg.is_some(),
            running,
            unbound_version: self.version.clone(),
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
                self.counters.current().cache_memory_bytes
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
        self.control(&["flush_zone", &zone], None)
            .and_then(|_| {
                // Negative answers and the upstreams' timing too, when everything goes.
                if name.is_none() {
                    self.control(&["flush_negative"], None)?;
                    self.control(&["flush_infra", "all"], None)?;
                }
                Ok(())
            })
            .map(|_| ())
            .map_err(|m| DnsError::new("flush_failed", m))
    }

    /// Notices an unbound that exited on its own.
    fn reap(&mut self) {
        if let Some(run) = self.running.as_mut() {
            if let Ok(Some(status)) = run.child.try_wait() {
                self.last_exit = Some(format!(
                    "unbound exited unexpectedly ({status}); see {}",
                    self.opts.paths.log().display()
                ));
                self.running = None;
                self.counters.carry();
            }
        }
    }

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

    /// `unbound-checkconf FILE`: unbound's own verdict on the rendered file.
    fn checkconf(&self, file: &Path) -> Result<(), DnsError> {
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

    fn swap_in(&self, candidate: &Path) -> Result<(), DnsError> {
        std::fs::rename(candidate, self.opts.paths.conf())
            .map_err(io_err("installing unbound.conf"))
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

    /// Our directories: unbound (after dropping to its user) reads its config from the state
    /// dir, so both are world-traversable; the control socket is unbound's own (root/unbound).
    fn prepare_dirs(&self) -> Result<(), DnsError> {
        let p = &self.opts.paths;
        for dir in [&p.state_dir, &p.run_dir] {
            std::fs::create_dir_all(dir).map_err(io_err("creating the resolver's directories"))?;
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755))
                .map_err(io_err("setting the resolver's directory permissions"))?;
        }
        Ok(())
    }

    fn remove_run_files(&self) {
        let _ = std::fs::remove_file(self.opts.paths.pid_file());
        let _ = std::fs::remove_file(self.opts.paths.control_socket());
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

    fn spawn(&mut self, cfg: &DnsConfig, served: Vec<Cidr>) -> Result<(), DnsError> {
        self.stop_stale();
        self.prepare_dirs()?;
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.opts.paths.log())
            .map_err(io_err("opening unbound.log"))?;
        let log2 = log.try_clone().map_err(io_err("opening unbound.log"))?;
        // -d: stay in the foreground as our child (logging to stderr, i.e. unbound.log).
        let mut cmd = Command::new(&self.opts.unbound_bin);
        cmd.arg("-d")
            .arg("-c")
            .arg(self.opts.paths.conf())
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log2)
            .process_group(0);
        perigee_netsys::signals::TermSignals::unblock_in_child(&mut cmd);
        let child = cmd
            .spawn()
            .map_err(|e| DnsError::new("unbound_start", format!("cannot start unbound: {e}")))?;
        self.last_exit = None;
        self.running = Some(Running {
            child,
            config: cfg.clone(),
            served,
        });
        if let Err(m) = self.wait_ready() {
            self.stop();
            return Err(DnsError::new("unbound_start", m));
        }
        Ok(())
    }

    /// Waits until unbound answers on its control socket (or died).
    fn wait_ready(&mut self) -> Result<(), String> {
        let deadline = Instant::now() + self.opts.ready_timeout;
        loop {
            self.reap();
            if self.running.is_none() {
                let tail = log_tail(&self.opts.paths.log());
                return Err(format!(
                    "{}{}",
                    self.last_exit
                        .clone()
                        .unwrap_or_else(|| "unbound exited".into()),
                    if tail.is_empty() {
                        String::new()
                    } else {
                        format!(": {tail}")
                    }
                ));
            }
            if self.control(&["status"], None).is_ok() {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "unbound did not answer on {} within {:?}; see {}",
                    self.opts.paths.control_socket().display(),
                    self.opts.ready_timeout,
                    self.opts.paths.log().display()
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for UnboundManager {
    fn drop(&mut self) {
        self.stop();
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

fn lookup_user(name: &str) -> Option<(u32, u32)> {
    let passwd = std::fs::read_to_string("/etc/passwd").ok()?;
    passwd.lines().find_map(|l| {
        let f: Vec<&str> = l.split(':').collect();
        (f.len() > 3 && f[0] == name)
            .then(|| Some((f[2].parse().ok()?, f[3].parse().ok()?)))
            .flatten()
    })
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
