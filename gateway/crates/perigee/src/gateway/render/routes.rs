//! The policy routing that delivers diverted packets to the splitter, and the satellite routes
//! (the configured ones and the peer path's host routes) with the leg's congestion control and
//! initial windows, as `ip` argv.
use super::super::config::{Cidr, CongestionControl, GatewayConfig, Role};
use super::{argv, FW_MARK, ROUTE_TABLE};
use std::net::IpAddr;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RouteOp {
    /// `ip rule add fwmark MARK/MARK lookup TABLE priority TABLE`
    MarkRule { v6: bool },
    /// `ip route replace local default dev lo table TABLE`
    LocalRoute { v6: bool },
    /// A satellite route with per-route congestion control and initial windows; `via` None is a
    /// host route on the satellite link itself (the peer path's, to the other gateway).
    SatRoute {
        dst: String,
        via: Option<String>,
        dev: String,
        cc: Option<String>,
        initcwnd: u32,
        initrwnd: u32,
    },
}

impl RouteOp {
    fn fam(v6: bool) -> &'static str {
        if v6 {
            "-6"
        } else {
            "-4"
        }
    }

    pub fn is_v6(&self) -> bool {
        match self {
            RouteOp::MarkRule { v6 } | RouteOp::LocalRoute { v6 } => *v6,
            RouteOp::SatRoute { dst, .. } => dst.contains(':'),
        }
    }

    /// `ip route <verb> local <default> dev lo table TABLE`: LocalRoute's add and del.
    fn local_route_argv(v6: bool, verb: &str) -> Vec<String> {
        let default = if v6 { "::/0" } else { "0.0.0.0/0" };
        let table = ROUTE_TABLE.to_string();
        argv(&[
            Self::fam(v6),
            "route",
            verb,
            "local",
            default,
            "dev",
            "lo",
            "table",
            &table,
        ])
    }

    /// The `ip` argv that installs this (idempotent for routes; rules are deleted first by apply).
    pub fn add_argv(&self) -> Vec<String> {
        let table = ROUTE_TABLE.to_string();
        match self {
            RouteOp::MarkRule { v6 } => argv(&[
                Self::fam(*v6),
                "rule",
                "add",
                "fwmark",
                &format!("{FW_MARK:#x}/{FW_MARK:#x}"),
                "lookup",
                &table,
                "priority",
                &table,
            ]),
            RouteOp::LocalRoute { v6 } => Self::local_route_argv(*v6, "replace"),
            RouteOp::SatRoute {
                dst,
                via,
                dev,
                cc,
                initcwnd,
                initrwnd,
            } => {
                let mut v = argv(&[Self::fam(self.is_v6()), "route", "replace", dst]);
                if let Some(via) = via {
                    v.extend(argv(&["via", via]));
                }
                v.extend(argv(&["dev", dev]));
                if let Some(cc) = cc {
                    v.extend(argv(&["congctl", cc]));
                }
                if *initcwnd > 0 {
                    v.extend(argv(&["initcwnd", &initcwnd.to_string()]));
                }
                if *initrwnd > 0 {
                    v.extend(argv(&["initrwnd", &initrwnd.to_string()]));
                }
                v
            }
        }
    }

    /// The argv that removes it again.
    pub fn del_argv(&self) -> Vec<String> {
        match self {
            RouteOp::MarkRule { v6 } => argv(&[
                Self::fam(*v6),
                "rule",
                "del",
                "priority",
                &ROUTE_TABLE.to_string(),
            ]),
            RouteOp::LocalRoute { v6 } => Self::local_route_argv(*v6, "del"),
            RouteOp::SatRoute { dst, dev, .. } => {
                argv(&[Self::fam(self.is_v6()), "route", "del", dst, "dev", dev])
            }
        }
    }

    pub fn describe(&self) -> String {
        format!("ip {}", self.add_argv().join(" "))
    }
}

/// The congestion control to use on the satellite: the configured one when the kernel has it,
/// else its fallback when the kernel has that (hybla for hybla_ld, as the workers do), else None
/// (the system default).
pub fn effective_cc(wanted: CongestionControl, available: &[String]) -> Option<String> {
    let has = |cc: CongestionControl| available.iter().any(|a| a == cc.as_str());
    if has(wanted) {
        return Some(wanted.to_string());
    }
    wanted.fallback().filter(|&f| has(f)).map(|f| f.to_string())
}

pub fn render_routes(cfg: &GatewayConfig, available_cc: &[String]) -> Vec<RouteOp> {
    let mut ops = vec![
        RouteOp::MarkRule { v6: false },
        RouteOp::MarkRule { v6: true },
        RouteOp::LocalRoute { v6: false },
        RouteOp::LocalRoute { v6: true },
    ];
    let cc = effective_cc(cfg.satellite.congestion_control, available_cc);
    let routes = cfg
        .satellite
        .routes
        .iter()
        .map(|r| (r.dst, Some(r.via)))
        .chain(peer_routes(cfg));
    for (dst, via) in routes {
        ops.push(RouteOp::SatRoute {
            dst: dst.to_string(),
            via: via.map(|v| v.to_string()),
            dev: cfg.interfaces.satellite.to_string(),
            cc: cc.clone(),
            initcwnd: cfg.satellite.initcwnd,
            initrwnd: cfg.satellite.initrwnd,
        });
    }
    ops
}

