//! The control socket (docs/control-protocol.md): HTTP/1.1 + JSON over a Unix stream socket.
use super::config::{self, ConfigError};
use super::reports::{
    ActionCounters, Applied, BypassRuleCounters, BypassRuleKind, CacheCounters, Counters,
    DnsReport, ErrorBody, FlowList, Health, HealthStatus, HostStats, LinkCounters, PacketCounters,
    PeerCounters, PeerHealth, ServiceState, Services, SiteCounters, SplitCounters, Validated,
    WorkerHealth,
};
use super::state::{ConfigFailure, Shared};
use super::telemetry::Flow;
use super::{
    apply, control_tls, http, interfaces, ipc, log, peer_control, procstat, render, routing, sys,
};
use serde::Serialize;
use serde_json::{json, Value};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::sync::atomic::Ordering;
use std::sync::Arc;

pub const VERSION: &str = env!("CARGO_PKG_VERSION");

pub fn bind(path: &str) -> std::io::Result<UnixListener> {
    if let Some(dir) = std::path::Path::new(path).parent() {
        std::fs::create_dir_all(dir)?;
    }
    // A stale socket from a crashed run would make bind fail.
    if UnixStream::connect(path).is_err() {
        let _ = std::fs::remove_file(path);
    }
    let l = UnixListener::bind(path)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o660))?;
    // Group `perigee` (the API's group), when the system has it.
    let group = std::ffi::CString::new("perigee").unwrap_or_default();
    // SAFETY: getgrnam with a valid C string; the result is read before any other call.
    let gr = unsafe { libc::getgrnam(group.as_ptr()) };
    if !gr.is_null() {
        // SAFETY: gr points to a valid group entry.
        let gid = unsafe { (*gr).gr_gid };
        std::os::unix::fs::chown(path, None, Some(gid))?;
    }
    Ok(l)
}

pub fn serve(shared: Arc<Shared>, listener: UnixListener) {
    for conn in listener.incoming() {
        let Ok(conn) = conn else { continue };
        let s = shared.clone();
        std::thread::spawn(move || {
            let _ = conn.set_read_timeout(Some(std::time::Duration::from_secs(10)));
            let mut conn = conn;
            let _ = answer(&s, &mut conn);
        });
    }
}

/// The control protocol on TCP with mutual TLS (control_tls): at most
/// `control_tls::MAX_CONNECTIONS` connections at once, the same routes as the Unix socket.
pub fn serve_tls(
    shared: Arc<Shared>,
    listener: std::net::TcpListener,
    tls: Arc<control_tls::ControlTls>,
) {
    control_tls::set_listener(tls.clone());
    control_tls::serve_bounded(listener, control_tls::MAX_CONNECTIONS, move |tcp| {
        let _ = tls.answer(tcp, |stream| answer(&shared, stream));
    });
}

/// One request read from `stream` and its answer written back: the same for the Unix socket and
/// the TLS listener (control_tls).
pub fn answer<S: std::io::Read + std::io::Write>(
    shared: &Shared,
    stream: &mut S,
) -> std::io::Result<()> {
    let (status, body) = match http::read_request(&mut *stream) {
        Ok(req) => handle(shared, &req),
        // Below HTTP (a refused TLS handshake) the answer's write fails too, and the caller drops it.
        Err(e) => (400, error("bad_request", &e.to_string(), None)),
    };
    http::write_response(
        &mut *stream,
        status,
        "application/json",
        body.to_string().as_bytes(),
    )
}

fn error(code: &str, message: &str, field: Option<&str>) -> Value {
    to_json(&ErrorBody::new(code, message, field))
}

/// The answer types are plain data: serializing them cannot fail.
fn to_json<T: Serialize>(v: &T) -> Value {
    serde_json::to_value(v).unwrap_or(Value::Null)
}

fn invalid(e: &ConfigError) -> (u16, Value) {
    (422, error("invalid_config", &e.message, Some(&e.field)))
}

fn hybla_json() -> Value {
    serde_json::to_value(perigee_hybla::status()).unwrap_or(Value::Null)
}

