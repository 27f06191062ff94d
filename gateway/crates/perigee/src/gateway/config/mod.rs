//! `GatewayConfig`: the serde types of docs/control-protocol.md and their strict validation.
//! Every error names the JSON path of the offending field so the API can point at it.
//!
//! These types are the source of the control protocol's JSON Schema (`perigee schema config`,
//! committed as gateway/schema/config.schema.json): the API's models and the dashboard's types
//! are generated from it. Bounds are written once as constants that both the `#[schemars]`
//! attributes and `validate()` use; rules between fields live only in `validate()` (and in the
//! API's cross-field validators, which tests/test_config_contract.py holds to these).
//!
//! The module is split by job: `types` (the top level), `transport`, `policy` and `peer` (the
//! sections), `limits` (the bounds), `validate` (the rules), `example` (a sample config).
mod example;
mod limits;
mod peer;
mod policy;
mod transport;
mod types;
mod validate;

#[cfg(test)]
mod tests;

pub use example::example_json;
pub use limits::*;
pub use peer::*;
pub use perigee_types::{
    parse_cidr, parse_ports, Cidr, ConfigError, IfName, ObjectName, PortRange,
};
pub use policy::*;
pub use transport::*;
pub use types::*;

use perigee_types::config_error as err;

/// Parse JSON text into a config, naming the path of a type error or unknown field.
pub fn parse(text: &str) -> Result<GatewayConfig, ConfigError> {
    let de = &mut serde_json::Deserializer::from_str(text);
    let cfg: GatewayConfig = serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        err(
            if path == "." { String::new() } else { path },
            e.inner().to_string(),
        )
    })?;
    cfg.validate()?;
    Ok(cfg)
}

pub fn from_value(v: serde_json::Value) -> Result<GatewayConfig, ConfigError> {
    parse(&v.to_string())
}
