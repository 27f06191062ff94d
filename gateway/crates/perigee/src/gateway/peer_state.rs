//! The master's peer-path state: this gateway's identity store (made on first start, rotated
//! and committed through the control socket, handed to the workers by file name) and the hub's
//! per-terminal totals, summed from the workers' reports. The routes are `peer_control`'s.
use super::cluster::table::ClusterTable;
use super::ipc::{PeerReport, ToWorker};
use super::log;
use super::peer::identity::{Identity, IdentityStore};
use serde_json::json;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Condvar, Mutex};

/// Where the identity lives unless `--peer-state-dir` says otherwise.
pub const DEFAULT_STATE_DIR: &str = "/var/lib/perigee/peer";

/// One terminal's refusals since the daemon started, and when it was last heard from.
#[derive(Debug, Default, Clone, Copy)]
pub struct TerminalTotals {
    pub refused_prefix: u64,
    pub refused_other: u64,
    pub last_seen: Option<f64>,
}

pub struct PeerShared {
    pub identity: Mutex<Result<IdentityStore, String>>,
    pub terminals: Mutex<BTreeMap<String, TerminalTotals>>,
    pub refused_unknown: Mutex<u64>,
    /// A hub cluster's bucket table as its controller last pushed it, and when (Unix time).
    /// The third part says where it came from: `control` (its controller) or `hub` (a terminal's
    /// poll across the satellite).
    pub cluster: Mutex<Option<(ClusterTable, f64, &'static str)>>,
    /// Signalled when `cluster` changes: the table service answers its waiting terminals.
    pub cluster_changed: Condvar,
}

impl PeerShared {
    /// The store in `dir`; an identity is made there on first start.
    pub fn open(dir: &Path) -> PeerShared {
        let store = IdentityStore::open(dir);
        match &store {
            Ok(s) => log::info(
                "peer identity",
                json!({"fingerprint": s.current().fingerprint.to_string(), "dir": dir.display().to_string()}),
            ),
            Err(e) => log::error(
                "no peer identity: the peer path cannot start",
                json!({"error": e}),
            ),
        }
        PeerShared {
            identity: Mutex::new(store),
            terminals: Mutex::new(BTreeMap::new()),
            refused_unknown: Mutex::new(0),
            cluster: Mutex::new(None),
            cluster_changed: Condvar::new(),
        }
    }

    /// What a worker is told to load (at its start, and after a commit).
    pub fn identity_message(&self) -> Option<ToWorker> {
        let store = self.identity.lock().unwrap();
        let s = store.as_ref().ok()?;
        Some(ToWorker::Identity {
            path: s.current_path().display().to_string(),
            fingerprint: s.current().fingerprint.to_string(),
        })
    }

    /// What a worker is told about the cluster's table (at its start, and on every change).
    pub fn cluster_message(&self) -> ToWorker {
        let held = self.cluster.lock().unwrap();
        ToWorker::Cluster {
            table: held.as_ref().map(|(t, _, _)| Box::new(t.clone())),
        }
    }

    /// The identity in use and a staged one's fingerprint.
    pub fn current(&self) -> Result<(Arc<Identity>, Option<String>), String> {
        let store = self.identity.lock().unwrap();
        let s = store.as_ref().map_err(|e| e.clone())?;
        Ok((s.current(), s.next().map(|n| n.fingerprint.to_string())))
    }

    /// A worker's report: the hub's refusals add up here.
    pub fn on_report(&self, r: &PeerReport) {
        *self.refused_unknown.lock().unwrap() += r.refused_unknown;
        let mut totals = self.terminals.lock().unwrap();
        for t in &r.terminals {
            let e = totals.entry(t.name.clone()).or_default();
            e.refused_prefix += t.refused_prefix;
            e.refused_other += t.refused_other;
            e.last_seen = match (e.last_seen, t.last_seen) {
                (Some(a), Some(b)) => Some(a.max(b)),
                (a, b) => a.or(b),
            };
        }
    }
}