pub fn problems(shared: &Shared) -> Vec<String> {
    let mut p = Vec::new();
    if let Some(why) = shared.apply_problem.lock().unwrap().clone() {
        p.push(format!(
            "config not installed (initial apply failed: {why}); nothing is intercepted until PUT /v1/config succeeds"
        ));
    }
    if !shared.configured.load(Ordering::Relaxed) {
        // The placeholder config says nothing about this box: nothing else to report yet.
        if p.is_empty() {
            p.push("no config is installed: nothing is intercepted until PUT /v1/config".into());
        }
        return p;
    }
    // Workers only start once a config is installed: before that their absence is expected.
    if shared.configured.load(Ordering::Relaxed) {
        for (i, w) in shared.workers.iter().enumerate() {
            if !w.alive.load(Ordering::Relaxed) {
                p.push(format!("worker {i} is not running"));
            }
        }
    }
    let cfg = shared.config.lock().unwrap();
    let avail = sys::available_cc();
    if !avail.iter().any(|c| c == "hybla") {
        if let Some(why) = shared.hybla_load_problem.lock().unwrap().clone() {
            p.push(why);
        }
    }
    let wanted = cfg.satellite.congestion_control;
    if !avail.iter().any(|a| a == wanted.as_str()) {
        // Its fallback (hybla for hybla_ld) when the kernel has that, as the routes and workers do.
        let instead =
            render::effective_cc(wanted, &avail).unwrap_or_else(|| "the system default".into());
        p.push(format!(
            "congestion control '{wanted}' is not available (have: {}); the satellite leg uses {instead}",
            avail.join(" ")
        ));
    }
    if shared.overflow.load(Ordering::Relaxed) {
        p.push("max_flows reached: new flows are routed unsplit".into());
    }
    if cfg.dns.enabled && !shared.dns_up.load(Ordering::Relaxed) {
        let why = shared.dns_problem.lock().unwrap().clone();
        p.push(format!(
            "dns: the resolver is not running, DNS from the served subnets goes to the addresses it was sent to{}",
            why.map(|w| format!(" ({w})")).unwrap_or_default()
        ));
    }
    if cfg.dns.enabled || cfg.cache.enabled {
        if let Some(why) = shared.resolver.lock().unwrap().reason() {
            p.push(format!("dns: {why}"));
        }
    }
    if let Some(why) = peer_problem(shared, &cfg) {
        p.push(why);
    }
    if let Some(why) = shared.config_file.problem(&cfg.revision) {
        p.push(why);
    }
    if cfg.peer.enabled
        && apply::read_sysctl("net.ipv4.tcp_slow_start_after_idle").is_ok_and(|v| v.trim() == "1")
    {
        p.push(
            "peer path: net.ipv4.tcp_slow_start_after_idle is 1, so a warm connection idle past its RTO \
             loses its initial window; set it to 0 (sysctls)"
                .into(),
        );
    }
    if cfg.cache.enabled {
        if let Some(why) = shared.cache_flows_problem.lock().unwrap().clone() {
            p.push(format!(
                "cache: {why}; its connections are missing from the flows and the link figures"
            ));
        }
        if !shared.cache_up.load(Ordering::Relaxed) {
            let why = shared.cache_problem.lock().unwrap().clone();
            p.push(format!(
                "cache: squid is not serving, port 80 goes to the splitter{}",
                why.map(|w| format!(" ({w})")).unwrap_or_default()
            ));
        }
        if cfg.cache.collapsed_forwarding
            && !perigee_squid::collapsed_forwarding_safe(shared.squid_version)
        {
            p.push(
                "cache: collapsed_forwarding left off (CVE-2023-49288 affects this Squid version)"
                    .into(),
            );
        }
    }
    p
}

/// The peer path's state summed over the workers (`/v1/health` `peer`, None when it is off).
fn peer_health(shared: &Shared) -> Option<PeerHealth> {
    let reports: Vec<ipc::PeerReport> = shared
        .workers
        .iter()
        .filter_map(|w| w.peer.lock().unwrap().clone())
        .collect();
    if reports.is_empty() {
        return None;
    }
    Some(PeerHealth {
        ready: reports.iter().map(|r| r.ready).sum(),
        full: reports.iter().map(|r| r.full).sum(),
        gateways: reports.iter().map(|r| r.gateways).max().unwrap_or(0),
        listening: reports.iter().any(|r| r.listening),
        error: reports.iter().find_map(|r| r.error.clone()),
    })
}

