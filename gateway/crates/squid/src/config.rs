//! The `cache` section of GatewayConfig: types, defaults and validation.
//!
//! Every value that reaches squid.conf is checked here first, because squid.conf has no quoting:
//! a stray space or newline in an operator string would otherwise inject directives.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::borrow::Cow;

/// Which Squid disk store backs the cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default, JsonSchema)]
#[serde(rename_all = "lowercase")]
#[schemars(transform = perigee_types::flat_enum)]
pub enum Store {
    /// One database file, shared-memory index; SMP friendly, Squid's recommended store.
    #[default]
    Rock,
    /// One file per object in a directory tree, threaded I/O.
    Aufs,
}

impl Store {
    pub fn as_str(self) -> &'static str {
        match self {
            Store::Rock => "rock",
            Store::Aufs => "aufs",
        }
    }
}

/// One operator refresh rule (Squid's `refresh_pattern`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RefreshPattern {
    /// POSIX extended regex matched against the URL: no whitespace, control characters or '#'
    /// (squid.conf has no quoting; use \s or [[:space:]]), not starting with '-', brackets and
    /// parentheses balanced.
    #[schemars(with = "RefreshRegexSchema")]
    pub regex: String,
    #[serde(default = "yes")]
    pub case_insensitive: bool,
    #[schemars(range(max = MAX_REFRESH_MINUTES))]
    pub min_minutes: u32,
    #[schemars(range(max = 10_000))]
    pub percent: u32,
    /// At most one year; at least min_minutes.
    #[schemars(range(max = MAX_REFRESH_MINUTES))]
    pub max_minutes: u32,
    /// Squid's refresh_pattern options that are safe to offer.
    #[serde(default)]
    #[schemars(inner(regex(pattern = refresh_option_pattern())))]
    pub options: Vec<String>,
}

/// The schema of `RefreshPattern.regex`: its own definition, so the API can attach the checks
/// a pattern cannot express (balanced brackets).
struct RefreshRegexSchema;

impl JsonSchema for RefreshRegexSchema {
    fn schema_name() -> Cow<'static, str> {
        "RefreshRegex".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "minLength": 1,
            "maxLength": 512,
            "description": "A POSIX extended regex for squid.conf: 1-512 bytes, no whitespace, control characters or '#', not starting with '-', brackets and parentheses balanced",
        })
    }
}

/// The schema of a `never_cache_domains` entry (its own definition: the label rules are the API's
/// to check too).
struct CacheDomainSchema;

impl JsonSchema for CacheDomainSchema {
    fn schema_name() -> Cow<'static, str> {
        "CacheDomain".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "minLength": 1,
            "maxLength": 254,
            "description": "A hostname (its subdomains included; an optional leading dot is the same) or an IPv4 literal: labels of A-Z a-z 0-9 and '-', 1-63 each, 253 in all",
        })
    }
}

/// The refresh_pattern options, as one anchored pattern for the schema.
fn refresh_option_pattern() -> String {
    format!("^({}|max-stale=[0-9]{{1,9}})$", FLAG_OPTIONS.join("|"))
}

fn yes() -> bool {
    true
}

