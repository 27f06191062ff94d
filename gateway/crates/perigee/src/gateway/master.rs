//! The daemon's master process: applies the configuration, spawns and supervises the worker
//! processes, aggregates their reports (counters, closed flows), switches new flows to
//! "routed unsplit" above `max_flows`, and serves the control socket and metrics.
use super::apply::{self, AppliedState, ApplyError, ServiceStep};
use super::config::{self, ConfigError, GatewayConfig};
use super::render;
use super::telemetry::Flow;
use super::{control, ipc, log, metrics, sys};
use perigee_dns::{ResolverHealth, UnboundManager};
use perigee_netsys::signals::TermSignals;
use perigee_squid::{RequestCounters, SquidManager};
use serde_json::json;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::io::{BufRead, BufReader, Write};
use std::os::fd::OwnedFd;
use std::os::unix::net::UnixStream;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

pub const CLOSED_RING: usize = 20_000;
/// How often the master checks Squid (restart if dead, rotate logs, nft fail-over).
const CACHE_WATCH_EVERY: Duration = Duration::from_secs(2);
/// Squid's access.log is rotated beyond this size.
const SQUID_LOG_MAX_BYTES: u64 = 64 << 20;
/// How often the master checks unbound (restart if dead, counters, nft dns_up).
const DNS_WATCH_EVERY: Duration = Duration::from_secs(2);
/// Pause between two rounds of the upstream resolver probe (a round takes at most
/// dns.probe_timeout_ms).
const PROBE_EVERY: Duration = Duration::from_secs(1);

#[derive(Default)]
pub struct WorkerSlot {
    pub tx: Mutex<Option<UnixStream>>,
    pub live: AtomicU64,
    pub alive: AtomicBool,
    pub listening: AtomicBool,
    pub pid: AtomicI32,
    pub restarts: AtomicU64,
    pub pipes: AtomicU64,
    /// The worker's last peer-path report (None: peer path off).
    pub peer: Mutex<Option<ipc::PeerReport>>,
}

#[derive(Default, Clone)]
pub struct Totals {
    pub flows_total: u64,
    pub failed_connect: u64,
    pub bytes_up: u64,
    pub bytes_down: u64,
    pub cc_fallback: u64,
    pub closed_dropped: u64,
    pub by_action: BTreeMap<String, (u64, u64, u64)>,
    pub peer_flows: u64,
    pub peer_fallbacks: u64,
    pub peer_refused: u64,
}

pub struct Shared {
    pub started: Instant,
    pub config: Mutex<GatewayConfig>,
    pub applied: Mutex<AppliedState>,
    pub workers: Vec<WorkerSlot>,
    pub totals: Mutex<Totals>,
    pub closed: Mutex<VecDeque<Flow>>,
    pub pending: Mutex<HashMap<u64, mpsc::Sender<Vec<Flow>>>>,
    pub next_id: AtomicU64,
    pub overflow: AtomicBool,
    pub shutting_down: AtomicBool,
    /// The one Squid of this gateway (docs/cache.md).
    pub squid: Mutex<SquidManager>,
    /// Squid's paths and version, readable without the manager's lock (validate renders).
    pub squid_paths: perigee_squid::SquidPaths,
    pub squid_version: Option<perigee_squid::SquidVersion>,
    /// Whether port 80 currently goes to Squid (the nft cache_up set holds `tcp`).
    pub cache_up: AtomicBool,
    /// Why the enabled cache is not serving, for /v1/health.
    pub cache_problem: Mutex<Option<String>>,
    /// The last Squid request counters read (used while the manager is busy).
    pub cache_counters: Mutex<RequestCounters>,
    /// Whether Squid was running when last looked at (the probe thread's gate decisions).
    pub squid_running: AtomicBool,
    /// The gateway's caching resolver (docs/dns.md).
    pub dns: Mutex<UnboundManager>,
    /// unbound's paths, readable without the manager's lock (validate renders).
    pub dns_paths: perigee_dns::UnboundPaths,
    /// Whether port 53 currently goes to the resolver (the nft dns_up set holds udp and tcp).
    pub dns_up: AtomicBool,
    /// Why the enabled resolver is not serving, for /v1/health.
    pub dns_problem: Mutex<Option<String>>,
    /// The upstream probe's verdict: Squid's resolver answers (the cache's port-80 gate).
    pub resolver: Mutex<ResolverHealth>,
    /// True once a config has been applied; until then nothing is installed and no worker
    /// runs (fail-open), and workers are only spawned after it turns true.
    pub configured: AtomicBool,
    /// Why the startup config is not installed (the initial apply failed), for /v1/health.
    pub apply_problem: Mutex<Option<String>>,
    /// Why loading Hybla at startup failed, for /v1/health (shown while hybla is missing).
    pub hybla_load_problem: Mutex<Option<String>>,
}

