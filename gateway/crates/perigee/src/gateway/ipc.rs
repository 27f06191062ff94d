//! Messages between the master and its workers (JSON lines over a socketpair).
use super::config::GatewayConfig;
use serde::{Deserialize, Serialize};

#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum ToWorker {
    /// The active configuration (sent at start and on every apply).
    Config { config: Box<GatewayConfig> },
    /// Ask for the live flow table; answered by `{"type":"snapshot","id":..,"flows":[..]}`.
    Snapshot { id: u64 },
}
