//! The `peer` section (who the other gateway is, by its key's fingerprint) and the hub's
//! `egress` policy.
use super::limits::*;
use super::{Cidr, ObjectName};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::net::IpAddr;

/// The peer path (docs/splitter.md, *The peer path*): a terminal keeps warm, authenticated
/// TCP connections to its hub's peer listener and hands each new flow to one of them, so the
/// client's first bytes cross the satellite at once instead of after a handshake. The hub
/// re-originates the flow to the server from the client's own address, as on the direct path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct Peer {
    pub enabled: bool,
    /// Hub: the TCP port its peer listener binds. Terminal: the hub's peer port.
    #[schemars(range(min = 1, max = 65_535))]
    pub port: u32,
    /// Terminal: the hub's unicast address (an IP literal; a name would need DNS across the
    /// satellite at start). Empty at a hub.
    #[schemars(schema_with = "peer_hub_schema")]
    pub hub: String,
    /// Terminal: the keys of the hub (or of each hub gateway) it accepts, by fingerprint (`GET
    /// /v1/identity` at the hub). Required when enabled.
    #[schemars(length(max = MAX_HUB_FINGERPRINTS), inner(regex(pattern = FINGERPRINT_PATTERN)))]
    pub hub_fingerprints: Vec<String>,
    /// Terminal: the hub is a cluster of gateways behind ECMP (docs/cluster.md, *The peer path
    /// through the cluster*): fetch its bucket table through the peer path and keep a pool to
    /// each gateway it names, so each flow starts on the gateway that receives its answers.
    /// `hub` is then any one of them. Off: one hub gateway.
    pub hub_cluster: bool,
    /// Hub: the addresses its peer listener binds; empty = the addresses of
    /// `interfaces.satellite` (link-local IPv6 ones aside).
    #[schemars(schema_with = "peer_listen_schema")]
    pub listen: Vec<IpAddr>,
    /// Hub: the terminals it serves the peer path to, each with its own key(s) and the client
    /// prefixes it may open flows for (no two terminals' prefixes overlap).
    #[schemars(length(max = MAX_TERMINALS))]
    pub terminals: Vec<PeerTerminal>,
    /// Terminal: warm connections each worker keeps ready (refilled as flows take them).
    #[schemars(range(min = *PEER_POOL_SIZE.start(), max = *PEER_POOL_SIZE.end()))]
    pub pool_size: u32,
    /// The first bytes of each flow's peer connection sent twice over the satellite link, so a
    /// frame lost to bit errors costs no round trip while a short exchange (a page's objects,
    /// a TLS handshake, a request) crosses.
    pub redundancy: PeerRedundancy,
}

/// How much of each peer connection crosses twice (docs/splitter.md, *Redundancy*). Each
/// gateway duplicates what it sends: a hub on the forward link, a terminal on the return link.
/// The budget is the smaller of the direction's byte cap and `link_ms` of the direction's rate
/// (`satellite.forward_rate_bps` / `return_rate_bps`), so a slow link spends as little time on
/// copies as a fast one; with that rate unknown (0) nothing is duplicated. The count starts at
/// the connection's first byte (its TLS handshake included, which itself is sent once, before a
/// flow takes the connection); a cap of 0 turns that direction off.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct PeerRedundancy {
    /// Hub: at most this many bytes toward the terminal on each connection sent twice.
    #[schemars(range(min = 0, max = PEER_REDUNDANT_BYTES_MAX))]
    pub forward_bytes: u32,
    /// Terminal: at most this many bytes toward the hub on each connection sent twice (the
    /// return link is often narrow or assigned on demand: requests and handshakes, not uploads).
    #[schemars(range(min = 0, max = PEER_REDUNDANT_BYTES_MAX))]
    pub return_bytes: u32,
    /// The copies of one connection take at most this long at the direction's rate, ms.
    #[schemars(range(min = 0, max = PEER_REDUNDANT_MS_MAX))]
    pub link_ms: u32,
}

impl Default for PeerRedundancy {
    fn default() -> Self {
        PeerRedundancy {
            forward_bytes: 262_144,
            return_bytes: 16_384,
            link_ms: 40,
        }
    }
}

/// A terminal enrolled at the hub.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PeerTerminal {
    pub name: ObjectName,
    /// Its key's fingerprint (`GET /v1/identity` at the terminal); two while it rotates.
    #[schemars(length(min = 1, max = MAX_TERMINAL_FINGERPRINTS), inner(regex(pattern = FINGERPRINT_PATTERN)))]
    pub fingerprints: Vec<String>,
    /// The client prefixes of its site: a flow it opens for a client outside them is refused.
    #[schemars(length(min = 1, max = MAX_SITE_PREFIXES))]
    pub prefixes: Vec<Cidr>,
}

impl Default for Peer {
    fn default() -> Self {
        Peer {
            enabled: false,
            port: 7072,
            hub: String::new(),
            hub_fingerprints: Vec::new(),
            hub_cluster: false,
            listen: Vec::new(),
            terminals: Vec::new(),
            pool_size: 8,
            redundancy: PeerRedundancy::default(),
        }
    }
}

/// Hub: where the connections it opens for its terminals (peer flows and direct splits) may go.
/// Built in it refuses loopback, link-local, multicast, its own addresses and every enrolled
/// terminal's prefixes but the flow's own site's; `deny` adds to that (management networks),
/// `allow` re-opens what it names. Enforced by the daemon and by nft on the hub's own output.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct Egress {
    #[schemars(length(max = MAX_CIDRS))]
    pub allow: Vec<Cidr>,
    #[schemars(length(max = MAX_CIDRS))]
    pub deny: Vec<Cidr>,
}

fn peer_listen_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "array",
        "maxItems": MAX_PEER_LISTEN,
        "items": {"type": "string", "pattern": format!("^{}$", perigee_types::ip_pattern())},
        "default": [],
    })
}

fn peer_hub_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "string",
        "maxLength": 64,
        "pattern": format!("^({})?$", perigee_types::ip_pattern()),
        "default": "",
    })
}

impl Peer {
    /// The hub's address (terminal).
    pub fn hub_addr(&self) -> Option<IpAddr> {
        self.hub.parse().ok()
    }
}
