//! Names an operator writes that reach nft or Squid text verbatim, so they are restricted to
//! what those accept without quoting problems.
use std::borrow::Cow;
use std::fmt;
use std::ops::Deref;
use std::str::FromStr;

/// The kernel's IFNAMSIZ less the terminating NUL.
pub const IFNAME_MAX: usize = 15;
/// Class and bypass names.
pub const OBJECT_NAME_MAX: usize = 64;

/// A network interface name: 1-15 of `[A-Za-z0-9_.:@-]` (what the kernel allows and nft can quote).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct IfName(String);

/// A class or bypass-entry name: 1-64 of `[A-Za-z0-9_.-]`, starting with a letter or digit.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ObjectName(String);

pub(crate) fn valid_ifname(s: &str) -> bool {
    (1..=IFNAME_MAX).contains(&s.len())
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-@:".contains(&b))
}

pub(crate) fn valid_object_name(s: &str) -> bool {
    s.len() <= OBJECT_NAME_MAX
        && s.bytes().next().is_some_and(|b| b.is_ascii_alphanumeric())
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_-.".contains(&b))
}

impl FromStr for IfName {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        if valid_ifname(s) {
            Ok(IfName(s.to_string()))
        } else {
            Err(format!(
                "'{s}' is not an interface name (1-{IFNAME_MAX} of A-Z a-z 0-9 _ . : @ -)"
            ))
        }
    }
}

impl FromStr for ObjectName {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        if valid_object_name(s) {
            Ok(ObjectName(s.to_string()))
        } else {
            Err(format!(
                "'{s}': names are 1-{OBJECT_NAME_MAX} of [A-Za-z0-9_.-], starting with a letter or digit"
            ))
        }
    }
}

macro_rules! string_newtype {
    ($t:ident, $pattern:expr, $max:expr, $description:expr) => {
        impl Deref for $t {
            type Target = str;
            fn deref(&self) -> &str {
                &self.0
            }
        }

        impl AsRef<str> for $t {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }

        impl PartialEq<str> for $t {
            fn eq(&self, other: &str) -> bool {
                self.0 == other
            }
        }

        impl PartialEq<&str> for $t {
            fn eq(&self, other: &&str) -> bool {
                self.0 == *other
            }
        }

        impl fmt::Display for $t {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        crate::serde_via_str!($t);

        impl schemars::JsonSchema for $t {
            fn schema_name() -> Cow<'static, str> {
                stringify!($t).into()
            }

            fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
                crate::string_schema($pattern, $max, $description)
            }
        }
    };
}

string_newtype!(
    IfName,
    crate::patterns::IFNAME_PATTERN,
    IFNAME_MAX,
    "A network interface name: 1-15 of A-Z a-z 0-9 _ . : @ -"
);
string_newtype!(
    ObjectName,
    crate::patterns::OBJECT_NAME_PATTERN,
    OBJECT_NAME_MAX,
    "A class or bypass-entry name: 1-64 of A-Z a-z 0-9 _ . -, starting with a letter or digit"
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_their_rules() {
        assert_eq!("lan0".parse::<IfName>().unwrap(), "lan0");
        assert!("a".repeat(15).parse::<IfName>().is_ok());
        for bad in ["", "a".repeat(16).as_str(), "lan 0", "lan\"0", "wé"] {
            assert!(bad.parse::<IfName>().is_err(), "{bad}");
        }
        assert!("a.b-c_d".parse::<ObjectName>().is_ok());
        assert!("a".repeat(64).parse::<ObjectName>().is_ok());
        for bad in ["", "-web", "_web", "a b", "wéb", "a".repeat(65).as_str()] {
            assert!(bad.parse::<ObjectName>().is_err(), "{bad}");
        }
        let n: ObjectName = serde_json::from_str("\"web\"").unwrap();
        assert_eq!(serde_json::to_string(&n).unwrap(), "\"web\"");
    }
}
