//! Bodies of the `/v1/cache/*` control endpoints, and one dispatcher the daemon can call.

use serde::{Deserialize, Serialize};

use crate::access_log::AccessRecord;
use crate::manager::{CacheStats, SquidError, SquidManager};

/// POST /v1/cache/purge body: exactly one of `{"url": "..."}` or `{"all": true}`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PurgeRequest {
    #[serde(default)]
    pub url: Option<String>,
    #[serde(default)]
    pub all: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PurgeResponse {
    pub ok: bool,
    pub purged: u64,
}

/// POST /v1/cache/requests/collect answer.
#[derive(Debug, Clone, Serialize)]
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

#[cfg(test)]
mod tests {
    use super::*;

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
