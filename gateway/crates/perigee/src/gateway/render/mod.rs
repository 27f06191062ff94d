//! Pure rendering of a `GatewayConfig` into kernel state: the nftables ruleset (one table,
//! `inet perigee`), the policy-routing and satellite routes (as `ip` argument vectors), the
//! satellite interface's shaper (as `tc` argument vectors) and sysctls. One module per step,
//! as `apply/` installs them: `nft` (with the hub's `egress` policy), `routes` (with the peer
//! path's host routes and the congestion-control fallback), `shaper`; `redundancy` renders the
//! peer path's duplicate tables into the nft transaction.
mod egress;
mod nft;
mod redundancy;
mod routes;
mod shaper;

pub use egress::EGRESS_DENIED;
pub use nft::*;
pub use redundancy::*;
pub use routes::*;
pub use shaper::*;

use super::config::GatewayConfig;
use super::reports::RenderedReport;
use std::collections::BTreeMap;

/// fwmark bit set on diverted SYNs and on packets of our transparent sockets.
pub const FW_MARK: u32 = 0x4000_0000;
/// Routing table (and rule priority) with the `local` default route that delivers marked packets.
pub const ROUTE_TABLE: u32 = 171;

/// An owned argv from its words (each one argv element, never split on spaces).
fn argv(words: &[&str]) -> Vec<String> {
    words.iter().map(|w| w.to_string()).collect()
}

#[derive(Debug, Clone)]
pub struct Rendered {
    pub nft: String,
    pub routes: Vec<RouteOp>,
    pub sysctls: BTreeMap<String, String>,
    /// None: shaping off (no qdisc of ours on the satellite interface).
    pub shaper: Option<Shaper>,
    /// `interfaces.satellite`: where the first apply looks for a shaper a killed daemon left.
    pub satellite: String,
}

impl Rendered {
    /// The control protocol's view (Squid's and unbound's files are added by the caller).
    pub fn report(&self) -> RenderedReport {
        RenderedReport {
            nft: self.nft.clone(),
            routes: self.routes.iter().map(|r| r.describe()).collect(),
            sysctls: self.sysctls.clone(),
            shaping: self.shaper.as_ref().map(|s| s.describe()),
            squid_conf: None,
            unbound_conf: None,
        }
    }

    pub fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self.report()).unwrap_or_default()
    }
}

pub fn render(cfg: &GatewayConfig, available_cc: &[String]) -> Rendered {
    let routes = render_routes(cfg, available_cc);
    Rendered {
        nft: render_nft(cfg),
        routes,
        sysctls: cfg.sysctls.clone(),
        shaper: render_shaper(cfg),
        satellite: cfg.interfaces.satellite.to_string(),
    }
}

/// The example config every renderer's tests start from.
#[cfg(test)]
fn example_cfg() -> GatewayConfig {
    super::config::from_value(super::config::example_json()).unwrap()
}