/// Why the enabled peer path is not carrying new flows, if it is not.
fn peer_problem(shared: &Shared, cfg: &config::GatewayConfig) -> Option<String> {
    if !cfg.peer.enabled || !shared.configured.load(Ordering::Relaxed) {
        return None;
    }
    if let Err(e) = shared.peer.current() {
        return Some(format!(
            "peer path: this gateway has no identity ({e}); it is off"
        ));
    }
    let reports: Vec<ipc::PeerReport> = shared
        .workers
        .iter()
        .filter_map(|w| w.peer.lock().unwrap().clone())
        .collect();
    if reports.is_empty() {
        return None; // workers not reported yet
    }
    match cfg.role {
        config::Role::Terminal if reports.iter().all(|r| r.ready == 0) => {
            let why = reports.iter().find_map(|r| r.error.clone());
            Some(format!(
                "peer path: no connection to the hub {} ready{}; new flows take the direct path",
                cfg.peer.hub,
                why.map(|w| format!(" ({w})")).unwrap_or_default()
            ))
        }
        config::Role::Hub if !reports.iter().any(|r| r.listening) => Some(format!(
            "peer path: cannot listen on port {}; terminals' flows take the direct path",
            cfg.peer.port
        )),
        _ => None,
    }
}

/// `rendered.squid_conf` of /v1/config/validate: what Squid would get (None when disabled).
fn render_squid(shared: &Shared, cfg: &config::GatewayConfig) -> Option<String> {
    if !cfg.cache.enabled {
        return None;
    }
    let served =
        perigee_squid::check_served_subnets(&cfg.served_subnets, &cfg.served_limits).ok()?;
    Some(perigee_squid::render(
        &cfg.cache,
        &served,
        &cfg.squid_nameservers(),
        &shared.squid_paths,
        shared.squid_version,
    ))
}

/// `rendered.unbound_conf` of /v1/config/validate: what unbound would get (None when disabled).
fn render_unbound(shared: &Shared, cfg: &config::GatewayConfig) -> Option<String> {
    if !cfg.dns.enabled {
        return None;
    }
    let served = perigee_dns::check_served_subnets(&cfg.served_subnets).ok()?;
    let ups = cfg.dns.upstreams().ok()?;
    Some(perigee_dns::render(
        &cfg.dns,
        &served,
        &ups,
        cfg.dns_forwarding(),
        &shared.dns_paths,
    ))
}

/// GET /v1/dns/stats: the resolver crate's counters with what the daemon knows about it.
fn dns_report(shared: &Shared) -> DnsReport {
    let cfg = shared.config.lock().unwrap().clone();
    let health = shared.resolver.lock().unwrap().clone();
    let (intercepted, _) = apply::read_counter("dns_intercepted").unwrap_or((0, 0));
    let stats = shared.dns.lock().unwrap().stats();
    DnsReport {
        stats,
        intercept: cfg.dns.enabled && cfg.dns.intercept,
        intercepted_resolvers: if cfg.dns.enabled && cfg.dns.intercept {
            cfg.dns
                .intercepted_resolvers()
                .iter()
                .map(|a| a.to_string())
                .collect()
        } else {
            Vec::new()
        },
        serving: shared.dns_up.load(Ordering::Relaxed),
        intercepted_packets: intercepted,
        upstream_healthy: health.healthy,
        upstream_probe: health.last,
    }
}

/// `/v1/dns/*`: the stats here, the rest served by the resolver crate.
fn dns_endpoint(shared: &Shared, req: &http::Request) -> (u16, Value) {
    if (req.method.as_str(), req.path.as_str()) == ("GET", "/v1/dns/stats") {
        return (200, to_json(&dns_report(shared)));
    }
    let mut mgr = shared.dns.lock().unwrap();
    perigee_dns::api::handle(
        &mut mgr,
        &req.method,
        &req.path,
        &req.body,
        serde_json::Map::new(),
    )
    .unwrap_or_else(|| (404, error("not_found", "no such endpoint", None)))
}

