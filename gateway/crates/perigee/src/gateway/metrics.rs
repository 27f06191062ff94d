//! Prometheus text exposition on a local TCP port (default 127.0.0.1:9464, `--metrics` or
//! PERIGEE_METRICS). Names and units follow the Prometheus conventions: `_total` counters,
//! `_bytes`/`_seconds`/`_bits_per_second` units, `_info` metrics for labels with value 1.
//! Every metric is listed in docs/operations.md, *Metrics*.
use super::exposition::{b, labels, n, Exposition};
use super::reports::{BypassRuleKind, CacheCounters, Counters, PacketCounters, SplitCounters};
use super::reports_peer::PeerStatus;
use super::state::Shared;
use super::{control, host_metrics, http, log, peer_control, procstat};
use serde_json::json;
use std::net::TcpListener;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// The satellite leg per congestion control and per reason it runs (docs/hybla.md, *What the
/// operator sees*): flows, data segments sent and retransmitted, whose ratio over time is the
/// leg's loss as its senders repaired it.
fn satellite_cc_families(e: &mut Exposition, c: &Counters) {
    for (what, label, map) in [
        ("cc", "cc", &c.by_congestion_control),
        ("cc_reason", "cc_reason", &c.by_cc_reason),
    ] {
        let each = |f: fn(&SplitCounters) -> u64| -> Vec<_> {
            map.iter()
                .map(|(k, u)| (labels(&[(label, k)]), n(f(u))))
                .collect()
        };
        e.family(
            &format!("perigee_satellite_{what}_flows_total"),
            "counter",
            &format!("Split flows per {label} of their satellite leg."),
            each(|u| u.flows),
        );
        e.family(
            &format!("perigee_satellite_{what}_segments_total"),
            "counter",
            &format!(
                "Data segments sent on the satellite leg per {label} (retransmissions included)."
            ),
            each(|u| u.segments),
        );
        e.family(
            &format!("perigee_satellite_{what}_retransmitted_segments_total"),
            "counter",
            &format!("Segments retransmitted on the satellite leg per {label}."),
            each(|u| u.retrans_segments),
        );
    }
}

/// Per-category usage maps of /v1/counters (`by_action`, `by_class`, `by_site`) as labelled
/// bytes (both directions) and flows.
fn usage_families<'a>(
    e: &mut Exposition,
    what: &str,
    label: &str,
    usages: impl IntoIterator<Item = (&'a str, &'a SplitCounters)>,
) {
    let mut bytes = Vec::new();
    let mut flows = Vec::new();
    for (k, u) in usages {
        for (dir, v) in [("up", u.bytes_up), ("down", u.bytes_down)] {
            bytes.push((labels(&[(label, k), ("direction", dir)]), n(v)));
        }
        flows.push((labels(&[(label, k)]), n(u.flows)));
    }
    e.family(
        &format!("perigee_{what}_bytes_total"),
        "counter",
        &format!("Payload bytes per {label} that crossed the satellite leg (up: toward the server, down: toward the client)."),
        bytes,
    );
    e.family(
        &format!("perigee_{what}_flows_total"),
        "counter",
        &format!(
            "Intercepted connections per {label} (split flows and the cache's client connections)."
        ),
        flows,
    );
}

