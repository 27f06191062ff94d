//! Real Squid in pq-gw intercepting port 80 with TPROXY between pq-cli and pq-srv.
//! Needs root, squid, nft, iproute2 and curl. One test function: the namespaces are fixed names.

mod common;

use common::*;
use perigee_squid::{
    api, AccessRecord, ApplyAction, CacheConfig, CacheOutcome, Cidr, ManagerOptions,
    RefreshPattern, ServedLimits, SquidManager, SquidPaths, Store,
};
use perigee_testkit::HUNG;
use std::path::Path;
use std::time::{Duration, Instant};

const PORT: u16 = 3129;

fn options(dir: &Path) -> ManagerOptions {
    ManagerOptions {
        paths: SquidPaths {
            state_dir: dir.join("state"),
            run_dir: dir.join("run"),
            service_name: "pqtest".into(),
            effective_user: "proxy".into(),
        },
        poll_interval: Duration::from_millis(100),
        ..ManagerOptions::default()
    }
}

fn cache_config() -> CacheConfig {
    CacheConfig {
        enabled: true,
        port: PORT,
        admin_port: 3130,
        memory_mb: 64,
        disk_mb: 1024,
        max_object_mb: 512,
        max_memory_object_mb: 8,
        ..CacheConfig::default()
    }
}

fn served() -> Vec<Cidr> {
    vec![SERVED.parse().unwrap(), SERVED6.parse().unwrap()]
}

/// Squid's resolver: nothing answers there, and nothing needs to (every origin is an IP
/// literal, so no name is ever looked up).
fn ns() -> Vec<std::net::IpAddr> {
    vec![ORIGIN_IP.parse().unwrap()]
}