/// The `dns` step of an apply: the new resolver policy, and the previous one to go back to.
struct DnsStep<'a> {
    mgr: &'a mut UnboundManager,
    new: &'a GatewayConfig,
    /// None on the first apply: going back means stopping unbound.
    prev: Option<&'a GatewayConfig>,
}

impl ServiceStep for DnsStep<'_> {
    fn apply(&mut self) -> Result<(), ApplyError> {
        match self.mgr.apply(&self.new.dns, &self.new.served_subnets) {
            Ok(report) => {
                log::info(
                    "resolver applied",
                    json!({"action": report.action, "cache_records_kept": report.cache_records_kept}),
                );
                Ok(())
            }
            Err(e) => Err(ApplyError {
                step: "dns",
                message: format!("{}: {}", e.code, e.message),
                field: e.field,
            }),
        }
    }

    fn restore(&mut self) {
        let result = match self.prev {
            Some(p) => self.mgr.apply(&p.dns, &p.served_subnets).map(|_| ()),
            None => {
                self.mgr.stop();
                Ok(())
            }
        };
        if let Err(e) = result {
            log::error(
                "could not restore the previous resolver policy",
                json!({"error": e.to_string()}),
            );
        }
    }
}

/// The `squid` step of an apply: the new cache policy, and the previous one to go back to.
struct SquidStep<'a> {
    mgr: &'a mut SquidManager,
    new: &'a GatewayConfig,
    /// None on the first apply: going back means stopping Squid.
    prev: Option<&'a GatewayConfig>,
}

impl ServiceStep for SquidStep<'_> {
    fn apply(&mut self) -> Result<(), ApplyError> {
        let ns = self.new.squid_nameservers();
        match self.mgr.apply(
            &self.new.cache,
            &self.new.served_subnets,
            &self.new.served_limits,
            &ns,
        ) {
            Ok(report) => {
                log::info(
                    "cache applied",
                    json!({"action": report.action, "collapsed_forwarding_effective": report.collapsed_forwarding_effective}),
                );
                Ok(())
            }
            Err(e) => Err(ApplyError {
                step: "squid",
                message: format!("{}: {}", e.code, e.message),
                field: e.field,
            }),
        }
    }

    fn restore(&mut self) {
        let result = match self.prev {
            Some(p) => self
                .mgr
                .apply(
                    &p.cache,
                    &p.served_subnets,
                    &p.served_limits,
                    &p.squid_nameservers(),
                )
                .map(|_| ()),
            None => {
                self.mgr.stop();
                Ok(())
            }
        };
        if let Err(e) = result {
            log::error(
                "could not restore the previous cache policy",
                json!({"error": e.to_string()}),
            );
        }
    }
}

#[derive(Debug)]
pub enum ConfigFailure {
    Invalid(ConfigError),
    Apply(ApplyError),
}

impl Shared {
    pub fn live(&self) -> u64 {
        self.workers
            .iter()
            .map(|w| w.live.load(Ordering::Relaxed))
            .sum()
    }

    fn broadcast(&self, msg: &ipc::ToWorker) {
        let mut line = serde_json::to_string(msg).unwrap_or_default();
        line.push('\n');
        for w in &self.workers {
            if let Some(tx) = w.tx.lock().unwrap().as_mut() {
                let _ = tx.write_all(line.as_bytes());
            }
        }
    }