pub fn render(shared: &Shared) -> String {
    let c = control::counters_report(shared);
    let cfg = shared.config.lock().unwrap().clone();
    let problems = control::problems(shared);
    let mut e = Exposition::default();

    e.family(
        "perigee_build_info",
        "gauge",
        "Version of the running gateway (value 1).",
        vec![(labels(&[("version", control::VERSION)]), 1.0)],
    );
    let configured = shared.configured.load(Ordering::Relaxed);
    let revision = cfg.revision.clone();
    e.family(
        "perigee_config_info",
        "gauge",
        "The config in force: its revision and role (value 1; absent while none is installed).",
        if configured {
            vec![(
                labels(&[("revision", &revision), ("role", role_name(&cfg))]),
                1.0,
            )]
        } else {
            Vec::new()
        },
    );
    e.one(
        "perigee_config_applied_timestamp_seconds",
        "gauge",
        "When the config in force was applied (unix time; 0 = none installed).",
        shared.applied_at.lock().unwrap().unwrap_or(0.0),
    );
    e.one(
        "perigee_config_persisted",
        "gauge",
        "1 while the --config file holds the config in force (a restart boots it); 0 after a failed write of it, without --config, or while none is installed.",
        b(configured && shared.config_file.holds_config_in_force()),
    );
    e.one(
        "perigee_config_persist_failures_total",
        "counter",
        "Applied configs that could not be written to the --config file.",
        shared.config_file.failures() as f64,
    );
    e.one(
        "perigee_degraded",
        "gauge",
        "1 while /v1/health says degraded (see perigee_health_problems).",
        b(!problems.is_empty()),
    );
    e.one(
        "perigee_health_problems",
        "gauge",
        "Problems /v1/health lists now.",
        problems.len() as f64,
    );
    e.one(
        "perigee_fail_open",
        "gauge",
        "1 while new connections pass unsplit (no worker listening, or max_flows reached).",
        b(control::fail_open(shared)),
    );
    let hybla = perigee_hybla::status();
    e.one(
        "perigee_hybla_loaded",
        "gauge",
        "1 while the congestion control hybla is registered in the kernel.",
        b(hybla.loaded),
    );
    let kind = serde_json::to_value(hybla.implementation)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default();
    e.family(
        "perigee_hybla_info",
        "gauge",
        "Which Hybla runs: implementation kernel (tcp_hybla), bpf (Perigee's struct_ops) or none (value 1).",
        vec![(labels(&[("implementation", &kind)]), 1.0)],
    );

    let live = shared.live();
    let cache_live = shared.cache_live.lock().unwrap().len() as u64;
    e.family(
        "perigee_flows_live",
        "gauge",
        "Intercepted connections open now, by who terminates them (splitter or squid).",
        vec![
            (labels(&[("relay", "splitter")]), live as f64),
            (labels(&[("relay", "squid")]), cache_live as f64),
        ],
    );
    relay_families(&mut e, &c);
    e.family(
        "perigee_link_capacity_bits_per_second",
        "gauge",
        "The link's configured rate (satellite.forward_rate_bps / return_rate_bps; 0 = not configured).",
        vec![
            (
                labels(&[("direction", "forward")]),
                cfg.satellite.forward_rate_bps as f64,
            ),
            (
                labels(&[("direction", "return")]),
                cfg.satellite.return_rate_bps as f64,
            ),
        ],
    );

    usage_and_bypass_families(&mut e, &c);

    render_cache(&mut e, shared, &c, &cfg);
    render_dns(&mut e, shared, &cfg);

    peer_and_fallback_families(&mut e, &c);
    peer_terminal_families(&mut e, &peer_control::peer_status(shared));

    render_processes(&mut e, shared);
    host_metrics::render(
        &mut e,
        &c,
        &control::host(shared, &cfg),
        &control::services(shared, &cfg),
    );
    e.one(
        "perigee_uptime_seconds",
        "gauge",
        "Seconds since the daemon started.",
        shared.started.elapsed().as_secs() as f64,
    );
    e.text
}

/// The splitter's flow and byte totals and what crossed the satellite link.
fn relay_families(e: &mut Exposition, c: &Counters) {
    e.one(
        "perigee_flows_total",
        "counter",
        "Split flows accepted.",
        n(c.flows_total),
    );
    e.one(
        "perigee_flows_failed_connect_total",
        "counter",
        "Flows whose server connect failed.",
        n(c.flows_failed_connect),
    );
    e.one(
        "perigee_flows_unsplit_overflow_total",
        "counter",
        "SYNs routed unsplit above max_flows.",
        n(c.flows_unsplit_overflow),
    );
    e.one(
        "perigee_closed_flows_dropped_total",
        "counter",
        "Closed-flow records dropped because nobody collected them (ring full).",
        n(c.closed_dropped),
    );
    e.family(
        "perigee_relay_bytes_total",
        "counter",
        "Bytes the splitter's relay moved between its sockets (up: client to server).",
        vec![
            (labels(&[("direction", "up")]), n(c.bytes_up)),
            (labels(&[("direction", "down")]), n(c.bytes_down)),
        ],
    );

    let link = &c.link;
    e.family(
        "perigee_link_bytes_total",
        "counter",
        "Bytes that crossed the satellite interface for intercepted connections, headers included (forward: hub to terminal).",
        vec![
            (labels(&[("direction", "forward")]), n(link.forward_bytes)),
            (labels(&[("direction", "return")]), n(link.return_bytes)),
        ],
    );
    e.family(
        "perigee_link_payload_bytes_total",
        "counter",
        "TCP payload that crossed the satellite for intercepted connections (delivered, not written).",
        vec![
            (labels(&[("direction", "forward")]), n(link.forward_payload_bytes)),
            (labels(&[("direction", "return")]), n(link.return_payload_bytes)),
        ],
    );
}

