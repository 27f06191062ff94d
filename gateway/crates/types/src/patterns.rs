//! The value types' JSON Schema patterns (ECMA-262 syntax that the Rust `regex` crate reads the
//! same way: no look-around, no back-references). They describe the syntax only: what a pattern
//! cannot say (an IPv4-mapped prefix, a range whose start is above its end) the parsers refuse
//! and the API's validators refuse too. The tests run every pattern against its parser.
use std::borrow::Cow;

pub const IFNAME_PATTERN: &str = "^[A-Za-z0-9_.:@-]{1,15}$";
pub const OBJECT_NAME_PATTERN: &str = "^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$";

/// One IPv4 octet as Rust writes and reads it: no leading zeros.
const OCTET: &str = "(25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9][0-9]|[0-9])";
const H16: &str = "[0-9A-Fa-f]{1,4}";

/// A dotted-quad IPv4 address, unanchored.
pub fn ipv4_pattern() -> String {
    format!("{OCTET}(\\.{OCTET}){{3}}")
}

/// An IPv6 address as RFC 3986 writes it (no zone), unanchored.
pub fn ipv6_pattern() -> String {
    let h = H16;
    let ls32 = format!("({h}:{h}|{})", ipv4_pattern());
    // `n` groups before "::" at most: ((h:){0,n-1}h)?
    let before = |n: usize| match n {
        0 => String::new(),
        1 => format!("({h})?"),
        n => format!("(({h}:){{0,{}}}{h})?", n - 1),
    };
    let alternatives = [
        format!("({h}:){{6}}{ls32}"),
        format!("::({h}:){{5}}{ls32}"),
        format!("{}::({h}:){{4}}{ls32}", before(1)),
        format!("{}::({h}:){{3}}{ls32}", before(2)),
        format!("{}::({h}:){{2}}{ls32}", before(3)),
        format!("{}::{h}:{ls32}", before(4)),
        format!("{}::{ls32}", before(5)),
        format!("{}::{h}", before(6)),
        format!("{}::", before(7)),
    ];
    format!("({})", alternatives.join("|"))
}

/// An IPv4 or IPv6 address, unanchored.
pub fn ip_pattern() -> String {
    format!("({}|{})", ipv4_pattern(), ipv6_pattern())
}

/// 1-3 digits whose value is at most 32 / 128.
const V4_PREFIX: &str = "([0-9]|[0-2][0-9]|3[0-2]|0[0-2][0-9]|03[0-2])";
const V6_PREFIX: &str = "([0-9]{1,2}|0[0-9]{2}|1[01][0-9]|12[0-8])";

pub(crate) fn cidr_pattern() -> String {
    format!(
        "^({}(/{V4_PREFIX})?|{}(/{V6_PREFIX})?)$",
        ipv4_pattern(),
        ipv6_pattern()
    )
}

/// 1-5 digits (leading zeros allowed) whose value is 1..=65535.
const PORT: &str = "([1-9][0-9]{0,3}|0[1-9][0-9]{0,2}|00[1-9][0-9]?|000[1-9]|0([1-9][0-9]{3}|0[1-9][0-9]{2}|00[1-9][0-9]|000[1-9])|[1-5][0-9]{4}|6[0-4][0-9]{3}|65[0-4][0-9]{2}|655[0-2][0-9]|6553[0-5])";

/// One port, 1-65535 in 1-5 digits, unanchored.
pub fn port_pattern() -> &'static str {
    PORT
}

pub(crate) fn port_range_pattern() -> String {
    format!("^{PORT}(-{PORT})?$")
}

/// The schema of an IP address literal (`std::net::IpAddr` fields), as the named definition
/// `IpAddr`: `#[schemars(with = "perigee_types::IpAddrSchema")]`.
pub struct IpAddrSchema;

