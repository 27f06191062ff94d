//! Runs Squid as a child of the gateway daemon: apply (parse → swap → reconfigure/restart),
//! stop, purge, and the access-log follower that feeds the request ring and counters.

use serde::Serialize;
use std::collections::VecDeque;
use std::net::IpAddr;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::access_log::{parse_access_line, AccessRecord, RequestCounters, RequestRing};
use crate::admin::{self, StoreInfo};
use crate::config::{CacheConfig, ConfigError};
use crate::render::{render, SquidPaths};
use crate::served::{check_served_subnets, ServedLimits};
use crate::tailer::AccessLogTailer;
use crate::version::{
    collapsed_forwarding_safe, parse_squid_v, SquidVersion, COLLAPSED_FORWARDING_ADVISORY,
};
use perigee_types::Cidr;

/// Debian's Squid keeps its IPC sockets here (compiled-in DEFAULT_STATEDIR).
pub const SQUID_IPC_DIR: &str = "/run/squid";

/// A failed manager operation, shaped like the control protocol's error object.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, thiserror::Error)]
#[error("{code}: {message}")]
pub struct SquidError {
    /// invalid_config | squid_parse | squid_start | squid_reconfigure | squid_io | not_running | purge_failed
    pub code: &'static str,
    pub message: String,
    pub field: Option<String>,
}

impl SquidError {
    fn new(code: &'static str, message: impl Into<String>) -> Self {
        SquidError {
            code,
            message: message.into(),
            field: None,
        }
    }
}

impl From<ConfigError> for SquidError {
    fn from(e: ConfigError) -> Self {
        SquidError {
            code: "invalid_config",
            message: e.message,
            field: Some(e.field),
        }
    }
}

fn io_err(what: &str) -> impl FnOnce(std::io::Error) -> SquidError + '_ {
    move |e| SquidError::new("squid_io", format!("{what}: {e}"))
}

#[derive(Debug, Clone)]
pub struct ManagerOptions {
    pub squid_bin: PathBuf,
    pub paths: SquidPaths,
    /// Parsed requests kept until collected; the oldest are dropped beyond this.
    pub ring_capacity: usize,
    pub poll_interval: Duration,
    pub ready_timeout: Duration,
}

impl Default for ManagerOptions {
    fn default() -> Self {
        ManagerOptions {
            squid_bin: PathBuf::from("squid"),
            paths: SquidPaths::default(),
            ring_capacity: 10_000,
            poll_interval: Duration::from_millis(250),
            ready_timeout: Duration::from_secs(30),
        }
    }
}

/// What apply did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ApplyAction {
    Started,
    Reconfigured,
    Restarted,
    Stopped,
    /// Running with exactly this squid.conf already: nothing touched.
    Unchanged,
}

#[derive(Debug, Clone, Serialize)]
pub struct ApplyReport {
    pub action: ApplyAction,
    pub collapsed_forwarding_effective: bool,
    pub squid_conf: Option<String>,
}

/// GET /v1/cache/stats.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct CacheStats {
    pub enabled: bool,
    pub running: bool,
    pub squid_version: Option<String>,
    pub collapsed_forwarding_requested: bool,
    pub collapsed_forwarding_effective: bool,
    pub requests: u64,
    pub hits: u64,
    pub misses: u64,
    pub denied: u64,
    pub hit_ratio_requests: f64,
    pub hit_ratio_bytes: f64,
    pub bytes_to_clients: u64,
    pub bytes_from_cache: u64,
    pub bytes_from_origin: u64,
    pub bytes_saved_satellite: u64,
    pub memory_used_bytes: Option<u64>,
    pub memory_capacity_bytes: Option<u64>,
    pub disk_used_bytes: Option<u64>,
    pub disk_capacity_bytes: Option<u64>,
    pub store_entries: Option<u64>,
    pub requests_buffered: usize,
    pub requests_dropped: u64,
    pub unparsed_lines: u64,
    pub problems: Vec<String>,
}

struct Shared {
    tailer: Mutex<AccessLogTailer>,
    ring: Mutex<RequestRing>,
    counters: Mutex<RequestCounters>,
    feed: RecordFeed,
}