/// Satellite-leg usage per action, class and site, and what each bypass rule let through.
fn usage_and_bypass_families(e: &mut Exposition, c: &Counters) {
    let actions = [
        ("accelerate", &c.by_action.accelerate),
        ("cache", &c.by_action.cache.split),
    ];
    usage_families(e, "action", "action", actions);
    usage_families(
        e,
        "class",
        "class",
        c.by_class.iter().map(|(k, u)| (k.as_str(), u)),
    );
    usage_families(
        e,
        "site",
        "site",
        c.by_site.iter().map(|(k, s)| (k.as_str(), &s.usage)),
    );
    satellite_cc_families(e, c);
    e.family(
        "perigee_site_retransmitted_segments_total",
        "counter",
        "Segments retransmitted on the satellite leg, per site.",
        c.by_site
            .iter()
            .map(|(k, s)| (labels(&[("site", k)]), n(s.usage.retrans_segments)))
            .collect(),
    );
    e.family(
        "perigee_site_cache_saved_bytes_total",
        "counter",
        "Bytes the cache served to a site's clients without fetching them over the satellite.",
        c.by_site
            .iter()
            .map(|(k, s)| (labels(&[("site", k)]), n(s.cache_saved_bytes)))
            .collect(),
    );
    let rule_samples = |value: fn(&PacketCounters) -> u64| -> Vec<(String, f64)> {
        c.bypass_rules
            .iter()
            .map(|r| {
                let kind = match r.kind {
                    BypassRuleKind::Bypass => "bypass",
                    BypassRuleKind::Class => "class",
                };
                (
                    labels(&[("rule", &r.name), ("kind", kind)]),
                    n(value(&r.counted)),
                )
            })
            .collect()
    };
    e.family(
        "perigee_bypass_packets_total",
        "counter",
        "Packets accepted untouched, per bypass rule (kind bypass: a bypass entry; class: a bypass class, LAN side).",
        rule_samples(|p| p.packets),
    );
    e.family(
        "perigee_bypass_bytes_total",
        "counter",
        "Bytes accepted untouched, per bypass rule.",
        rule_samples(|p| p.bytes),
    );
}

/// The peer path's outcomes, QUIC rejected, and sockets left on the default congestion control.
fn peer_and_fallback_families(e: &mut Exposition, c: &Counters) {
    let peer = &c.peer;
    e.family(
        "perigee_peer_flows_total",
        "counter",
        "Flows by way of the peer path, by outcome (fallback: the ready connection refused OPEN's first byte and the flow went direct; failed: the peer connection broke and the client was reset, never replayed; pool_empty: a terminal had no ready connection for the flow, which went direct).",
        vec![
            (labels(&[("outcome", "started")]), n(peer.flows)),
            (labels(&[("outcome", "fallback")]), n(peer.fallbacks)),
            (labels(&[("outcome", "failed")]), n(peer.failed)),
            (labels(&[("outcome", "pool_empty")]), n(peer.pool_empty)),
        ],
    );
    e.one(
        "perigee_peer_refused_total",
        "counter",
        "Peer connections and flows the hub refused (an unknown key, garbage, too slow, a client outside the terminal's prefixes, a destination the egress policy refuses).",
        n(peer.refused),
    );
    e.one(
        "perigee_peer_redundant_bytes_total",
        "counter",
        "Bytes this gateway sent a second time over the satellite: the first bytes of each peer connection's flow (peer.redundancy), since the last config apply.",
        n(peer.redundant.bytes),
    );
    e.one(
        "perigee_quic_rejected_packets_total",
        "counter",
        "QUIC packets answered with port-unreachable (quic: fallback).",
        n(c.quic_rejected.packets),
    );
    e.one(
        "perigee_cc_fallback_total",
        "counter",
        "Satellite sockets left on the system default congestion control.",
        n(c.cc_fallback),
    );
}

