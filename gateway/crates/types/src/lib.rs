//! The control protocol's value types: a config's strings become these once, where the config
//! enters the gateway (deserialization), and every later user (renderers, the classifier, Squid's
//! and the resolver's policies) works on the parsed value.
//!
//! Each type is serialized as its canonical text and describes itself in the JSON Schema with a
//! named definition (`$defs/Cidr`, ...) whose `pattern` accepts what its parser accepts, as far
//! as a regular expression can say it; the tests hold each pattern against its parser. The API
//! and the dashboard validate with these definitions (docs/ARCHITECTURE.md, *One schema*).
mod cidr;
mod error;
mod names;
mod patterns;
mod ports;

pub use cidr::{parse_cidr, Cidr};
pub use error::{config_error, ConfigError};
pub use names::{IfName, ObjectName, IFNAME_MAX, OBJECT_NAME_MAX};
pub use patterns::{ip_pattern, ipv4_pattern, ipv6_pattern, port_pattern, IpAddrSchema};
pub use ports::{parse_ports, PortRange};

/// A string schema with a pattern, for the value types' `JsonSchema` impls.
fn string_schema(pattern: &str, max_len: usize, description: &str) -> schemars::Schema {
    schemars::json_schema!({
        "type": "string",
        "pattern": pattern,
        "maxLength": max_len,
        "description": description,
    })
}

/// Deserialize through `FromStr`, so a bad value fails where it stands (serde names its path).
macro_rules! serde_via_str {
    ($t:ty) => {
        impl serde::Serialize for $t {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.collect_str(self)
            }
        }

        impl<'de> serde::Deserialize<'de> for $t {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                struct V;
                impl serde::de::Visitor<'_> for V {
                    type Value = $t;
                    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                        f.write_str(concat!("a string (", stringify!($t), ")"))
                    }
                    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<$t, E> {
                        v.parse().map_err(E::custom)
                    }
                }
                d.deserialize_str(V)
            }
        }
    };
}
pub(crate) use serde_via_str;

/// A `#[schemars(transform = ...)]` for enums whose variants carry doc comments: schemars writes
/// those as a `oneOf` of constants; this makes it a plain `enum` (what code generators turn into
/// an enum type) and moves each variant's doc into the description as "- value: doc".
pub fn flat_enum(schema: &mut schemars::Schema) {
    let Some(obj) = schema.as_object_mut() else {
        return;
    };
    let Some(serde_json_value) = obj.remove("oneOf") else {
        return;
    };
    let mut values = Vec::new();
    let mut notes = Vec::new();
    for variant in serde_json_value.as_array().into_iter().flatten() {
        let listed = variant
            .get("enum")
            .and_then(|e| e.as_array())
            .cloned()
            .or_else(|| variant.get("const").map(|c| vec![c.clone()]))
            .unwrap_or_default();
        if let (Some(doc), [one]) = (
            variant.get("description").and_then(|d| d.as_str()),
            &listed[..],
        ) {
            notes.push(format!("- {}: {doc}", one.as_str().unwrap_or_default()));
        }
        values.extend(listed);
    }
    let mut description = obj
        .get("description")
        .and_then(|d| d.as_str())
        .unwrap_or_default()
        .to_string();
    if !notes.is_empty() {
        if !description.is_empty() {
            description.push('\n');
        }
        description.push_str(&notes.join("\n"));
        obj.insert("description".into(), description.into());
    }
    obj.insert("type".into(), "string".into());
    obj.insert("enum".into(), values.into());
}