    /// Validate, render and apply atomically; on success workers get the new config.
    /// Open flows are untouched: workers keep their sockets, only new flows see the change.
    pub fn apply_config(&self, cfg: GatewayConfig) -> Result<(), ConfigFailure> {
        cfg.validate().map_err(ConfigFailure::Invalid)?;
        let mut applied = self.applied.lock().unwrap();
        // A daemon started without a config (or one without Hybla) loads it for the first one that asks.
        if wants_hybla(&cfg) && !sys::available_cc().iter().any(|c| c == "hybla") {
            *self.hybla_load_problem.lock().unwrap() = ensure_hybla_loaded();
        }
        let rendered = render::render(&cfg, &sys::available_cc());
        // Hybla's parameters and ceiling (this namespace's entry with Perigee's BPF Hybla,
        // the host-wide ones with the kernel's): only touched when this config uses Hybla.
        let params = apply::HyblaPlan::for_config(&cfg);
        let prev_cfg = self.config.lock().unwrap().clone();
        let prev = applied.rendered.is_some().then_some(&prev_cfg);
        // Lock order everywhere: applied, dns, squid.
        let mut dns = self.dns.lock().unwrap();
        let mut squid = self.squid.lock().unwrap();
        let mut dns_step = DnsStep {
            mgr: &mut dns,
            new: &cfg,
            prev,
        };
        let mut squid_step = SquidStep {
            mgr: &mut squid,
            new: &cfg,
            prev,
        };
        let result = apply::apply(
            &rendered,
            &applied,
            params,
            &mut [&mut dns_step, &mut squid_step],
        );
        // Either way the table was replaced (new one, or the previous one re-applied by the
        // rollback), which empties its sets: re-arm the overflow switch, port 53 → the
        // resolver and port 80 → Squid.
        if self.overflow.load(Ordering::Relaxed) {
            let _ = apply::set_overflow(true);
        }
        let in_force = match &result {
            Ok(_) => cfg.clone(),
            Err(_) => prev_cfg.clone(),
        };
        let dns_running = in_force.dns.enabled && dns.is_running();
        self.set_dns_up(dns_running, None);
        let squid_running = squid.is_running();
        self.squid_running.store(squid_running, Ordering::Relaxed);
        drop(squid);
        drop(dns);
        if result.is_ok() && upstreams_changed(&prev_cfg, &cfg) {
            // A verdict about other servers says nothing about these.
            *self.resolver.lock().unwrap() = ResolverHealth::default();
        }
        self.refresh_cache_gate(&in_force, squid_running, true);
        *applied = result.map_err(ConfigFailure::Apply)?;
        *self.config.lock().unwrap() = cfg.clone();
        *self.apply_problem.lock().unwrap() = None;
        self.configured.store(true, Ordering::Relaxed);
        self.broadcast(&ipc::ToWorker::Config {
            config: Box::new(cfg),
        });
        log::info(
            "config applied",
            json!({"revision": self.config.lock().unwrap().revision}),
        );
        Ok(())
    }

    /// Port 80 goes to Squid only while the cache is enabled, Squid runs and its resolver
    /// answers; otherwise to the splitter, with the reason kept for /v1/health.
    /// `rearm`: the table was just replaced (its sets are empty), so write the set whatever
    /// the last known state.
    pub fn refresh_cache_gate(&self, cfg: &GatewayConfig, squid_running: bool, rearm: bool) {
        if !cfg.cache.enabled {
            if rearm || self.cache_up.load(Ordering::Relaxed) {
                self.set_cache_up(false, None);
            }
            return;
        }
        let resolver_reason = self.resolver.lock().unwrap().reason();
        let why = if !squid_running {
            Some(
                self.cache_problem
                    .lock()
                    .unwrap()
                    .clone()
                    .filter(|p| !p.starts_with("resolver:"))
                    .unwrap_or_else(|| "squid is not running".into()),
            )
        } else {
            resolver_reason.map(|r| format!("resolver: {r}"))
        };
        let up = why.is_none();
        if rearm
            || up != self.cache_up.load(Ordering::Relaxed)
            || *self.cache_problem.lock().unwrap() != why
        {
            self.set_cache_up(up, why);
        }
    }

