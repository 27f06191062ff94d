//! Runs Squid as a child of the gateway daemon: apply (parse → swap → reconfigure/restart),
//! stop, purge, and the access-log follower that feeds the request ring and counters. The
//! supervision (check, swap, start, ready, reap, stop) is perigee-child's; `Squid` is what is
//! particular to Squid.

use serde::Serialize;
use std::net::IpAddr;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use crate::access_log::{AccessRecord, RequestCounters};
use crate::admin::{self, StoreInfo};
use crate::config::CacheConfig;
use crate::follower::LogFollower;
pub use crate::follower::RecordFeed;
use crate::render::{render, SquidPaths};
use crate::served::{check_served_subnets, ServedLimits};
use crate::service::{kill_group, Squid};
pub use crate::service::{parse_errors, SQUID_IPC_DIR};
use crate::version::{
    collapsed_forwarding_safe, parse_squid_v, SquidVersion, COLLAPSED_FORWARDING_ADVISORY,
};
use perigee_child::{Installed, ServiceError, Supervisor};
use perigee_types::Cidr;

/// A failed manager operation, shaped like the control protocol's error object. Codes:
/// invalid_config | squid_parse | squid_start | squid_reconfigure | squid_io | not_running | purge_failed
pub type SquidError = ServiceError;

fn io_err(what: &str) -> impl FnOnce(std::io::Error) -> SquidError + '_ {
    ServiceError::io("squid_io", what)
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

/// What apply did: Squid is reconfigured in place unless the store or a port changed.
pub use perigee_child::ApplyAction;

#[derive(Debug, Clone, Serialize)]
pub struct ApplyReport {
    pub action: ApplyAction,
    pub collapsed_forwarding_effective: bool,
    pub squid_conf: Option<String>,
}

impl ApplyReport {
    fn new(
        action: ApplyAction,
        collapsed_forwarding_effective: bool,
        conf: Option<String>,
    ) -> Self {
        ApplyReport {
            action,
            collapsed_forwarding_effective,
            squid_conf: conf,
        }
    }
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

pub struct SquidManager {
    sup: Supervisor<Squid>,
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
        let follower = LogFollower::start(
            opts.paths.access_log(),
            opts.ring_capacity,
            opts.poll_interval,
        );
        SquidManager {
            sup: Supervisor::new(Squid {
                bin: opts.squid_bin,
                paths: opts.paths,
                ready_timeout: opts.ready_timeout,
                version,
                version_problem,
                follower,
            }),
        }
    }

    fn squid(&self) -> &Squid {
        self.sup.service()
    }

    fn follower(&self) -> &LogFollower {
        &self.squid().follower
    }

    /// The feed of logged requests (the same records the counters and the ring get).
    pub fn record_feed(&self) -> RecordFeed {
        self.follower().feed()
    }

    /// The process group of the running Squid (its master leads it; kids and helpers share
    /// it): whose sockets are the cache's.
    pub fn process_group(&self) -> Option<i32> {
        self.sup.running().map(|r| r.child.id() as i32)
    }

    pub fn version(&self) -> Option<SquidVersion> {
        self.squid().version
    }

    pub fn paths(&self) -> &SquidPaths {
        &self.squid().paths
    }

    /// Validates and renders without touching anything (for /v1/config/validate).
    pub fn render_checked(
        &self,
        cfg: &CacheConfig,
        served_subnets: &[Cidr],
        limits: &ServedLimits,
        nameservers: &[IpAddr],
    ) -> Result<Option<String>, SquidError> {
        let rendered = self.rendered(cfg, nameservers, served_subnets, limits)?;
        Ok(rendered.map(|(_, text)| text))
    }

    /// The served subnets as squid.conf has them, and squid.conf; None when the cache is off.
    /// Validates first.
    fn rendered(
        &self,
        cfg: &CacheConfig,
        nameservers: &[IpAddr],
        served_subnets: &[Cidr],
        limits: &ServedLimits,
    ) -> Result<Option<(Vec<Cidr>, String)>, SquidError> {
        cfg.validate()?;
        if !cfg.enabled {
            return Ok(None);
        }
        let served = check_served_subnets(served_subnets, limits)?;
        check_nameservers(nameservers)?;
        let squid = self.squid();
        let text = render(cfg, &served, nameservers, &squid.paths, squid.version);
        Ok(Some((served, text)))
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
        let Some((served, text)) = self.rendered(cfg, nameservers, served_subnets, limits)? else {
            self.sup.disable();
            return Ok(ApplyReport::new(ApplyAction::Stopped, false, None));
        };
        let collapsed_forwarding_effective =
            cfg.collapsed_forwarding && collapsed_forwarding_safe(self.squid().version);
        let installed =
            self.sup
                .install(cfg, served.clone(), &text, |sup, mut old, candidate| {
                    if needs_restart(&old.config, cfg) {
                        sup.restart(old, cfg, served, candidate)
                            .map_err(|failed| failed.error)?;
                        return Ok(ApplyAction::Restarted);
                    }
                    sup.swap_in(candidate)?;
                    sup.service()
                        .squid_k("reconfigure")
                        .map_err(|m| SquidError::new("squid_reconfigure", m))?;
                    old.config = cfg.clone();
                    old.served = served;
                    sup.put_back(old);
                    sup.wait_ready(cfg)
                        .map_err(|m| SquidError::new("squid_reconfigure", m))?;
                    Ok(ApplyAction::Reconfigured)
                })?;
        let action = match installed {
            Installed::Unchanged => ApplyAction::Unchanged,
            Installed::Started => ApplyAction::Started,
            Installed::Replaced(action) => action,
        };
        Ok(ApplyReport::new(
            action,
            collapsed_forwarding_effective,
            Some(text),
        ))
    }