/// Collects access-log records until `n` for `path` arrived (Squid logs when a request ends).
fn records_for(
    mgr: &SquidManager,
    seen: &mut Vec<AccessRecord>,
    path: &str,
    n: usize,
) -> Vec<AccessRecord> {
    let deadline = Instant::now() + HUNG;
    loop {
        seen.extend(mgr.collect_requests());
        let mine: Vec<AccessRecord> = seen
            .iter()
            .filter(|r| r.url.ends_with(path))
            .cloned()
            .collect();
        if mine.len() >= n || Instant::now() > deadline {
            assert_eq!(mine.len(), n, "access log records for {path}: {mine:#?}");
            return mine;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Squid commits a fetched object to its (shared) store asynchronously; a repeat request that
/// arrives within a few hundred ms of the MISS can still be a MISS. Real repeats come later.
fn settle() {
    std::thread::sleep(Duration::from_millis(600));
}

/// Requests `path` again until Squid answers it from the cache, `have` records being logged so far;
/// returns all its records. The commit after a MISS can take seconds while the disk is busy (right
/// after a 200 MB object, on a loaded machine), so a fixed pause is not enough to know it is stored.
fn get_until_hit(
    mgr: &SquidManager,
    seen: &mut Vec<AccessRecord>,
    path: &str,
    have: usize,
) -> Vec<AccessRecord> {
    let deadline = Instant::now() + HUNG;
    let mut n = have;
    loop {
        settle();
        assert_eq!(get(path).status, 200);
        n += 1;
        let recs = records_for(mgr, seen, path, n);
        if recs[n - 1].outcome == CacheOutcome::Hit {
            return recs;
        }
        assert!(
            Instant::now() < deadline,
            "{path} never came from the cache: {recs:#?}"
        );
    }
}

fn outcomes(recs: &[AccessRecord]) -> Vec<CacheOutcome> {
    recs.iter().map(|r| r.outcome).collect()
}

#[test]
fn tproxy_cache_end_to_end() {
    if !perigee_testkit::root("namespaces, TPROXY") {
        return;
    }
    // The topology holds the suite lock; everything fixed-name comes after it.
    let _topo = build_topology(PORT);
    let dir = std::env::temp_dir().join("pq-squid-e2e");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let origin = start_origin();
    // The manager (and so Squid, its child) lives in pq-gw, like the daemon in the gateway.
    enter_netns("pq-gw");
    let mut mgr = SquidManager::new(options(&dir));
    assert!(mgr.version().is_some(), "squid -v not understood");
    let mut seen = Vec::new();

    // --- start ---
    let report = mgr
        .apply(&cache_config(), &served(), &ServedLimits::default(), &ns())
        .expect("start squid");
    assert_eq!(report.action, ApplyAction::Started);
    assert!(mgr.is_running());

    // --- 1 MB cacheable object: MISS then HIT; origin sees the client's own address ---
    let one_mb = "/o/1048576/public/one";
    assert_eq!(get(one_mb).body_len, 1_048_576);
    settle();
    assert_eq!(get(one_mb).status, 200);
    let recs = records_for(&mgr, &mut seen, one_mb, 2);
    assert_eq!(
        outcomes(&recs),
        vec![CacheOutcome::Miss, CacheOutcome::Hit],
        "{recs:#?}"
    );
    assert!(recs[0].client.starts_with(&format!("{CLIENT_IP}:")));
    assert_eq!(recs[0].upstream_bytes, 1_048_576);
    assert_eq!(recs[1].upstream_bytes, 0);
    let peers = origin_hits(&origin, one_mb);
    assert_eq!(peers.len(), 1, "origin must be asked once: {peers:?}");
    assert_eq!(
        peers[0].ip().to_string(),
        CLIENT_IP,
        "TPROXY: origin sees the client's address"
    );
    let stats = mgr.stats();
    assert!(stats.running && stats.enabled);
    assert_eq!((stats.hits, stats.misses), (1, 1));
    assert!(stats.bytes_saved_satellite >= 1_048_576, "{stats:#?}");
    assert!((stats.hit_ratio_requests - 0.5).abs() < 1e-9);
    assert!(stats.hit_ratio_bytes > 0.49 && stats.hit_ratio_bytes < 0.51);
    assert!(
        stats.memory_used_bytes.unwrap_or(0) >= 1_048_576,
        "{stats:#?}"
    );
    assert_eq!(stats.disk_capacity_bytes, Some(1024 * 1024 * 1024));
    assert!(!stats.collapsed_forwarding_effective);

    // --- IPv6: same path through the dual-stack TPROXY port ---
    let v6 = "/o/4096/public/v6";
    for _ in 0..2 {
        let mut c = client_connect_to(ORIGIN_IP6);
        send_host(&mut c, &format!("[{ORIGIN_IP6}]"), &[v6]);
        assert_eq!(read_reply(&mut c).status, 200);
        settle();
    }
    let recs = records_for(&mgr, &mut seen, v6, 2);
    assert_eq!(
        outcomes(&recs),
        vec![CacheOutcome::Miss, CacheOutcome::Hit],
        "{recs:#?}"
    );
    assert!(
        recs[0].client.starts_with(&format!("[{CLIENT_IP6}]:")),
        "{recs:#?}"
    );
    let peers = origin_hits(&origin, v6);
    assert_eq!(peers.len(), 1);
    assert_eq!(peers[0].ip().to_string(), CLIENT_IP6, "TPROXY over IPv6");

    // --- Host header that disagrees with the intercepted destination: served, never cached ---
    let spoof = "/o/4096/public/spoofed-host";
    for _ in 0..2 {
        let mut c = client_connect_to(ORIGIN_IP6);
        send_host(&mut c, ORIGIN_IP, &[spoof]);
        assert_eq!(read_reply(&mut c).status, 200);
        settle();
    }
    let recs = records_for(&mgr, &mut seen, spoof, 2);
    assert_eq!(
        outcomes(&recs),
        vec![CacheOutcome::Miss, CacheOutcome::Miss],
        "{recs:#?}"
    );
    assert_eq!(
        recs[0].server.as_deref(),
        Some(ORIGIN_IP6),
        "goes to the original destination"
    );

    // --- no-store and private are never cached ---
    for p in ["/o/2048/nostore/ns", "/o/2048/private/pv"] {
        assert_eq!(get(p).status, 200);
        settle();
        assert_eq!(get(p).status, 200);
        let recs = records_for(&mgr, &mut seen, p, 2);
        assert_eq!(
            outcomes(&recs),
            vec![CacheOutcome::Miss, CacheOutcome::Miss],
            "{p}: {recs:#?}"
        );
        assert_eq!(origin_hits(&origin, p).len(), 2, "{p}");
    }

    // --- keep-alive: three requests on one connection; pipelined: two in one write ---
    let ka = "/o/5000/public/ka";
    let mut conn = client_connect();
    for _ in 0..3 {
        send(&mut conn, &[ka]);
        let r = read_reply(&mut conn);
        assert_eq!((r.status, r.body_len), (200, 5000));
        settle();
    }
    let (p1, p2) = ("/o/7000/public/p1", "/o/9000/public/p2");
    send(&mut conn, &[p1, p2]);
    let r1 = read_reply(&mut conn);
    let r2 = read_reply(&mut conn);
    assert_eq!(
        (r1.status, r1.body_len, r2.status, r2.body_len),
        (200, 7000, 200, 9000)
    );
    drop(conn);
    let recs = records_for(&mgr, &mut seen, ka, 3);
    assert_eq!(
        outcomes(&recs),
        vec![CacheOutcome::Miss, CacheOutcome::Hit, CacheOutcome::Hit],
        "{recs:#?}"
    );
    let port_of = |r: &AccessRecord| r.client.rsplit(':').next().unwrap().to_string();
    assert!(
        recs.iter().all(|r| port_of(r) == port_of(&recs[0])),
        "one client connection: {recs:#?}"
    );
    records_for(&mgr, &mut seen, p1, 1);
    records_for(&mgr, &mut seen, p2, 1);

    // --- a 200 MB update-sized object is cached (max object size) ---
    let big = "/o/209715200/public/big.iso";
    assert_eq!(get(big).body_len, 209_715_200);
    settle();
    assert_eq!(get(big).body_len, 209_715_200);
    let recs = records_for(&mgr, &mut seen, big, 2);
    assert_eq!(
        outcomes(&recs),
        vec![CacheOutcome::Miss, CacheOutcome::Hit],
        "{recs:#?}"
    );
    assert_eq!(origin_hits(&origin, big).len(), 1);
    // Informational only (no timing assertions): Squid's own durations over veth.
    eprintln!(
        "200 MB object: MISS {} ms, HIT {} ms (Squid access log)",
        recs[0].duration_ms, recs[1].duration_ms
    );

    // --- range request on a large update: Squid fetches (and caches) the whole object ---
    let ranged = "/o/8388608/public/update.bin";
    let mut c = client_connect();
    send_raw(
        &mut c,
        &format!("GET {ranged} HTTP/1.1\r\nHost: {ORIGIN_IP}\r\nRange: bytes=0-99\r\n\r\n"),
    );
    let r = read_reply(&mut c);
    assert_eq!((r.status, r.body_len), (206, 100));
    drop(c);
    records_for(&mgr, &mut seen, ranged, 1);
    // The whole object keeps arriving after the client got its 100 bytes (quick_abort_min -1),
    // after Squid logged the ranged request; 8 MB over veth takes milliseconds.
    settle();
    assert_eq!(get(ranged).body_len, 8_388_608);
    let recs = records_for(&mgr, &mut seen, ranged, 2);
    assert_eq!(recs[1].outcome, CacheOutcome::Hit, "{recs:#?}");
    assert_eq!(origin_hits(&origin, ranged).len(), 1);

    // --- a client outside the served subnets is refused, never proxied ---
    let out_path = "/o/100/public/outsider";
    let status = curl_status(OUTSIDER_IP, &format!("http://{ORIGIN_IP}{out_path}"));
    assert!(status == "403" || status == "000", "outsider got {status}");
    assert!(
        origin_hits(&origin, out_path).is_empty(),
        "outsider request reached the origin"
    );
    let recs = records_for(&mgr, &mut seen, out_path, 1);
    assert_eq!(recs[0].outcome, CacheOutcome::Denied);

    // --- purge one URL: the next request is a MISS ---
    let url = format!("http://{ORIGIN_IP}{one_mb}");
    // Through the control-protocol handler, as the daemon will route it.
    let body = serde_json::to_vec(&serde_json::json!({ "url": url })).unwrap();
    let (status, answer) = api::handle(&mut mgr, "POST", "/v1/cache/purge", &body).unwrap();
    assert_eq!(
        (status, answer),
        (200, serde_json::json!({"ok": true, "purged": 1}))
    );
    assert_eq!(
        mgr.purge_url(&format!("http://{ORIGIN_IP}/never/cached"))
            .unwrap(),
        0
    );
    assert!(mgr.purge_url("ftp://x y").is_err());
    get(one_mb);
    let recs = records_for(&mgr, &mut seen, one_mb, 3);
    settle();
    assert_eq!(recs[2].outcome, CacheOutcome::Miss, "{recs:#?}");
    // Stored again (a HIT) before the bad applies, so a MISS after them would mean they lost it.
    let stored = get_until_hit(&mgr, &mut seen, one_mb, 3).len();

    // --- bad applies change nothing and Squid keeps serving ---
    let conf_before = std::fs::read_to_string(mgr.paths().conf()).unwrap();
    let e = mgr
        .apply(
            &CacheConfig {
                memory_mb: 5_000_000,
                ..cache_config()
            },
            &served(),
            &ServedLimits::default(),
            &ns(),
        )
        .unwrap_err();
    assert_eq!(
        (e.code, e.field.as_deref()),
        ("invalid_config", Some("cache.memory_mb"))
    );
    let e = mgr
        .apply(
            &cache_config(),
            &["0.0.0.0/0".parse().unwrap()],
            &ServedLimits::default(),
            &ns(),
        )
        .unwrap_err();
    assert_eq!(e.field.as_deref(), Some("served_subnets[0]"));
    // No resolver: never rendered (Squid would fall back to the system's resolv.conf).
    let e = mgr
        .apply(&cache_config(), &served(), &ServedLimits::default(), &[])
        .unwrap_err();
    assert_eq!(
        (e.code, e.field.as_deref()),
        ("invalid_config", Some("dns.upstream"))
    );
    // Passes our checks but Squid's regcomp refuses it: caught by `squid -k parse`.
    let bad_regex = CacheConfig {
        refresh_patterns: vec![RefreshPattern {
            regex: "a{2".into(),
            case_insensitive: false,
            min_minutes: 0,
            percent: 20,
            max_minutes: 60,
            options: vec![],
        }],
        ..cache_config()
    };
    let e = mgr
        .apply(&bad_regex, &served(), &ServedLimits::default(), &ns())
        .unwrap_err();
    assert_eq!(e.code, "squid_parse", "{e:?}");
    assert!(e.message.contains("a{2"), "{e}");
    assert_eq!(
        std::fs::read_to_string(mgr.paths().conf()).unwrap(),
        conf_before
    );
    assert!(mgr.is_running());
    assert_eq!(
        get(one_mb).status,
        200,
        "still serving after a rejected apply"
    );
    let recs = records_for(&mgr, &mut seen, one_mb, stored + 1);
    assert_eq!(recs[stored].outcome, CacheOutcome::Hit, "{recs:#?}");

    // --- the same config again touches nothing ---
    assert_eq!(
        mgr.apply(&cache_config(), &served(), &ServedLimits::default(), &ns())
            .unwrap()
            .action,
        ApplyAction::Unchanged
    );

    // --- Squid killed outright: noticed, and ensure_running brings it back ---
    let pid: i32 = std::fs::read_to_string(mgr.paths().pid_file())
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    unsafe { libc::kill(-pid, libc::SIGKILL) };
    let deadline = Instant::now() + HUNG;
    while mgr.is_running() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(!mgr.is_running());
    assert!(mgr
        .stats()
        .problems
        .iter()
        .any(|p| p.contains("exited unexpectedly")));
    assert!(mgr.ensure_running().expect("restart"));
    assert!(!mgr.ensure_running().unwrap());
    assert_eq!(get(one_mb).status, 200);
    records_for(&mgr, &mut seen, one_mb, stored + 2);

    // --- a good change is applied with reconfigure: never-cache domain (by address) ---
    let never = CacheConfig {
        never_cache_domains: vec![ORIGIN_IP.into()],
        ..cache_config()
    };
    assert_eq!(
        mgr.apply(&never, &served(), &ServedLimits::default(), &ns())
            .unwrap()
            .action,
        ApplyAction::Reconfigured
    );
    let nc = "/o/3000/public/never";
    get(nc);
    settle();
    get(nc);
    let recs = records_for(&mgr, &mut seen, nc, 2);
    assert_eq!(
        outcomes(&recs),
        vec![CacheOutcome::Miss, CacheOutcome::Miss]
    );

    // --- purge everything: the big object is gone ---
    let (status, answer) =
        api::handle(&mut mgr, "POST", "/v1/cache/purge", br#"{"all": true}"#).unwrap();
    assert_eq!(status, 200, "{answer}");
    let purged = answer["purged"].as_u64().unwrap();
    assert!(purged >= 1, "purge all reported {purged}");
    assert!(mgr.is_running());
    get(big);
    let recs = records_for(&mgr, &mut seen, big, 3);
    assert_eq!(recs[2].outcome, CacheOutcome::Miss, "{recs:#?}");

    // --- switching the store to aufs restarts Squid on the new store, which then caches ---
    let aufs = CacheConfig {
        store: Store::Aufs,
        disk_mb: 512,
        ..cache_config()
    };
    assert_eq!(
        mgr.apply(&aufs, &served(), &ServedLimits::default(), &ns())
            .unwrap()
            .action,
        ApplyAction::Restarted
    );
    assert!(
        mgr.paths().store_dir(Store::Aufs).join("00").is_dir(),
        "squid -z made the aufs tree"
    );
    let on_aufs = "/o/300000/public/aufs";
    get(on_aufs);
    settle();
    get(on_aufs);
    let recs = records_for(&mgr, &mut seen, on_aufs, 2);
    assert_eq!(
        outcomes(&recs),
        vec![CacheOutcome::Miss, CacheOutcome::Hit],
        "{recs:#?}"
    );
    let (status, stats) = api::handle(&mut mgr, "GET", "/v1/cache/stats", b"").unwrap();
    assert_eq!(status, 200);
    assert_eq!(stats["disk_capacity_bytes"], 512u64 * 1024 * 1024);
    assert!(stats["hits"].as_u64().unwrap() >= 8, "{stats}");

    // --- log rotation: requests after `squid -k rotate` still reach the ring ---
    assert!(!mgr.rotate_logs_if_larger(u64::MAX).unwrap());
    mgr.rotate_logs().expect("rotate");
    let after = "/o/100/public/after-rotate";
    let deadline = Instant::now() + HUNG;
    // Squid reopens its logs asynchronously after the signal.
    while !mgr.paths().access_log().exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    get(after);
    records_for(&mgr, &mut seen, after, 1);
    let collected = perigee_squid::api::collect(&mgr);
    assert_eq!(collected.dropped, 0);

    // --- disabling stops Squid ---
    assert_eq!(
        mgr.apply(
            &CacheConfig::default(),
            &served(),
            &ServedLimits::default(),
            &ns()
        )
        .unwrap()
        .action,
        ApplyAction::Stopped
    );
    assert!(!mgr.is_running());
    assert!(
        !mgr.paths().pid_file().exists()
            || std::fs::read_to_string(mgr.paths().pid_file())
                .unwrap()
                .is_empty()
    );
    drop(mgr);
    let _ = std::fs::remove_dir_all(&dir);
}