    /// Points port 53 at the resolver (up) or lets it through to where it was sent.
    fn set_dns_up(&self, up: bool, problem: Option<String>) {
        if let Err(e) = apply::set_dns_up(up) {
            log::error("cannot switch port 53", json!({"dns_up": up, "error": e}));
            return;
        }
        let was = self.dns_up.swap(up, Ordering::Relaxed);
        if was != up {
            log::info(
                "port 53 switched",
                json!({"to": if up { "resolver" } else { "original destinations" }}),
            );
        }
        *self.dns_problem.lock().unwrap() = problem;
    }

    /// Points port 80 at Squid (up) or fails it over to the splitter, and records why.
    fn set_cache_up(&self, up: bool, problem: Option<String>) {
        if let Err(e) = apply::set_cache_up(up) {
            log::error("cannot switch port 80", json!({"cache_up": up, "error": e}));
            return;
        }
        let was = self.cache_up.swap(up, Ordering::Relaxed);
        if was != up {
            log::info(
                "port 80 switched",
                json!({"to": if up { "squid" } else { "splitter" }}),
            );
        }
        *self.cache_problem.lock().unwrap() = problem;
    }

    /// Squid's request counters: fresh when the manager is free, else the last ones read.
    pub fn cache_counters(&self) -> RequestCounters {
        if let Ok(mgr) = self.squid.try_lock() {
            let c = mgr.counters();
            *self.cache_counters.lock().unwrap() = c.clone();
            return c;
        }
        self.cache_counters.lock().unwrap().clone()
    }

    /// Ask every live worker for its flow table.
    pub fn snapshot(&self) -> Vec<Flow> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = mpsc::channel();
        self.pending.lock().unwrap().insert(id, tx);
        let asked = self
            .workers
            .iter()
            .filter(|w| w.alive.load(Ordering::Relaxed))
            .count();
        self.broadcast(&ipc::ToWorker::Snapshot { id });
        let mut out = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(3);
        for _ in 0..asked {
            let left = deadline.saturating_duration_since(Instant::now());
            match rx.recv_timeout(left) {
                Ok(mut f) => out.append(&mut f),
                Err(_) => break,
            }
        }
        self.pending.lock().unwrap().remove(&id);
        out.sort_by_key(|f| f.id);
        out
    }

    fn on_report(&self, slot: &WorkerSlot, m: ipc::FromWorker) {
        match m.kind.as_str() {
            "report" => {
                slot.live.store(m.live, Ordering::Relaxed);
                slot.pipes.store(m.pipes_in_use, Ordering::Relaxed);
                slot.listening.store(m.listening, Ordering::Relaxed);
                *slot.peer.lock().unwrap() = m.peer.clone();
                let d = &m.deltas;
                {
                    let mut t = self.totals.lock().unwrap();
                    t.flows_total += d.flows;
                    t.failed_connect += d.failed_connect;
                    t.bytes_up += d.bytes_up;
                    t.bytes_down += d.bytes_down;
                    t.cc_fallback += d.cc_fallback;
                    t.peer_flows += d.peer_flows;
                    t.peer_fallbacks += d.peer_fallbacks;
                    t.peer_refused += d.peer_refused;
                    for (k, a) in &d.by_action {
                        let e = t.by_action.entry(k.clone()).or_default();
                        e.0 += a.bytes_up;
                        e.1 += a.bytes_down;
                        e.2 += a.flows;
                    }
                }
                let mut ring = self.closed.lock().unwrap();
                for f in m.closed {
                    if ring.len() >= CLOSED_RING {
                        ring.pop_front();
                        self.totals.lock().unwrap().closed_dropped += 1;
                    }
                    ring.push_back(f);
                }
            }
            "snapshot" => {
                if let Some(tx) = self.pending.lock().unwrap().get(&m.id) {
                    let _ = tx.send(m.flows);
                }
            }
            _ => {}
        }
    }
}

/// Whether an apply moved the resolver(s) the probe asks.
fn upstreams_changed(a: &GatewayConfig, b: &GatewayConfig) -> bool {
    a.dns.upstream != b.dns.upstream || a.dns.enabled != b.dns.enabled
}

/// Whether the resolver must be probed: Squid needs it, or the operator runs one.
fn probe_wanted(cfg: &GatewayConfig) -> bool {
    cfg.cache.enabled || cfg.dns.enabled
}