impl schemars::JsonSchema for IpAddrSchema {
    fn schema_name() -> Cow<'static, str> {
        "IpAddr".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        crate::string_schema(
            &format!("^{}$", ip_pattern()),
            64,
            "An IPv4 or IPv6 address literal (no zone)",
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::names::{valid_ifname, valid_object_name};
    use crate::{parse_cidr, parse_ports};
    use regex::Regex;
    use std::net::IpAddr;

    fn re(p: &str) -> Regex {
        Regex::new(p).unwrap_or_else(|e| panic!("{p}: {e}"))
    }

    /// Addresses and near-misses in every spelling the parsers see.
    fn ip_corpus() -> Vec<String> {
        let mut v: Vec<String> = [
            "0.0.0.0",
            "255.255.255.255",
            "10.71.1.9",
            "256.0.0.1",
            "01.2.3.4",
            "1.2.3",
            "1.2.3.4.5",
            "1.2.3.-4",
            "1..2.3",
            "::",
            "::1",
            "1::",
            "fd71:1::10",
            "FD71:1::10",
            "1:2:3:4:5:6:7:8",
            "1:2:3:4:5:6:7:8:9",
            "1:2:3:4:5:6:7::",
            "::2:3:4:5:6:7:8",
            "1::8",
            "1::2:3:4:5:6:7",
            "1:2:3:4:5:6:7::8",
            "1:2:3:4:5:6::8",
            "::ffff:10.0.0.1",
            "::10.0.0.1",
            "1:2:3:4:5:6:1.2.3.4",
            "1:2:3:4:5:6:7:1.2.3.4",
            "1::1.2.3.4",
            "1:2:3:4:5::1.2.3.4",
            "::1:2:3:4:5:1.2.3.4",
            "::1:2:3:4:5:6:1.2.3.4",
            "12345::",
            "1:::2",
            ":1::",
            "1::2::3",
            "fe80::1%lan0",
            "g::1",
            "::ffff:1.2.3.04",
            "1:2:3:4:5:6:7",
            "",
            " ::1",
            "::1 ",
            "1.2.3.4/8",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        // Every way of placing "::" among eight groups.
        for before in 0..=8usize {
            for after in 0..=(8 - before) {
                let l: Vec<String> = (1..=before).map(|i| format!("{i:x}")).collect();
                let r: Vec<String> = (1..=after).map(|i| format!("a{i}")).collect();
                v.push(format!("{}::{}", l.join(":"), r.join(":")));
            }
        }
        v
    }

    #[test]
    fn ip_pattern_accepts_what_std_parses() {
        let r = re(&format!("^{}$", ip_pattern()));
        for s in ip_corpus() {
            assert_eq!(r.is_match(&s), s.parse::<IpAddr>().is_ok(), "{s:?}");
        }
    }

    #[test]
    fn cidr_pattern_accepts_what_parse_cidr_parses_except_v4_mapped() {
        let r = re(&cidr_pattern());
        let mut corpus = Vec::new();
        for ip in ip_corpus() {
            for suffix in [
                "",
                "/0",
                "/8",
                "/24",
                "/024",
                "/32",
                "/33",
                "/064",
                "/128",
                "/129",
                "/0128",
                "/",
                "/+8",
                "/-1",
                "/255.0.0.0",
                "/1/2",
            ] {
                corpus.push(format!("{ip}{suffix}"));
            }
        }
        for s in corpus {
            let parsed = parse_cidr(&s);
            let mapped = parsed
                .as_ref()
                .err()
                .is_some_and(|e| e.contains("IPv4-mapped"));
            if !mapped {
                assert_eq!(r.is_match(&s), parsed.is_ok(), "{s:?}");
            }
        }
    }

    #[test]
    fn port_pattern_accepts_what_parse_ports_parses_except_reversed_ranges() {
        let r = re(&port_range_pattern());
        let mut corpus: Vec<String> = [
            "", "-", "+80", " 80", "80 ", "80-", "-80", "1-2-3", "٨٠", "0x50",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        for width in 1..=6usize {
            for n in (0..100_000u32)
                .step_by(7)
                .chain([0, 1, 65535, 65536, 99999])
            {
                let s = format!("{n:0width$}");
                if s.len() == width {
                    corpus.push(s);
                }
            }
        }
        for a in ["1", "80", "00443", "65535", "0", "65536"] {
            for b in ["1", "80", "00443", "65535", "0", "65536", "000080"] {
                corpus.push(format!("{a}-{b}"));
            }
        }
        for s in corpus {
            let parsed = parse_ports(&s);
            let reversed = parsed.as_ref().err().is_some_and(|e| e.contains("above"));
            if !reversed {
                assert_eq!(r.is_match(&s), parsed.is_ok(), "{s:?}");
            }
        }
    }

    #[test]
    fn name_patterns_are_the_name_rules() {
        let (ifname, object) = (re(IFNAME_PATTERN), re(OBJECT_NAME_PATTERN));
        let mut corpus: Vec<String> = [
            "", "a", "lan0", "-a", "_a", ".a", "a b", "a\"b", "wé", "a:b@c", "a\n",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        for n in [14, 15, 16, 63, 64, 65] {
            corpus.push("a".repeat(n));
        }
        for s in corpus {
            assert_eq!(ifname.is_match(&s), valid_ifname(&s), "ifname {s:?}");
            assert_eq!(object.is_match(&s), valid_object_name(&s), "name {s:?}");
        }
    }
}
