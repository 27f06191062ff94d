//! Keeps port 80 off a Squid that runs but does not serve. A live Squid master says nothing
//! about its worker: with a rock store, Squid's coordinator holds the listening sockets, so a
//! worker that died (a full disk under its logs is fatal to it) or hangs leaves connections
//! queued forever. Once a second a request Squid answers by itself goes to its admin port
//! (`perigee_squid::admin::probe`); after a run of unanswered ones port 80 goes to the
//! splitter at once, Squid is killed and started again, and port 80 comes back with its first
//! answer (docs/cache.md, "A Squid that runs but does not serve").
use super::log;
use super::state::Shared;
use perigee_squid::{admin, ServingPolicy, ServingStep, ServingWatch};
use serde_json::json;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// One probe per this period (from probe start to probe start).
const PROBE_EVERY: Duration = Duration::from_secs(1);
/// Time Squid has to answer a probe. It answers in well under a millisecond when idle; the
/// margin (and the run of failures ServingPolicy asks for) keeps a busy Squid in service.
const PROBE_TIMEOUT: Duration = Duration::from_secs(2);
/// The last look before a restart, once the verdict is in (a Squid that serves answers in
/// milliseconds).
const CONFIRM_TIMEOUT: Duration = Duration::from_millis(500);

pub fn watch_serving(shared: Arc<Shared>) {
    let policy = ServingPolicy::default();
    let mut watch = ServingWatch::new(policy);
    loop {
        let started = Instant::now();
        if shared.shutting_down.load(Ordering::Relaxed) {
            return;
        }
        match probe_target(&shared) {
            Target::CacheOff => {
                watch.reset();
                *shared.squid_not_serving.lock().unwrap() = None;
            }
            Target::NotRunning => watch.pause(),
            Target::AdminPort(port) => {
                let result = admin::probe(port, PROBE_TIMEOUT);
                let step = watch.record(result.is_ok(), Instant::now());
                if step != ServingStep::Keep {
                    act(&shared, step, &mut watch, result.err().unwrap_or_default());
                }
            }
        }
        std::thread::sleep(PROBE_EVERY.saturating_sub(started.elapsed()));
    }
}

enum Target {
    CacheOff,
    NotRunning,
    AdminPort(u16),
}

/// Without the manager's lock: the restart-if-dead path and the storage figures hold it for
/// seconds when Squid does not answer, which would delay the verdict.
fn probe_target(shared: &Shared) -> Target {
    let cache = shared.config.lock().unwrap().cache.clone();
    if !cache.enabled || !shared.configured.load(Ordering::Relaxed) {
        return Target::CacheOff;
    }
    if !shared.squid_running.load(Ordering::Relaxed) {
        return Target::NotRunning;
    }
    Target::AdminPort(cache.admin_port)
}

fn act(shared: &Shared, step: ServingStep, watch: &mut ServingWatch, error: String) {
    if step == ServingStep::WithdrawAndRestart {
        // At once, without waiting for the apply lock (the storage figures or an apply may
        // hold it for seconds): the gate reads squid_not_serving, so whoever rewrites the
        // cache_up set meanwhile keeps port 80 with the splitter too.
        let why = format!(
            "squid does not answer ({error}, {} probes in a row); restarting it",
            watch.failures()
        );
        log::error(
            "squid runs but does not answer: port 80 goes to the splitter",
            json!({"error": error, "probes_failed": watch.failures()}),
        );
        *shared.squid_not_serving.lock().unwrap() = Some(why.clone());
        shared.set_cache_up(false, Some(why));
    }
    // Same lock order as apply_config: applied, then squid. Shutdown stops Squid under these
    // locks: never act afterwards, nor for a config that switched the cache off meanwhile.
    let _applied = shared.applied.lock().unwrap();
    let cache = shared.config.lock().unwrap().cache.clone();
    if shared.shutting_down.load(Ordering::Relaxed) || !cache.enabled {
        return;
    }
    let mut step = step;
    if step != ServingStep::Restore {
        // An apply may have been restarting Squid while the probes went unanswered (and held
        // the lock just taken): ask the Squid there is now before killing it.
        if admin::probe(cache.admin_port, CONFIRM_TIMEOUT).is_ok() {
            step = watch.record(true, Instant::now());
        } else if step == ServingStep::Restart {
            log::warn(
                "squid still does not answer since its restart",
                json!({"error": error}),
            );
        }
    }
    match step {
        ServingStep::Keep => {}
        ServingStep::WithdrawAndRestart | ServingStep::Restart => restart(shared),
        ServingStep::Restore => {
            log::info("squid answers again", json!({}));
            *shared.squid_not_serving.lock().unwrap() = None;
            let cfg = shared.config.lock().unwrap().clone();
            let running = shared.squid_running.load(Ordering::Relaxed);
            shared.refresh_cache_gate(&cfg, running, false);
        }
    }
}

fn restart(shared: &Shared) {
    let mut mgr = shared.squid.lock().unwrap();
    match mgr.restart_unresponsive() {
        Ok(_) => log::warn("squid restarted", json!({"why": "it did not answer"})),
        // The restart-if-dead path (master.rs watch_cache) keeps trying.
        Err(e) => log::error("squid does not start", json!({"error": e.to_string()})),
    }
    shared
        .squid_running
        .store(mgr.is_running(), Ordering::Relaxed);
}
