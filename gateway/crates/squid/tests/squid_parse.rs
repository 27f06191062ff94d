//! Every rendered variant must pass the installed Squid's own `squid -k parse`.

use perigee_squid::manager::parse_errors;
use perigee_squid::{
    parse_served_subnets, render, CacheConfig, RefreshPattern, ServedLimits, SquidPaths,
    SquidVersion, Store,
};
use std::process::Command;

fn squid_parse(name: &str, text: &str) -> Result<(), String> {
    let dir = std::env::temp_dir().join(format!("pq-squid-parse-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join(format!("{name}.conf"));
    std::fs::write(&file, text).unwrap();
    let out = Command::new("squid")
        .args(["-n", "pqparse", "-k", "parse", "-f"])
        .arg(&file)
        .output()
        .expect("squid must be installed (scripts/apt/squid.txt)");
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let errors = parse_errors(&all);
    let _ = std::fs::remove_file(&file);
    if out.status.success() && errors.is_empty() {
        Ok(())
    } else {
        Err(format!("{name}: {errors:?} (exit {})", out.status))
    }
}

#[test]
fn rendered_variants_pass_squid_parse() {
    let served = parse_served_subnets(
        &["10.71.1.0/24".into(), "fd71:1::/64".into()],
        &ServedLimits::default(),
    )
    .unwrap();
    let paths = SquidPaths::default();
    let base = CacheConfig {
        enabled: true,
        ..CacheConfig::default()
    };
    let operator = CacheConfig {
        store: Store::Aufs,
        disk_mb: 4096,
        refresh_patterns: vec![RefreshPattern {
            regex: r"^http://[^/]+/pool/.*\.(deb|udeb)$".into(),
            case_insensitive: true,
            min_minutes: 1440,
            percent: 100,
            max_minutes: 525_600,
            options: vec![
                "ignore-reload".into(),
                "ignore-no-store".into(),
                "max-stale=120".into(),
            ],
        }],
        never_cache_domains: vec!["bank.example".into(), "10.71.3.10".into()],
        range_offset_limit_mb: 128,
        collapsed_forwarding: true,
        ..base.clone()
    };
    let variants = [
        ("default", base.clone(), Some(SquidVersion::new(5, 7, 0))),
        (
            "operator-aufs",
            operator.clone(),
            Some(SquidVersion::new(5, 7, 0)),
        ),
        ("collapsed-on", operator, Some(SquidVersion::new(6, 6, 0))),
        (
            "memory-only",
            CacheConfig {
                disk_mb: 0,
                range_offset_limit_mb: 0,
                ..base
            },
            None,
        ),
    ];
    for (name, cfg, version) in variants {
        cfg.validate().unwrap();
        // Both address families: the gateway's own resolver, or upstreams on v4 and v6.
        let ns: Vec<std::net::IpAddr> =
            vec!["127.0.0.1".parse().unwrap(), "fd71:3::53".parse().unwrap()];
        squid_parse(name, &render(&cfg, &served, &ns, &paths, version)).unwrap();
    }
}

#[test]
fn parse_check_catches_what_validation_cannot() {
    let served = parse_served_subnets(&["10.71.1.0/24".into()], &ServedLimits::default()).unwrap();
    let cfg = CacheConfig {
        enabled: true,
        refresh_patterns: vec![RefreshPattern {
            regex: "a{2".into(),
            case_insensitive: false,
            min_minutes: 0,
            percent: 20,
            max_minutes: 60,
            options: vec![],
        }],
        ..CacheConfig::default()
    };
    cfg.validate().unwrap();
    let err = squid_parse(
        "bad-regex",
        &render(
            &cfg,
            &served,
            &["127.0.0.1".parse().unwrap()],
            &SquidPaths::default(),
            None,
        ),
    )
    .unwrap_err();
    assert!(err.contains("a{2"), "{err}");
}
