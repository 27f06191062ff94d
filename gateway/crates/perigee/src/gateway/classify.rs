//! Which class a new TCP flow belongs to. Built once per config (the classes in evaluation
//! order, the ones that can match TCP): classifying an accepted connection only compares
//! parsed prefixes and port ranges, in the order the nft ruleset evaluates them.
use super::config::{Class, GatewayConfig, MatchProtocol};
use std::net::SocketAddr;

#[derive(Debug, Clone, Default)]
pub struct Classifier {
    /// Indices into `classes`, by priority (stable: equal priorities keep their listed order),
    /// without the UDP-only classes, which never see a split flow.
    order: Vec<usize>,
}

impl Classifier {
    pub fn new(cfg: &GatewayConfig) -> Classifier {
        let mut order: Vec<usize> = (0..cfg.classes.len())
            .filter(|&i| cfg.classes[i].matcher.protocol != MatchProtocol::Udp)
            .collect();
        order.sort_by_key(|&i| cfg.classes[i].priority);
        Classifier { order }
    }

    /// The first class (of `cfg`, the config this was built from) whose match holds for a TCP
    /// flow from `client` to `server`; None: the default class. `dscp`: the client's marking,
    /// when known (a class that matches on DSCP never matches a flow whose marking is unknown).
    pub fn classify<'a>(
        &self,
        cfg: &'a GatewayConfig,
        client: &SocketAddr,
        server: &SocketAddr,
        dscp: Option<u8>,
    ) -> Option<&'a Class> {
        self.order.iter().map(|&i| &cfg.classes[i]).find(|c| {
            let m = &c.matcher;
            (m.src.is_empty() || m.src.iter().any(|n| n.contains(client.ip())))
                && (m.dst.is_empty() || m.dst.iter().any(|n| n.contains(server.ip())))
                && (m.dports.is_empty() || m.dports.iter().any(|r| r.contains(server.port())))
                && (m.sports.is_empty() || m.sports.iter().any(|r| r.contains(client.port())))
                && (m.dscp.is_empty() || dscp.is_some_and(|d| m.dscp.contains(&u32::from(d))))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gateway::config::{example_json, from_value};

    fn addr(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    #[test]
    fn first_match_by_priority_tcp_classes_only() {
        let mut j = example_json();
        j["classes"] = serde_json::json!([
            {"name": "bulk", "priority": 200, "action": "accelerate",
             "match": {"dst": ["10.71.3.0/24"]}},
            {"name": "web", "priority": 100, "action": "accelerate",
             "match": {"src": ["10.71.1.0/24"], "dports": ["80", "8000-8080"]}},
            {"name": "voice", "priority": 10, "action": "bypass",
             "match": {"protocol": "udp", "dports": ["5060"]}},
            {"name": "web-v6", "priority": 100, "action": "accelerate",
             "match": {"src": ["fd71:1::/64"], "dports": ["80"]}},
        ]);
        let cfg = from_value(j).unwrap();
        let c = Classifier::new(&cfg);
        let name = |client: &str, server: &str| {
            c.classify(&cfg, &addr(client), &addr(server), None)
                .map(|c| c.name.to_string())
        };
        assert_eq!(
            name("10.71.1.10:40000", "10.71.3.10:8080").as_deref(),
            Some("web")
        );
        assert_eq!(
            name("10.71.1.10:40000", "10.71.3.10:5001").as_deref(),
            Some("bulk")
        );
        assert_eq!(
            name("10.71.1.10:40000", "10.71.9.9:5060"),
            None,
            "udp-only class"
        );
        assert_eq!(
            name("[fd71:1::10]:40000", "[fd71:3::10]:80").as_deref(),
            Some("web-v6")
        );
        assert_eq!(name("10.71.1.10:40000", "10.71.9.9:443"), None);
    }
}