/// The `cache` section. Every field has a default, so `{}` is a valid (disabled) section.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
#[schemars(rename = "Cache")]
pub struct CacheConfig {
    /// false leaves port 80 to the splitter and keeps Squid stopped.
    pub enabled: bool,
    /// TPROXY listening port the nft rule sends port-80 traffic to.
    #[schemars(range(min = 1))]
    pub port: u16,
    /// Loopback-only forward port for the cache manager and PURGE; never reachable from
    /// clients. Differs from port.
    #[schemars(range(min = 1))]
    pub admin_port: u16,
    /// cache_mem: RAM for hot objects, MB.
    #[schemars(range(max = MAX_MEMORY_MB))]
    pub memory_mb: u32,
    /// Disk store size, MB; 0 = memory-only cache. Rock stores at most 262144.
    #[schemars(range(max = MAX_AUFS_MB), extend("x-maximum-rock" = MAX_ROCK_MB))]
    pub disk_mb: u32,
    pub store: Store,
    /// maximum_object_size, MB: large so OS and software updates are cached.
    #[schemars(range(min = 1, max = MAX_OBJECT_MB))]
    pub max_object_mb: u32,
    /// maximum_object_size_in_memory, MB; at most max_object_mb.
    #[schemars(range(max = MAX_OBJECT_MB))]
    pub max_memory_object_mb: u32,
    /// Tried in order before the built-in defaults.
    #[schemars(length(max = MAX_REFRESH_PATTERNS))]
    pub refresh_patterns: Vec<RefreshPattern>,
    /// Never stored (the domain and all its subdomains).
    #[schemars(with = "Vec<CacheDomainSchema>", length(max = MAX_NEVER_CACHE_DOMAINS))]
    pub never_cache_domains: Vec<String>,
    /// range_offset_limit: -1 = always fetch whole object for a range request, 0 = never, else MB.
    #[schemars(range(min = -1, max = MAX_OBJECT_MB))]
    pub range_offset_limit_mb: i64,
    /// Requested collapsed forwarding; only rendered where the Squid version is not affected
    /// by CVE-2023-49288 (see crate::version).
    pub collapsed_forwarding: bool,
}

impl Default for CacheConfig {
    fn default() -> Self {
        CacheConfig {
            enabled: false,
            port: 3129,
            admin_port: 3130,
            memory_mb: 256,
            disk_mb: 2048,
            store: Store::Rock,
            max_object_mb: 4096,
            max_memory_object_mb: 8,
            refresh_patterns: Vec::new(),
            never_cache_domains: Vec::new(),
            range_offset_limit_mb: -1,
            collapsed_forwarding: false,
        }
    }
}

use perigee_types::config_error as err;
pub use perigee_types::ConfigError;

/// Squid's own ceiling for refresh_pattern max age (one year, in minutes).
pub const MAX_REFRESH_MINUTES: u32 = 525_600;
/// Rock addresses at most 2^24 slots of 16 KiB: 256 GiB.
pub const MAX_ROCK_MB: u32 = 262_144;
pub const MAX_AUFS_MB: u32 = 16 * 1024 * 1024;
pub const MAX_REFRESH_PATTERNS: usize = 256;
pub const MAX_NEVER_CACHE_DOMAINS: usize = 4096;
/// cache_mem's ceiling (1 TiB).
pub const MAX_MEMORY_MB: u32 = 1_048_576;
/// maximum_object_size's ceiling (1 TiB), also range_offset_limit's.
pub const MAX_OBJECT_MB: u32 = 1_048_576;

const FLAG_OPTIONS: &[&str] = &[
    "override-expire",
    "override-lastmod",
    "reload-into-ims",
    "ignore-reload",
    "ignore-no-store",
    "ignore-private",
    "refresh-ims",
    "store-stale",
];