/// The upstream probe: every PROBE_EVERY, asks each upstream once; two failed rounds in a
/// row mark the resolver down (port 80 steps aside to the splitter), one answer brings it back.
fn watch_resolver(shared: Arc<Shared>) {
    loop {
        std::thread::sleep(PROBE_EVERY);
        if shared.shutting_down.load(Ordering::Relaxed) {
            return;
        }
        let cfg = shared.config.lock().unwrap().clone();
        if !shared.configured.load(Ordering::Relaxed) || !probe_wanted(&cfg) {
            continue;
        }
        let upstreams = cfg.dns.upstreams().unwrap_or_default();
        let timeout = Duration::from_millis(u64::from(cfg.dns.probe_timeout_ms));
        let mut round = perigee_dns::probe_all(&upstreams, timeout);
        // With the gateway's own resolver in between, Squid also needs that one running.
        if cfg.dns.enabled && !shared.dns_up.load(Ordering::Relaxed) {
            for r in &mut round {
                r.ok = false;
                r.error
                    .get_or_insert_with(|| "the gateway's resolver is not running".into());
            }
            if round.is_empty() {
                round.push(perigee_dns::ProbeResult {
                    upstream: "127.0.0.1@53".into(),
                    ok: false,
                    rtt_ms: None,
                    error: Some("the gateway's resolver is not running".into()),
                });
            }
        }
        // The config may have changed while the round ran: its verdict is about old servers.
        if shared.config.lock().unwrap().dns.upstream != cfg.dns.upstream {
            continue;
        }
        let changed = shared.resolver.lock().unwrap().record(round);
        if let Some(healthy) = changed {
            let reason = shared.resolver.lock().unwrap().reason();
            if healthy {
                log::info("resolver answers again", json!({}));
            } else {
                log::error("resolver does not answer", json!({"why": reason}));
            }
            // Under the apply lock, with the config in force now (an apply may have run).
            let _applied = shared.applied.lock().unwrap();
            let now = shared.config.lock().unwrap().clone();
            let running = shared.squid_running.load(Ordering::Relaxed);
            shared.refresh_cache_gate(&now, running, false);
        }
    }
}

/// Keeps unbound serving: restarts it when it died (port 53 passes through meanwhile), and
/// refreshes its counters so a crash loses at most one period.
fn watch_dns(shared: Arc<Shared>) {
    loop {
        std::thread::sleep(DNS_WATCH_EVERY);
        if shared.shutting_down.load(Ordering::Relaxed) {
            return;
        }
        let _applied = shared.applied.lock().unwrap();
        let enabled = shared.config.lock().unwrap().dns.enabled;
        let mut mgr = shared.dns.lock().unwrap();
        mgr.refresh_counters();
        if !enabled
            || shared.shutting_down.load(Ordering::Relaxed)
            || !shared.configured.load(Ordering::Relaxed)
            || !mgr.wanted()
        {
            continue;
        }
        if !mgr.is_running() && shared.dns_up.load(Ordering::Relaxed) {
            log::error(
                "unbound is down: DNS goes to the addresses it was sent to",
                json!({}),
            );
            shared.set_dns_up(false, Some("unbound exited".into()));
        }
        match mgr.ensure_running() {
            Ok(restarted) => {
                if restarted {
                    log::warn("unbound restarted", json!({}));
                }
                if mgr.is_running() && !shared.dns_up.load(Ordering::Relaxed) {
                    shared.set_dns_up(true, None);
                }
            }
            Err(e) => {
                log::error("unbound does not start", json!({"error": e.to_string()}));
                shared.set_dns_up(false, Some(format!("{}: {}", e.code, e.message)));
            }
        }
    }
}

/// Whether the satellite leg or any class asks for hybla.
fn wants_hybla(cfg: &GatewayConfig) -> bool {
    apply::HyblaPlan::for_config(cfg).is_some()
}

/// Loads Hybla when the kernel does not offer it yet, so the first apply can use it, and
/// re-registers a Perigee BPF Hybla too old for per-namespace parameters.
/// Returns why it is still missing (the satellite leg then falls back to the default).
fn ensure_hybla_loaded() -> Option<String> {
    if sys::available_cc().iter().any(|c| c == "hybla") && !perigee_hybla::outdated() {
        return None;
    }
    match perigee_hybla::load() {
        Ok(st) => {
            log::info(
                "hybla loaded at startup",
                json!({"implementation": st.implementation}),
            );
            None
        }
        Err(e) => {
            log::error(
                "cannot load hybla: the satellite leg uses the fallback",
                json!({"error": e.to_string()}),
            );
            Some(format!("hybla could not be loaded at startup: {e}"))
        }
    }
}

