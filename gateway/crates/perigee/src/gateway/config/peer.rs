//! The `peer` section and its shared key.
use super::limits::*;
use super::Cidr;
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
    /// Hub: the TCP port its peer listener binds (all addresses). Terminal: the hub's peer port.
    #[schemars(range(min = 1, max = 65_535))]
    pub port: u32,
    /// Terminal: the hub's unicast address (an IP literal; a name would need DNS across the
    /// satellite at start). Empty at a hub.
    #[schemars(schema_with = "peer_hub_schema")]
    pub hub: String,
    /// The shared secret: 64 hex digits (32 bytes, e.g. `openssl rand -hex 32`). Required when
    /// enabled.
    #[schemars(regex(pattern = PEER_KEY_PATTERN))]
    pub key: String,
    /// Hub: the CIDRs terminals may connect from; empty = any holder of the key.
    #[schemars(length(max = MAX_CIDRS))]
    pub allowed: Vec<Cidr>,
    /// Terminal: warm connections each worker keeps ready (refilled as flows take them).
    #[schemars(range(min = *PEER_POOL_SIZE.start(), max = *PEER_POOL_SIZE.end()))]
    pub pool_size: u32,
}

impl Default for Peer {
    fn default() -> Self {
        Peer {
            enabled: false,
            port: 7072,
            hub: String::new(),
            key: String::new(),
            allowed: Vec::new(),
            pool_size: 8,
        }
    }
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
    /// The shared key as bytes (None unless it is 64 hex digits: validation guarantees it
    /// when the peer path is enabled).
    pub fn key_bytes(&self) -> Option<[u8; 32]> {
        parse_peer_key(&self.key).ok()
    }

    /// The hub's address (terminal).
    pub fn hub_addr(&self) -> Option<IpAddr> {
        self.hub.parse().ok()
    }
}

/// 64 hex digits -> 32 bytes.
pub fn parse_peer_key(s: &str) -> Result<[u8; 32], String> {
    if s.len() != PEER_KEY_HEX_LEN || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(format!(
            "must be {PEER_KEY_HEX_LEN} hex digits (32 random bytes, e.g. `openssl rand -hex 32`)"
        ));
    }
    let mut key = [0u8; 32];
    for (i, k) in key.iter_mut().enumerate() {
        *k = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).map_err(|e| e.to_string())?;
    }
    Ok(key)
}