impl CacheConfig {
    /// Checks every field; the first problem found is returned with its field path.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.port == 0 {
            return Err(err("cache.port", "must be 1-65535"));
        }
        if self.admin_port == 0 {
            return Err(err("cache.admin_port", "must be 1-65535"));
        }
        if self.admin_port == self.port {
            return Err(err("cache.admin_port", "must differ from cache.port"));
        }
        if self.memory_mb > MAX_MEMORY_MB {
            return Err(err("cache.memory_mb", "must be at most 1048576 (1 TiB)"));
        }
        let disk_max = match self.store {
            Store::Rock => MAX_ROCK_MB,
            Store::Aufs => MAX_AUFS_MB,
        };
        if self.disk_mb > disk_max {
            return Err(err(
                "cache.disk_mb",
                format!(
                    "must be at most {disk_max} for store {}",
                    self.store.as_str()
                ),
            ));
        }
        if self.max_object_mb == 0 || self.max_object_mb > MAX_OBJECT_MB {
            return Err(err("cache.max_object_mb", "must be 1-1048576"));
        }
        if self.max_memory_object_mb > self.max_object_mb {
            return Err(err(
                "cache.max_memory_object_mb",
                "must not exceed cache.max_object_mb",
            ));
        }
        if self.range_offset_limit_mb < -1 || self.range_offset_limit_mb > i64::from(MAX_OBJECT_MB)
        {
            return Err(err(
                "cache.range_offset_limit_mb",
                "must be -1 (always fetch the whole object), 0 (never) or a size in MB up to 1048576",
            ));
        }
        if self.refresh_patterns.len() > MAX_REFRESH_PATTERNS {
            return Err(err(
                "cache.refresh_patterns",
                format!("at most {MAX_REFRESH_PATTERNS} entries"),
            ));
        }
        for (i, p) in self.refresh_patterns.iter().enumerate() {
            validate_refresh_pattern(p, &format!("cache.refresh_patterns[{i}]"))?;
        }
        if self.never_cache_domains.len() > MAX_NEVER_CACHE_DOMAINS {
            return Err(err(
                "cache.never_cache_domains",
                format!("at most {MAX_NEVER_CACHE_DOMAINS} entries"),
            ));
        }
        for (i, d) in self.never_cache_domains.iter().enumerate() {
            normalize_domain(d).map_err(|m| err(format!("cache.never_cache_domains[{i}]"), m))?;
        }
        Ok(())
    }

    /// The never-cache list as Squid dstdomain entries: lowercase, leading dot, no duplicates.
    pub fn never_cache_dstdomains(&self) -> Vec<String> {
        let mut out: Vec<String> = self
            .never_cache_domains
            .iter()
            .filter_map(|d| normalize_domain(d).ok())
            .collect();
        out.sort();
        out.dedup();
        // Squid rejects a domain listed together with one of its parent domains.
        let parents = out.clone();
        out.retain(|d| {
            !parents
                .iter()
                .any(|p| p != d && p.starts_with('.') && d.ends_with(p.as_str()))
        });
        out
    }
}

fn validate_refresh_pattern(p: &RefreshPattern, path: &str) -> Result<(), ConfigError> {
    let regex = &p.regex;
    if regex.is_empty() || regex.len() > 512 {
        return Err(err(format!("{path}.regex"), "must be 1-512 characters"));
    }
    if regex
        .chars()
        .any(|c| c.is_whitespace() || c.is_control() || c == '#')
    {
        return Err(err(
            format!("{path}.regex"),
            "must not contain whitespace, control characters or '#' (squid.conf has no quoting); use \\s or [[:space:]]",
        ));
    }
    if regex.starts_with('-') {
        return Err(err(
            format!("{path}.regex"),
            "must not start with '-' (read as an option by Squid)",
        ));
    }
    check_regex_balance(regex).map_err(|m| err(format!("{path}.regex"), m))?;
    if p.max_minutes > MAX_REFRESH_MINUTES {
        return Err(err(
            format!("{path}.max_minutes"),
            format!("must be at most {MAX_REFRESH_MINUTES} (one year)"),
        ));
    }
    if p.min_minutes > p.max_minutes {
        return Err(err(
            format!("{path}.min_minutes"),
            "must not exceed max_minutes",
        ));
    }
    if p.percent > 10_000 {
        return Err(err(format!("{path}.percent"), "must be 0-10000"));
    }
    for (j, o) in p.options.iter().enumerate() {
        let ok = FLAG_OPTIONS.contains(&o.as_str())
            || o.strip_prefix("max-stale=").is_some_and(|n| {
                !n.is_empty() && n.len() <= 9 && n.bytes().all(|b| b.is_ascii_digit())
            });
        if !ok {
            return Err(err(
                format!("{path}.options[{j}]"),
                format!(
                    "unknown option {o:?}; allowed: {}, max-stale=N",
                    FLAG_OPTIONS.join(", ")
                ),
            ));
        }
    }
    Ok(())
}

