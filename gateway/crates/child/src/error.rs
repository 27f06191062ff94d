//! A failed service operation, shaped like the control protocol's error object, and the
//! answers the services' `/v1/<service>/*` endpoints give with it.
use serde::Serialize;
use serde_json::{json, Value};

use perigee_types::ConfigError;

/// A failed manager operation: a code (each service lists its own), a message for the
/// operator and, for a bad value, the JSON path of the field.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, thiserror::Error)]
#[error("{code}: {message}")]
pub struct ServiceError {
    pub code: &'static str,
    pub message: String,
    pub field: Option<String>,
}

impl ServiceError {
    pub fn new(code: &'static str, message: impl Into<String>) -> Self {
        ServiceError {
            code,
            message: message.into(),
            field: None,
        }
    }

    /// `code`: "{what}: {the I/O error}".
    pub fn io<'a>(code: &'static str, what: &'a str) -> impl FnOnce(std::io::Error) -> Self + 'a {
        move |e| ServiceError::new(code, format!("{what}: {e}"))
    }

    /// The HTTP status the control API answers it with.
    pub fn status(&self) -> u16 {
        match self.code {
            "invalid_config" | "invalid_request" => 400,
            "not_running" => 409,
            _ => 500,
        }
    }

    /// The status and the error object.
    pub fn response(&self) -> (u16, Value) {
        (
            self.status(),
            error_body(self.code, &self.message, self.field.as_deref()),
        )
    }
}

impl From<ConfigError> for ServiceError {
    fn from(e: ConfigError) -> Self {
        ServiceError {
            code: "invalid_config",
            message: e.message,
            field: Some(e.field),
        }
    }
}

/// The control protocol's error object.
pub fn error_body(code: &str, message: &str, field: Option<&str>) -> Value {
    json!({"error": {"code": code, "message": message, "field": field}})
}

/// A known endpoint asked with the wrong method.
pub fn method_not_allowed(method: &str, path: &str) -> (u16, Value) {
    (
        405,
        error_body(
            "method_not_allowed",
            &format!("{method} is not allowed on {path}"),
            None,
        ),
    )
}

/// A path under the service's prefix that names no endpoint.
pub fn not_found(path: &str) -> (u16, Value) {
    (
        404,
        error_body("not_found", &format!("no such endpoint: {path}"), None),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_and_bodies() {
        let e = ServiceError::new("not_running", "the cache is not running");
        assert_eq!(e.to_string(), "not_running: the cache is not running");
        assert_eq!(
            e.response(),
            (
                409,
                json!({"error": {"code": "not_running", "message": "the cache is not running", "field": null}})
            )
        );
        let bad: ServiceError = perigee_types::config_error("dns.upstream", "required").into();
        assert_eq!(
            (bad.code, bad.status(), bad.field.as_deref()),
            ("invalid_config", 400, Some("dns.upstream"))
        );
        assert_eq!(ServiceError::new("squid_io", "x").status(), 500);
        let io = ServiceError::io("unbound_io", "opening unbound.log")(std::io::Error::other("no"));
        assert_eq!(io.message, "opening unbound.log: no");
        assert_eq!(method_not_allowed("GET", "/v1/dns/flush").0, 405);
        assert_eq!(
            not_found("/v1/dns/nope").1["error"]["message"],
            "no such endpoint: /v1/dns/nope"
        );
    }
}