/// A hub's enrolled terminals (GET /v1/peer): their connections, flows and refusals.
fn peer_terminal_families(e: &mut Exposition, p: &PeerStatus) {
    let per = |f: fn(&super::reports_peer::PeerTerminalStatus) -> u64| -> Vec<(String, f64)> {
        p.terminals
            .iter()
            .map(|t| (labels(&[("terminal", &t.name)]), n(f(t))))
            .collect()
    };
    e.family(
        "perigee_peer_terminal_idle_connections",
        "gauge",
        "Hub: an enrolled terminal's identified connections waiting for a flow.",
        per(|t| t.idle_connections),
    );
    e.family(
        "perigee_peer_terminal_live_flows",
        "gauge",
        "Hub: an enrolled terminal's live flows.",
        per(|t| t.live_flows),
    );
    let mut refused = Vec::new();
    for t in &p.terminals {
        for (reason, v) in [("prefix", t.refused_prefix), ("other", t.refused_other)] {
            refused.push((labels(&[("terminal", &t.name), ("reason", reason)]), n(v)));
        }
    }
    e.family(
        "perigee_peer_terminal_refused_total",
        "counter",
        "Hub: an enrolled terminal's flows refused (prefix: its client outside the terminal's prefixes; other: the egress policy, a protocol error).",
        refused,
    );
    e.one(
        "perigee_peer_refused_unknown_total",
        "counter",
        "Hub: peer connections refused before they were identified (an unknown or revoked key, no certificate, garbage, no handshake in time).",
        n(p.refused_unknown),
    );
    e.one(
        "perigee_egress_refused_total",
        "counter",
        "Hub: direct splits the egress policy refused.",
        n(p.egress_refused),
    );
}

fn role_name(cfg: &super::config::GatewayConfig) -> &'static str {
    match cfg.role {
        super::config::Role::Hub => "hub",
        super::config::Role::Terminal => "terminal",
    }
}

fn render_cache(
    e: &mut Exposition,
    shared: &Shared,
    c: &Counters,
    cfg: &super::config::GatewayConfig,
) {
    e.one(
        "perigee_cache_enabled",
        "gauge",
        "1 when the config in force has the cache on.",
        b(cfg.cache.enabled),
    );
    e.one(
        "perigee_cache_serving",
        "gauge",
        "1 while port 80 goes to Squid (running, its resolver answering).",
        b(shared.cache_up.load(Ordering::Relaxed)),
    );
    cache_request_families(e, &c.by_action.cache);
    let store = shared
        .cache_store
        .lock()
        .unwrap()
        .clone()
        .unwrap_or_default();
    let mb = |v: u32| f64::from(v) * 1024.0 * 1024.0;
    let mut used = Vec::new();
    let mut capacity = Vec::new();
    if let Some(d) = store.disk_used_bytes {
        used.push((labels(&[("store", "disk")]), d as f64));
    }
    if let Some(m) = store.memory_used_bytes {
        used.push((labels(&[("store", "memory")]), m as f64));
    }
    if cfg.cache.enabled {
        capacity.push((labels(&[("store", "disk")]), mb(cfg.cache.disk_mb)));
        capacity.push((labels(&[("store", "memory")]), mb(cfg.cache.memory_mb)));
    }
    e.family(
        "perigee_cache_store_used_bytes",
        "gauge",
        "Squid's store in use (cache manager info; absent while Squid does not answer).",
        used,
    );
    e.family(
        "perigee_cache_store_capacity_bytes",
        "gauge",
        "Squid's store size from the config (cache.disk_mb, cache.memory_mb).",
        capacity,
    );
    e.family(
        "perigee_cache_objects",
        "gauge",
        "Objects in Squid's store (StoreEntries).",
        store
            .store_entries
            .map(|v| vec![(String::new(), v as f64)])
            .unwrap_or_default(),
    );
}