/// Cheap structural check so the common regex typos fail with a field name instead of a
/// squid -k parse message: brackets and parentheses must balance, no trailing backslash.
fn check_regex_balance(regex: &str) -> Result<(), String> {
    let mut depth = 0i32;
    let mut in_class = false;
    let mut chars = regex.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                chars.next().ok_or("ends with a lone backslash")?;
            }
            '[' if !in_class => {
                in_class = true;
                // A ']' right after '[' or '[^' is a literal member.
                if chars.peek() == Some(&'^') {
                    chars.next();
                }
                if chars.peek() == Some(&']') {
                    chars.next();
                }
            }
            '[' if in_class => {
                // POSIX classes like [:space:] inside a bracket expression.
                if matches!(chars.peek(), Some(':' | '.' | '=')) {
                    let kind = chars.next().unwrap_or(':');
                    let mut closed = false;
                    while let Some(x) = chars.next() {
                        if x == kind && chars.peek() == Some(&']') {
                            chars.next();
                            closed = true;
                            break;
                        }
                    }
                    if !closed {
                        return Err("unterminated [: :] class".into());
                    }
                }
            }
            ']' if in_class => in_class = false,
            '(' if !in_class => depth += 1,
            ')' if !in_class => {
                depth -= 1;
                if depth < 0 {
                    return Err("unmatched ')'".into());
                }
            }
            _ => {}
        }
    }
    if in_class {
        return Err("unmatched '['".into());
    }
    if depth != 0 {
        return Err("unmatched '('".into());
    }
    Ok(())
}