/// Host routes that give the peer path's connections the satellite leg's route settings
/// (initcwnd, congctl). The other gateway's address is usually on the satellite link's own
/// connected route, which has none. A terminal routes to its hub (via the satellite route that
/// covers it, else on the link); a hub routes to the next hops of its satellite routes, which
/// are its terminals' satellite addresses. Prefixes a satellite route already covers exactly
/// are left to it.
pub fn peer_routes(cfg: &GatewayConfig) -> Vec<(Cidr, Option<IpAddr>)> {
    if !cfg.peer.enabled {
        return Vec::new();
    }
    let sat: Vec<(Cidr, IpAddr)> = cfg
        .satellite
        .routes
        .iter()
        .map(|r| (r.dst, r.via))
        .collect();
    let mut out: Vec<(Cidr, Option<IpAddr>)> = Vec::new();
    let mut add = |ip: IpAddr, via: Option<IpAddr>| {
        let dst = Cidr::host(ip);
        let taken = sat.iter().any(|(c, _)| *c == dst) || out.iter().any(|(d, _)| *d == dst);
        if !taken {
            out.push((dst, via));
        }
    };
    match cfg.role {
        Role::Terminal => {
            if let Some(hub) = cfg.peer.hub_addr() {
                let via = sat
                    .iter()
                    .filter(|(c, _)| c.contains(hub))
                    .max_by_key(|(c, _)| c.len)
                    .map(|(_, via)| *via);
                add(hub, via);
            }
        }
        Role::Hub => {
            for (_, via) in &sat {
                add(*via, None);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::example_cfg as cfg;
    use super::*;
    use crate::gateway::config::{example_json, from_value};

    #[test]
    fn peer_routes_carry_the_satellite_settings_to_the_other_gateway() {
        let pin = format!("sha256:{}", "ab".repeat(32));
        let mut j = example_json();
        j["peer"] =
            serde_json::json!({"enabled": true, "hub": "203.0.113.2", "hub_fingerprints": [pin]});
        // A set initrwnd (the BoD tuning's) is carried; the default 0 is no route value.
        j["satellite"]["initrwnd"] = 10.into();
        let term = render_routes(&from_value(j.clone()).unwrap(), &["hybla".into()]);
        let hub_route = term.last().unwrap().describe();
        assert_eq!(
            hub_route,
            "ip -4 route replace 203.0.113.2/32 dev sat0 congctl hybla initcwnd 10 initrwnd 10"
        );
        // A hub behind a satellite route is reached through that route's next hop.
        j["peer"]["hub"] = "198.51.100.1".into();
        let term = render_routes(&from_value(j.clone()).unwrap(), &[]);
        assert_eq!(
            term.last().unwrap().describe(),
            "ip -4 route replace 198.51.100.1/32 via 203.0.113.2 dev sat0 initcwnd 10 initrwnd 10"
        );
        // A hub: host routes to its terminals, the next hops of its satellite routes.
        j["role"] = "hub".into();
        j["peer"] = serde_json::json!({"enabled": true});
        j["satellite"]["routes"] = serde_json::json!([
        {"dst": "10.71.1.0/24", "via": "10.71.2.1"}, {"dst": "fd71:1::/64", "via": "fd71:2::1"},
        {"dst": "10.71.5.0/24", "via": "10.71.2.1"}]);
        let hub = from_value(j.clone()).unwrap();
        assert_eq!(
            peer_routes(&hub),
            vec![
                ("10.71.2.1/32".parse().unwrap(), None),
                ("fd71:2::1/128".parse().unwrap(), None)
            ]
        );
        j["peer"]["enabled"] = false.into();
        assert!(peer_routes(&from_value(j).unwrap()).is_empty());
    }

    #[test]
    fn routes_use_available_cc_only() {
        let c = cfg();
        let r = render_routes(&c, &["cubic".into(), "reno".into()]);
        let sat: Vec<String> = r
            .iter()
            .filter(|o| matches!(o, RouteOp::SatRoute { .. }))
            .map(|o| o.describe())
            .collect();
        assert_eq!(
            sat[0],
            "ip -4 route replace 198.51.100.0/24 via 203.0.113.2 dev sat0 initcwnd 10"
        );
        let r = render_routes(&c, &["hybla".into()]);
        assert!(r[5].describe().starts_with(
            "ip -6 route replace 2001:db8:3::/64 via 2001:db8:2::2 dev sat0 congctl hybla"
        ));
        assert_eq!(
            r[0].describe(),
            "ip -4 rule add fwmark 0x40000000/0x40000000 lookup 171 priority 171"
        );
    }

    #[test]
    fn the_default_hybla_ld_falls_back_to_hybla_then_the_system_default() {
        let ld = CongestionControl::HyblaLd;
        let have = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            effective_cc(ld, &have(&["hybla", "hybla_ld"])).as_deref(),
            Some("hybla_ld")
        );
        assert_eq!(
            effective_cc(ld, &have(&["cubic", "hybla"])).as_deref(),
            Some("hybla")
        );
        assert_eq!(effective_cc(ld, &have(&["cubic"])), None);
        assert_eq!(
            effective_cc(CongestionControl::Bbr, &have(&["hybla"])),
            None
        );
    }
}
