//! Served subnets judged as address space, not as text.
//!
//! The served subnets are the clients the gateway serves: the splitter intercepts their flows and
//! Squid's ACL admits only them. Checking each entry for "/0" let `0.0.0.0/1` + `128.0.0.0/1`
//! (every IPv4 address) or `::ffff:0:0/96` through; in Squid, which keeps IPv4 clients as
//! IPv4-mapped IPv6 addresses, the latter admits every IPv4 client, and in nftables it matches
//! nothing. So the set is judged as a whole:
//! - no prefix inside or around `::ffff:0:0/96` (IPv4-mapped): write the IPv4 subnet itself;
//! - the union of each family covers at most one `/ipv4_prefix` (default /8) or
//!   `/ipv6_prefix` (default /32) worth of addresses, an operator-set maximum (`served_limits`);
//! - entries are normalised (host bits cleared), duplicates and nested ones merged, sorted.

use perigee_types::{config_error as err, Cidr};
use serde::{Deserialize, Serialize};
use std::net::{IpAddr, Ipv6Addr};

use crate::config::ConfigError;

/// The operator's maximum for the served address space (config `served_limits`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct ServedLimits {
    /// The IPv4 served subnets together cover at most as many addresses as one prefix of this
    /// length: 8 (default) = 16,777,216 addresses.
    #[schemars(range(min = 1, max = 32))]
    pub ipv4_prefix: u8,
    /// The same for IPv6: 32 (default) = 2^96 addresses.
    #[schemars(range(min = 1, max = 128))]
    pub ipv6_prefix: u8,
}

impl Default for ServedLimits {
    fn default() -> Self {
        ServedLimits {
            ipv4_prefix: 8,
            ipv6_prefix: 32,
        }
    }
}

impl ServedLimits {
    pub fn validate(&self) -> Result<(), ConfigError> {
        if !(1..=32).contains(&self.ipv4_prefix) {
            return Err(err("served_limits.ipv4_prefix", "must be 1..32"));
        }
        if !(1..=128).contains(&self.ipv6_prefix) {
            return Err(err("served_limits.ipv6_prefix", "must be 1..128"));
        }
        Ok(())
    }
}

/// `::ffff:0:0/96`, where IPv6 sockets (and Squid) keep IPv4 addresses.
const V4_MAPPED: Cidr = Cidr {
    addr: IpAddr::V6(Ipv6Addr::new(0, 0, 0, 0, 0, 0xffff, 0, 0)),
    len: 96,
};

/// Merged and sorted: no entry contains another. IPv4 first.
pub fn merge(list: &[Cidr]) -> Vec<Cidr> {
    let mut sorted: Vec<Cidr> = list.to_vec();
    // Family, then address, then the wider prefix first: a contained entry follows its container.
    sorted.sort_by_key(|c| {
        let (fam, n) = match c.addr {
            IpAddr::V4(a) => (0u8, u128::from(u32::from(a))),
            IpAddr::V6(a) => (1u8, u128::from(a)),
        };
        (fam, n, c.len)
    });
    let mut out: Vec<Cidr> = Vec::with_capacity(sorted.len());
    for c in sorted {
        if out.last().is_some_and(|last| last.overlaps(&c)) {
            continue;
        }
        out.push(c);
    }
    out
}

fn human(n: u128) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, ch) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(ch);
    }
    out
}

/// The served subnets from text (tools and tests; the daemon's config holds them parsed).
pub fn parse_served_subnets(
    subnets: &[String],
    limits: &ServedLimits,
) -> Result<Vec<Cidr>, ConfigError> {
    let parsed = subnets
        .iter()
        .enumerate()
        .map(|(i, s)| {
            s.parse()
                .map_err(|m: String| err(format!("served_subnets[{i}]"), m))
        })
        .collect::<Result<Vec<Cidr>, ConfigError>>()?;
    check_served_subnets(&parsed, limits)
}