/// "Example.COM" / ".example.com" → ".example.com"; "10.0.0.1" stays as is; anything that is not a hostname is refused.
pub fn normalize_domain(d: &str) -> Result<String, String> {
    // An IPv4 literal matches requests by address (no subdomains to fold in).
    if d.parse::<std::net::Ipv4Addr>().is_ok() {
        return Ok(d.to_string());
    }
    let trimmed = d.strip_prefix('.').unwrap_or(d).to_ascii_lowercase();
    if trimmed.is_empty() || trimmed.len() > 253 {
        return Err("must be a hostname of 1-253 characters".into());
    }
    for label in trimmed.split('.') {
        let ok = !label.is_empty()
            && label.len() <= 63
            && label
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-')
            && !label.starts_with('-')
            && !label.ends_with('-');
        if !ok {
            return Err(format!(
                "{d:?} is not a hostname (letters, digits, '-' and '.' only)"
            ));
        }
    }
    Ok(format!(".{trimmed}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::served::{parse_served_subnets, ServedLimits};

    fn field_of(cfg: &CacheConfig) -> String {
        cfg.validate().expect_err("should be rejected").field
    }

    #[test]
    fn defaults_are_valid_and_match_the_protocol_doc() {
        let cfg: CacheConfig = serde_json::from_str("{}").unwrap();
        assert_eq!(cfg, CacheConfig::default());
        cfg.validate().unwrap();
        assert_eq!(
            (cfg.port, cfg.memory_mb, cfg.disk_mb, cfg.max_object_mb),
            (3129, 256, 2048, 4096)
        );
        assert_eq!(cfg.range_offset_limit_mb, -1);
        assert!(!cfg.enabled && !cfg.collapsed_forwarding);
    }

    #[test]
    fn unknown_fields_and_bad_store_are_rejected() {
        let e = serde_json::from_str::<CacheConfig>(r#"{"memroy_mb": 5}"#).unwrap_err();
        assert!(e.to_string().contains("memroy_mb"), "{e}");
        let e = serde_json::from_str::<CacheConfig>(r#"{"store": "ufs"}"#).unwrap_err();
        assert!(e.to_string().contains("ufs"), "{e}");
        let e = serde_json::from_str::<CacheConfig>(r#"{"refresh_patterns": [{"regex": "x", "min_minutes": 1, "percent": 2, "max_minutes": 3, "bogus": 1}]}"#).unwrap_err();
        assert!(e.to_string().contains("bogus"), "{e}");
    }

    #[test]
    fn invalid_values_name_their_field() {
        let base = CacheConfig::default();
        assert_eq!(
            field_of(&CacheConfig {
                port: 0,
                ..base.clone()
            }),
            "cache.port"
        );
        assert_eq!(
            field_of(&CacheConfig {
                admin_port: 3129,
                ..base.clone()
            }),
            "cache.admin_port"
        );
        assert_eq!(
            field_of(&CacheConfig {
                disk_mb: MAX_ROCK_MB + 1,
                ..base.clone()
            }),
            "cache.disk_mb"
        );
        assert_eq!(
            field_of(&CacheConfig {
                max_object_mb: 0,
                ..base.clone()
            }),
            "cache.max_object_mb"
        );
        assert_eq!(
            field_of(&CacheConfig {
                range_offset_limit_mb: -2,
                ..base.clone()
            }),
            "cache.range_offset_limit_mb"
        );
        assert_eq!(
            field_of(&CacheConfig {
                max_memory_object_mb: 5000,
                ..base.clone()
            }),
            "cache.max_memory_object_mb"
        );
        let pat = |regex: &str, opts: &[&str]| RefreshPattern {
            regex: regex.into(),
            case_insensitive: true,
            min_minutes: 1,
            percent: 20,
            max_minutes: 10,
            options: opts.iter().map(|s| s.to_string()).collect(),
        };
        let with = |p: RefreshPattern| CacheConfig {
            refresh_patterns: vec![pat(".", &[]), p],
            ..base.clone()
        };
        assert_eq!(
            field_of(&with(pat("a b", &[]))),
            "cache.refresh_patterns[1].regex"
        );
        assert_eq!(
            field_of(&with(pat("a\nhttp_access allow all", &[]))),
            "cache.refresh_patterns[1].regex"
        );
        assert_eq!(
            field_of(&with(pat("([a-z", &[]))),
            "cache.refresh_patterns[1].regex"
        );
        assert_eq!(
            field_of(&with(pat("-i", &[]))),
            "cache.refresh_patterns[1].regex"
        );
        assert_eq!(
            field_of(&with(pat("x", &["ignore-everything"]))),
            "cache.refresh_patterns[1].options[0]"
        );
        assert_eq!(
            field_of(&with(pat("x", &["max-stale=1 x"]))),
            "cache.refresh_patterns[1].options[0]"
        );
        let mut p = pat("x", &[]);
        p.min_minutes = 11;
        assert_eq!(field_of(&with(p)), "cache.refresh_patterns[1].min_minutes");
        let mut p = pat("x", &[]);
        p.max_minutes = MAX_REFRESH_MINUTES + 1;
        assert_eq!(field_of(&with(p)), "cache.refresh_patterns[1].max_minutes");
        let d = CacheConfig {
            never_cache_domains: vec!["ok.example".into(), "bad domain".into()],
            ..base
        };
        let e = d.validate().unwrap_err();
        assert_eq!(e.field, "cache.never_cache_domains[1]");
        assert!(e.message.contains("hostname"), "{e}");
    }

    #[test]
    fn good_regexes_pass_the_balance_check() {
        for r in [
            r"\.(deb|rpm)$",
            r"^http://[^/]+/x\?",
            "[]a]",
            "[^]a]",
            "[[:space:]x]",
            r"a\(b",
        ] {
            check_regex_balance(r).unwrap_or_else(|e| panic!("{r}: {e}"));
        }
    }

    #[test]
    fn domains_normalize_and_subdomains_fold_into_parents() {
        let cfg = CacheConfig {
            never_cache_domains: vec![
                "Bank.example".into(),
                ".bank.example".into(),
                "www.bank.example".into(),
                "other.test".into(),
            ],
            ..CacheConfig::default()
        };
        cfg.validate().unwrap();
        assert_eq!(
            cfg.never_cache_dstdomains(),
            vec![".bank.example", ".other.test"]
        );
        assert_eq!(normalize_domain("10.1.2.3").unwrap(), "10.1.2.3");
    }

    #[test]
    fn served_subnets_never_open() {
        assert_eq!(
            parse_served_subnets(&[], &ServedLimits::default())
                .unwrap_err()
                .field,
            "served_subnets"
        );
        let e = parse_served_subnets(
            &["10.0.0.0/8".into(), "0.0.0.0/0".into()],
            &ServedLimits::default(),
        )
        .unwrap_err();
        assert_eq!(e.field, "served_subnets[1]");
        let e =
            parse_served_subnets(&["10.0.0.0/33".into()], &ServedLimits::default()).unwrap_err();
        assert_eq!(e.field, "served_subnets[0]");
        assert_eq!(
            parse_served_subnets(&["fd71:1::/64".into()], &ServedLimits::default())
                .unwrap()
                .len(),
            1
        );
    }
}
