//! The daemon's master process: applies the configuration, spawns and supervises the worker
//! processes, aggregates their reports (counters, closed flows), switches new flows to
//! "routed unsplit" above `max_flows`, and serves the control socket and metrics.
use super::apply::{self, AppliedState};
use super::cache_flows::{self, CacheFlows};
use super::config::{self, GatewayConfig};
use super::config_file::ConfigFile;
use super::state::{merge, ConfigFailure, Shared, Totals, WorkerSlot, CLOSED_RING};
use super::{control, control_tls, ipc, log, metrics, squid_watch, sys};
use perigee_dns::{ResolverHealth, UnboundManager};
use perigee_netsys::signals::TermSignals;
use perigee_squid::{RequestCounters, SquidManager};
use serde_json::json;
use std::collections::{HashMap, VecDeque};
use std::io::{BufRead, BufReader, Write};
use std::os::fd::OwnedFd;
use std::os::unix::net::UnixStream;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How often the master checks Squid (restart if dead, rotate logs, counters).
const CACHE_WATCH_EVERY: Duration = Duration::from_secs(2);
/// How often it looks whether Squid is still alive: a dead Squid's port 80 goes to the
/// splitter within this (the soak measures it; a 2 s check left new web flows unserved ~2 s).
const CACHE_ALIVE_EVERY: Duration = Duration::from_millis(250);
/// Squid's access.log is rotated beyond this size.
const SQUID_LOG_MAX_BYTES: u64 = 64 << 20;
/// How often Squid's storage figures are asked for (a cache manager request each).
const STORE_INFO_EVERY: Duration = Duration::from_secs(10);
/// How often the master checks unbound (restart if dead, counters, nft dns_up).
const DNS_WATCH_EVERY: Duration = Duration::from_secs(2);
/// Pause between two rounds of the upstream resolver probe (a round takes at most
/// dns.probe_timeout_ms).
const PROBE_EVERY: Duration = Duration::from_secs(1);
/// Through the peer path each probe is a flow of its own (a warm connection taken, a new one
/// opened across the satellite): rarer, so a terminal's pool is not kept busy by its own health
/// check, nor a hub with many terminals by theirs. The pool's own state says at once when the
/// path is gone; this only checks the hub's resolver behind it.
const PROBE_EVERY_PEER_PATH: Duration = Duration::from_secs(15);

/// How long after the last probe round the next one starts.
fn probe_pause(forwarding: perigee_dns::Forwarding) -> Duration {
    match forwarding {
        perigee_dns::Forwarding::Direct => PROBE_EVERY,
        perigee_dns::Forwarding::PeerPath => PROBE_EVERY_PEER_PATH,
    }
}
/// How often Squid's connections are read from the kernel (a satellite-facing connection lives
/// at least a round trip, so it is seen at least once before it closes).
const CACHE_FLOWS_EVERY: Duration = Duration::from_millis(500);

/// Whether the resolver must be probed: Squid needs it, or the operator runs one.
fn probe_wanted(cfg: &GatewayConfig) -> bool {
    cfg.cache.enabled || cfg.dns.enabled
}

