//! The peer path's control routes: `GET /v1/identity`, `POST /v1/identity/rotate`, `POST
//! /v1/identity/commit` and `GET /v1/peer` (docs/control-protocol.md).
use super::config::Role;
use super::http;
use super::ipc::PeerReport;
use super::log;
use super::reports::ErrorBody;
use super::reports_peer::{IdentityReport, PeerPoolStatus, PeerStatus, PeerTerminalStatus};
use super::state::Shared;
use serde::Serialize;
use serde_json::{json, Value};
use std::sync::atomic::Ordering;

fn to_json<T: Serialize>(v: &T) -> Value {
    serde_json::to_value(v).unwrap_or(Value::Null)
}

fn error(status: u16, code: &str, message: &str) -> (u16, Value) {
    (status, to_json(&ErrorBody::new(code, message, None)))
}

fn identity_report(shared: &Shared) -> (u16, Value) {
    match shared.peer.current() {
        Ok((id, next)) => (
            200,
            to_json(&IdentityReport {
                fingerprint: id.fingerprint.to_string(),
                certificate_pem: id.certificate_pem(),
                next_fingerprint: next,
            }),
        ),
        Err(e) => error(503, "no_identity", &e),
    }
}

/// Stage a new identity, or put the staged one in use (every worker loads it; new peer
/// connections present it, live flows keep theirs).
fn change_identity(shared: &Shared, commit: bool) -> (u16, Value) {
    let changed = {
        let mut store = shared.peer.identity.lock().unwrap();
        let Ok(s) = store.as_mut() else {
            drop(store);
            return identity_report(shared);
        };
        if commit {
            s.commit()
        } else {
            s.rotate()
        }
    };
    match changed {
        Ok(id) => {
            log::info(
                if commit {
                    "peer identity committed: new peer connections present it"
                } else {
                    "peer identity staged"
                },
                json!({"fingerprint": id.fingerprint.to_string()}),
            );
            if commit {
                if let Some(m) = shared.peer.identity_message() {
                    shared.broadcast(&m);
                }
            }
            identity_report(shared)
        }
        Err(e) if commit => error(409, "nothing_staged", &e),
        Err(e) => error(500, "identity_failed", &e),
    }
}

pub fn peer_status(shared: &Shared) -> PeerStatus {
    let cfg = shared.config.lock().unwrap().clone();
    let configured = shared.configured.load(Ordering::Relaxed);
    let reports: Vec<PeerReport> = shared
        .workers
        .iter()
        .filter_map(|w| w.peer.lock().unwrap().clone())
        .collect();
    let (identity, identity_error) = match shared.peer.current() {
        Ok((id, _)) => (Some(id.fingerprint.to_string()), None),
        Err(e) => (None, Some(e)),
    };
    let totals = shared.peer.terminals.lock().unwrap().clone();
    let sum = |name: &str, f: fn(&super::ipc::TerminalReport) -> u64| -> u64 {
        reports
            .iter()
            .flat_map(|r| r.terminals.iter())
            .filter(|t| t.name == name)
            .map(f)
            .sum()
    };
    let hub = configured && cfg.role == Role::Hub && cfg.peer.enabled;
    let terminals = if hub {
        cfg.peer
            .terminals
            .iter()
            .map(|t| {
                let name = t.name.to_string();
                let tot = totals.get(&name).copied().unwrap_or_default();
                PeerTerminalStatus {
                    idle_connections: sum(&name, |t| t.idle_connections),
                    live_flows: sum(&name, |t| t.live_flows),
                    refused_prefix: tot.refused_prefix,
                    refused_other: tot.refused_other,
                    last_seen: tot.last_seen,
                    fingerprints: t.fingerprints.clone(),
                    prefixes: t.prefixes.clone(),
                    name,
                }
            })
            .collect()
    } else {
        Vec::new()
    };
    let terminal = configured && cfg.role == Role::Terminal && cfg.peer.enabled;
    let pool = terminal.then(|| PeerPoolStatus {
        hub: format!(
            "{}",
            std::net::SocketAddr::new(
                cfg.peer.hub_addr().unwrap_or([0, 0, 0, 0].into()),
                cfg.peer.port as u16
            )
        ),
        hub_fingerprints: cfg.peer.hub_fingerprints.clone(),
        ready: reports.iter().map(|r| r.ready).sum(),
        error: reports.iter().find_map(|r| r.error.clone()),
    });
    PeerStatus {
        role: configured.then_some(cfg.role),
        enabled: configured && cfg.peer.enabled,
        identity,
        identity_error,
        listening: reports.iter().any(|r| r.listening),
        terminals,
        refused_unknown: *shared.peer.refused_unknown.lock().unwrap(),
        egress_refused: shared.totals.lock().unwrap().egress_refused,
        pool,
    }
}

/// The peer routes; None for any other path.
pub fn handle(shared: &Shared, req: &http::Request) -> Option<(u16, Value)> {
    Some(match (req.method.as_str(), req.path.as_str()) {
        ("GET", "/v1/identity") => identity_report(shared),
        ("POST", "/v1/identity/rotate") => change_identity(shared, false),
        ("POST", "/v1/identity/commit") => change_identity(shared, true),
        ("GET", "/v1/peer") => (200, to_json(&peer_status(shared))),
        (_, "/v1/identity" | "/v1/identity/rotate" | "/v1/identity/commit" | "/v1/peer") => {
            error(405, "method_not_allowed", "method not allowed")
        }
        _ => return None,
    })
}
