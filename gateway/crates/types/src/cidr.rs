//! An IPv4 or IPv6 prefix, the one CIDR type of the gateway: the daemon's nft sets and routes,
//! Squid's ACL and the resolver's access control all parse with `parse_cidr`.
use std::borrow::Cow;
use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;

/// A prefix in its network form: host bits are cleared when it is parsed ("10.0.0.7/24" is
/// 10.0.0.0/24), so equal prefixes compare equal however they were written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Cidr {
    pub addr: IpAddr,
    pub len: u8,
}

impl Cidr {
    /// A prefix from an address and length (at most the family's bits); host bits are cleared.
    pub fn new(addr: IpAddr, len: u8) -> Cidr {
        let len = len.min(Self::bits_of(addr));
        let addr = match addr {
            IpAddr::V4(a) => {
                let mask = u32::MAX.checked_shl(32 - u32::from(len)).unwrap_or(0);
                IpAddr::V4((u32::from(a) & mask).into())
            }
            IpAddr::V6(a) => {
                let mask = u128::MAX.checked_shl(128 - u32::from(len)).unwrap_or(0);
                IpAddr::V6((u128::from(a) & mask).into())
            }
        };
        Cidr { addr, len }
    }

    /// The single address as a /32 or /128.
    pub fn host(addr: IpAddr) -> Cidr {
        Cidr {
            addr,
            len: Self::bits_of(addr),
        }
    }

    fn bits_of(addr: IpAddr) -> u8 {
        if addr.is_ipv4() {
            32
        } else {
            128
        }
    }

    pub fn is_v4(&self) -> bool {
        self.addr.is_ipv4()
    }

    /// 32 or 128.
    pub fn bits(&self) -> u8 {
        Self::bits_of(self.addr)
    }

    pub fn contains(&self, ip: IpAddr) -> bool {
        match (self.addr, ip) {
            (IpAddr::V4(n), IpAddr::V4(a)) => {
                let mask = u32::MAX.checked_shl(32 - u32::from(self.len)).unwrap_or(0);
                u32::from(n) & mask == u32::from(a) & mask
            }
            (IpAddr::V6(n), IpAddr::V6(a)) => {
                let mask = u128::MAX
                    .checked_shl(128 - u32::from(self.len))
                    .unwrap_or(0);
                u128::from(n) & mask == u128::from(a) & mask
            }
            _ => false,
        }
    }

    /// Do the two share an address? Prefixes never partly overlap: one contains the other.
    pub fn overlaps(&self, other: &Cidr) -> bool {
        self.is_v4() == other.is_v4() && (self.contains(other.addr) || other.contains(self.addr))
    }

    /// Addresses in the prefix, saturating (an IPv6 /0 is one more than u128 holds).
    pub fn size(&self) -> u128 {
        1u128
            .checked_shl(u32::from(self.bits() - self.len))
            .unwrap_or(u128::MAX)
    }
}

impl fmt::Display for Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.len)
    }
}

/// "10.0.0.0/8", "fd00::/8" or a bare address (a /32 or /128). The prefix length is 1-3 ASCII
/// digits (no sign, no netmask); an IPv4-mapped IPv6 prefix (inside ::ffff:0:0/96) is refused,
/// since no packet carries one: a rule on it would match nothing (and in Squid's ACL, which
/// keeps IPv4 clients in that form, every IPv4 client).
pub fn parse_cidr(s: &str) -> Result<Cidr, String> {
    let (a, l) = match s.split_once('/') {
        Some((a, l)) => (a, Some(l)),
        None => (s, None),
    };
    let addr: IpAddr = a
        .parse()
        .map_err(|_| format!("'{s}' is not an IPv4/IPv6 CIDR"))?;
    let max = Cidr::bits_of(addr);
    let len = match l {
        None => max,
        Some(l) => Some(l)
            .filter(|l| (1..=3).contains(&l.len()) && l.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|l| l.parse::<u8>().ok())
            .filter(|l| *l <= max)
            .ok_or(format!("'{s}': bad prefix length"))?,
    };
    if let IpAddr::V6(v6) = addr {
        if len >= 96 && v6.to_ipv4_mapped().is_some() {
            return Err(format!(
                "'{s}' is IPv4-mapped IPv6 (::ffff:0:0/96): write the IPv4 address or subnet itself"
            ));
        }
    }
    Ok(Cidr::new(addr, len))
}

impl FromStr for Cidr {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        parse_cidr(s)
    }
}

crate::serde_via_str!(Cidr);

impl schemars::JsonSchema for Cidr {
    fn schema_name() -> Cow<'static, str> {
        "Cidr".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        crate::string_schema(
            &crate::patterns::cidr_pattern(),
            64,
            "An IPv4 or IPv6 prefix (\"10.0.0.0/8\", \"fd00::/8\") or a single address; the prefix \
             length is 1-3 digits; IPv4-mapped IPv6 (::ffff:0:0/96) is refused. Host bits are \
             cleared (\"10.0.0.7/24\" is 10.0.0.0/24).",
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_strictly_and_clears_host_bits() {
        let c = parse_cidr("10.71.1.200/24").unwrap();
        assert_eq!(c.to_string(), "10.71.1.0/24");
        assert!(c.contains("10.71.1.9".parse().unwrap()));
        assert!(!c.contains("10.71.2.1".parse().unwrap()));
        assert!(!c.contains("fd71::1".parse().unwrap()));
        assert_eq!(parse_cidr("10.0.0.1").unwrap().to_string(), "10.0.0.1/32");
        assert_eq!(
            parse_cidr("FD71:1::5/64").unwrap().to_string(),
            "fd71:1::/64"
        );
        assert_eq!(parse_cidr("10.0.0.0/024").unwrap().len, 24);
        for bad in [
            "10.0.0.0/+8",
            "10.0.0.0/33",
            "fd00::/129",
            "10.0.0.0/",
            "10.0.0.0/0024",
            "10.0.0.0/255.0.0.0",
            "010.0.0.0/8",
            "fe80::1%lan0",
            " 10.0.0.0/8",
            "10.0/8",
            "::ffff:10.0.0.0/104",
            "::ffff:0:0/96",
            "::ffff:10.0.0.1",
        ] {
            assert!(parse_cidr(bad).is_err(), "{bad}");
        }
        // Contains the mapped range, but is not written as one.
        parse_cidr("::/0").unwrap();
    }

    #[test]
    fn sizes_and_overlap() {
        let a = parse_cidr("10.0.0.0/8").unwrap();
        let b = parse_cidr("10.1.0.0/16").unwrap();
        assert!(a.overlaps(&b) && b.overlaps(&a));
        assert!(!a.overlaps(&parse_cidr("11.0.0.0/8").unwrap()));
        assert_eq!(a.size(), 1 << 24);
        assert_eq!(parse_cidr("::/0").unwrap().size(), u128::MAX);
        assert_eq!(Cidr::host("fd71::1".parse().unwrap()).len, 128);
    }

    #[test]
    fn serde_is_the_canonical_text() {
        let c: Cidr = serde_json::from_str("\"10.71.1.9/24\"").unwrap();
        assert_eq!(serde_json::to_string(&c).unwrap(), "\"10.71.1.0/24\"");
        let e = serde_json::from_str::<Cidr>("\"10.0.0.0/33\"").unwrap_err();
        assert!(e.to_string().contains("bad prefix length"), "{e}");
        assert!(serde_json::from_str::<Cidr>("10").is_err());
    }
}
