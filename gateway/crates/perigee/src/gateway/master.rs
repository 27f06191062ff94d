//! The daemon's master process: applies the configuration, spawns and supervises the worker
//! processes, aggregates their reports (counters, closed flows), switches new flows to
//! "routed unsplit" above `max_flows`, and serves the control socket and metrics.
use super::apply::{self, AppliedState, ApplyError};
use super::config::{self, ConfigError, GatewayConfig};
use super::render;
use super::telemetry::Flow;
use super::{control, ipc, log, metrics, sys};
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::io::{BufRead, BufReader, Write};
use std::os::fd::OwnedFd;
use std::os::unix::net::UnixStream;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};
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
        let rendered = render::render(&cfg, &sys::available_cc());
        // Hybla's parameters are global: only touch them when this config uses Hybla at all.
        let params = uses_hybla(&cfg).then_some(perigee_hybla::HyblaParams {
            rtt0_ms: cfg.hybla.rtt0_ms,
            base_rtt_ms: cfg.hybla.base_rtt_ms,
        });
        let next = apply::apply(&rendered, &applied, params).map_err(ConfigFailure::Apply)?;
        *applied = next;
        if self.overflow.load(Ordering::Relaxed) {
            // The table was replaced: re-arm the overflow switch.
            let _ = apply::set_overflow(true);
        }
        *self.config.lock().unwrap() = cfg.clone();
        self.broadcast(&ipc::ToWorker::Config {
            config: Box::new(cfg),
        });
        log::info(
            "config applied",
            json!({"revision": self.config.lock().unwrap().revision}),
        );
        Ok(())
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

    fn on_report(&self, slot: &WorkerSlot, v: Value) {
        match v["type"].as_str() {
            Some("report") => {
                slot.live
                    .store(v["live"].as_u64().unwrap_or(0), Ordering::Relaxed);
                slot.pipes
                    .store(v["pipes_in_use"].as_u64().unwrap_or(0), Ordering::Relaxed);
                slot.listening
                    .store(v["listening"].as_bool().unwrap_or(false), Ordering::Relaxed);
                let d = &v["deltas"];
                let g = |k: &str| d[k].as_u64().unwrap_or(0);
                {
                    let mut t = self.totals.lock().unwrap();
                    t.flows_total += g("flows");
                    t.failed_connect += g("failed_connect");
                    t.bytes_up += g("bytes_up");
                    t.bytes_down += g("bytes_down");
                    t.cc_fallback += g("cc_fallback");
                    if let Some(m) = d["by_action"].as_object() {
                        for (k, a) in m {
                            let e = t.by_action.entry(k.clone()).or_default();
                            e.0 += a["bytes_up"].as_u64().unwrap_or(0);
                            e.1 += a["bytes_down"].as_u64().unwrap_or(0);
                            e.2 += a["flows"].as_u64().unwrap_or(0);
                        }
                    }
                }
                if let Ok(closed) = serde_json::from_value::<Vec<Flow>>(v["closed"].clone()) {
                    let mut ring = self.closed.lock().unwrap();
                    for f in closed {
                        if ring.len() >= CLOSED_RING {
                            ring.pop_front();
                            self.totals.lock().unwrap().closed_dropped += 1;
                        }
                        ring.push_back(f);
                    }
                }
            }
            Some("snapshot") => {
                let id = v["id"].as_u64().unwrap_or(0);
                if let Ok(flows) = serde_json::from_value::<Vec<Flow>>(v["flows"].clone()) {
                    if let Some(tx) = self.pending.lock().unwrap().get(&id) {
                        let _ = tx.send(flows);
                    }
                }
            }
            _ => {}
        }
    }
}

fn uses_hybla(cfg: &GatewayConfig) -> bool {
    cfg.satellite.congestion_control == "hybla"
        || cfg
            .classes
            .iter()
            .any(|c| c.satellite.congestion_control.as_deref() == Some("hybla"))
}

fn supervise(shared: Arc<Shared>, index: usize) {
    let exe = std::env::current_exe().unwrap_or_else(|_| "perigee".into());
    let mut generation: u32 = 0;
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
            if let Ok(v) = serde_json::from_str::<Value>(&line) {
                shared.on_report(slot, v);
            }
        }
        slot.alive.store(false, Ordering::Relaxed);
        slot.listening.store(false, Ordering::Relaxed);
        slot.live.store(0, Ordering::Relaxed);
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

fn block_signals() -> libc::sigset_t {
    // SAFETY: sigset manipulation on a local set.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGTERM);
        libc::sigaddset(&mut set, libc::SIGINT);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        set
    }
}

pub struct RunArgs {
    pub config: String,
    pub control_socket: String,
    pub workers: usize,
    pub metrics: Option<String>,
}

pub fn run(args: RunArgs) -> i32 {
    let text = match std::fs::read_to_string(&args.config) {
        Ok(t) => t,
        Err(e) => {
            log::error(
                "cannot read config",
                json!({"path": args.config, "error": e.to_string()}),
            );
            return 2;
        }
    };
    let cfg = match config::parse(&text) {
        Ok(c) => c,
        Err(e) => {
            log::error(
                "invalid config",
                json!({"field": e.field, "message": e.message}),
            );
            return 2;
        }
    };
    sys::raise_nofile();
    let sigset = block_signals();
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
    });
    if let Err(e) = shared.apply_config(cfg) {
        log::error("initial apply failed", json!({"error": format!("{e:?}")}));
        return 1;
    }
    let listener = match control::bind(&args.control_socket) {
        Ok(l) => l,
        Err(e) => {
            log::error(
                "cannot bind control socket",
                json!({"path": args.control_socket, "error": e.to_string()}),
            );
            apply::teardown(&shared.applied.lock().unwrap());
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
    let mut sig: libc::c_int = 0;
    // SAFETY: sigset was filled by block_signals; sig is a valid out-parameter.
    unsafe { libc::sigwait(&sigset, &mut sig) };
    shared.shutting_down.store(true, Ordering::Relaxed);
    log::info("shutting down", json!({"signal": sig}));
    for w in &shared.workers {
        let pid = w.pid.load(Ordering::Relaxed);
        if pid > 0 {
            // SAFETY: signalling our own child by pid.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
    }
    apply::teardown(&shared.applied.lock().unwrap());
    let _ = std::fs::remove_file(&args.control_socket);
    0
}
