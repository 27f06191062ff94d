//! A minimal IPv4/IPv6 CIDR: enough to validate served subnets and print them canonically.

use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cidr {
    pub addr: IpAddr,
    pub prefix: u8,
}

impl Cidr {
    pub fn contains(&self, ip: IpAddr) -> bool {
        match (self.addr, ip) {
            (IpAddr::V4(a), IpAddr::V4(b)) => {
                let mask = u32::MAX
                    .checked_shl(32 - u32::from(self.prefix))
                    .unwrap_or(0);
                u32::from(a) & mask == u32::from(b) & mask
            }
            (IpAddr::V6(a), IpAddr::V6(b)) => {
                let mask = u128::MAX
                    .checked_shl(128 - u32::from(self.prefix))
                    .unwrap_or(0);
                u128::from(a) & mask == u128::from(b) & mask
            }
            _ => false,
        }
    }
}

impl FromStr for Cidr {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let (addr_s, prefix_s) = match s.split_once('/') {
            Some((a, p)) => (a, Some(p)),
            None => (s, None),
        };
        let addr: IpAddr = addr_s
            .parse()
            .map_err(|_| format!("{s:?} is not an IP address or CIDR"))?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let prefix = match prefix_s {
            None => max,
            Some(p) => p
                .parse::<u8>()
                .ok()
                .filter(|p| *p <= max)
                .ok_or_else(|| format!("{s:?}: prefix length must be 0-{max}"))?,
        };
        Ok(Cidr { addr, prefix })
    }
}

impl fmt::Display for Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.prefix)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_contains() {
        let c: Cidr = "10.81.1.0/25".parse().unwrap();
        assert!(c.contains("10.81.1.10".parse().unwrap()));
        assert!(!c.contains("10.81.1.200".parse().unwrap()));
        assert!(!c.contains("fd00::1".parse().unwrap()));
        let v6: Cidr = "fd71:1::/64".parse().unwrap();
        assert!(v6.contains("fd71:1::10".parse().unwrap()));
        assert_eq!("10.0.0.1".parse::<Cidr>().unwrap().prefix, 32);
        assert!("10.0.0.0/40".parse::<Cidr>().is_err());
        assert!("nonsense/8".parse::<Cidr>().is_err());
        assert_eq!(v6.to_string(), "fd71:1::/64");
    }
}
