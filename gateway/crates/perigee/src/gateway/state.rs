//! The state the master shares with its threads (control socket, metrics, watchers, worker
//! supervisors): the running config and what applying it installed, the workers' slots, the
//! totals of closed flows, and the apply itself (`Shared::apply_config`).
use super::apply::{self, AppliedState, ApplyError, DnsStep, SquidStep};
use super::config::{ConfigError, GatewayConfig};
use super::config_file::{ConfigFile, Kept};
use super::ipc::Usage;
use super::meter::LinkBytes;
use super::peer_state::PeerShared;
use super::render;
use super::telemetry::Flow;
use super::{ipc, log, sys};
use perigee_dns::{ResolverHealth, UnboundManager};
use perigee_squid::{RequestCounters, SquidManager};
use serde_json::json;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::io::Write;
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};
use std::sync::{mpsc, Mutex};
use std::time::{Duration, Instant};

pub const CLOSED_RING: usize = 20_000;

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
    /// Satellite-leg payload and flows per action, class and site (docs/control-protocol.md).
    pub by_action: BTreeMap<String, Usage>,
    pub by_class: BTreeMap<String, Usage>,
    pub by_site: BTreeMap<String, Usage>,
    /// Split flows by their satellite leg's congestion control, and by why it runs it.
    pub by_cc: BTreeMap<String, Usage>,
    pub by_cc_reason: BTreeMap<String, Usage>,
    /// Bytes served from the cache, by the site of the client.
    pub cache_saved_by_site: BTreeMap<String, u64>,
    /// What crossed the satellite, split flows and the cache's connections together.
    pub link: LinkBytes,
    pub peer_flows: u64,
    pub peer_fallbacks: u64,
    pub peer_refused: u64,
    pub peer_failed: u64,
    pub peer_pool_empty: u64,
    pub egress_refused: u64,
}

