//! Domain names an operator writes: a zone in `dns.private_domains`, a name to flush.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::borrow::Cow;
use std::fmt;
use std::str::FromStr;

/// A domain name: labels of letters, digits, '-' and '_' (1-63 each), 1-253 characters; a
/// trailing dot is optional. Returned lowercased, without the trailing dot. Nothing else can
/// reach unbound.conf (no quote, space or newline passes).
pub fn validate_name(name: &str) -> Result<String, String> {
    let n = name.strip_suffix('.').unwrap_or(name).to_ascii_lowercase();
    let ok = !n.is_empty()
        && n.len() <= 253
        && n.split('.').all(|l| {
            !l.is_empty()
                && l.len() <= 63
                && l.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        });
    if ok {
        Ok(n)
    } else {
        Err(format!("{name:?} is not a domain name"))
    }
}

/// A zone (a name and everything below it), never the root. Kept as the operator wrote it (the
/// config reads back unchanged); compared and written to unbound.conf lowercased, with the
/// trailing dot.
#[derive(Debug, Clone)]
pub struct Zone {
    written: String,
    name: String,
}

impl Zone {
    /// The name as unbound.conf writes a zone: `corp.example.`.
    pub fn fqdn(&self) -> String {
        format!("{}.", self.name)
    }
}

/// The same zone however it is written ("Corp.Example." is "corp.example").
impl PartialEq for Zone {
    fn eq(&self, other: &Zone) -> bool {
        self.name == other.name
    }
}

impl Eq for Zone {}

impl FromStr for Zone {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let name = validate_name(s).map_err(|_| {
            format!("{s:?} is not a zone name (write it as \"corp.example.com\"; not the root)")
        })?;
        Ok(Zone {
            written: s.to_string(),
            name,
        })
    }
}

impl fmt::Display for Zone {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.written)
    }
}

impl Serialize for Zone {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Zone {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// The label pattern `validate_name` accepts, for the schema.
const ZONE_PATTERN: &str = r"^([A-Za-z0-9_-]{1,63}\.)*[A-Za-z0-9_-]{1,63}\.?$";

impl JsonSchema for Zone {
    fn schema_name() -> Cow<'static, str> {
        "Zone".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "maxLength": 254,
            "pattern": ZONE_PATTERN,
            "description": "A DNS zone: the name and every name below it (\"corp.example.com\"); labels of letters, digits, '-' and '_'",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_domain_names_only() {
        assert_eq!(validate_name("WWW.Example.").unwrap(), "www.example");
        assert_eq!(validate_name("_dmarc.example").unwrap(), "_dmarc.example");
        for bad in [
            "",
            ".",
            "a..b",
            "a b",
            "a;b",
            "x\nstop",
            "a\"b",
            &"a".repeat(64),
        ] {
            assert!(validate_name(bad).is_err(), "{bad:?}");
        }
        assert!(validate_name(&format!("{}.x", "a.".repeat(126))).is_err());
    }

    #[test]
    fn zones_keep_their_spelling_and_compare_normalised() {
        let z: Zone = "Corp.Example.".parse().unwrap();
        assert_eq!(
            (z.to_string(), z.fqdn()),
            ("Corp.Example.".into(), "corp.example.".into())
        );
        assert_eq!(z, "corp.example".parse().unwrap());
        assert!(".".parse::<Zone>().is_err());
        let e = serde_json::from_str::<Zone>("\"corp example\"").unwrap_err();
        assert!(e.to_string().contains("not a zone name"), "{e}");
        assert_eq!(
            serde_json::to_string(&z).unwrap(),
            "\"Corp.Example.\"",
            "as written"
        );
    }

    #[test]
    fn the_schema_pattern_accepts_what_the_parser_accepts() {
        let re = regex::Regex::new(ZONE_PATTERN).unwrap();
        for ok in ["corp.example", "corp.example.", "_x.a-b.c", "internal"] {
            assert!(re.is_match(ok) && ok.parse::<Zone>().is_ok(), "{ok}");
        }
        for bad in [".", "", "a..b", "a b", "a.\n", "-.."] {
            assert!(!re.is_match(bad) && bad.parse::<Zone>().is_err(), "{bad:?}");
        }
    }
}
