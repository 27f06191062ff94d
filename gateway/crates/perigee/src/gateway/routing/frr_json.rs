//! FRR's JSON answers, turned into the report's types: `show bgp neighbors json` (bgpd) and
//! `show bfd peers json` (bfdd), in the shape of FRR 8.4 (Debian 12). Only the fields read here
//! are named; anything else FRR adds is ignored, and a missing field is a null in the report.
use super::super::reports::{BfdSession, BfdStatus, BgpNeighbor, BgpState};
use serde::Deserialize;
use std::collections::BTreeMap;

/// One neighbor of `show bgp neighbors json` (keyed by the neighbor's address).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct FrrNeighbor {
    hostname: Option<String>,
    remote_as: Option<u32>,
    local_as: Option<u32>,
    bgp_state: Option<String>,
    #[serde(rename = "adminShutDown", default)]
    admin_shut_down: bool,
    bgp_timer_up_msec: Option<u64>,
    last_reset_due_to: Option<String>,
    last_reset_timer_msecs: Option<u64>,
    #[serde(default)]
    address_family_info: BTreeMap<String, FrrAfi>,
    peer_bfd_info: Option<serde_json::Value>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct FrrAfi {
    accepted_prefix_counter: Option<u64>,
    sent_prefix_counter: Option<u64>,
}

/// One entry of `show bfd peers json`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "kebab-case")]
struct FrrBfdPeer {
    peer: String,
    local: Option<String>,
    interface: Option<String>,
    #[serde(default)]
    multihop: bool,
    vrf: Option<String>,
    status: Option<String>,
    uptime: Option<u64>,
    downtime: Option<u64>,
    diagnostic: Option<String>,
    remote_diagnostic: Option<String>,
    receive_interval: Option<u64>,
    transmit_interval: Option<u64>,
    detect_multiplier: Option<u64>,
}

fn bgp_state(s: Option<&str>) -> BgpState {
    match s.unwrap_or_default() {
        "Idle" => BgpState::Idle,
        "Connect" => BgpState::Connect,
        "Active" => BgpState::Active,
        "OpenSent" => BgpState::OpenSent,
        "OpenConfirm" => BgpState::OpenConfirm,
        "Established" => BgpState::Established,
        "Clearing" => BgpState::Clearing,
        "Deleted" => BgpState::Deleted,
        _ => BgpState::Unknown,
    }
}

fn bfd_status(s: Option<&str>) -> BfdStatus {
    match s.unwrap_or_default() {
        "up" => BfdStatus::Up,
        "down" => BfdStatus::Down,
        "init" => BfdStatus::Init,
        "shutdown" => BfdStatus::Shutdown,
        _ => BfdStatus::Unknown,
    }
}

/// bgpd's neighbors, without their BFD session (`bfd` None: see `attach_bfd`). An entry that is
/// not a neighbor object is skipped; an answer that is not a JSON object is an error.
pub fn neighbors(text: &str) -> Result<Vec<BgpNeighbor>, String> {
    let all: BTreeMap<String, serde_json::Value> =
        serde_json::from_str(text).map_err(|e| format!("bgpd answered no JSON object: {e}"))?;
    let mut out = Vec::new();
    for (address, v) in all {
        let Ok(n) = serde_json::from_value::<FrrNeighbor>(v) else {
            continue;
        };
        let state = bgp_state(n.bgp_state.as_deref());
        let sum = |f: fn(&FrrAfi) -> Option<u64>| -> u64 {
            n.address_family_info.values().filter_map(f).sum()
        };
        out.push(BgpNeighbor {
            address,
            hostname: n.hostname.clone(),
            remote_as: n.remote_as,
            local_as: n.local_as,
            state,
            admin_shutdown: n.admin_shut_down,
            uptime_s: (state == BgpState::Established)
                .then_some(n.bgp_timer_up_msec)
                .flatten()
                .map(|ms| ms as f64 / 1000.0),
            prefixes_received: sum(|a| a.accepted_prefix_counter),
            prefixes_sent: sum(|a| a.sent_prefix_counter),
            last_reset: n.last_reset_due_to.clone(),
            last_reset_age_s: n.last_reset_timer_msecs.map(|ms| ms as f64 / 1000.0),
            bfd_configured: n.peer_bfd_info.is_some(),
            bfd: None,
        });
    }
    Ok(out)
}

/// bfdd's single-hop sessions of the default VRF (the ones a directly connected BGP neighbor
/// uses); an answer that is not a JSON array is an error.
pub fn bfd_sessions(text: &str) -> Result<Vec<BfdSession>, String> {
    let all: Vec<serde_json::Value> =
        serde_json::from_str(text).map_err(|e| format!("bfdd answered no JSON array: {e}"))?;
    Ok(all
        .into_iter()
        .filter_map(|v| serde_json::from_value::<FrrBfdPeer>(v).ok())
        .filter(|p| !p.multihop && p.vrf.as_deref().unwrap_or("default") == "default")
        .map(|p| {
            let status = bfd_status(p.status.as_deref());
            BfdSession {
                status_age_s: if status == BfdStatus::Up {
                    p.uptime
                } else {
                    p.downtime
                },
                peer: p.peer,
                local: p.local,
                interface: p.interface,
                status,
                diagnostic: p.diagnostic,
                remote_diagnostic: p.remote_diagnostic,
                receive_interval_ms: p.receive_interval,
                transmit_interval_ms: p.transmit_interval,
                detect_multiplier: p.detect_multiplier,
            }
        })
        .collect())
}