/// `/v1/cache/*`, served by the Squid crate.
fn cache_endpoint(shared: &Shared, req: &http::Request) -> (u16, Value) {
    let mut target = req.path.clone();
    if !req.query.is_empty() {
        let q: Vec<String> = req.query.iter().map(|(k, v)| format!("{k}={v}")).collect();
        target = format!("{target}?{}", q.join("&"));
    }
    let mut mgr = shared.squid.lock().unwrap();
    perigee_squid::api::handle(&mut mgr, &req.method, &target, &req.body)
        .unwrap_or_else(|| (404, error("not_found", "no such endpoint", None)))
}

/// True while new connections pass unsplit: no listening worker, or above max_flows.
pub fn fail_open(shared: &Shared) -> bool {
    let listening = shared
        .workers
        .iter()
        .any(|w| w.listening.load(Ordering::Relaxed));
    !listening || shared.overflow.load(Ordering::Relaxed)
}

/// Squid's and the resolver's state, from what the daemon last saw of them.
pub fn services(shared: &Shared, cfg: &config::GatewayConfig) -> Services {
    let squid_problem = shared
        .squid_not_serving
        .lock()
        .unwrap()
        .clone()
        .or_else(|| shared.cache_problem.lock().unwrap().clone());
    let squid_serving = shared.cache_up.load(Ordering::Relaxed);
    let dns_serving = shared.dns_up.load(Ordering::Relaxed);
    Services {
        squid: ServiceState {
            enabled: cfg.cache.enabled,
            serving: squid_serving,
            problem: (cfg.cache.enabled && !squid_serving)
                .then(|| squid_problem.unwrap_or_else(|| "not serving yet".into())),
        },
        resolver: ServiceState {
            enabled: cfg.dns.enabled,
            serving: dns_serving,
            problem: (cfg.dns.enabled && !dns_serving).then(|| {
                shared
                    .dns_problem
                    .lock()
                    .unwrap()
                    .clone()
                    .unwrap_or_else(|| "not serving yet".into())
            }),
        },
    }
}

/// The box's resources, with the filesystems the gateway writes (Squid's store when on).
pub fn host(shared: &Shared, cfg: &config::GatewayConfig) -> HostStats {
    let store = shared.squid_paths.cache_root();
    let store = store.to_string_lossy();
    let mut paths = vec!["/"];
    if cfg.cache.enabled && std::path::Path::new(store.as_ref()).exists() {
        paths.push(store.as_ref());
    }
    procstat::host(&paths)
}

fn health(shared: &Shared) -> Health {
    let problems = problems(shared);
    let cfg = shared.config.lock().unwrap().clone();
    let configured = shared.configured.load(Ordering::Relaxed);
    Health {
        status: if problems.is_empty() {
            HealthStatus::Ok
        } else {
            HealthStatus::Degraded
        },
        version: VERSION.into(),
        uptime_s: shared.started.elapsed().as_secs_f64(),
        role: configured.then_some(cfg.role),
        // None while no config is installed (the startup one could not be).
        config_revision: configured.then(|| cfg.revision.clone()),
        fail_open: fail_open(shared),
        hybla: perigee_hybla::status(),
        problems,
        notices: if configured {
            cfg.dns_in_clear().into_iter().collect()
        } else {
            Vec::new()
        },
        peer: peer_health(shared),
        host: host(shared, &cfg),
        services: services(shared, &cfg),
        workers: shared
            .workers
            .iter()
            .map(|w| WorkerHealth {
                alive: w.alive.load(Ordering::Relaxed),
                pid: w.pid.load(Ordering::Relaxed),
                live: w.live.load(Ordering::Relaxed),
                restarts: w.restarts.load(Ordering::Relaxed),
                pipes_in_use: w.pipes.load(Ordering::Relaxed),
            })
            .collect(),
    }
}

