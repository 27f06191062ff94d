//! Messages between the master and its workers (JSON lines over a socketpair).
use super::cluster::table::ClusterTable;
use super::config::GatewayConfig;
use super::meter::LinkBytes;
use super::telemetry::Flow;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum ToWorker {
    /// The active configuration (sent at start and on every apply).
    Config { config: Box<GatewayConfig> },
    /// Ask for the live flow table; answered by `{"type":"snapshot","id":..,"flows":[..]}`.
    Snapshot { id: u64 },
    /// The peer identity to present from now on: the worker reads it from `path` (0600, the
    /// daemon's own state directory: the key never travels) and checks its fingerprint.
    Identity { path: String, fingerprint: String },
    /// A hub cluster's bucket table (None: no cluster, or it was withdrawn).
    Cluster { table: Option<Box<ClusterTable>> },
}

/// Every worker → master line: `type` "report" (once a second: counters since the last one and
/// the flows closed meanwhile) or "snapshot" (the answer to `ToWorker::Snapshot`). One flat
/// struct, not a tagged enum or a `serde_json::Value`: both would build an intermediate tree
/// of every closed flow before the typed one, thousands of flows a second at high new-flow rates.
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct FromWorker {
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default)]
    pub live: u64,
    #[serde(default)]
    pub pipes_in_use: u64,
    #[serde(default)]
    pub pipes_idle: u64,
    #[serde(default)]
    pub listening: bool,
    #[serde(default)]
    pub deltas: Deltas,
    #[serde(default)]
    pub closed: Vec<Flow>,
    /// Snapshot answers only.
    #[serde(default)]
    pub id: u64,
    #[serde(default)]
    pub flows: Vec<Flow>,
    /// Reports only, when the peer path is on.
    #[serde(default)]
    pub peer: Option<PeerReport>,
}

/// A worker's side of the peer path, for /v1/health.
#[derive(Debug, Default, Clone, Serialize, Deserialize)]
pub struct PeerReport {
    /// Terminal: warm connections ready for new flows.
    pub ready: u64,
    /// Terminal: how many are ready when its pools are full (each pool's size, every gateway).
    #[serde(default)]
    pub full: u64,
    /// Terminal: the gateways its pools go to (each of a hub cluster's once its table arrived).
    #[serde(default)]
    pub gateways: u64,
    /// Terminal: why the last connection attempt failed (None once one is ready again).
    pub error: Option<String>,
    /// Hub: the peer listener is bound.
    pub listening: bool,
    /// Hub: each enrolled terminal's idle connections and live flows now, and its refusals
    /// since the last report.
    #[serde(default)]
    pub terminals: Vec<TerminalReport>,
    /// Hub: connections refused before they were identified, since the last report.
    #[serde(default)]
    pub refused_unknown: u64,
    /// The identity this worker presents (a fingerprint).
    #[serde(default)]
    pub identity: Option<String>,
}

/// One enrolled terminal as one worker of the hub sees it.
#[derive(Debug, Default, Clone, Serialize, Deserialize)]
pub struct TerminalReport {
    pub name: String,
    pub idle_connections: u64,
    pub live_flows: u64,
    pub refused_prefix: u64,
    pub refused_other: u64,
    /// Unix time of its last identified connection at this worker.
    pub last_seen: Option<f64>,
}

#[derive(Debug, Default, Serialize, Deserialize)]
pub struct Deltas {
    pub flows: u64,
    pub failed_connect: u64,
    pub bytes_up: u64,
    pub bytes_down: u64,
    pub cc_fallback: u64,
    #[serde(default)]
    pub peer_flows: u64,
    #[serde(default)]
    pub peer_fallbacks: u64,
    #[serde(default)]
    pub peer_refused: u64,
    /// Terminal: peer flows reset because their connection to the hub failed (never replayed).
    #[serde(default)]
    pub peer_failed: u64,
    /// Terminal: clients' flows that found no ready peer connection and went direct.
    #[serde(default)]
    pub peer_pool_empty: u64,
    /// Hub: direct splits the egress policy refused (peer flows count per terminal).
    #[serde(default)]
    pub egress_refused: u64,
    pub by_action: BTreeMap<String, Usage>,
    /// What crossed the satellite, both directions (docs/splitter.md, *Rates*).
    #[serde(default)]
    pub link: LinkBytes,
    #[serde(default)]
    pub by_class: BTreeMap<String, Usage>,
    #[serde(default)]
    pub by_site: BTreeMap<String, Usage>,
    /// Split flows by the congestion control their satellite leg ran, and by why it ran it.
    #[serde(default)]
    pub by_cc: BTreeMap<String, Usage>,
    #[serde(default)]
    pub by_cc_reason: BTreeMap<String, Usage>,
}

/// One category's share (an action, a class, a site): satellite-leg payload toward the server
/// (`up`) and toward the client (`down`), flows started, satellite segments retransmitted.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    pub bytes_up: u64,
    pub bytes_down: u64,
    pub flows: u64,
    #[serde(default)]
    pub retrans_segments: u64,
    /// Satellite-leg data segments sent (the retransmitted ones included).
    #[serde(default)]
    pub segments: u64,
}

impl Usage {
    pub fn add(&mut self, o: &Usage) {
        self.bytes_up += o.bytes_up;
        self.bytes_down += o.bytes_down;
        self.flows += o.flows;
        self.retrans_segments += o.retrans_segments;
        self.segments += o.segments;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn report_round_trips_and_snapshot_fills_defaults() {
        let mut r = FromWorker {
            kind: "report".into(),
            live: 3,
            listening: true,
            closed: vec![Flow {
                id: 7,
                ..Default::default()
            }],
            ..Default::default()
        };
        r.deltas.flows = 5;
        r.deltas.by_action.insert(
            "accelerate".into(),
            Usage {
                bytes_up: 1,
                bytes_down: 2,
                flows: 5,
                ..Default::default()
            },
        );
        let line = serde_json::to_string(&r).unwrap();
        let back: FromWorker = serde_json::from_str(&line).unwrap();
        assert_eq!(back.kind, "report");
        assert_eq!((back.live, back.listening, back.deltas.flows), (3, true, 5));
        assert_eq!(back.deltas.by_action["accelerate"].bytes_down, 2);
        assert_eq!(back.closed[0].id, 7);
        let snap: FromWorker =
            serde_json::from_str(r#"{"type":"snapshot","id":9,"flows":[]}"#).unwrap();
        assert_eq!((snap.kind.as_str(), snap.id, snap.live), ("snapshot", 9, 0));
    }
}