/// Each neighbor gets bfdd's session toward its address.
pub fn attach_bfd(neighbors: &mut [BgpNeighbor], sessions: &[BfdSession]) {
    for n in neighbors {
        n.bfd = sessions.iter().find(|s| s.peer == n.address).cloned();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Taken from FRR 8.4.4 (Debian 12) in a satlab hub cluster gateway: both sessions up; both
    // shut by `neighbor R4 shutdown`; both links down (BGP Active, BFD down).
    const ESTABLISHED_BGP: &str = include_str!("fixtures/established-bgp.json");
    const ESTABLISHED_BFD: &str = include_str!("fixtures/established-bfd.json");
    const SHUTDOWN_BGP: &str = include_str!("fixtures/shutdown-bgp.json");
    const DOWN_BGP: &str = include_str!("fixtures/down-bgp.json");
    const DOWN_BFD: &str = include_str!("fixtures/down-bfd.json");

    #[test]
    fn established_sessions_with_bfd_up() {
        let mut ns = neighbors(ESTABLISHED_BGP).unwrap();
        attach_bfd(&mut ns, &bfd_sessions(ESTABLISHED_BFD).unwrap());
        assert_eq!(ns.len(), 2);
        let hub = &ns[0];
        assert_eq!(hub.address, "10.71.11.1");
        assert_eq!(hub.hostname.as_deref(), Some("fr-hub"));
        assert_eq!((hub.remote_as, hub.local_as), (Some(65001), Some(65100)));
        assert_eq!(hub.state, BgpState::Established);
        assert!(!hub.admin_shutdown);
        assert!(hub.uptime_s.is_some_and(|s| s > 0.0));
        assert_eq!((hub.prefixes_received, hub.prefixes_sent), (1, 3));
        assert!(hub.bfd_configured);
        let bfd = hub.bfd.as_ref().unwrap();
        assert_eq!(bfd.status, BfdStatus::Up);
        assert_eq!(bfd.interface.as_deref(), Some("sat0"));
        assert_eq!(bfd.diagnostic.as_deref(), Some("ok"));
        assert_eq!(
            (
                bfd.receive_interval_ms,
                bfd.transmit_interval_ms,
                bfd.detect_multiplier
            ),
            (Some(200), Some(200), Some(4))
        );
        let edge = &ns[1];
        assert_eq!(edge.address, "10.71.21.1");
        assert_eq!((edge.prefixes_received, edge.prefixes_sent), (2, 3));
        assert_eq!(
            edge.bfd.as_ref().unwrap().interface.as_deref(),
            Some("lan0")
        );
    }

    #[test]
    fn admin_shutdown_is_idle_with_its_reason() {
        let ns = neighbors(SHUTDOWN_BGP).unwrap();
        assert_eq!(ns.len(), 2);
        for n in &ns {
            assert_eq!(n.state, BgpState::Idle);
            assert!(n.admin_shutdown);
            assert_eq!(n.uptime_s, None);
            assert_eq!(n.prefixes_received, 0);
            assert_eq!(n.last_reset.as_deref(), Some("Admin. shutdown"));
        }
    }

    #[test]
    fn links_down_is_active_with_bfd_down_and_its_diagnostic() {
        let mut ns = neighbors(DOWN_BGP).unwrap();
        attach_bfd(&mut ns, &bfd_sessions(DOWN_BFD).unwrap());
        for n in &ns {
            assert_eq!(n.state, BgpState::Active);
            assert!(!n.admin_shutdown);
            let bfd = n.bfd.as_ref().unwrap();
            assert_eq!(bfd.status, BfdStatus::Down);
            assert_eq!(
                bfd.diagnostic.as_deref(),
                Some("control detection time expired")
            );
            assert!(bfd.status_age_s.is_some());
        }
    }

    #[test]
    fn unknown_fields_and_values_are_tolerated_and_garbage_is_an_error() {
        let text = r#"{"192.0.2.1": {"bgpState": "Reborn", "futureField": {"x": 1}, "remoteAs": 64512},
                       "bgpNoSuchThing": "not a neighbor"}"#;
        let ns = neighbors(text).unwrap();
        assert_eq!(ns.len(), 1);
        assert_eq!(ns[0].state, BgpState::Unknown);
        assert!(!ns[0].bfd_configured);
        assert_eq!(neighbors("{}").unwrap().len(), 0);
        assert!(neighbors("% No BGP process is configured").is_err());
        let s = bfd_sessions(
            r#"[{"peer": "192.0.2.1", "status": "adminDownish", "new": 1},
                {"peer": "192.0.2.9", "multihop": true, "status": "up"}, 7]"#,
        )
        .unwrap();
        assert_eq!(s.len(), 1);
        assert_eq!(s[0].status, BfdStatus::Unknown);
        assert!(bfd_sessions("{}").is_err());
    }
}
