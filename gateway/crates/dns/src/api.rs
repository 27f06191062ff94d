//! Bodies of the `/v1/dns/*` control endpoints, and one dispatcher the daemon can call.

use serde::Deserialize;
use serde_json::{json, Map, Value};

use crate::manager::{DnsError, UnboundManager};
/// The control protocol's error object (the same for every service).
pub use perigee_child::error_body;
use perigee_child::{method_not_allowed, not_found};

/// POST /v1/dns/flush body: exactly one of `{"name": "example.com"}` or `{"all": true}`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FlushRequest {
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub all: bool,
}

impl FlushRequest {
    pub fn execute(&self, mgr: &mut UnboundManager) -> Result<(), DnsError> {
        match (&self.name, self.all) {
            (Some(n), false) => mgr.flush(Some(n)),
            (None, true) => mgr.flush(None),
            _ => Err(DnsError {
                code: "invalid_request",
                message: "give exactly one of \"name\" or \"all\": true".into(),
                field: Some("name".into()),
            }),
        }
    }
}

/// Serves every `/v1/dns/...` request; None for other paths. `extra` is merged into the stats
/// object (what the daemon knows: interception, the resolver probe).
///
/// | method | path | answer |
/// |---|---|---|
/// | GET | /v1/dns/stats | DnsStats plus `extra` |
/// | POST | /v1/dns/flush | `{"ok": true}` |
pub fn handle(
    mgr: &mut UnboundManager,
    method: &str,
    path: &str,
    body: &[u8],
    extra: Map<String, Value>,
) -> Option<(u16, Value)> {
    if path != "/v1/dns" && !path.starts_with("/v1/dns/") {
        return None;
    }
    let answer = match (method, path) {
        ("GET", "/v1/dns/stats") => {
            let mut v = serde_json::to_value(mgr.stats()).unwrap_or(Value::Null);
            if let Some(obj) = v.as_object_mut() {
                obj.extend(extra);
            }
            (200, v)
        }
        ("POST", "/v1/dns/flush") => match serde_json::from_slice::<FlushRequest>(body) {
            Err(e) => (400, error_body("invalid_json", &e.to_string(), None)),
            Ok(req) => match req.execute(mgr) {
                Ok(()) => (200, json!({"ok": true})),
                Err(e) => e.response(),
            },
        },
        (_, "/v1/dns/stats" | "/v1/dns/flush") => method_not_allowed(method, path),
        _ => not_found(path),
    };
    Some(answer)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manager::ManagerOptions;
    use crate::render::UnboundPaths;

    fn idle_manager() -> UnboundManager {
        let dir = std::env::temp_dir().join(format!("pd-dns-api-{}", std::process::id()));
        UnboundManager::new(ManagerOptions {
            paths: UnboundPaths {
                state_dir: dir.join("state"),
                run_dir: dir.join("run"),
                ..UnboundPaths::default()
            },
            ..ManagerOptions::default()
        })
    }

    #[test]
    fn routes_and_errors_without_a_running_resolver() {
        let mut mgr = idle_manager();
        let none = Map::new;
        assert!(handle(&mut mgr, "GET", "/v1/cache/stats", b"", none()).is_none());
        let mut extra = Map::new();
        extra.insert("resolver_healthy".into(), true.into());
        let (st, v) = handle(&mut mgr, "GET", "/v1/dns/stats", b"", extra).unwrap();
        assert_eq!(st, 200);
        assert_eq!(
            (v["running"].as_bool(), v["queries"].as_u64()),
            (Some(false), Some(0))
        );
        assert_eq!(v["resolver_healthy"], true);
        let flush = |m: &mut UnboundManager, b: &[u8]| {
            let (st, v) = handle(m, "POST", "/v1/dns/flush", b, Map::new()).unwrap();
            (st, v["error"]["code"].as_str().map(String::from))
        };
        assert_eq!(
            flush(&mut mgr, br#"{"all":true}"#),
            (409, Some("not_running".into()))
        );
        assert_eq!(
            flush(&mut mgr, br#"{"all":true,"name":"a.example"}"#),
            (400, Some("invalid_request".into()))
        );
        assert_eq!(flush(&mut mgr, b"{"), (400, Some("invalid_json".into())));
        assert_eq!(
            flush(&mut mgr, br#"{"zone":"x"}"#),
            (400, Some("invalid_json".into()))
        );
        assert_eq!(
            handle(&mut mgr, "GET", "/v1/dns/flush", b"", none())
                .unwrap()
                .0,
            405
        );
        assert_eq!(
            handle(&mut mgr, "GET", "/v1/dns/nope", b"", none())
                .unwrap()
                .0,
            404
        );
    }
}
