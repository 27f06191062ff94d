//! UnboundManager against the installed unbound (root): namespaces pd-mgr-g (the resolver)
//! and pd-mgr-s (its upstream, a counting responder), joined by a veth. Also: every rendered
//! variant passes the installed unbound-checkconf.
use perigee_dns::{
    check_served_subnets, parse_served_subnets, render, ApplyAction, DnsConfig, Forwarding,
    ManagerOptions, Policy, UnboundManager,
};
use perigee_testkit::dns::{address_of, Responder, TYPE_A};
use perigee_testkit::{wait_for, HUNG};
use std::time::Duration;

mod common;
use common::*;

fn config(cache_mb: u32) -> DnsConfig {
    DnsConfig {
        cache_mb,
        ..forwarding_to_upstream()
    }
}

#[test]
fn a_refused_config_leaves_the_running_one_serving_and_changes_keep_the_cache() {
    let lab = Lab::new("mgr");
    let dir = temp_dir("mgr");
    let up = in_ns(&lab.up, || {
        Responder::bind(&[format!("{UPSTREAM}:53").parse().unwrap()], Duration::ZERO)
    });
    let name = "keep.pd.example";
    let want = vec![address_of(name, TYPE_A)];
    let count = move || up.count(name);
    let p = paths(&dir);
    in_ns(&lab.gw, move || {
        let mut mgr = UnboundManager::new(ManagerOptions {
            paths: p.clone(),
            ..ManagerOptions::default()
        });
        let r = mgr
            .apply(&config(64), &served(), Forwarding::Direct)
            .unwrap();
        assert_eq!(r.action, ApplyAction::Started);
        assert!(mgr.is_running());
        assert_eq!(ask(name).unwrap(), want);
        assert_eq!(count(), 1);

        // --- a config unbound-checkconf refuses: the old one keeps serving ---
        let conf_before = std::fs::read_to_string(p.conf()).unwrap();
        let served_nets = check_served_subnets(&served()).unwrap();
        let good = render(
            &config(32),
            &served_nets,
            &config(32).upstreams().unwrap(),
            Forwarding::Direct,
            &p,
        );
        let refused = good.replacen("server:\n", "server:\n\tno-such-directive: yes\n", 1);
        let e = mgr
            .install(
                &Policy {
                    dns: config(32),
                    forwarding: Forwarding::Direct,
                },
                served_nets.clone(),
                refused,
            )
            .unwrap_err();
        assert_eq!(e.code, "unbound_checkconf", "{e:?}");
        assert!(e.message.contains("no-such-directive"), "{e}");
        assert_eq!(std::fs::read_to_string(p.conf()).unwrap(), conf_before);
        assert!(!p.candidate_conf().exists(), "the candidate is removed");
        assert!(mgr.is_running());
        assert_eq!(ask(name).unwrap(), want, "still serving, from its cache");
        assert_eq!(count(), 1);

        // --- a real change: restarted on the new config, the cache carried over ---
        let r = mgr
            .apply(&config(32), &served(), Forwarding::Direct)
            .unwrap();
        assert_eq!(r.action, ApplyAction::Restarted);
        assert!(r.cache_records_kept.unwrap_or(0) > 0, "{r:?}");
        assert!(std::fs::read_to_string(p.conf())
            .unwrap()
            .contains("rrset-cache-size: 21846k"));
        assert_eq!(ask(name).unwrap(), want);
        assert_eq!(count(), 1, "answered from the carried-over cache");
        assert_eq!(
            mgr.apply(&config(32), &served(), Forwarding::Direct)
                .unwrap()
                .action,
            ApplyAction::Unchanged
        );

        // --- unbound killed: noticed, brought back, counters kept ---
        let before = mgr.stats().queries;
        assert!(before >= 3, "{before}");
        let pid: i32 = std::fs::read_to_string(p.pid_file())
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        // SAFETY: killing the unbound this test's manager started.
        unsafe { libc::kill(pid, libc::SIGKILL) };
        wait_for("the manager noticing unbound gone", HUNG, || {
            (!mgr.is_running()).then_some(())
        });
        assert!(mgr
            .stats()
            .problems
            .iter()
            .any(|x| x.contains("exited unexpectedly")));
        assert!(mgr.ensure_running().unwrap(), "restarted");
        assert_eq!(ask(name).unwrap(), want);
        let s = mgr.stats();
        assert!(s.queries > before, "cumulative across runs: {s:?}");

        // --- flush: the next query goes to the upstream again ---
        let asked = count();
        mgr.flush(Some(name)).unwrap();
        assert_eq!(ask(name).unwrap(), want);
        assert_eq!(count(), asked + 1);

        // --- disabled: stopped, port 53 free ---
        assert_eq!(
            mgr.apply(&DnsConfig::default(), &served(), Forwarding::Direct)
                .unwrap()
                .action,
            ApplyAction::Stopped
        );
        assert!(!mgr.is_running());
        assert!(ask(name).is_err());
    });
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn rendered_variants_pass_unbound_checkconf() {
    let dir = temp_dir("checkconf");
    let p = paths(&dir);
    std::fs::create_dir_all(&p.state_dir).unwrap();
    std::fs::create_dir_all(&p.run_dir).unwrap();
    let served = parse_served_subnets(&["10.71.1.0/24".into(), "fd71:1::/64".into()]).unwrap();
    let operator: DnsConfig = serde_json::from_str(
        r#"{"enabled": true, "upstream": ["192.0.2.53", "2001:db8::53@5353", "127.0.0.1@5300"],
            "intercept": false, "cache_mb": 16384, "prefetch": false, "serve_stale": true,
            "stale_ttl_s": 604800, "stale_reply_ttl_s": 3600, "stale_client_timeout_ms": 10000,
            "min_ttl_s": 3600, "max_ttl_s": 604800, "max_negative_ttl_s": 0,
            "client_qps_limit": 100000}"#,
    )
    .unwrap();
    let validating = DnsConfig {
        dnssec_validation: true,
        private_domains: vec!["corp.example".parse().unwrap()],
        intercept_for: vec!["192.0.2.1".parse().unwrap()],
        ..config(64)
    };
    let variants = [
        (
            "default",
            DnsConfig {
                enabled: true,
                upstream: config(64).upstream,
                ..DnsConfig::default()
            },
            Forwarding::Direct,
        ),
        ("validating", validating.clone(), Forwarding::Direct),
        ("peer-path", validating, Forwarding::PeerPath),
        ("operator", operator, Forwarding::Direct),
        (
            "no-stale-small-no-rebinding",
            DnsConfig {
                serve_stale: false,
                cache_mb: 4,
                rebind_protection: false,
                ..config(4)
            },
            Forwarding::Direct,
        ),
    ];
    for (name, cfg, forwarding) in variants {
        cfg.validate().unwrap();
        let text = render(&cfg, &served, &cfg.upstreams().unwrap(), forwarding, &p);
        let file = dir.join(format!("{name}.conf"));
        std::fs::write(&file, text).unwrap();
        let out = std::process::Command::new("unbound-checkconf")
            .arg(&file)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{name}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