/// The daemon's counters now (GET /v1/counters).
pub fn counters_report(shared: &Shared) -> Counters {
    let t = shared.totals.lock().unwrap().clone();
    // Every nft counter in one read (one `nft` run, not one per counter).
    let nft = apply::read_counters();
    let read = |name: &str| {
        let (packets, bytes) = nft.get(name).copied().unwrap_or((0, 0));
        PacketCounters { packets, bytes }
    };
    let usage = |u: Option<&ipc::Usage>| {
        let u = u.copied().unwrap_or_default();
        SplitCounters {
            bytes_up: u.bytes_up,
            bytes_down: u.bytes_down,
            flows: u.flows,
            retrans_segments: u.retrans_segments,
            segments: u.segments,
        }
    };
    let usages = |m: &std::collections::BTreeMap<String, ipc::Usage>| {
        m.iter().map(|(k, u)| (k.clone(), usage(Some(u)))).collect()
    };
    let mut site_names: Vec<&String> = t
        .by_site
        .keys()
        .chain(t.cache_saved_by_site.keys())
        .collect();
    site_names.sort();
    site_names.dedup();
    let by_site = site_names
        .into_iter()
        .map(|k| {
            let site = SiteCounters {
                usage: usage(t.by_site.get(k)),
                cache_saved_bytes: t.cache_saved_by_site.get(k).copied().unwrap_or(0),
            };
            (k.clone(), site)
        })
        .collect();
    let cfg = shared.config.lock().unwrap().clone();
    let mut bypass_rules: Vec<BypassRuleCounters> = cfg
        .bypass
        .iter()
        .enumerate()
        .map(|(i, b)| BypassRuleCounters {
            name: b.name.to_string(),
            kind: BypassRuleKind::Bypass,
            builtin: b.builtin,
            counted: read(&render::bypass_counter(i)),
        })
        .collect();
    for (i, c) in cfg.classes.iter().enumerate() {
        if c.action == config::Action::Bypass {
            bypass_rules.push(BypassRuleCounters {
                name: c.name.to_string(),
                kind: BypassRuleKind::Class,
                builtin: false,
                counted: read(&render::bypass_class_counter(i)),
            });
        }
    }
    // Squid's side of `cache` (from its access log); bytes and flows are what the cache's and
    // the cache-class flows carried over the satellite.
    let c = shared.cache_counters();
    Counters {
        flows_live: shared.live() + shared.cache_live.lock().unwrap().len() as u64,
        flows_total: t.flows_total,
        flows_unsplit_overflow: read("overflow_syns").packets,
        flows_failed_connect: t.failed_connect,
        bytes_up: t.bytes_up,
        bytes_down: t.bytes_down,
        link: LinkCounters {
            forward_bytes: t.link.forward_wire,
            return_bytes: t.link.return_wire,
            forward_payload_bytes: t.link.forward_payload,
            return_payload_bytes: t.link.return_payload,
            interface: interfaces::link_interface(&cfg, shared.configured.load(Ordering::Relaxed)),
        },
        by_action: ActionCounters {
            accelerate: usage(t.by_action.get("accelerate")),
            cache: CacheCounters {
                split: usage(t.by_action.get("cache")),
                requests: c.requests,
                hits: c.hits,
                misses: c.misses,
                denied: c.denied,
                bytes: c.bytes,
                bytes_from_origin: c.upstream_bytes,
                bytes_saved: c.hit_bytes,
            },
            bypass: read("bypass"),
        },
        by_class: usages(&t.by_class),
        by_site,
        by_congestion_control: usages(&t.by_cc),
        by_cc_reason: usages(&t.by_cc_reason),
        bypass_rules,
        cc_fallback: t.cc_fallback,
        closed_dropped: t.closed_dropped,
        peer: PeerCounters {
            flows: t.peer_flows,
            fallbacks: t.peer_fallbacks,
            refused: t.peer_refused,
            failed: t.peer_failed,
            pool_empty: t.peer_pool_empty,
            redundant: read(apply::DUP_KEY),
        },
        quic_rejected: read("quic_rejected"),
    }
}

/// GET /v1/counters as JSON (the metrics exporter renders `counters_report` itself).
pub fn counters(shared: &Shared) -> Value {
    to_json(&counters_report(shared))
}

fn parse_body(body: &[u8]) -> Result<config::GatewayConfig, ConfigError> {
    config::parse(std::str::from_utf8(body).unwrap_or(""))
}

