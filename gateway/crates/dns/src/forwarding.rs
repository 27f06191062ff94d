//! Where unbound sends the queries its cache cannot answer.

use schemars::JsonSchema;
use serde::Serialize;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};

/// The terminal's end of the peer path's resolver tunnel: each TCP connection accepted here is
/// carried inside the encrypted peer path to the hub's resolver (docs/splitter.md, *The
/// resolver's upstream*).
pub const PEER_PATH_RESOLVER: SocketAddr = SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 8853);

/// How the resolver's upstream queries travel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Forwarding {
    /// To `dns.upstream` itself, over UDP (TCP for a truncated answer): in clear on every link
    /// it crosses, where a forged answer would be cached for every client.
    Direct,
    /// DNS over TCP to `PEER_PATH_RESOLVER`, connections reused: inside the peer path's TLS to
    /// the hub's resolver (a terminal with the peer path on).
    PeerPath,
}

impl Forwarding {
    /// Whether the queries cross readable (and forgeable) by whoever is on the link.
    pub fn in_clear(self) -> bool {
        self == Forwarding::Direct
    }
}
