//! Prometheus text exposition on a local TCP port (default 127.0.0.1:9464).
use super::state::Shared;
use super::{control, http, log};
use serde_json::json;
use std::fmt::Write;
use std::net::TcpListener;
use std::sync::atomic::Ordering;
use std::sync::Arc;

pub fn render(shared: &Shared) -> String {
    let c = control::counters(shared);
    let g = |k: &str| c[k].as_u64().unwrap_or(0);
    let mut t = String::new();
    let mut metric = |name: &str, kind: &str, help: &str, lines: Vec<(String, u64)>| {
        let _ = writeln!(t, "# HELP {name} {help}\n# TYPE {name} {kind}");
        for (labels, v) in lines {
            let _ = writeln!(t, "{name}{labels} {v}");
        }
    };
    metric(
        "perigee_flows_live",
        "gauge",
        "Split flows open now.",
        vec![(String::new(), g("flows_live"))],
    );
    metric(
        "perigee_flows_total",
        "counter",
        "Split flows accepted.",
        vec![(String::new(), g("flows_total"))],
    );
    metric(
        "perigee_flows_failed_connect_total",
        "counter",
        "Flows whose server connect failed.",
        vec![(String::new(), g("flows_failed_connect"))],
    );
    metric(
        "perigee_flows_unsplit_overflow_total",
        "counter",
        "SYNs routed unsplit above max_flows.",
        vec![(String::new(), g("flows_unsplit_overflow"))],
    );
    metric(
        "perigee_bytes_total",
        "counter",
        "Bytes relayed by the splitter.",
        vec![
            ("{direction=\"up\"}".into(), g("bytes_up")),
            ("{direction=\"down\"}".into(), g("bytes_down")),
        ],
    );
    metric(
        "perigee_cc_fallback_total",
        "counter",
        "Satellite sockets left on the system default congestion control.",
        vec![(String::new(), g("cc_fallback"))],
    );
    metric(
        "perigee_bypass_packets_total",
        "counter",
        "Packets matched by bypass rules.",
        vec![(
            String::new(),
            c["by_action"]["bypass"]["packets"].as_u64().unwrap_or(0),
        )],
    );
    let peer = |k: &str| c["peer"][k].as_u64().unwrap_or(0);
    metric(
        "perigee_peer_flows_total",
        "counter",
        "Flows by way of the peer path, by outcome (fallback: lost the peer connection before the hub's status and went direct).",
        vec![
            ("{outcome=\"started\"}".into(), peer("flows")),
            ("{outcome=\"fallback\"}".into(), peer("fallbacks")),
        ],
    );
    metric(
        "perigee_peer_refused_total",
        "counter",
        "Peer connections the hub refused (not allowed, failed authentication, garbage, too slow).",
        vec![(String::new(), peer("refused"))],
    );
    metric(
        "perigee_quic_rejected_packets_total",
        "counter",
        "QUIC packets answered with port-unreachable (quic: fallback).",
        vec![(
            String::new(),
            c["quic_rejected"]["packets"].as_u64().unwrap_or(0),
        )],
    );
    let alive = shared
        .workers
        .iter()
        .filter(|w| w.alive.load(Ordering::Relaxed))
        .count() as u64;
    metric(
        "perigee_workers_alive",
        "gauge",
        "Worker processes running.",
        vec![(String::new(), alive)],
    );
    metric(
        "perigee_uptime_seconds",
        "gauge",
        "Seconds since start.",
        vec![(String::new(), shared.started.elapsed().as_secs())],
    );
    t
}

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
