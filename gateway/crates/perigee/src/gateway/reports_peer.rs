//! What the control socket answers about the peer path: this gateway's identity (`GET
//! /v1/identity` and its rotation) and the peer path's state (`GET /v1/peer`): a hub's enrolled
//! terminals, a terminal's pool (docs/control-protocol.md).
use super::config::{Cidr, Role};
use schemars::JsonSchema;
use serde::Serialize;

/// GET /v1/identity, POST /v1/identity/rotate and /v1/identity/commit.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct IdentityReport {
    /// The key this gateway presents on the peer path: `sha256:` + 64 hex digits of the SHA-256
    /// of its certificate's SubjectPublicKeyInfo. What the other gateway pins.
    pub fingerprint: String,
    /// Its self-signed certificate (PEM); the private key never leaves the gateway.
    pub certificate_pem: String,
    /// A staged identity (rotate) that commit puts in use; null when none is staged.
    pub next_fingerprint: Option<String>,
}

/// GET /v1/peer.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct PeerStatus {
    /// The running config's role; null while no config is installed.
    pub role: Option<Role>,
    pub enabled: bool,
    /// This gateway's identity (fingerprint); null when it could not be read or made.
    pub identity: Option<String>,
    /// Why there is no identity, when there is none.
    pub identity_error: Option<String>,
    /// Hub: the peer listener is bound.
    pub listening: bool,
    /// Hub: each enrolled terminal (`peer.terminals`), in config order.
    pub terminals: Vec<PeerTerminalStatus>,
    /// Hub: connections refused before they were identified (an unknown or revoked key, no
    /// certificate, garbage, no handshake in time) since the daemon started.
    pub refused_unknown: u64,
    /// Hub: direct splits its egress policy refused since the daemon started.
    pub egress_refused: u64,
    /// Terminal: its warm pool; null at a hub or with the peer path off.
    pub pool: Option<PeerPoolStatus>,
}

/// One enrolled terminal at the hub.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct PeerTerminalStatus {
    pub name: String,
    pub fingerprints: Vec<String>,
    pub prefixes: Vec<Cidr>,
    /// Its identified connections waiting for a flow, summed over the workers.
    pub idle_connections: u64,
    /// Flows it opened that are live now.
    pub live_flows: u64,
    /// Flows refused because their client is outside its prefixes, since the daemon started.
    pub refused_prefix: u64,
    /// Its other refusals (a destination the egress policy refuses, a protocol error).
    pub refused_other: u64,
    /// Unix time of its last identified connection; null when never seen.
    pub last_seen: Option<f64>,
}

/// A terminal's warm pool.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct PeerPoolStatus {
    /// The hub's peer listener (address:port).
    pub hub: String,
    /// The hub keys this terminal accepts (`peer.hub_fingerprints`).
    pub hub_fingerprints: Vec<String>,
    /// Connections ready for new flows, summed over the workers.
    pub ready: u64,
    /// Why the last connection attempt failed, if it did.
    pub error: Option<String>,
}
