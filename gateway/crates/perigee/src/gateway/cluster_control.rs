//! The cluster table's control routes: `GET`, `PUT` and `DELETE /v1/cluster/table`
//! (docs/control-protocol.md). The cluster's controller is their only writer: it pushes the
//! whole table to every hub gateway and to their terminals each time it changes.
use super::cluster::table::{ClusterTable, Refusal};
use crate::gateway::http;
use crate::gateway::log;
use crate::gateway::reports::ErrorBody;
use crate::gateway::state::Shared;
use crate::gateway::sys;
use schemars::JsonSchema;
use serde::Serialize;
use serde_json::{json, Value};

/// GET /v1/cluster/table, and the answer to PUT and DELETE.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct ClusterTableStatus {
    /// The table in use; null when this gateway has none (not in a cluster, or withdrawn).
    pub table: Option<ClusterTable>,
    /// When it was pushed (Unix time); null without one.
    pub received_at: Option<f64>,
    /// Where it came from: `control` (the cluster's controller, `PUT`) or `hub` (a terminal's
    /// poll to its hub, across the satellite); null without one.
    pub source: Option<String>,
    /// Each member's number of buckets, in member order.
    pub shares: Vec<MemberShare>,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct MemberShare {
    pub name: String,
    pub buckets: usize,
}

fn status(shared: &Shared) -> Value {
    let held = shared.peer.cluster.lock().unwrap();
    let report = ClusterTableStatus {
        table: held.as_ref().map(|(t, _, _)| t.clone()),
        received_at: held.as_ref().map(|(_, at, _)| *at),
        source: held.as_ref().map(|(_, _, from)| from.to_string()),
        shares: held.as_ref().map_or(Vec::new(), |(t, _, _)| {
            t.shares()
                .into_iter()
                .map(|(name, buckets)| MemberShare { name, buckets })
                .collect()
        }),
    };
    serde_json::to_value(report).unwrap_or(Value::Null)
}

fn refused(status: u16, (code, message): Refusal) -> (u16, Value) {
    let body = ErrorBody::new(code, &message, None);
    (status, serde_json::to_value(body).unwrap_or(Value::Null))
}

/// Check a table, hold it, tell the workers (and the terminals waiting in the table service).
/// A refused table leaves the held one in use; `from` says where it came from, for the log.
pub fn hold(shared: &Shared, table: ClusterTable, from: &'static str) -> Result<(), Refusal> {
    {
        let mut held = shared.peer.cluster.lock().unwrap();
        if let Err(r) = table.validate(held.as_ref().map(|(t, _, _)| t)) {
            log::warn(
                "cluster table refused",
                json!({"from": from, "code": r.0, "why": r.1}),
            );
            return Err(r);
        }
        if held.as_ref().is_some_and(|(t, _, _)| *t == table) {
            return Ok(());
        }
        log::info(
            "cluster table",
            json!({"from": from, "epoch": table.epoch, "member": table.member,
                   "shares": table.shares()}),
        );
        *held = Some((table, sys::now_f64(), from));
    }
    shared.peer.cluster_changed.notify_all();
    shared.broadcast(&shared.peer.cluster_message());
    Ok(())
}

fn put(shared: &Shared, body: &[u8]) -> (u16, Value) {
    let table: ClusterTable = match serde_json::from_slice(body) {
        Ok(t) => t,
        Err(e) => return refused(422, ("invalid_cluster_table", format!("body: {e}"))),
    };
    match hold(shared, table, "control") {
        Ok(()) => (200, status(shared)),
        Err(r) if r.0 == "stale_epoch" => refused(409, r),
        Err(r) => refused(422, r),
    }
}

fn delete(shared: &Shared) -> (u16, Value) {
    if shared.peer.cluster.lock().unwrap().take().is_some() {
        log::info("cluster table withdrawn", json!({}));
        shared.peer.cluster_changed.notify_all();
        shared.broadcast(&shared.peer.cluster_message());
    }
    (200, status(shared))
}

/// The cluster routes; None for any other path.
pub fn handle(shared: &Shared, req: &http::Request) -> Option<(u16, Value)> {
    if req.path != "/v1/cluster/table" {
        return None;
    }
    Some(match req.method.as_str() {
        "GET" => (200, status(shared)),
        "PUT" => put(shared, &req.body),
        "DELETE" => delete(shared),
        _ => refused(405, ("method_not_allowed", "method not allowed".into())),
    })
}