    /// Restarts Squid with the last applied config if it died. Ok(true) when it restarted.
    /// The daemon calls this periodically; while it returns an error the port-80 TPROXY rule
    /// should be withdrawn (fail open to the splitter) rather than send clients to a dead port.
    pub fn ensure_running(&mut self) -> Result<bool, SquidError> {
        self.sup.ensure_running()
    }

    /// Shuts Squid down (graceful, then forced). Idempotent.
    pub fn stop(&mut self) {
        self.sup.stop();
    }

    /// Kills a Squid that runs but does not serve (its whole process group: a hung or
    /// half-dead Squid would not act on a graceful shutdown) and starts it again with the last
    /// applied config. Ok(false) when nothing was applied to start.
    pub fn restart_unresponsive(&mut self) -> Result<bool, SquidError> {
        if let Some(mut run) = self.sup.take_running() {
            kill_group(run.child.id());
            let _ = run.child.wait();
            self.follower().pump();
        }
        self.sup.ensure_running()
    }

    /// Whether our Squid process is alive.
    pub fn is_running(&mut self) -> bool {
        self.sup.is_running()
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
            .sup
            .running()
            .map(|r| r.served.clone())
            .unwrap_or_default();
        let info = self.store_info().unwrap_or_default();
        let before = info
            .on_disk_objects
            .unwrap_or(0)
            .max(info.memory_objects.unwrap_or(0));
        self.stop();
        let store = self.squid().paths.store_dir(cfg.store);
        if store.exists() {
            std::fs::remove_dir_all(&store).map_err(io_err("removing the cache store"))?;
        }
        self.sup.spawn(&cfg, served)?;
        Ok(before)
    }

    /// Drains the parsed-request ring (POST /v1/cache/requests/collect).
    pub fn collect_requests(&self) -> Vec<AccessRecord> {
        self.follower().pump();
        self.follower().ring().drain()
    }

    /// The newest requests without draining them.
    pub fn recent_requests(&self, limit: usize) -> Vec<AccessRecord> {
        self.follower().pump();
        self.follower().ring().recent(limit)
    }

    pub fn requests_dropped(&self) -> u64 {
        self.follower().ring().dropped()
    }

    /// Moves access.log and cache.log aside (to `*.1`, replacing older ones) and has Squid
    /// reopen them (`squid -k rotate`; logfile_rotate 0 means Squid itself renames nothing).
    /// The follower finishes the old file before switching, so no request is lost.
    pub fn rotate_logs(&mut self) -> Result<(), SquidError> {
        if !self.sup.is_running() {
            return Err(SquidError::new("not_running", "the cache is not running"));
        }
        let squid = self.squid();
        squid.follower.pump();
        for log in [squid.paths.access_log(), squid.paths.cache_log()] {
            if log.exists() {
                let mut old = log.clone().into_os_string();
                old.push(".1");
                std::fs::rename(&log, old).map_err(io_err("rotating squid logs"))?;
            }
        }
        squid
            .squid_k("rotate")
            .map_err(|m| SquidError::new("squid_io", m))
    }

    /// Rotates when access.log has grown past `max_bytes` (call it periodically).
    pub fn rotate_logs_if_larger(&mut self, max_bytes: u64) -> Result<bool, SquidError> {
        let size = std::fs::metadata(self.squid().paths.access_log())
            .map(|m| m.len())
            .unwrap_or(0);
        if size <= max_bytes {
            return Ok(false);
        }
        self.rotate_logs().map(|_| true)
    }

    pub fn counters(&self) -> RequestCounters {
        self.follower().pump();
        self.follower().counters().clone()
    }

    /// Counters from the access log plus storage use from the cache manager.
    pub fn stats(&mut self) -> CacheStats {
        self.sup.reap();
        let c = self.counters();
        let (ring_len, dropped) = {
            let r = self.follower().ring();
            (r.len(), r.dropped())
        };
        let cfg = self.sup.running().map(|r| r.config.clone());
        let info = self.store_info();
        let version = self.squid().version;
        let mut problems: Vec<String> = self.squid().version_problem.iter().cloned().collect();
        if let Some(e) = self.sup.last_exit() {
            problems.push(e.to_string());
        }
        if let (Some(cfg), Err(e)) = (&cfg, &info) {
            let _ = cfg;
            problems.push(format!("cache manager: {e}"));
        }
        let requested = cfg.as_ref().is_some_and(|c| c.collapsed_forwarding);
        let effective = requested && collapsed_forwarding_safe(version);
        if requested && !effective {
            problems.push(format!(
                "collapsed_forwarding requested but left off: Squid {} is affected by {}",
                version.map_or_else(|| "unknown".into(), |v| v.to_string()),
                COLLAPSED_FORWARDING_ADVISORY.id
            ));
        }
        let info = info.unwrap_or_default();
        let mb = |v: u32| Some(u64::from(v) * 1024 * 1024);
        CacheStats {
            enabled: cfg.is_some(),
            running: self.sup.running().is_some(),
            squid_version: version.map(|v| v.to_string()),
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
            .sup
            .running()
            .map(|r| r.config.admin_port)
            .ok_or("squid is not running")?;
        admin::mgr_page(port, "info")
            .map(|t| admin::parse_mgr_info(&t))
            .map_err(|e| e.to_string())
    }

    fn running_config(&self) -> Result<&CacheConfig, SquidError> {
        self.sup
            .running()
            .map(|r| &r.config)
            .ok_or_else(|| SquidError::new("not_running", "the cache is not running"))
    }
}

/// Squid falls back to /etc/resolv.conf without `dns_nameservers`, which in a gateway's
/// network namespace may name a server it cannot reach: refuse to render without one.
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