/// The upstream probe: every PROBE_EVERY (PROBE_EVERY_PEER_PATH through the peer path), asks
/// each upstream once; two failed rounds in a row mark the resolver down (port 80 steps aside to the splitter), one answer brings it back.
fn watch_resolver(shared: Arc<Shared>) {
    let mut last_round: Option<(Instant, perigee_dns::Forwarding)> = None;
    loop {
        std::thread::sleep(PROBE_EVERY);
        if shared.shutting_down.load(Ordering::Relaxed) {
            return;
        }
        let cfg = shared.config.lock().unwrap().clone();
        if !shared.configured.load(Ordering::Relaxed) || !probe_wanted(&cfg) {
            continue;
        }
        // A change of path probes at once; otherwise the path's own pause.
        if let Some((at, how)) = last_round {
            if how == cfg.dns_forwarding() && at.elapsed() + PROBE_EVERY < probe_pause(how) {
                continue;
            }
        }
        last_round = Some((Instant::now(), cfg.dns_forwarding()));
        let upstreams = cfg.dns.upstreams().unwrap_or_default();
        let timeout = Duration::from_millis(u64::from(cfg.dns.probe_timeout_ms));
        let forwarding = cfg.dns_forwarding();
        let mut round = perigee_dns::probe_route(forwarding, &upstreams, timeout);
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
        let now = shared.config.lock().unwrap().clone();
        if now.dns.upstream != cfg.dns.upstream || now.dns_forwarding() != forwarding {
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
        *shared.dns_totals.lock().unwrap() = mgr.totals();
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

/// Reads Squid's connections from the kernel every CACHE_FLOWS_EVERY: live cache flows for
/// /v1/flows, closed ones into the ring, what they carried over the satellite into the totals.
fn watch_cache_flows(shared: Arc<Shared>, feed: perigee_squid::RecordFeed) {
    let mut tracker = CacheFlows::default();
    let mut pgid = None;
    loop {
        // On the same boundaries as the workers' ticks.
        std::thread::sleep(sys::until_next_boundary(CACHE_FLOWS_EVERY));
        if shared.shutting_down.load(Ordering::Relaxed) {
            return;
        }
        let cfg = shared.config.lock().unwrap().clone();
        // The manager is busy during an apply: keep the process group last seen meanwhile.
        if let Ok(mgr) = shared.squid.try_lock() {
            pgid = mgr.process_group();
        }
        let running = cfg.cache.enabled && shared.configured.load(Ordering::Relaxed);
        let view = cache_flows::View::of(&cfg);
        let step = tracker.step(&view, pgid.filter(|_| running), feed.take());
        *shared.cache_flows_problem.lock().unwrap() = tracker.problem.clone();
        *shared.cache_live.lock().unwrap() = tracker.live(&view);
        {
            let mut t = shared.totals.lock().unwrap();
            t.link.merge(&step.link);
            t.by_action
                .entry("cache".into())
                .or_default()
                .add(&step.cache);
            merge(&mut t.by_class, &step.by_class);
            merge(&mut t.by_site, &step.by_site);
            for (site, b) in &step.saved_by_site {
                *t.cache_saved_by_site.entry(site.clone()).or_default() += b;
            }
        }
        if !step.closed.is_empty() {
            let mut ring = shared.closed.lock().unwrap();
            for f in step.closed {
                if ring.len() >= CLOSED_RING {
                    ring.pop_front();
                    shared.totals.lock().unwrap().closed_dropped += 1;
                }
                ring.push_back(f);
            }
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
                // The identity first: the config that turns the peer path on needs it.
                if let Some(m) = shared.peer.identity_message() {
                    let mut line = serde_json::to_string(&m).unwrap_or_default();
                    line.push('\n');
                    let _ = t.write_all(line.as_bytes());
                }
                // The cluster's table before the config, so the first flows already see it.
                let mut line =
                    serde_json::to_string(&shared.peer.cluster_message()).unwrap_or_default();
                line.push('\n');
                let _ = t.write_all(line.as_bytes());
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
    let mut since_full = CACHE_WATCH_EVERY;
    let mut store_read: Option<Instant> = None;
    loop {
        std::thread::sleep(CACHE_ALIVE_EVERY);
        since_full += CACHE_ALIVE_EVERY;
        if shared.shutting_down.load(Ordering::Relaxed) {
            return;
        }
        // Same lock order as apply_config: applied, then squid.
        let _applied = shared.applied.lock().unwrap();
        let enabled = shared.config.lock().unwrap().cache.enabled;
        let mut mgr = shared.squid.lock().unwrap();
        // Shutdown stops Squid under these locks: never bring it back afterwards. Nor start
        // it for a config that never got installed.
        if !enabled
            || shared.shutting_down.load(Ordering::Relaxed)
            || !shared.configured.load(Ordering::Relaxed)
        {
            if since_full >= CACHE_WATCH_EVERY {
                since_full = Duration::ZERO;
                *shared.cache_counters.lock().unwrap() = mgr.counters();
                *shared.cache_store.lock().unwrap() = None;
                store_read = None;
            }
            continue;
        }
        let died = !mgr.is_running() && shared.cache_up.load(Ordering::Relaxed);
        if died {
            log::error("squid is down: port 80 goes to the splitter", json!({}));
            shared.squid_running.store(false, Ordering::Relaxed);
            shared.set_cache_up(false, Some("squid exited".into()));
        }
        if !died && since_full < CACHE_WATCH_EVERY {
            continue;
        }
        since_full = Duration::ZERO;
        *shared.cache_counters.lock().unwrap() = mgr.counters();
        // Not from a Squid known not to answer: the request would hold the lock for seconds.
        let answers = shared.squid_not_serving.lock().unwrap().is_none();
        if answers && store_read.is_none_or(|t| t.elapsed() >= STORE_INFO_EVERY) {
            *shared.cache_store.lock().unwrap() = mgr.store_info().ok();
            store_read = Some(Instant::now());
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
    /// The config booted at start, and where each config applied later is kept (config_file.rs).
    /// None: start without a config (nothing intercepted until PUT /v1/config, nothing kept).
    pub config: Option<String>,
    pub control_socket: String,
    /// The control protocol over TCP with mutual TLS: listen address and the PEM files.
    pub control_tls: Option<(String, control_tls::TlsFiles)>,
    pub workers: usize,
    pub metrics: Option<String>,
    pub squid: perigee_squid::ManagerOptions,
    pub dns: perigee_dns::ManagerOptions,
    /// Where FRR's vty sockets are (GET /v1/routing).
    pub frr_vty_dir: std::path::PathBuf,
    /// The peer identity's directory (made on first start).
    pub peer_state_dir: std::path::PathBuf,
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
        squid_not_serving: Mutex::new(None),
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
        cache_live: Mutex::new(Vec::new()),
        cache_flows_problem: Mutex::new(None),
        applied_at: Mutex::new(None),
        dns_totals: Mutex::new(perigee_dns::Totals::default()),
        cache_store: Mutex::new(None),
        frr_vty_dir: args.frr_vty_dir.clone(),
        peer: super::peer_state::PeerShared::open(&args.peer_state_dir),
        config_file: ConfigFile::new(args.config.as_deref()),
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
    // A TLS listener that cannot start is fatal like the Unix socket: a fleet gateway that the
    // API cannot reach would look configured and be unmanaged.
    let tls = match &args.control_tls {
        None => None,
        Some((addr, files)) => match control_tls::server_config(files).and_then(|c| {
            control_tls::bind(addr)
                .map(|l| (l, c))
                .map_err(|e| format!("{addr}: {e}"))
        }) {
            Ok(pair) => Some(pair),
            Err(e) => {
                log::error("cannot start the TLS control listener", json!({"error": e}));
                apply::teardown(&shared.applied.lock().unwrap());
                shared.squid.lock().unwrap().stop();
                shared.dns.lock().unwrap().stop();
                let _ = std::fs::remove_file(&args.control_socket);
                return 1;
            }
        },
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
        std::thread::spawn(move || squid_watch::watch_serving(s));
    }
    {
        let s = shared.clone();
        std::thread::spawn(move || watch_dns(s));
    }
    {
        let s = shared.clone();
        std::thread::spawn(move || watch_resolver(s));
    }
    {
        let s = shared.clone();
        let feed = s.squid.lock().unwrap().record_feed();
        std::thread::spawn(move || watch_cache_flows(s, feed));
    }
    // A hub cluster's table: served to the terminals (hub), fetched from the hub (terminal).
    {
        let s = shared.clone();
        std::thread::spawn(move || super::cluster_service::serve(s));
        let s = shared.clone();
        std::thread::spawn(move || super::cluster_service::poll(s));
    }
    if let Some(addr) = args.metrics.clone() {
        let s = shared.clone();
        std::thread::spawn(move || metrics::serve(s, &addr));
    }
    {
        let s = shared.clone();
        std::thread::spawn(move || control::serve(s, listener));
    }
    if let Some((listener, config)) = tls {
        let s = shared.clone();
        std::thread::spawn(move || control::serve_tls(s, listener, config));
    }
    log::info(
        "gateway running",
        json!({
            "control_socket": args.control_socket,
            "control_tls": args.control_tls.as_ref().map(|(a, _)| a),
            "workers": shared.workers.len()
        }),
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
