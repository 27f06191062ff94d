//! GET /v1/routing: the BGP sessions and their BFD state of the FRR running beside the gateway (a
//! hub cluster member, docs/cluster.md), read over bgpd's and bfdd's vty sockets in the directory
//! given by `--frr-vty-dir`. Read on each request, never cached: the answer is what FRR says now.
mod frr_json;
pub mod vty;

use super::reports::{BfdStatus, BgpNeighbor, BgpState, RoutingReport};
use std::path::Path;

pub const DEFAULT_VTY_DIR: &str = "/var/run/frr";

/// What bgpd and bfdd in `dir` report now. Without bgpd (no socket: no FRR on this box) the report
/// is `available: false` with the reason; without bfdd the sessions are listed without BFD.
pub fn report(dir: &Path) -> RoutingReport {
    let vty_dir = dir.display().to_string();
    let unavailable = |reason: String| RoutingReport {
        available: false,
        reason: Some(reason),
        vty_dir: vty_dir.clone(),
        neighbors: Vec::new(),
        problems: Vec::new(),
    };
    let mut neighbors = match vty::command(dir, "bgpd", "show bgp neighbors json")
        .map_err(|e| e.to_string())
        .and_then(|text| frr_json::neighbors(&text))
    {
        Ok(n) => n,
        Err(e) => return unavailable(format!("bgpd: {e}")),
    };
    let reason = match vty::command(dir, "bfdd", "show bfd peers json")
        .map_err(|e| e.to_string())
        .and_then(|text| frr_json::bfd_sessions(&text))
    {
        Ok(sessions) => {
            frr_json::attach_bfd(&mut neighbors, &sessions);
            None
        }
        Err(e) => Some(format!("bfdd: {e}")),
    };
    RoutingReport {
        available: true,
        reason,
        vty_dir,
        problems: problems(&neighbors),
        neighbors,
    }
}

/// A session that is not Established, and a BFD session that is not up (or missing where bgpd has
/// BFD configured), one sentence each.
pub fn problems(neighbors: &[BgpNeighbor]) -> Vec<String> {
    let mut out = Vec::new();
    for n in neighbors {
        let who = match &n.hostname {
            Some(h) => format!("{} ({h})", n.address),
            None => n.address.clone(),
        };
        if n.state != BgpState::Established {
            let why = if n.admin_shutdown {
                " (admin shutdown)".to_string()
            } else {
                n.last_reset
                    .as_ref()
                    .map(|r| format!(" (last reset: {r})"))
                    .unwrap_or_default()
            };
            out.push(format!("BGP session to {who} is {:?}{why}", n.state));
        }
        match &n.bfd {
            Some(b) if b.status != BfdStatus::Up => {
                let diag = b
                    .diagnostic
                    .as_deref()
                    .filter(|d| *d != "ok")
                    .map(|d| format!(" ({d})"))
                    .unwrap_or_default();
                let status = b.status.as_str();
                out.push(format!("BFD session to {who} is {status}{diag}"));
            }
            None if n.bfd_configured => out.push(format!(
                "BFD is configured toward {who} but bfdd has no session"
            )),
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_frr_is_unavailable_with_the_reason() {
        let dir = std::env::temp_dir().join(format!("perigee-no-frr-{}", std::process::id()));
        let r = report(&dir);
        assert!(!r.available);
        assert!(r.neighbors.is_empty() && r.problems.is_empty());
        let reason = r.reason.unwrap();
        assert!(
            reason.starts_with("bgpd: ") && reason.contains("bgpd.vty does not exist"),
            "{reason}"
        );
    }

    fn neighbor(state: BgpState, admin: bool, bfd: Option<BfdStatus>) -> BgpNeighbor {
        BgpNeighbor {
            address: "10.71.11.1".into(),
            hostname: Some("hub".into()),
            remote_as: Some(65001),
            local_as: Some(65100),
            state,
            admin_shutdown: admin,
            uptime_s: None,
            prefixes_received: 0,
            prefixes_sent: 0,
            last_reset: Some("BFD down received".into()),
            last_reset_age_s: Some(3.0),
            bfd_configured: true,
            bfd: bfd.map(|status| super::super::reports::BfdSession {
                peer: "10.71.11.1".into(),
                local: None,
                interface: None,
                status,
                status_age_s: None,
                diagnostic: Some("control detection time expired".into()),
                remote_diagnostic: None,
                receive_interval_ms: None,
                transmit_interval_ms: None,
                detect_multiplier: None,
            }),
        }
    }

    #[test]
    fn bfd_status_names_are_its_serialized_ones() {
        use BfdStatus::*;
        for s in [Up, Down, Init, Shutdown, Unknown] {
            assert_eq!(serde_json::to_value(s).unwrap(), s.as_str());
        }
    }

    #[test]
    fn every_session_not_up_is_a_problem() {
        let up = neighbor(BgpState::Established, false, Some(BfdStatus::Up));
        assert!(problems(&[up]).is_empty());
        assert_eq!(
            problems(&[neighbor(BgpState::Idle, true, Some(BfdStatus::Up))]),
            ["BGP session to 10.71.11.1 (hub) is Idle (admin shutdown)"]
        );
        assert_eq!(
            problems(&[neighbor(BgpState::Active, false, Some(BfdStatus::Down))]),
            [
                "BGP session to 10.71.11.1 (hub) is Active (last reset: BFD down received)",
                "BFD session to 10.71.11.1 (hub) is down (control detection time expired)"
            ]
        );
        assert_eq!(
            problems(&[neighbor(BgpState::Established, false, None)]),
            ["BFD is configured toward 10.71.11.1 (hub) but bfdd has no session"]
        );
    }
}
