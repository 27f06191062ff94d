//! The error of a rejected config value, shared by the daemon's config and the cache's and the
//! resolver's sections: the control protocol's `error.field` and `error.message`.
use serde::Serialize;
use std::fmt;

/// A rejected value, named by its JSON path (e.g. `cache.refresh_patterns[2].regex`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ConfigError {
    pub field: String,
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.message)
    }
}

impl std::error::Error for ConfigError {}

/// A `ConfigError` for `field`.
pub fn config_error(field: impl Into<String>, message: impl Into<String>) -> ConfigError {
    ConfigError {
        field: field.into(),
        message: message.into(),
    }
}