pub fn handle(shared: &Shared, req: &http::Request) -> (u16, Value) {
    if let Some(answer) = peer_control::handle(shared, req) {
        return answer;
    }
    if let Some(answer) = super::cluster_control::handle(shared, req) {
        return answer;
    }
    let now = sys::now_f64();
    match (req.method.as_str(), req.path.as_str()) {
        ("GET", "/v1/health") => (200, to_json(&health(shared))),
        ("GET", "/v1/config") if !shared.configured.load(Ordering::Relaxed) => (
            404,
            error(
                "no_config",
                "no config is installed: nothing is intercepted until one is PUT",
                None,
            ),
        ),
        ("GET", "/v1/config") => (200, to_json(&*shared.config.lock().unwrap())),
        ("POST", "/v1/config/validate") => match parse_body(&req.body) {
            Ok(cfg) => {
                let mut rendered = render::render(&cfg, &sys::available_cc()).report();
                rendered.squid_conf = render_squid(shared, &cfg);
                rendered.unbound_conf = render_unbound(shared, &cfg);
                (200, to_json(&Validated { ok: true, rendered }))
            }
            Err(e) => invalid(&e),
        },
        ("PUT", "/v1/config") => match parse_body(&req.body) {
            Err(e) => invalid(&e),
            Ok(cfg) => {
                let rev = cfg.revision.clone();
                match shared.apply_and_keep(cfg) {
                    Ok(kept) => (
                        200,
                        to_json(&Applied {
                            ok: true,
                            revision: rev,
                            applied_at: now,
                            persisted: kept.persisted,
                            persist_error: kept.error,
                        }),
                    ),
                    Err(ConfigFailure::Invalid(e)) => invalid(&e),
                    Err(ConfigFailure::Apply(e)) => {
                        log::error(
                            "config apply failed, previous state kept",
                            json!({"step": e.step, "error": e.message}),
                        );
                        let mut v = error("apply_failed", &e.message, e.field.as_deref());
                        v["error"]["step"] = e.step.into();
                        (409, v)
                    }
                }
            }
        },
        ("GET", "/v1/flows") => {
            let state = req.param("state").unwrap_or("live");
            let mut flows: Vec<Flow> = Vec::new();
            if state == "live" || state == "all" {
                flows.extend(shared.snapshot());
            }
            if state == "closed" || state == "all" {
                flows.extend(shared.closed.lock().unwrap().iter().cloned());
            }
            if !["live", "closed", "all"].contains(&state) {
                return (
                    400,
                    error(
                        "bad_request",
                        "state must be live, closed or all",
                        Some("state"),
                    ),
                );
            }
            (
                200,
                to_json(&FlowList {
                    flows,
                    now: Some(now),
                }),
            )
        }
        ("POST", "/v1/flows/collect") => {
            let drained: Vec<Flow> = shared.closed.lock().unwrap().drain(..).collect();
            (
                200,
                to_json(&FlowList {
                    flows: drained,
                    now: None,
                }),
            )
        }
        ("GET", "/v1/counters") => (200, counters(shared)),
        ("GET", "/v1/hybla") => (200, hybla_json()),
        ("GET", "/v1/routing") => (200, to_json(&routing::report(&shared.frr_vty_dir))),
        ("PUT", "/v1/control-tls/crl") => match control_tls::put_crl(&req.body) {
            Ok(installed) => {
                log::info(
                    "fleet revocation list installed",
                    json!({"listening": installed.listening, "persisted": installed.persisted}),
                );
                (200, to_json(&installed))
            }
            Err((status, code, message)) => (status, error(code, &message, Some("crl_pem"))),
        },
        ("GET", "/v1/interfaces") => {
            let cfg = shared.config.lock().unwrap().clone();
            let running = shared.configured.load(Ordering::Relaxed).then_some(&cfg);
            match interfaces::list(running) {
                Ok(list) => (200, to_json(&list)),
                Err(e) => (500, error("interfaces_unreadable", &e.to_string(), None)),
            }
        }
        (_, p) if p == "/v1/cache" || p.starts_with("/v1/cache/") => cache_endpoint(shared, req),
        (_, p) if p == "/v1/dns" || p.starts_with("/v1/dns/") => dns_endpoint(shared, req),
        (
            _,
            "/v1/health"
            | "/v1/config"
            | "/v1/config/validate"
            | "/v1/flows"
            | "/v1/flows/collect"
            | "/v1/counters"
            | "/v1/hybla"
            | "/v1/interfaces"
            | "/v1/routing"
            | "/v1/control-tls/crl",
        ) => (405, error("method_not_allowed", "method not allowed", None)),
        _ => (404, error("not_found", "no such endpoint", None)),
    }
}
