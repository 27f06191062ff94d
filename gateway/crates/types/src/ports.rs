//! An inclusive port range ("443", "8000-8080"), as classes and bypass entries match ports.
use std::borrow::Cow;
use std::fmt;
use std::str::FromStr;

/// An inclusive port range; a single port is `lo == hi`. Ports are 1..=65535.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PortRange {
    pub lo: u16,
    pub hi: u16,
}

impl PortRange {
    pub fn contains(&self, p: u16) -> bool {
        self.lo <= p && p <= self.hi
    }
}

impl fmt::Display for PortRange {
    /// "80" or "8000-8080", as nft writes a port set element.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.lo == self.hi {
            write!(f, "{}", self.lo)
        } else {
            write!(f, "{}-{}", self.lo, self.hi)
        }
    }
}

/// "443" or "1000-2000": 1-5 ASCII digits each (no sign, no spaces), 1..=65535, start <= end.
pub fn parse_ports(s: &str) -> Result<PortRange, String> {
    let one = |p: &str| {
        Some(p)
            .filter(|p| (1..=5).contains(&p.len()) && p.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|p| p.parse::<u16>().ok())
            .filter(|p| *p > 0)
            .ok_or(format!("'{s}' is not a port or range"))
    };
    let r = match s.split_once('-') {
        Some((a, b)) => PortRange {
            lo: one(a)?,
            hi: one(b)?,
        },
        None => {
            let p = one(s)?;
            PortRange { lo: p, hi: p }
        }
    };
    if r.lo > r.hi {
        return Err(format!("'{s}': range start is above its end"));
    }
    Ok(r)
}

impl FromStr for PortRange {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        parse_ports(s)
    }
}

crate::serde_via_str!(PortRange);

impl schemars::JsonSchema for PortRange {
    fn schema_name() -> Cow<'static, str> {
        "PortRange".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        crate::string_schema(
            &crate::patterns::port_range_pattern(),
            11,
            "A port (\"443\") or an inclusive range (\"8000-8080\"): 1-65535, 1-5 digits each, \
             the start not above the end.",
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_ports_and_ranges() {
        assert_eq!(parse_ports("80").unwrap(), PortRange { lo: 80, hi: 80 });
        assert_eq!(parse_ports("00080").unwrap().to_string(), "80");
        let r = parse_ports("8000-8080").unwrap();
        assert!(r.contains(8080) && !r.contains(7999));
        assert_eq!(r.to_string(), "8000-8080");
        for bad in [
            "0",
            "65536",
            "2000-1000",
            "000080",
            "+80",
            " 80",
            "80-",
            "-80",
            "٨٠",
            "",
        ] {
            assert!(parse_ports(bad).is_err(), "{bad}");
        }
    }
}
