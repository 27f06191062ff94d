//! Which remote site a client belongs to (`sites` in the config): the longest configured
//! prefix that holds its address, "other" when none does.
use super::config::{Cidr, GatewayConfig, OTHER_SITE};
use std::net::IpAddr;

#[derive(Debug, Clone, Default)]
pub struct SiteMap {
    /// Longest prefixes first, so the first match is the most specific one.
    prefixes: Vec<(Cidr, String)>,
}

impl SiteMap {
    pub fn of(cfg: &GatewayConfig) -> SiteMap {
        let mut prefixes: Vec<(Cidr, String)> = cfg
            .sites
            .iter()
            .flat_map(|s| s.prefixes.iter().map(|c| (*c, s.name.to_string())))
            .collect();
        prefixes.sort_by_key(|p| std::cmp::Reverse(p.0.len));
        SiteMap { prefixes }
    }

    pub fn site_of(&self, ip: IpAddr) -> &str {
        let ip = match ip {
            IpAddr::V6(a) => a.to_ipv4_mapped().map_or(ip, IpAddr::V4),
            v4 => v4,
        };
        self.prefixes
            .iter()
            .find(|(c, _)| c.contains(ip))
            .map_or(OTHER_SITE, |(_, name)| name.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gateway::config::{example_json, from_value};

    fn map(sites: serde_json::Value) -> SiteMap {
        let mut j = example_json();
        j["sites"] = sites;
        SiteMap::of(&from_value(j).unwrap())
    }

    #[test]
    fn longest_prefix_wins_and_the_rest_is_other() {
        let m = map(serde_json::json!([
            {"name": "region", "prefixes": ["10.72.0.0/16"]},
            {"name": "ship-7", "prefixes": ["10.72.7.0/24", "fd72:7::/64"]},
        ]));
        let site = |s: &str| m.site_of(s.parse().unwrap()).to_string();
        assert_eq!(site("10.72.7.9"), "ship-7");
        assert_eq!(site("10.72.8.9"), "region");
        assert_eq!(site("fd72:7::10"), "ship-7");
        assert_eq!(site("::ffff:10.72.7.1"), "ship-7");
        assert_eq!(site("10.9.9.9"), "other");
        assert_eq!(
            SiteMap::default().site_of("10.72.7.9".parse().unwrap()),
            "other"
        );
    }

    #[test]
    fn config_refuses_bad_sites() {
        let bad = |sites: serde_json::Value| {
            let mut j = example_json();
            j["sites"] = sites;
            from_value(j).unwrap_err().field
        };
        assert_eq!(
            bad(serde_json::json!([{"name": "other", "prefixes": ["10.0.0.0/8"]}])),
            "sites[0].name"
        );
        assert_eq!(
            bad(
                serde_json::json!([{"name": "a", "prefixes": ["10.0.0.0/8"]}, {"name": "a", "prefixes": ["10.1.0.0/16"]}])
            ),
            "sites[1].name"
        );
        assert_eq!(
            bad(serde_json::json!([{"name": "a", "prefixes": []}])),
            "sites[0].prefixes"
        );
        assert_eq!(
            bad(serde_json::json!([{"name": "a", "prefixes": ["10.0.0.0/33"]}])),
            "sites[0].prefixes[0]"
        );
        assert_eq!(
            bad(
                serde_json::json!([{"name": "a", "prefixes": ["10.1.0.0/16"]}, {"name": "b", "prefixes": ["10.1.2.3/16"]}])
            ),
            "sites[1].prefixes[0]"
        );
        assert!(
            bad(serde_json::json!([{"name": "a", "prefixes": ["10.1.0.0/16"], "x": 1}]))
                .starts_with("sites[0]")
        );
    }
}