/// Adds `from`'s usage into `into`, key by key.
pub fn merge(into: &mut BTreeMap<String, Usage>, from: &BTreeMap<String, Usage>) {
    for (k, u) in from {
        match into.get_mut(k) {
            Some(v) => v.add(u),
            None => {
                into.insert(k.clone(), *u);
            }
        }
    }
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
    /// Set while a running Squid does not answer the serving probe (squid_watch.rs): port 80
    /// stays with the splitter until it answers again.
    pub squid_not_serving: Mutex<Option<String>>,
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
    /// Squid's connections open now, as flows (docs/cache.md, *Live connections*).
    pub cache_live: Mutex<Vec<Flow>>,
    /// Why Squid's connections cannot be read, for /v1/health.
    pub cache_flows_problem: Mutex<Option<String>>,
    /// When the config in force was applied (unix seconds).
    pub applied_at: Mutex<Option<f64>>,
    /// The resolver's counters as last read (metrics read them without its manager's lock).
    pub dns_totals: Mutex<perigee_dns::Totals>,
    /// Squid's storage figures as last read (every STORE_INFO_EVERY).
    pub cache_store: Mutex<Option<perigee_squid::admin::StoreInfo>>,
    /// The directory of the FRR vty sockets GET /v1/routing reads (`--frr-vty-dir`).
    pub frr_vty_dir: std::path::PathBuf,
    /// The peer path's identity and the hub's per-terminal totals.
    pub peer: PeerShared,
    /// The `--config` file, kept equal to the config in force (config_file.rs).
    pub config_file: ConfigFile,
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

    pub fn broadcast(&self, msg: &ipc::ToWorker) {
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
    /// The startup config's apply: the file it came from is left as it is.
    pub fn apply_config(&self, cfg: GatewayConfig) -> Result<(), ConfigFailure> {
        let mut applied = self.applied.lock().unwrap();
        self.apply_locked(&mut applied, cfg)
    }

    /// `apply_config`, then, when it succeeded, the config written to the `--config` file so the
    /// next start boots it (PUT /v1/config). Under the apply lock throughout: the file ends up
    /// with the last config applied, whatever the order two applies raced in.
    pub fn apply_and_keep(&self, cfg: GatewayConfig) -> Result<Kept, ConfigFailure> {
        let mut applied = self.applied.lock().unwrap();
        let to_keep = cfg.clone();
        self.config_file
            .apply_then_keep(&to_keep, || self.apply_locked(&mut applied, cfg))
    }

    /// The apply itself; `applied` is the apply lock's content, held by the caller.
    fn apply_locked(
        &self,
        applied: &mut AppliedState,
        cfg: GatewayConfig,
    ) -> Result<(), ConfigFailure> {
        cfg.validate().map_err(ConfigFailure::Invalid)?;
        // A daemon started without a config (or one without Hybla) loads it for the first one that asks.
        if wants_hybla(&cfg) && perigee_hybla::needs_load() {
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
            applied,
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
        *self.applied_at.lock().unwrap() = Some(sys::now_f64());
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
        let not_serving = self.squid_not_serving.lock().unwrap().clone();
        let why = if !squid_running {
            Some(
                self.cache_problem
                    .lock()
                    .unwrap()
                    .clone()
                    .filter(|p| !p.starts_with("resolver:"))
                    .unwrap_or_else(|| "squid is not running".into()),
            )
        } else if not_serving.is_some() {
            not_serving
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
    pub(super) fn set_dns_up(&self, up: bool, problem: Option<String>) {
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
    pub(super) fn set_cache_up(&self, up: bool, problem: Option<String>) {
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
        out.extend(self.cache_live.lock().unwrap().iter().cloned());
        out.sort_by_key(|f| f.id);
        out
    }

    pub(super) fn on_report(&self, slot: &WorkerSlot, m: ipc::FromWorker) {
        match m.kind.as_str() {
            "report" => {
                slot.live.store(m.live, Ordering::Relaxed);
                slot.pipes.store(m.pipes_in_use, Ordering::Relaxed);
                slot.listening.store(m.listening, Ordering::Relaxed);
                if let Some(p) = &m.peer {
                    self.peer.on_report(p);
                }
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
                    t.peer_failed += d.peer_failed;
                    t.peer_pool_empty += d.peer_pool_empty;
                    t.egress_refused += d.egress_refused;
                    merge(&mut t.by_action, &d.by_action);
                    merge(&mut t.by_class, &d.by_class);
                    merge(&mut t.by_site, &d.by_site);
                    merge(&mut t.by_cc, &d.by_cc);
                    merge(&mut t.by_cc_reason, &d.by_cc_reason);
                    t.link.merge(&d.link);
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

/// Whether an apply moved the resolver(s) the probe asks, or the way it reaches them.
fn upstreams_changed(a: &GatewayConfig, b: &GatewayConfig) -> bool {
    a.dns.upstream != b.dns.upstream
        || a.dns.enabled != b.dns.enabled
        || a.dns_forwarding() != b.dns_forwarding()
}

/// Whether the satellite leg or any class asks for hybla or hybla_ld.
fn wants_hybla(cfg: &GatewayConfig) -> bool {
    apply::HyblaPlan::for_config(cfg).is_some()
}

/// Loads Hybla (and hybla_ld) when the kernel does not offer them yet, so the first apply can
/// use them, and re-registers a Perigee BPF Hybla too old for per-namespace parameters or a
/// stale hybla_ld. Returns why hybla is still missing (the satellite leg then falls back to the
/// default); a hybla_ld that cannot be loaded is logged (sockets asking for it fall back too).
fn ensure_hybla_loaded() -> Option<String> {
    if !perigee_hybla::needs_load() {
        return None;
    }
    match perigee_hybla::load() {
        Ok(st) => {
            log::info(
                "hybla loaded at startup",
                json!({"implementation": st.implementation, "hybla_ld": st.ld.registration}),
            );
            if let Some(problem) = &st.ld.problem {
                log::error("hybla_ld unavailable", json!({"problem": problem}));
            }
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