/// Requests as they are logged, for one consumer that joins them to Squid's connections
/// (the daemon's live cache flows). Bounded: the oldest are dropped when nobody takes them.
#[derive(Clone, Default)]
pub struct RecordFeed(Arc<Mutex<VecDeque<AccessRecord>>>);

/// How many logged requests the feed holds for its consumer.
const FEED_CAPACITY: usize = 20_000;

impl RecordFeed {
    fn push(&self, r: &AccessRecord) {
        let mut q = lock(&self.0);
        if q.len() == FEED_CAPACITY {
            q.pop_front();
        }
        q.push_back(r.clone());
    }

    /// Everything logged since the last call, oldest first.
    pub fn take(&self) -> Vec<AccessRecord> {
        lock(&self.0).drain(..).collect()
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Shared {
    /// Moves new access-log lines into the ring and counters.
    fn pump(&self) {
        let lines = match lock(&self.tailer).poll() {
            Ok(l) => l,
            Err(_) => return,
        };
        if lines.is_empty() {
            return;
        }
        let mut ring = lock(&self.ring);
        let mut counters = lock(&self.counters);
        for line in lines {
            match parse_access_line(&line) {
                Ok(rec) => {
                    counters.add(&rec);
                    self.feed.push(&rec);
                    ring.push(rec);
                }
                Err(_) => counters.unparsed_lines += 1,
            }
        }
    }
}

struct Running {
    child: Child,
    config: CacheConfig,
    served: Vec<Cidr>,
}

pub struct SquidManager {
    opts: ManagerOptions,
    version: Option<SquidVersion>,
    version_problem: Option<String>,
    running: Option<Running>,
    /// The last config that was successfully applied with enabled: true (kept when Squid dies,
    /// so ensure_running can bring it back).
    desired: Option<(CacheConfig, Vec<Cidr>)>,
    last_exit: Option<String>,
    shared: Arc<Shared>,
    stop_flag: Arc<AtomicBool>,
    follower: Option<JoinHandle<()>>,
}

impl SquidManager {
    /// Detects Squid's version (`squid -v`) and starts following the access log.
    pub fn new(opts: ManagerOptions) -> Self {
        let (version, version_problem) = match Command::new(&opts.squid_bin).arg("-v").output() {
            Ok(out) => {
                let text = String::from_utf8_lossy(&out.stdout).into_owned();
                let problem = (!text.contains("--enable-linux-netfilter")).then(|| {
                    "squid was built without --enable-linux-netfilter: TPROXY unavailable"
                        .to_string()
                });
                (parse_squid_v(&text), problem)
            }
            Err(e) => (
                None,
                Some(format!("cannot run {}: {e}", opts.squid_bin.display())),
            ),
        };
        let shared = Arc::new(Shared {
            tailer: Mutex::new(AccessLogTailer::new(opts.paths.access_log(), false)),
            ring: Mutex::new(RequestRing::new(opts.ring_capacity)),
            counters: Mutex::new(RequestCounters::default()),
            feed: RecordFeed::default(),
        });
        let stop_flag = Arc::new(AtomicBool::new(false));
        let follower = {
            let (shared, stop, every) = (shared.clone(), stop_flag.clone(), opts.poll_interval);
            std::thread::Builder::new()
                .name("squid-log".into())
                .spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        shared.pump();
                        std::thread::sleep(every);
                    }
                })
                .ok()
        };
        SquidManager {
            opts,
            version,
            version_problem,
            running: None,
            desired: None,
            last_exit: None,
            shared,
            stop_flag,
            follower,
        }
    }

    /// The feed of logged requests (the same records the counters and the ring get).
    pub fn record_feed(&self) -> RecordFeed {
        self.shared.feed.clone()
    }

    /// The process group of the running Squid (its master leads it; kids and helpers share
    /// it): whose sockets are the cache's.
    pub fn process_group(&self) -> Option<i32> {
        self.running.as_ref().map(|r| r.child.id() as i32)
    }

    pub fn version(&self) -> Option<SquidVersion> {
        self.version
    }

    pub fn paths(&self) -> &SquidPaths {
        &self.opts.paths
    }

    /// Validates and renders without touching anything (for /v1/config/validate).
    pub fn render_checked(
        &self,
        cfg: &CacheConfig,
        served_subnets: &[Cidr],
        limits: &ServedLimits,
        nameservers: &[IpAddr],
    ) -> Result<Option<String>, SquidError> {
        cfg.validate()?;
        if !cfg.enabled {
            return Ok(None);
        }
        let served = check_served_subnets(served_subnets, limits)?;
        check_nameservers(nameservers)?;
        Ok(Some(render(
            cfg,
            &served,
            nameservers,
            &self.opts.paths,
            self.version,
        )))
    }

    /// Same as apply; named for the daemon's first call.
    pub fn start(
        &mut self,
        cfg: &CacheConfig,
        served_subnets: &[Cidr],
        limits: &ServedLimits,
        nameservers: &[IpAddr],
    ) -> Result<ApplyReport, SquidError> {
        self.apply(cfg, served_subnets, limits, nameservers)
    }

    /// Validates, renders, checks the candidate with `squid -k parse`, and only then swaps it in
    /// and reconfigures (or starts/restarts). On any failure the running Squid and its
    /// squid.conf stay as they were. `nameservers` are Squid's resolvers (never the system's
    /// /etc/resolv.conf).
    pub fn apply(
        &mut self,
        cfg: &CacheConfig,
        served_subnets: &[Cidr],
        limits: &ServedLimits,
        nameservers: &[IpAddr],
    ) -> Result<ApplyReport, SquidError> {
        cfg.validate()?;
        if !cfg.enabled {
            self.stop();
            self.desired = None;
            return Ok(ApplyReport {
                action: ApplyAction::Stopped,
                collapsed_forwarding_effective: false,
                squid_conf: None,
            });
        }
        let served = check_served_subnets(served_subnets, limits)?;
        check_nameservers(nameservers)?;
        let text = render(cfg, &served, nameservers, &self.opts.paths, self.version);
        let collapsed_forwarding_effective =
            cfg.collapsed_forwarding && collapsed_forwarding_safe(self.version);
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
                collapsed_forwarding_effective,
                squid_conf: Some(text),
            });
        }
        self.prepare_dirs(cfg)?;
        let candidate = self.opts.paths.candidate_conf();
        std::fs::write(&candidate, &text).map_err(io_err("writing candidate squid.conf"))?;
        if let Err(e) = self.parse_check(&candidate) {
            let _ = std::fs::remove_file(&candidate);
            return Err(e);
        }
        let action = match self.running.take() {
            None => {
                self.swap_in(&candidate)?;
                self.spawn(cfg, served.clone())?;
                ApplyAction::Started
            }
            Some(old) if needs_restart(&old.config, cfg) => {
                let (old_cfg, old_served) = (old.config.clone(), old.served.clone());
                let old_text = std::fs::read_to_string(self.opts.paths.conf()).ok();
                self.running = Some(old);
                self.stop();
                self.swap_in(&candidate)?;
                if let Err(e) = self.spawn(cfg, served.clone()) {
                    // Put the previous working config back rather than leave the cache down.
                    if let Some(t) = old_text {
                        let _ = std::fs::write(self.opts.paths.conf(), t);
                        let _ = self.spawn(&old_cfg, old_served);
                    }
                    return Err(e);
                }
                ApplyAction::Restarted
            }
            Some(mut old) => {
                self.swap_in(&candidate)?;
                self.squid_k("reconfigure")
                    .map_err(|m| SquidError::new("squid_reconfigure", m))?;
                old.config = cfg.clone();
                old.served = served.clone();
                self.running = Some(old);
                self.wait_ready(cfg.admin_port)
                    .map_err(|m| SquidError::new("squid_reconfigure", m))?;
                ApplyAction::Reconfigured
            }
        };
        self.desired = Some((cfg.clone(), served));
        Ok(ApplyReport {
            action,
            collapsed_forwarding_effective,
            squid_conf: Some(text),
        })
    }

    /// Restarts Squid with the last applied config if it died. Ok(true) when it restarted.
    /// The daemon calls this periodically; while it returns an error the port-80 TPROXY rule
    /// should be withdrawn (fail open to the splitter) rather than send clients to a dead port.
    pub fn ensure_running(&mut self) -> Result<bool, SquidError> {
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

    /// Shuts Squid down (graceful, then forced). Idempotent.
    pub fn stop(&mut self) {
        let Some(mut run) = self.running.take() else {
            return;
        };
        let _ = self.squid_k("shutdown");
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = run.child.try_wait() {
                self.shared.pump();
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        // The master leads its own process group: take the kids down with it.
        let pgid = run.child.id() as libc::pid_t;
        // SAFETY: plain kill(2) on the process group we created for our own child.
        unsafe {
            libc::kill(-pgid, libc::SIGKILL);
        }
        let _ = run.child.wait();
        self.shared.pump();
    }

    /// Kills a Squid that runs but does not serve (its whole process group: a hung or
    /// half-dead Squid would not act on a graceful shutdown) and starts it again with the last
    /// applied config. Ok(false) when nothing was applied to start.
    pub fn restart_unresponsive(&mut self) -> Result<bool, SquidError> {
        if let Some(mut run) = self.running.take() {
            kill_group(run.child.id());
            let _ = run.child.wait();
            self.shared.pump();
        }
        self.ensure_running()
    }

    /// Whether our Squid process is alive.
    pub fn is_running(&mut self) -> bool {
        self.reap();
        self.running.is_some()
    }

    /// Removes one URL from the cache with an HTTP PURGE over the loopback admin port.
    /// Returns how many objects were removed (0 or 1).
    pub fn purge_url(&mut self, url: &str) -> Result<u64, SquidError> {
        let url_ok = (url.starts_with("http://") || url.starts_with("https://"))
            && url.len() <= 8192
            && !url.chars().any(|c| c.is_whitespace() || c.is_control());
        if !url_ok {
            return Err(SquidError {
                code: "invalid_config",
                message: "url must be an absolute http:// URL without spaces".into(),
                field: Some("url".into()),
            });
        }
        let port = self.running_config()?.admin_port;
        admin::purge(port, url)
            .map(u64::from)
            .map_err(|e| SquidError::new("purge_failed", e.to_string()))
    }

    /// Empties the whole cache: stop, delete the store, `squid -z`, start. Returns the number of
    /// objects the cache held before (0 when unknown).
    pub fn purge_all(&mut self) -> Result<u64, SquidError> {
        let cfg = self.running_config()?.clone();
        let served = self
            .running
            .as_ref()
            .map(|r| r.served.clone())
            .unwrap_or_default();
        let info = self.store_info().unwrap_or_default();
        let before = info
            .on_disk_objects
            .unwrap_or(0)
            .max(info.memory_objects.unwrap_or(0));
        self.stop();
        let store = self.opts.paths.store_dir(cfg.store);
        if store.exists() {
            std::fs::remove_dir_all(&store).map_err(io_err("removing the cache store"))?;
        }
        self.spawn(&cfg, served)?;
        Ok(before)
    }

    /// Drains the parsed-request ring (POST /v1/cache/requests/collect).
    pub fn collect_requests(&self) -> Vec<AccessRecord> {
        self.shared.pump();
        lock(&self.shared.ring).drain()
    }

    /// The newest requests without draining them.
    pub fn recent_requests(&self, limit: usize) -> Vec<AccessRecord> {
        self.shared.pump();
        lock(&self.shared.ring).recent(limit)
    }

    pub fn requests_dropped(&self) -> u64 {
        lock(&self.shared.ring).dropped()
    }

    /// Moves access.log and cache.log aside (to `*.1`, replacing older ones) and has Squid
    /// reopen them (`squid -k rotate`; logfile_rotate 0 means Squid itself renames nothing).
    /// The follower finishes the old file before switching, so no request is lost.
    pub fn rotate_logs(&mut self) -> Result<(), SquidError> {
        self.reap();
        if self.running.is_none() {
            return Err(SquidError::new("not_running", "the cache is not running"));
        }
        self.shared.pump();
        for log in [self.opts.paths.access_log(), self.opts.paths.cache_log()] {
            if log.exists() {
                let mut old = log.clone().into_os_string();
                old.push(".1");
                std::fs::rename(&log, old).map_err(io_err("rotating squid logs"))?;
            }
        }
        self.squid_k("rotate")
            .map_err(|m| SquidError::new("squid_io", m))
    }

    /// Rotates when access.log has grown past `max_bytes` (call it periodically).
    pub fn rotate_logs_if_larger(&mut self, max_bytes: u64) -> Result<bool, SquidError> {
        let size = std::fs::metadata(self.opts.paths.access_log())
            .map(|m| m.len())
            .unwrap_or(0);
        if size <= max_bytes {
            return Ok(false);
        }
        self.rotate_logs().map(|_| true)
    }

    pub fn counters(&self) -> RequestCounters {
        self.shared.pump();
        lock(&self.shared.counters).clone()
    }

    /// Counters from the access log plus storage use from the cache manager.
    pub fn stats(&mut self) -> CacheStats {
        self.reap();
        let c = self.counters();
        let (ring_len, dropped) = {
            let r = lock(&self.shared.ring);
            (r.len(), r.dropped())
        };
        let cfg = self.running.as_ref().map(|r| r.config.clone());
        let info = self.store_info();
        let mut problems: Vec<String> = self.version_problem.iter().cloned().collect();
        if let Some(e) = &self.last_exit {
            problems.push(e.clone());
        }
        if let (Some(cfg), Err(e)) = (&cfg, &info) {
            let _ = cfg;
            problems.push(format!("cache manager: {e}"));
        }
        let requested = cfg.as_ref().is_some_and(|c| c.collapsed_forwarding);
        let effective = requested && collapsed_forwarding_safe(self.version);
        if requested && !effective {
            problems.push(format!(
                "collapsed_forwarding requested but left off: Squid {} is affected by {}",
                self.version
                    .map_or_else(|| "unknown".into(), |v| v.to_string()),
                COLLAPSED_FORWARDING_ADVISORY.id
            ));
        }
        let info = info.unwrap_or_default();
        let mb = |v: u32| Some(u64::from(v) * 1024 * 1024);
        CacheStats {
            enabled: cfg.is_some(),
            running: self.running.is_some(),
            squid_version: self.version.map(|v| v.to_string()),
            collapsed_forwarding_requested: requested,
            collapsed_forwarding_effective: effective,
            requests: c.requests,
            hits: c.hits,
            misses: c.misses,
            denied: c.denied,
            hit_ratio_requests: c.hit_ratio_requests(),
            hit_ratio_bytes: c.hit_ratio_bytes(),
            bytes_to_clients: c.bytes,
            bytes_from_cache: c.hit_bytes,
            bytes_from_origin: c.upstream_bytes,
            bytes_saved_satellite: c.bytes_saved_satellite(),
            memory_used_bytes: info.memory_used_bytes,
            memory_capacity_bytes: cfg.as_ref().and_then(|c| mb(c.memory_mb)),
            disk_used_bytes: info.disk_used_bytes,
            disk_capacity_bytes: cfg.as_ref().and_then(|c| mb(c.disk_mb)),
            store_entries: info.store_entries,
            requests_buffered: ring_len,
            requests_dropped: dropped,
            unparsed_lines: c.unparsed_lines,
            problems,
        }
    }

    /// `mgr:info` storage figures.
    pub fn store_info(&self) -> Result<StoreInfo, String> {
        let port = self
            .running
            .as_ref()
            .map(|r| r.config.admin_port)
            .ok_or("squid is not running")?;
        admin::mgr_page(port, "info")
            .map(|t| admin::parse_mgr_info(&t))
            .map_err(|e| e.to_string())
    }

    fn running_config(&self) -> Result<&CacheConfig, SquidError> {
        self.running
            .as_ref()
            .map(|r| &r.config)
            .ok_or_else(|| SquidError::new("not_running", "the cache is not running"))
    }

    /// Notices a Squid that exited on its own.
    fn reap(&mut self) {
        if let Some(run) = self.running.as_mut() {
            if let Ok(Some(status)) = run.child.try_wait() {
                // A master that died without its kids (SIGKILL, a crash) leaves the coordinator
                // and the disker holding the service's IPC sockets and the store: the next Squid
                // of this service would never become ready. They share its process group.
                kill_group(run.child.id());
                self.last_exit = Some(format!(
                    "squid exited unexpectedly ({status}); see {}",
                    self.opts.paths.cache_log().display()
                ));
                self.running = None;
            }
        }
    }

    fn command(&self) -> Command {
        let mut c = Command::new(&self.opts.squid_bin);
        c.arg("-n").arg(&self.opts.paths.service_name);
        c
    }

    /// Runs `squid -k parse` on a candidate file. Squid exits 0 for some errors (unknown
    /// directives, bad regexes), so its messages are checked too.
    fn parse_check(&self, file: &Path) -> Result<(), SquidError> {
        let out = self
            .command()
            .arg("-k")
            .arg("parse")
            .arg("-f")
            .arg(file)
            .stdin(Stdio::null())
            .output()
            .map_err(|e| SquidError::new("squid_parse", format!("cannot run squid: {e}")))?;
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let errors = parse_errors(&text);
        if out.status.success() && errors.is_empty() {
            return Ok(());
        }
        let detail = if errors.is_empty() {
            format!("squid -k parse exited with {}", out.status)
        } else {
            errors.join("; ")
        };
        Err(SquidError::new(
            "squid_parse",
            format!("squid rejected the rendered configuration: {detail}"),
        ))
    }

    fn squid_k(&self, action: &str) -> Result<(), String> {
        let out = self
            .command()
            .arg("-k")
            .arg(action)
            .arg("-f")
            .arg(self.opts.paths.conf())
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("cannot run squid -k {action}: {e}"))?;
        if out.status.success() {
            Ok(())
        } else {
            Err(format!(
                "squid -k {action} failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ))
        }
    }

    fn swap_in(&self, candidate: &Path) -> Result<(), SquidError> {
        std::fs::rename(candidate, self.opts.paths.conf()).map_err(io_err("installing squid.conf"))
    }

    /// Creates our directories; Squid's user must own what it writes.
    fn prepare_dirs(&self, cfg: &CacheConfig) -> Result<(), SquidError> {
        let p = &self.opts.paths;
        let owner = lookup_user(&p.effective_user);
        for dir in [
            p.state_dir.clone(),
            p.run_dir.clone(),
            p.log_dir(),
            p.cache_root(),
        ] {
            std::fs::create_dir_all(&dir).map_err(io_err("creating squid directories"))?;
        }
        // Squid's SMP IPC sockets live in its compiled-in state dir (Debian: /run/squid, made
        // by tmpfiles.d or squid.service). Our `-n` name keeps them apart from a system Squid;
        // the directory itself may be missing when squid.service is disabled.
        let ipc_dir = Path::new(SQUID_IPC_DIR);
        let made_ipc_dir = !ipc_dir.exists() && std::fs::create_dir_all(ipc_dir).is_ok();
        if let Some((uid, gid)) = owner {
            if made_ipc_dir {
                let _ = std::os::unix::fs::chown(ipc_dir, Some(uid), Some(gid));
            }
            for dir in [p.run_dir.clone(), p.log_dir(), p.cache_root()] {
                std::os::unix::fs::chown(&dir, Some(uid), Some(gid))
                    .map_err(io_err("chown squid directories"))?;
            }
            for f in [p.access_log(), p.cache_log()] {
                if f.exists() {
                    let _ = std::os::unix::fs::chown(&f, Some(uid), Some(gid));
                }
            }
            let store = p.store_dir(cfg.store);
            if store.exists() {
                chown_tree(&store, uid, gid);
            }
        }
        Ok(())
    }

    /// Leftover Squid from an earlier daemon (same pid file): shut it down first. A daemon that
    /// stopped cleanly stopped its Squid, so a leftover belongs to a killed one: its process
    /// group goes at once (the rock store survives that), not after a graceful shutdown that
    /// would keep the restarted daemon from serving for seconds.
    fn stop_stale(&self) {
        if !self.opts.paths.pid_file().exists() {
            return;
        }
        if let Some(pid) = self.stale_leader() {
            kill_group(pid);
            let deadline = Instant::now() + Duration::from_secs(5);
            // SAFETY: kill(pid, 0) only probes for existence.
            while unsafe { libc::kill(pid as libc::pid_t, 0) } == 0 && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = std::fs::remove_file(self.opts.paths.pid_file());
            return;
        }
        if self.squid_k("shutdown").is_err() {
            // No such process: the pid file is a leftover of a killed Squid.
            let _ = std::fs::remove_file(self.opts.paths.pid_file());
            return;
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        while self.opts.paths.pid_file().exists() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The pid file's process when it is a Squid of this service leading its own process group
    /// (as `spawn` starts it), else None.
    fn stale_leader(&self) -> Option<u32> {
        let pid: u32 = std::fs::read_to_string(self.opts.paths.pid_file())
            .ok()?
            .trim()
            .parse()
            .ok()?;
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
        let args: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
        let is_ours = args.first().is_some_and(|a| a.ends_with(b"squid"))
            && args
                .windows(2)
                .any(|w| w[0] == b"-n" && w[1] == self.opts.paths.service_name.as_bytes());
        // SAFETY: getpgid has no memory effects.
        let leads = unsafe { libc::getpgid(pid as libc::pid_t) } == pid as libc::pid_t;
        (is_ours && leads).then_some(pid)
    }

    fn spawn(&mut self, cfg: &CacheConfig, served: Vec<Cidr>) -> Result<(), SquidError> {
        self.stop_stale();
        self.prepare_dirs(cfg)?;
        let conf = self.opts.paths.conf();
        // Create missing store directories/databases; existing ones are kept.
        let z = self
            .command()
            .args(["-N", "-z", "-f"])
            .arg(&conf)
            .stdin(Stdio::null())
            .output()
            .map_err(|e| SquidError::new("squid_start", format!("cannot run squid -z: {e}")))?;
        if !z.status.success() {
            return Err(SquidError::new(
                "squid_start",
                format!(
                    "squid -z failed: {}",
                    String::from_utf8_lossy(&z.stderr).trim()
                ),
            ));
        }
        let out_log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.opts.paths.log_dir().join("squid.out"))
            .map_err(io_err("opening squid.out"))?;
        let err_log = out_log.try_clone().map_err(io_err("opening squid.out"))?;
        let mut cmd = self.command();
        cmd.arg("--foreground")
            .arg("-f")
            .arg(&conf)
            .stdin(Stdio::null())
            .stdout(out_log)
            .stderr(err_log)
            .process_group(0);
        perigee_netsys::signals::TermSignals::unblock_in_child(&mut cmd);
        let child = cmd
            .spawn()
            .map_err(|e| SquidError::new("squid_start", format!("cannot start squid: {e}")))?;
        self.last_exit = None;
        self.running = Some(Running {
            child,
            config: cfg.clone(),
            served,
        });
        if let Err(m) = self.wait_ready(cfg.admin_port) {
            self.stop();
            return Err(SquidError::new("squid_start", m));
        }
        Ok(())
    }

    /// Waits until the cache manager answers on the admin port (or Squid died).
    fn wait_ready(&mut self, admin_port: u16) -> Result<(), String> {
        let deadline = Instant::now() + self.opts.ready_timeout;
        // After a reconfigure the old listener may answer briefly: give Squid a moment first.
        std::thread::sleep(Duration::from_millis(200));
        loop {
            self.reap();
            if self.running.is_none() {
                return Err(self
                    .last_exit
                    .clone()
                    .unwrap_or_else(|| "squid exited".into()));
            }
            if admin::mgr_page(admin_port, "info").is_ok() {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "squid did not answer on 127.0.0.1:{admin_port} within {:?}; see {}",
                    self.opts.ready_timeout,
                    self.opts.paths.cache_log().display()
                ));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for SquidManager {
    fn drop(&mut self) {
        self.stop();
        self.stop_flag.store(true, Ordering::Relaxed);
        if let Some(h) = self.follower.take() {
            let _ = h.join();
        }
    }
}

/// Squid falls back to /etc/resolv.conf without `dns_nameservers`, which in a gateway's
/// network namespace may name a server it cannot reach: refuse to render without one.
/// SIGKILL to the process group led by `leader` (a Squid master started by `spawn`).
fn kill_group(leader: u32) {
    // SAFETY: plain kill(2) on a process group we created for our own child.
    unsafe {
        libc::kill(-(leader as libc::pid_t), libc::SIGKILL);
    }
}

fn check_nameservers(nameservers: &[IpAddr]) -> Result<(), SquidError> {
    if nameservers.is_empty() {
        return Err(SquidError {
            code: "invalid_config",
            message: "the cache needs an explicit resolver (dns.enabled, or dns.upstream)".into(),
            field: Some("dns.upstream".into()),
        });
    }
    Ok(())
}

/// Store layout or the listening ports changed: a reconfigure cannot do that safely.
fn needs_restart(old: &CacheConfig, new: &CacheConfig) -> bool {
    old.store != new.store
        || old.disk_mb != new.disk_mb
        || old.port != new.port
        || old.admin_port != new.admin_port
}

/// The error lines in `squid -k parse` output (Squid echoes every directive as "Processing:").
pub fn parse_errors(output: &str) -> Vec<String> {
    const MARKERS: &[&str] = &[
        "FATAL",
        "ERROR",
        "unrecognized",
        "Invalid",
        "Bungled",
        "Cannot",
        "cannot",
    ];
    output
        .lines()
        .filter(|l| !l.contains("| Processing: "))
        .filter(|l| MARKERS.iter().any(|m| l.contains(m)))
        .map(|l| l.split_once("| ").map_or(l, |(_, m)| m).trim().to_string())
        .take(6)
        .collect()
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

fn chown_tree(p: &Path, uid: u32, gid: u32) {
    let _ = std::os::unix::fs::chown(p, Some(uid), Some(gid));
    if let Ok(rd) = std::fs::read_dir(p) {
        for e in rd.flatten() {
            let path = e.path();
            if path.is_dir() {
                chown_tree(&path, uid, gid);
            } else {
                let _ = std::os::unix::fs::chown(&path, Some(uid), Some(gid));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_errors_skip_echoed_directives() {
        let out = "2026/11/22 03:04:54| Processing: refresh_pattern -i ([a-z 0 20% 40\n\
                   2026/11/22 03:04:54| refreshAddToList: Invalid regular expression '([a-z': Unmatched [\n\
                   2026/11/22 03:04:57| s.conf(18): unrecognized: 'bogus_directive'\n\
                   2026/11/22 03:04:57| Processing: http_port 3129 tproxy name=perigee_tproxy\n";
        let e = parse_errors(out);
        assert_eq!(e.len(), 2, "{e:?}");
        assert!(e[0].starts_with("refreshAddToList: Invalid regular expression"));
    }

    #[test]
    fn restart_only_for_store_or_ports() {
        let a = CacheConfig::default();
        assert!(!needs_restart(
            &a,
            &CacheConfig {
                memory_mb: 1,
                max_object_mb: 10,
                ..a.clone()
            }
        ));
        assert!(needs_restart(
            &a,
            &CacheConfig {
                store: crate::config::Store::Aufs,
                ..a.clone()
            }
        ));
        assert!(needs_restart(
            &a,
            &CacheConfig {
                disk_mb: 1,
                ..a.clone()
            }
        ));
    }

    #[test]
    fn manager_can_move_between_threads() {
        fn assert_send<T: Send>() {}
        assert_send::<SquidManager>();
    }

    #[test]
    fn looks_up_users() {
        assert_eq!(lookup_user("root"), Some((0, 0)));
        assert_eq!(lookup_user("no-such-user-pq"), None);
    }
}