/// Squid's side of the cache action, from its access log.
fn cache_request_families(e: &mut Exposition, cache: &CacheCounters) {
    e.family(
        "perigee_cache_requests_total",
        "counter",
        "Requests Squid answered, by outcome (hit: no origin fetch across the satellite).",
        [
            ("hit", cache.hits),
            ("miss", cache.misses),
            ("denied", cache.denied),
        ]
        .iter()
        .map(|(outcome, v)| (labels(&[("outcome", outcome)]), n(*v)))
        .collect(),
    );
    e.one(
        "perigee_cache_saved_bytes_total",
        "counter",
        "Bytes served from the cache: what did not cross the satellite.",
        n(cache.bytes_saved),
    );
    e.one(
        "perigee_cache_client_bytes_total",
        "counter",
        "Bytes Squid sent to clients.",
        n(cache.bytes),
    );
    e.one(
        "perigee_cache_origin_bytes_total",
        "counter",
        "Body bytes Squid fetched from origins.",
        n(cache.bytes_from_origin),
    );
}

fn render_dns(e: &mut Exposition, shared: &Shared, cfg: &super::config::GatewayConfig) {
    let t = *shared.dns_totals.lock().unwrap();
    e.one(
        "perigee_dns_enabled",
        "gauge",
        "1 when the config in force runs the caching resolver.",
        b(cfg.dns.enabled),
    );
    e.one(
        "perigee_dns_serving",
        "gauge",
        "1 while port 53 from the served subnets goes to the resolver.",
        b(shared.dns_up.load(Ordering::Relaxed)),
    );
    e.one(
        "perigee_dns_upstream_healthy",
        "gauge",
        "1 while the upstream resolver answers the probe.",
        b(shared.resolver.lock().unwrap().healthy),
    );
    e.family(
        "perigee_dns_queries_total",
        "counter",
        "Queries the resolver answered, by where from (cache or upstream).",
        vec![
            (labels(&[("answer", "cache")]), t.cache_hits as f64),
            (labels(&[("answer", "upstream")]), t.cache_misses as f64),
        ],
    );
    e.one(
        "perigee_dns_stale_answers_total",
        "counter",
        "Answers served from expired records (RFC 8767), part of the cache answers.",
        t.expired as f64,
    );
    e.one(
        "perigee_dns_prefetches_total",
        "counter",
        "Records refreshed before they expired.",
        t.prefetches as f64,
    );
    e.one(
        "perigee_dns_servfail_answers_total",
        "counter",
        "SERVFAIL answers.",
        t.servfail as f64,
    );
    e.one(
        "perigee_dns_upstream_wait_seconds_total",
        "counter",
        "Time misses waited for the upstream, summed (divide by the upstream answers for the mean).",
        t.recursion_time_s,
    );
}

fn render_processes(e: &mut Exposition, shared: &Shared) {
    let mut procs: Vec<(String, String, i32)> =
        vec![("master".into(), String::new(), std::process::id() as i32)];
    for (i, w) in shared.workers.iter().enumerate() {
        let pid = w.pid.load(Ordering::Relaxed);
        if w.alive.load(Ordering::Relaxed) && pid > 0 {
            procs.push(("worker".into(), i.to_string(), pid));
        }
    }
    let mut fds = Vec::new();
    let mut max = Vec::new();
    let mut rss = Vec::new();
    for (kind, index, pid) in procs {
        let Some(s) = procstat::of(pid) else { continue };
        let l = if index.is_empty() {
            labels(&[("process", &kind)])
        } else {
            labels(&[("process", &kind), ("worker", &index)])
        };
        fds.push((l.clone(), s.open_fds as f64));
        max.push((l.clone(), s.max_fds as f64));
        rss.push((l, s.resident_bytes as f64));
    }
    e.family(
        "perigee_process_open_fds",
        "gauge",
        "Open file descriptors of the master and each worker.",
        fds,
    );
    e.family(
        "perigee_process_max_fds",
        "gauge",
        "Their open-files limit (RLIMIT_NOFILE, soft).",
        max,
    );
    e.family(
        "perigee_process_resident_memory_bytes",
        "gauge",
        "Resident memory of the master and each worker.",
        rss,
    );
    let alive = shared
        .workers
        .iter()
        .filter(|w| w.alive.load(Ordering::Relaxed))
        .count();
    e.one(
        "perigee_workers_alive",
        "gauge",
        "Worker processes running.",
        alive as f64,
    );
    e.family(
        "perigee_worker_restarts_total",
        "counter",
        "Times a worker was restarted after it died.",
        shared
            .workers
            .iter()
            .enumerate()
            .map(|(i, w)| {
                (
                    labels(&[("worker", &i.to_string())]),
                    w.restarts.load(Ordering::Relaxed) as f64,
                )
            })
            .collect(),
    );
}