fn supervise(shared: Arc<Shared>, index: usize) {
    let exe = std::env::current_exe().unwrap_or_else(|_| "perigee".into());
    let mut generation: u32 = 0;
    // No worker (so no listener) until a config is installed: a daemon whose startup config
    // failed to apply intercepts nothing until PUT /v1/config succeeds.
    while !shared.configured.load(Ordering::Relaxed) {
        if shared.shutting_down.load(Ordering::Relaxed) {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    loop {
        if shared.shutting_down.load(Ordering::Relaxed) {
            return;
        }
        let slot = &shared.workers[index];
        let spawned = UnixStream::pair().and_then(|(mine, theirs)| {
            let out = theirs.try_clone()?;
            let child = Command::new(&exe)
                .args([
                    "gateway",
                    "worker",
                    "--index",
                    &index.to_string(),
                    "--generation",
                    &generation.to_string(),
                    "--master-pid",
                    &std::process::id().to_string(),
                ])
                .stdin(Stdio::from(OwnedFd::from(theirs)))
                .stdout(Stdio::from(OwnedFd::from(out)))
                .stderr(Stdio::inherit())
                .spawn()?;
            Ok((mine, child))
        });
        let (mine, mut child) = match spawned {
            Ok(x) => x,
            Err(e) => {
                log::error(
                    "cannot spawn worker",
                    json!({"worker": index, "error": e.to_string()}),
                );
                std::thread::sleep(Duration::from_secs(1));
                continue;
            }
        };
        slot.pid.store(child.id() as i32, Ordering::Relaxed);
        {
            let mut tx = mine.try_clone().ok();
            let cfg = shared.config.lock().unwrap().clone();
            if let Some(t) = tx.as_mut() {
                let mut line = serde_json::to_string(&ipc::ToWorker::Config {
                    config: Box::new(cfg),
                })
                .unwrap_or_default();
                line.push('\n');
                let _ = t.write_all(line.as_bytes());
            }
            *slot.tx.lock().unwrap() = tx;
        }
        slot.alive.store(true, Ordering::Relaxed);
        log::info(
            "worker started",
            json!({"worker": index, "worker_pid": child.id(), "generation": generation}),
        );
        let started = Instant::now();
        for line in BufReader::new(mine).lines() {
            let Ok(line) = line else { break };
            if let Ok(m) = serde_json::from_str::<ipc::FromWorker>(&line) {
                shared.on_report(slot, m);
            }
        }
        slot.alive.store(false, Ordering::Relaxed);
        slot.listening.store(false, Ordering::Relaxed);
        slot.live.store(0, Ordering::Relaxed);
        *slot.peer.lock().unwrap() = None;
        *slot.tx.lock().unwrap() = None;
        let _ = child.kill();
        let status = child.wait().map(|s| s.to_string()).unwrap_or_default();
        if shared.shutting_down.load(Ordering::Relaxed) {
            return;
        }
        slot.restarts.fetch_add(1, Ordering::Relaxed);
        log::error(
            "worker exited; its open flows are lost; restarting",
            json!({"worker": index, "status": status}),
        );
        // Back off when a worker dies right away, so a crash loop does not spin.
        if started.elapsed() < Duration::from_secs(2) {
            std::thread::sleep(Duration::from_millis(500));
        }
        generation += 1;
    }
}

/// Flip new flows to "routed unsplit" above max_flows; back on below 90% (hysteresis).
fn watch_overflow(shared: Arc<Shared>) {
    loop {
        std::thread::sleep(Duration::from_millis(250));
        let max = shared.config.lock().unwrap().splitter.max_flows as u64;
        let live = shared.live();
        let on = shared.overflow.load(Ordering::Relaxed);
        if !on && live >= max {
            if apply::set_overflow(true).is_ok() {
                shared.overflow.store(true, Ordering::Relaxed);
                log::warn(
                    "max_flows reached: new flows are routed unsplit",
                    json!({"live": live, "max_flows": max}),
                );
            }
        } else if on && live < max * 9 / 10 && apply::set_overflow(false).is_ok() {
            shared.overflow.store(false, Ordering::Relaxed);
            log::info(
                "below max_flows again: splitting new flows",
                json!({"live": live}),
            );
        }
    }
}

/// Keeps Squid serving: restarts it when it died (withdrawing port 80 to the splitter
/// meanwhile and while it stays down), rotates its logs, refreshes the counters.
fn watch_cache(shared: Arc<Shared>) {
    loop {
        std::thread::sleep(CACHE_WATCH_EVERY);
        if shared.shutting_down.load(Ordering::Relaxed) {
            return;
        }
        // Same lock order as apply_config: applied, then squid.
        let _applied = shared.applied.lock().unwrap();
        let enabled = shared.config.lock().unwrap().cache.enabled;
        let mut mgr = shared.squid.lock().unwrap();
        *shared.cache_counters.lock().unwrap() = mgr.counters();
        // Shutdown stops Squid under these locks: never bring it back afterwards. Nor start
        // it for a config that never got installed.
        if !enabled
            || shared.shutting_down.load(Ordering::Relaxed)
            || !shared.configured.load(Ordering::Relaxed)
        {
            continue;
        }
        if !mgr.is_running() && shared.cache_up.load(Ordering::Relaxed) {
            log::error("squid is down: port 80 goes to the splitter", json!({}));
            shared.squid_running.store(false, Ordering::Relaxed);
            shared.set_cache_up(false, Some("squid exited".into()));
        }
        match mgr.ensure_running() {
            Ok(restarted) => {
                if restarted {
                    log::warn("squid restarted", json!({}));
                }
            }
            Err(e) => {
                log::error("squid does not start", json!({"error": e.to_string()}));
                shared.set_cache_up(false, Some(format!("{}: {}", e.code, e.message)));
            }
        }
        let running = mgr.is_running();
        shared.squid_running.store(running, Ordering::Relaxed);
        let cfg = shared.config.lock().unwrap().clone();
        shared.refresh_cache_gate(&cfg, running, false);
        if let Err(e) = mgr.rotate_logs_if_larger(SQUID_LOG_MAX_BYTES) {
            log::warn("squid log rotation failed", json!({"error": e.to_string()}));
        }
    }
}

pub struct RunArgs {
    /// None: start without a config (nothing intercepted until PUT /v1/config).
    pub config: Option<String>,
    pub control_socket: String,
    pub workers: usize,
    pub metrics: Option<String>,
    pub squid: perigee_squid::ManagerOptions,
    pub dns: perigee_dns::ManagerOptions,
}

/// The startup config: None when the daemon starts without one (a new box, configured later
/// through PUT /v1/config); an unreadable or invalid file is an error (exit 2).
fn startup_config(path: Option<&str>) -> Result<Option<GatewayConfig>, i32> {
    let Some(path) = path else {
        return Ok(None);
    };
    let text = std::fs::read_to_string(path).map_err(|e| {
        log::error(
            "cannot read config",
            json!({"path": path, "error": e.to_string()}),
        );
        2
    })?;
    config::parse(&text).map(Some).map_err(|e| {
        log::error(
            "invalid config",
            json!({"field": e.field, "message": e.message}),
        );
        2
    })
}

pub fn run(args: RunArgs) -> i32 {
    let startup = match startup_config(args.config.as_deref()) {
        Ok(c) => c,
        Err(code) => return code,
    };
    // Until a config is installed the daemon holds a placeholder it never applies or reports.
    let cfg = startup.clone().unwrap_or_else(GatewayConfig::unconfigured);
    sys::raise_nofile();
    let term = TermSignals::block();
    let squid_paths = args.squid.paths.clone();
    let squid = SquidManager::new(args.squid);
    let squid_version = squid.version();
    let dns = UnboundManager::new(args.dns);
    let dns_paths = dns.paths().clone();
    let shared = Arc::new(Shared {
        started: Instant::now(),
        config: Mutex::new(cfg.clone()),
        applied: Mutex::new(AppliedState::default()),
        workers: (0..args.workers.max(1))
            .map(|_| WorkerSlot::default())
            .collect(),
        totals: Mutex::new(Totals::default()),
        closed: Mutex::new(VecDeque::new()),
        pending: Mutex::new(HashMap::new()),
        next_id: AtomicU64::new(1),
        overflow: AtomicBool::new(false),
        shutting_down: AtomicBool::new(false),
        squid: Mutex::new(squid),
        squid_paths,
        squid_version,
        cache_up: AtomicBool::new(false),
        cache_problem: Mutex::new(None),
        cache_counters: Mutex::new(RequestCounters::default()),
        squid_running: AtomicBool::new(false),
        dns: Mutex::new(dns),
        dns_paths,
        dns_up: AtomicBool::new(false),
        dns_problem: Mutex::new(None),
        resolver: Mutex::new(ResolverHealth::default()),
        configured: AtomicBool::new(false),
        apply_problem: Mutex::new(None),
        hybla_load_problem: Mutex::new(None),
    });
    // What a clean stop undoes: this namespace's Hybla entry, or the kernel tcp_hybla's rtt0.
    let hybla_before = apply::hybla_snapshot(&apply::SystemHybla);
    if startup.is_none() {
        log::warn(
            "started without a config: nothing is intercepted until PUT /v1/config",
            json!({}),
        );
    } else if let Err(e) = shared.apply_config(cfg) {
        // Stay up with nothing installed (fail-open) so a correct config can be PUT;
        // exiting would only make the service manager restart us into the same failure.
        let why = match &e {
            ConfigFailure::Invalid(e) => format!("{}: {}", e.field, e.message),
            ConfigFailure::Apply(e) => e.to_string(),
        };
        log::error(
            "initial apply failed: nothing installed, waiting for PUT /v1/config",
            json!({"error": why}),
        );
        shared.squid.lock().unwrap().stop();
        shared.dns.lock().unwrap().stop();
        *shared.apply_problem.lock().unwrap() = Some(why);
    }
    let listener = match control::bind(&args.control_socket) {
        Ok(l) => l,
        Err(e) => {
            log::error(
                "cannot bind control socket",
                json!({"path": args.control_socket, "error": e.to_string()}),
            );
            apply::teardown(&shared.applied.lock().unwrap());
            shared.squid.lock().unwrap().stop();
            shared.dns.lock().unwrap().stop();
            return 1;
        }
    };
    for i in 0..shared.workers.len() {
        let s = shared.clone();
        std::thread::spawn(move || supervise(s, i));
    }
    {
        let s = shared.clone();
        std::thread::spawn(move || watch_overflow(s));
    }
    {
        let s = shared.clone();
        std::thread::spawn(move || watch_cache(s));
    }
    {
        let s = shared.clone();
        std::thread::spawn(move || watch_dns(s));
    }
    {
        let s = shared.clone();
        std::thread::spawn(move || watch_resolver(s));
    }
    if let Some(addr) = args.metrics.clone() {
        let s = shared.clone();
        std::thread::spawn(move || metrics::serve(s, &addr));
    }
    {
        let s = shared.clone();
        std::thread::spawn(move || control::serve(s, listener));
    }
    log::info(
        "gateway running",
        json!({"control_socket": args.control_socket, "workers": shared.workers.len()}),
    );
    // Wait for SIGTERM/SIGINT, then leave the kernel as we found it.
    let sig = term.wait();
    shared.shutting_down.store(true, Ordering::Relaxed);
    log::info("shutting down", json!({"signal": sig}));
    for w in &shared.workers {
        let pid = w.pid.load(Ordering::Relaxed);
        if pid > 0 {
            // SAFETY: signalling our own child by pid.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
    }
    // Table first (ports 53 and 80 back to plain routing), then the resolver (quick), then
    // Squid (it may take seconds to close its connections).
    let applied = shared.applied.lock().unwrap();
    apply::teardown(&applied);
    if let Some(before) = hybla_before {
        apply::restore_hybla(&apply::SystemHybla, before);
    }
    shared.dns.lock().unwrap().stop();
    shared.squid.lock().unwrap().stop();
    drop(applied);
    let _ = std::fs::remove_file(&args.control_socket);
    0
}
