//! perigee-squid: the gateway's transparent HTTP cache.
//!
//! Port-80 traffic from the served subnets is sent (by the splitter's nft rules) to Squid's
//! TPROXY port. This crate owns everything on the Squid side: the `cache` policy and its
//! validation, squid.conf rendering, running Squid as the daemon's child (parse → swap →
//! reconfigure), PURGE, and the access-log pipeline behind `/v1/cache/*`.
//! HTTPS is never intercepted here, so it is never decrypted.

pub mod access_log;
pub mod admin;
pub mod api;
pub mod config;
mod follower;
pub mod manager;
pub mod render;
pub mod served;
mod service;
pub mod serving;
pub mod tailer;
pub mod version;

pub use access_log::{parse_access_line, AccessRecord, CacheOutcome, RequestCounters, RequestRing};
pub use api::{CollectResponse, PurgeRequest, PurgeResponse};
pub use config::{CacheConfig, ConfigError, RefreshPattern, Store};
pub use manager::{
    ApplyAction, ApplyReport, CacheStats, ManagerOptions, RecordFeed, SquidError, SquidManager,
};
pub use perigee_types::Cidr;
pub use render::{default_refresh_patterns, render, SquidPaths};
pub use served::{check_served_subnets, parse_served_subnets, ServedLimits};
pub use serving::{ServingPolicy, ServingStep, ServingWatch};
pub use tailer::AccessLogTailer;
pub use version::{
    collapsed_forwarding_safe, parse_squid_v, SquidVersion, COLLAPSED_FORWARDING_ADVISORY,
};
