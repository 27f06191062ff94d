//! Bodies of the `/v1/cache/*` control endpoints, and one dispatcher the daemon can call.

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::access_log::AccessRecord;
use crate::manager::{CacheStats, SquidError, SquidManager};
/// The control protocol's error object (the same for every service).
pub use perigee_child::error_body;
use perigee_child::{method_not_allowed, not_found};

/// POST /v1/cache/purge body: exactly one of `{"url": "..."}` or `{"all": true}`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PurgeRequest {
    #[serde(default)]
    pub url: Option<String>,
    #[serde(default)]
    pub all: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct PurgeResponse {
    pub ok: bool,
    pub purged: u64,
}

/// POST /v1/cache/requests/collect answer.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct CollectResponse {
    pub requests: Vec<AccessRecord>,
    /// Records dropped because the ring was full, since the manager started.
    pub dropped: u64,
}

impl PurgeRequest {
    /// Runs the purge this body asks for.
    pub fn execute(&self, mgr: &mut SquidManager) -> Result<PurgeResponse, SquidError> {
        let purged = match (&self.url, self.all) {
            (Some(url), false) => mgr.purge_url(url)?,
            (None, true) => mgr.purge_all()?,
            _ => {
                return Err(SquidError {
                    code: "invalid_request",
                    message: "give exactly one of \"url\" or \"all\": true".into(),
                    field: Some("url".into()),
                })
            }
        };
        Ok(PurgeResponse { ok: true, purged })
    }
}

/// GET /v1/cache/stats.
pub fn stats(mgr: &mut SquidManager) -> CacheStats {
    mgr.stats()
}

/// POST /v1/cache/requests/collect.
pub fn collect(mgr: &SquidManager) -> CollectResponse {
    let requests = mgr.collect_requests();
    CollectResponse {
        requests,
        dropped: mgr.requests_dropped(),
    }
}

/// Serves every `/v1/cache/...` request; None for other paths, so the daemon's router can
/// hand them over wholesale. `target` may carry a query string.
///
/// | method | path | answer |
/// |---|---|---|
/// | GET | /v1/cache/stats | CacheStats |
/// | GET | /v1/cache/requests?limit=N | `{"requests":[AccessRecord]}` newest N (default 100), not drained |
/// | POST | /v1/cache/requests/collect | CollectResponse (drains) |
/// | POST | /v1/cache/purge | PurgeResponse |
pub fn handle(
    mgr: &mut SquidManager,
    method: &str,
    target: &str,
    body: &[u8],
) -> Option<(u16, Value)> {
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    if path != "/v1/cache" && !path.starts_with("/v1/cache/") {
        return None;
    }
    let answer = match (method, path) {
        ("GET", "/v1/cache/stats") => (200, to_value(&stats(mgr))),
        ("GET", "/v1/cache/requests") => {
            let limit = query
                .split('&')
                .find_map(|kv| kv.strip_prefix("limit="))
                .map(|v| v.parse::<usize>());
            match limit {
                Some(Err(_)) => (
                    400,
                    error_body("invalid_request", "limit must be a number", Some("limit")),
                ),
                Some(Ok(n)) => (200, json!({"requests": mgr.recent_requests(n.min(10_000))})),
                None => (200, json!({"requests": mgr.recent_requests(100)})),
            }
        }
        ("POST", "/v1/cache/requests/collect") => (200, to_value(&collect(mgr))),
        ("POST", "/v1/cache/purge") => match serde_json::from_slice::<PurgeRequest>(body) {
            Err(e) => (400, error_body("invalid_json", &e.to_string(), None)),
            Ok(req) => match req.execute(mgr) {
                Ok(r) => (200, to_value(&r)),
                Err(e) => e.response(),
            },
        },
        (
            _,
            "/v1/cache/stats"
            | "/v1/cache/requests"
            | "/v1/cache/requests/collect"
            | "/v1/cache/purge",
        ) => method_not_allowed(method, path),
        _ => not_found(path),
    };
    Some(answer)
}

/// Serialization cannot fail for these plain data types; Null is the unreachable fallback.
fn to_value<T: Serialize>(v: &T) -> Value {
    serde_json::to_value(v).unwrap_or(Value::Null)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn idle_manager(tag: &str) -> SquidManager {
        let dir = std::env::temp_dir().join(format!("pq-squid-api-{tag}-{}", std::process::id()));
        SquidManager::new(crate::ManagerOptions {
            paths: crate::SquidPaths {
                state_dir: dir.join("state"),
                run_dir: dir.join("run"),
                ..Default::default()
            },
            ..Default::default()
        })
    }

    #[test]
    fn routes_and_errors_without_a_running_squid() {
        let mut mgr = idle_manager("routes");
        assert!(handle(&mut mgr, "GET", "/v1/flows", b"").is_none());
        let (st, v) = handle(&mut mgr, "GET", "/v1/cache/stats", b"").unwrap();
        assert_eq!(st, 200);
        assert_eq!(v["running"], false);
        assert_eq!(v["requests"], 0);
        let (st, v) = handle(&mut mgr, "POST", "/v1/cache/requests/collect", b"").unwrap();
        assert_eq!((st, v["requests"].as_array().map(Vec::len)), (200, Some(0)));
        let (st, _) = handle(&mut mgr, "GET", "/v1/cache/requests?limit=5", b"").unwrap();
        assert_eq!(st, 200);
        let (st, v) = handle(&mut mgr, "GET", "/v1/cache/requests?limit=x", b"").unwrap();
        assert_eq!((st, v["error"]["field"].as_str()), (400, Some("limit")));
        let (st, v) = handle(
            &mut mgr,
            "POST",
            "/v1/cache/purge",
            br#"{"url":"http://x/a"}"#,
        )
        .unwrap();
        assert_eq!(
            (st, v["error"]["code"].as_str()),
            (409, Some("not_running"))
        );
        let (st, v) = handle(
            &mut mgr,
            "POST",
            "/v1/cache/purge",
            br#"{"url":"http://x/a","all":true}"#,
        )
        .unwrap();
        assert_eq!(
            (st, v["error"]["code"].as_str()),
            (400, Some("invalid_request"))
        );
        let (st, v) = handle(&mut mgr, "POST", "/v1/cache/purge", b"{").unwrap();
        assert_eq!(
            (st, v["error"]["code"].as_str()),
            (400, Some("invalid_json"))
        );
        assert_eq!(
            handle(&mut mgr, "GET", "/v1/cache/purge", b"").unwrap().0,
            405
        );
        assert_eq!(
            handle(&mut mgr, "GET", "/v1/cache/nope", b"").unwrap().0,
            404
        );
    }

    #[test]
    fn purge_bodies() {
        let r: PurgeRequest = serde_json::from_str(r#"{"url": "http://x/a"}"#).unwrap();
        assert_eq!(
            r,
            PurgeRequest {
                url: Some("http://x/a".into()),
                all: false
            }
        );
        let r: PurgeRequest = serde_json::from_str(r#"{"all": true}"#).unwrap();
        assert!(r.all && r.url.is_none());
        assert!(serde_json::from_str::<PurgeRequest>(r#"{"everything": true}"#).is_err());
        let out = serde_json::to_string(&PurgeResponse {
            ok: true,
            purged: 1,
        })
        .unwrap();
        assert_eq!(out, r#"{"ok":true,"purged":1}"#);
    }
}