/// Serves the exposition; a bad address is logged and metrics stay off (the daemon runs on).
pub fn serve(shared: Arc<Shared>, addr: &str) {
    let l = match TcpListener::bind(addr) {
        Ok(l) => l,
        Err(e) => {
            log::warn(
                "metrics listener unavailable",
                json!({"addr": addr, "error": e.to_string()}),
            );
            return;
        }
    };
    log::info("metrics listening", json!({"addr": addr}));
    for conn in l.incoming().flatten() {
        let _ = conn.set_read_timeout(Some(std::time::Duration::from_secs(5)));
        if http::read_request(&conn).is_ok() {
            let _ = http::write_response(
                &conn,
                200,
                "text/plain; version=0.0.4",
                render(&shared).as_bytes(),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gateway::reports::{BypassRuleCounters, PacketCounters, SiteCounters};

    /// A snapshot whose every value is distinct, so a family reading the wrong field shows.
    fn snapshot() -> Counters {
        let split = |base: u64| SplitCounters {
            bytes_up: base + 1,
            bytes_down: base + 2,
            flows: base + 3,
            retrans_segments: base + 4,
            segments: base + 5,
        };
        let mut c = Counters {
            flows_total: 7,
            flows_failed_connect: 8,
            flows_unsplit_overflow: 9,
            closed_dropped: 10,
            bytes_up: 11,
            bytes_down: 12,
            cc_fallback: 13,
            ..Default::default()
        };
        c.link.forward_bytes = 21;
        c.link.return_bytes = 22;
        c.link.forward_payload_bytes = 23;
        c.link.return_payload_bytes = 24;
        c.by_action.accelerate = split(100);
        c.by_action.cache.split = split(200);
        c.by_action.cache.hits = 31;
        c.by_action.cache.misses = 32;
        c.by_action.cache.denied = 33;
        c.by_action.cache.bytes = 34;
        c.by_action.cache.bytes_from_origin = 35;
        c.by_action.cache.bytes_saved = 36;
        c.by_class.insert("bulk".into(), split(300));
        c.by_congestion_control
            .insert("hybla_ld".into(), split(500));
        c.by_cc_reason.insert("fallback".into(), split(600));
        c.by_site.insert(
            "north".into(),
            SiteCounters {
                usage: split(400),
                cache_saved_bytes: 41,
            },
        );
        c.bypass_rules.push(BypassRuleCounters {
            name: "lan".into(),
            kind: BypassRuleKind::Class,
            builtin: false,
            counted: PacketCounters {
                packets: 51,
                bytes: 52,
            },
        });
        c.peer.flows = 61;
        c.peer.fallbacks = 62;
        c.peer.failed = 64;
        c.peer.refused = 63;
        c.peer.redundant.bytes = 65;
        c.peer.pool_empty = 66;
        c.quic_rejected.packets = 71;
        c
    }

    #[test]
    fn a_typed_snapshot_renders_each_family_from_its_field() {
        let c = snapshot();
        let mut e = Exposition::default();
        relay_families(&mut e, &c);
        usage_and_bypass_families(&mut e, &c);
        cache_request_families(&mut e, &c.by_action.cache);
        peer_and_fallback_families(&mut e, &c);
        for line in [
            "# TYPE perigee_flows_total counter",
            "perigee_flows_total 7",
            "perigee_flows_failed_connect_total 8",
            "perigee_flows_unsplit_overflow_total 9",
            "perigee_closed_flows_dropped_total 10",
            "perigee_relay_bytes_total{direction=\"down\"} 12",
            "perigee_link_bytes_total{direction=\"return\"} 22",
            "perigee_link_payload_bytes_total{direction=\"forward\"} 23",
            "perigee_action_bytes_total{action=\"accelerate\",direction=\"up\"} 101",
            "perigee_action_flows_total{action=\"cache\"} 203",
            "perigee_class_bytes_total{class=\"bulk\",direction=\"down\"} 302",
            "perigee_site_flows_total{site=\"north\"} 403",
            "perigee_site_retransmitted_segments_total{site=\"north\"} 404",
            "perigee_site_cache_saved_bytes_total{site=\"north\"} 41",
            "perigee_bypass_packets_total{rule=\"lan\",kind=\"class\"} 51",
            "perigee_bypass_bytes_total{rule=\"lan\",kind=\"class\"} 52",
            "perigee_cache_requests_total{outcome=\"hit\"} 31",
            "perigee_cache_requests_total{outcome=\"denied\"} 33",
            "perigee_cache_saved_bytes_total 36",
            "perigee_cache_client_bytes_total 34",
            "perigee_cache_origin_bytes_total 35",
            "perigee_peer_flows_total{outcome=\"fallback\"} 62",
            "perigee_peer_flows_total{outcome=\"failed\"} 64",
            "perigee_peer_flows_total{outcome=\"pool_empty\"} 66",
            "perigee_peer_refused_total 63",
            "perigee_peer_redundant_bytes_total 65",
            "perigee_quic_rejected_packets_total 71",
            "perigee_cc_fallback_total 13",
            "perigee_satellite_cc_flows_total{cc=\"hybla_ld\"} 503",
            "perigee_satellite_cc_segments_total{cc=\"hybla_ld\"} 505",
            "perigee_satellite_cc_retransmitted_segments_total{cc=\"hybla_ld\"} 504",
            "perigee_satellite_cc_reason_segments_total{cc_reason=\"fallback\"} 605",
            "perigee_satellite_cc_reason_retransmitted_segments_total{cc_reason=\"fallback\"} 604",
        ] {
            assert!(
                e.text.lines().any(|l| l == line),
                "missing {line:?} in\n{}",
                e.text
            );
        }
    }

    #[test]
    fn each_enrolled_terminal_has_its_own_series() {
        let mut e = Exposition::default();
        let status = PeerStatus {
            role: Some(crate::gateway::config::Role::Hub),
            enabled: true,
            identity: None,
            identity_error: None,
            listening: true,
            terminals: vec![crate::gateway::reports_peer::PeerTerminalStatus {
                name: "site-1".into(),
                fingerprints: vec![],
                prefixes: vec![],
                idle_connections: 8,
                live_flows: 3,
                refused_prefix: 2,
                refused_other: 1,
                last_seen: None,
            }],
            refused_unknown: 5,
            egress_refused: 4,
            pool: None,
        };
        peer_terminal_families(&mut e, &status);
        for line in [
            "perigee_peer_terminal_idle_connections{terminal=\"site-1\"} 8",
            "perigee_peer_terminal_live_flows{terminal=\"site-1\"} 3",
            "perigee_peer_terminal_refused_total{terminal=\"site-1\",reason=\"prefix\"} 2",
            "perigee_peer_terminal_refused_total{terminal=\"site-1\",reason=\"other\"} 1",
            "perigee_peer_refused_unknown_total 5",
            "perigee_egress_refused_total 4",
        ] {
            assert!(
                e.text.lines().any(|l| l == line),
                "missing {line:?} in\n{}",
                e.text
            );
        }
    }

    #[test]
    fn bypass_kinds_are_labelled_as_the_counters_json_names_them() {
        for kind in [BypassRuleKind::Bypass, BypassRuleKind::Class] {
            let c = Counters {
                bypass_rules: vec![BypassRuleCounters {
                    name: "r".into(),
                    kind,
                    builtin: false,
                    counted: PacketCounters::default(),
                }],
                ..Default::default()
            };
            let mut e = Exposition::default();
            usage_and_bypass_families(&mut e, &c);
            let json = serde_json::to_value(kind).unwrap();
            let want = format!("kind=\"{}\"", json.as_str().unwrap());
            assert!(e.text.contains(&want), "{want} in\n{}", e.text);
        }
    }

    #[test]
    fn labels_are_escaped_and_numbers_plain() {
        assert_eq!(labels(&[]), "");
        assert_eq!(labels(&[("a", "x\"y")]), "{a=\"x\\\"y\"}");
        let mut e = Exposition::default();
        e.family(
            "m_total",
            "counter",
            "h.",
            vec![(labels(&[("k", "v")]), 3.0), (String::new(), 0.25)],
        );
        assert_eq!(
            e.text,
            "# HELP m_total h.\n# TYPE m_total counter\nm_total{k=\"v\"} 3\nm_total 0.25\n"
        );
    }
}