/// The served subnets as the gateway uses them (nft sets, Squid's ACL): checked as address space
/// against `limits`, merged and sorted. Errors name the entry at fault, or `served_subnets` for
/// the set as a whole.
pub fn check_served_subnets(
    subnets: &[Cidr],
    limits: &ServedLimits,
) -> Result<Vec<Cidr>, ConfigError> {
    limits.validate()?;
    if subnets.is_empty() {
        return Err(err(
            "served_subnets",
            "at least one served subnet is required",
        ));
    }
    let mut parsed = Vec::with_capacity(subnets.len());
    for (i, c) in subnets.iter().enumerate() {
        let field = format!("served_subnets[{i}]");
        if c.len == 0 {
            return Err(err(&field, "a /0 is every address, never a served subnet"));
        }
        if c.overlaps(&V4_MAPPED) {
            return Err(err(
                &field,
                "overlaps ::ffff:0:0/96 (IPv4-mapped IPv6): write the IPv4 subnet itself",
            ));
        }
        parsed.push(*c);
    }
    let merged = merge(&parsed);
    for (v4, max_prefix, name) in [
        (true, limits.ipv4_prefix, "ipv4_prefix"),
        (false, limits.ipv6_prefix, "ipv6_prefix"),
    ] {
        let total = merged
            .iter()
            .filter(|c| c.addr.is_ipv4() == v4)
            .fold(0u128, |sum, c| sum.saturating_add(c.size()));
        let width = if v4 { 32 } else { 128 };
        let allowed = 1u128 << (width - u32::from(max_prefix));
        if total > allowed {
            return Err(err(
                "served_subnets",
                format!(
                    "the {} served subnets cover {} addresses together, more than one /{max_prefix} ({}; \
                     raise served_limits.{name} if this gateway really serves that many)",
                    if v4 { "IPv4" } else { "IPv6" },
                    human(total),
                    human(allowed),
                ),
            ));
        }
    }
    Ok(merged)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn served(list: &[&str]) -> Result<Vec<String>, ConfigError> {
        let owned: Vec<String> = list.iter().map(|s| s.to_string()).collect();
        parse_served_subnets(&owned, &ServedLimits::default())
            .map(|v| v.iter().map(|c| c.to_string()).collect())
    }

    fn field(list: &[&str]) -> String {
        served(list).unwrap_err().field
    }

    #[test]
    fn halves_of_the_internet_are_refused_together() {
        assert_eq!(field(&["0.0.0.0/1", "128.0.0.0/1"]), "served_subnets");
        assert_eq!(field(&["8000::/2", "c000::/2"]), "served_subnets");
        assert_eq!(field(&["::/1", "8000::/1"]), "served_subnets[0]"); // ::/1 holds ::ffff:0:0/96
        assert_eq!(field(&["10.0.0.0/8", "11.0.0.0/8"]), "served_subnets");
        let e = served(&["0.0.0.0/1", "128.0.0.0/1"]).unwrap_err();
        assert!(e.message.contains("4,294,967,296"), "{}", e.message);
        assert_eq!(field(&["10.0.0.0/8", "0.0.0.0/0"]), "served_subnets[1]");
    }

    #[test]
    fn v4_mapped_prefixes_inside_or_around_are_refused() {
        assert_eq!(field(&["::ffff:0:0/96"]), "served_subnets[0]");
        assert_eq!(
            field(&["10.0.0.0/8", "::ffff:10.0.0.0/104"]),
            "served_subnets[1]"
        );
        assert_eq!(field(&["::/64"]), "served_subnets[0]");
        served(&["fd71:1::/64", "64:ff9b::/96"]).unwrap();
    }

    #[test]
    fn normalised_and_merged_before_rendering() {
        assert_eq!(
            served(&[
                "fd71:1::10/64",
                "10.71.1.7/24",
                "10.71.0.0/16",
                "10.71.1.0/24",
                "10.9.9.9"
            ])
            .unwrap(),
            ["10.9.9.9/32", "10.71.0.0/16", "fd71:1::/64"]
        );
        // Exactly a /8 of IPv4 (in pieces) and a /32 of IPv6 are allowed by default.
        served(&["10.0.0.0/9", "10.128.0.0/9", "2001:db8::/32"]).unwrap();
        // Nested entries count once.
        served(&["10.0.0.0/8", "10.1.0.0/16"]).unwrap();
    }

    #[test]
    fn the_operator_sets_the_maximum() {
        let wide = ServedLimits {
            ipv4_prefix: 4,
            ipv6_prefix: 16,
        };
        let list: Vec<String> = ["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"]
            .map(String::from)
            .to_vec();
        assert_eq!(
            parse_served_subnets(&list, &ServedLimits::default())
                .unwrap_err()
                .field,
            "served_subnets"
        );
        parse_served_subnets(&list, &wide).unwrap();
        let bad = ServedLimits {
            ipv4_prefix: 0,
            ..wide
        };
        assert_eq!(
            parse_served_subnets(&list, &bad).unwrap_err().field,
            "served_limits.ipv4_prefix"
        );
        // Even the widest maximum never admits everything.
        let widest = ServedLimits {
            ipv4_prefix: 1,
            ipv6_prefix: 1,
        };
        let all: Vec<String> = ["0.0.0.0/1", "128.0.0.0/1"].map(String::from).to_vec();
        assert!(parse_served_subnets(&all, &widest).is_err());
    }
}
