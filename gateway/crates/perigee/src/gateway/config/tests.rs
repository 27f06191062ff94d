use super::*;
use std::net::IpAddr;

fn with(path: &[&str], v: serde_json::Value) -> Result<GatewayConfig, ConfigError> {
    let mut j = example_json();
    let mut cur = &mut j;
    for p in &path[..path.len() - 1] {
        cur = match p.parse::<usize>() {
            Ok(i) => &mut cur[i],
            Err(_) => &mut cur[*p],
        };
    }
    let last = path[path.len() - 1];
    match last.parse::<usize>() {
        Ok(i) => cur[i] = v,
        Err(_) => cur[last] = v,
    }
    from_value(j)
}

#[test]
fn example_is_valid() {
    from_value(example_json()).unwrap();
}

/// `perigee config example` is shown to operators: documentation addresses only, nothing of satlab's
/// (10.71.0.0/16, fd71::/16), which an operator might copy onto a real network.
#[test]
fn example_names_no_lab_address() {
    let text = example_json().to_string();
    for lab in ["10.71.", "fd71:"] {
        assert!(
            !text.contains(lab),
            "example config holds a lab address ({lab}): {text}"
        );
    }
}

fn cache_field(cache: serde_json::Value) -> String {
    with(&["cache"], cache).unwrap_err().field
}

#[test]
fn cache_section_is_the_squid_policy_with_field_paths() {
    let ok = with(
        &["cache"],
        serde_json::json!({"enabled": true, "port": 3129, "admin_port": 3131,
                           "max_memory_object_mb": 16, "store": "aufs"}),
    )
    .unwrap();
    assert_eq!(ok.cache.admin_port, 3131);
    // Defaults for what the API does not send.
    let d = with(&["cache"], serde_json::json!({"enabled": true})).unwrap();
    assert_eq!((d.cache.port, d.cache.admin_port), (3129, 3130));
    assert_eq!(
        cache_field(serde_json::json!({"port": 3130, "admin_port": 3130})),
        "cache.admin_port"
    );
    assert_eq!(cache_field(serde_json::json!({"port": 7071})), "cache.port");
    assert_eq!(
        cache_field(serde_json::json!({"admin_port": 7071})),
        "cache.admin_port"
    );
    assert_eq!(
        cache_field(serde_json::json!({"store": "ufs"})),
        "cache.store"
    );
    assert_eq!(cache_field(serde_json::json!({"prot": 1})), "cache.prot");
    assert_eq!(
        cache_field(serde_json::json!({"refresh_patterns": [
            {"regex": "a b", "min_minutes": 0, "percent": 0, "max_minutes": 0}]})),
        "cache.refresh_patterns[0].regex"
    );
    assert_eq!(
        cache_field(serde_json::json!({"max_memory_object_mb": 10000, "max_object_mb": 100})),
        "cache.max_memory_object_mb"
    );
}

fn dns_field(dns: serde_json::Value) -> String {
    with(&["dns"], dns).unwrap_err().field
}

#[test]
fn dns_section_is_the_resolver_policy_with_field_paths() {
    let ok = with(
        &["dns"],
        serde_json::json!({"enabled": true, "upstream": ["10.71.3.53", "fd71:3::53@5353"],
                           "cache_mb": 128}),
    )
    .unwrap();
    assert_eq!(ok.dns.cache_mb, 128);
    assert_eq!(
        ok.squid_nameservers(),
        vec![IpAddr::from([127, 0, 0, 1])],
        "Squid resolves through the gateway's own resolver"
    );
    let d = with(&["dns"], serde_json::json!({})).unwrap();
    assert!(!d.dns.enabled && d.dns.upstream.is_empty());
    assert_eq!(
        dns_field(serde_json::json!({"enabled": true})),
        "dns.upstream"
    );
    assert_eq!(
        dns_field(serde_json::json!({"upstream": ["resolver.example"]})),
        "dns.upstream[0]"
    );
    assert_eq!(
        dns_field(serde_json::json!({"cache_mb": 0})),
        "dns.cache_mb"
    );
    assert_eq!(dns_field(serde_json::json!({"cach_mb": 1})), "dns.cach_mb");
    // Port 53 belongs to the resolver when it runs.
    let mut j = example_json();
    j["dns"] = serde_json::json!({"enabled": true, "upstream": ["10.71.3.53"]});
    j["cache"]["admin_port"] = 53.into();
    assert_eq!(from_value(j.clone()).unwrap_err().field, "cache.admin_port");
    j["cache"]["admin_port"] = 3130.into();
    j["splitter"]["tproxy_port"] = 53.into();
    assert_eq!(
        from_value(j.clone()).unwrap_err().field,
        "splitter.tproxy_port"
    );
    // Never an open resolver.
    j["splitter"]["tproxy_port"] = 7071.into();
    j["served_subnets"] = serde_json::json!(["10.71.1.0/24", "::/0"]);
    assert_eq!(from_value(j).unwrap_err().field, "served_subnets[1]");
}

#[test]
fn the_cache_always_has_an_explicit_resolver() {
    let mut j = example_json();
    j["cache"]["enabled"] = true.into();
    j["dns"] = serde_json::json!({});
    let e = from_value(j.clone()).unwrap_err();
    assert_eq!(e.field, "dns.upstream");
    assert!(e.message.contains("needs a resolver"), "{}", e.message);
    // dns off: Squid uses the upstreams themselves, which must be on port 53.
    j["dns"] = serde_json::json!({"upstream": ["10.71.3.53", "fd71:3::53"]});
    let c = from_value(j.clone()).unwrap();
    assert_eq!(
        c.squid_nameservers(),
        vec![
            "10.71.3.53".parse::<IpAddr>().unwrap(),
            "fd71:3::53".parse::<IpAddr>().unwrap()
        ]
    );
    j["dns"] = serde_json::json!({"upstream": ["10.71.3.53", "10.71.3.54@5353"]});
    assert_eq!(from_value(j.clone()).unwrap_err().field, "dns.upstream[1]");
    // dns on: any port upstream is fine, Squid asks the gateway's resolver.
    j["dns"]["enabled"] = true.into();
    from_value(j).unwrap();
}

#[test]
fn enabled_cache_refuses_a_served_slash_zero() {
    let mut j = example_json();
    j["cache"]["enabled"] = true.into();
    j["served_subnets"] = serde_json::json!(["10.71.1.0/24", "0.0.0.0/0"]);
    assert_eq!(from_value(j).unwrap_err().field, "served_subnets[1]");
}

#[test]
fn served_subnets_are_judged_as_address_space_with_or_without_the_cache() {
    for cache in [false, true] {
        let set = |list: serde_json::Value| {
            let mut j = example_json();
            j["cache"]["enabled"] = cache.into();
            j["served_subnets"] = list;
            from_value(j)
        };
        for wide in [
            serde_json::json!(["0.0.0.0/1", "128.0.0.0/1"]),
            serde_json::json!(["8000::/2", "c000::/2"]),
            serde_json::json!(["10.0.0.0/8", "11.0.0.0/8"]),
        ] {
            assert_eq!(
                set(wide.clone()).unwrap_err().field,
                "served_subnets",
                "{wide}"
            );
        }
        for mapped in ["::ffff:0:0/96", "::ffff:10.71.1.0/120", "::/64"] {
            let e = set(serde_json::json!(["10.71.1.0/24", mapped])).unwrap_err();
            assert_eq!(e.field, "served_subnets[1]", "{mapped}");
        }
        let c = set(serde_json::json!([
            "10.71.1.9/24",
            "10.71.0.0/16",
            "fd71:1::5/64"
        ]))
        .unwrap();
        assert_eq!(
            c.served().iter().map(|c| c.to_string()).collect::<Vec<_>>(),
            ["10.71.0.0/16", "fd71:1::/64"]
        );
    }
    // The operator may allow more, within bounds.
    let mut j = example_json();
    j["served_subnets"] = serde_json::json!(["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"]);
    assert_eq!(from_value(j.clone()).unwrap_err().field, "served_subnets");
    j["served_limits"] = serde_json::json!({"ipv4_prefix": 7});
    from_value(j.clone()).unwrap();
    j["served_limits"] = serde_json::json!({"ipv4_prefix": 0});
    assert_eq!(
        from_value(j.clone()).unwrap_err().field,
        "served_limits.ipv4_prefix"
    );
    j["served_limits"] = serde_json::json!({"ipv6_prefix": 129});
    assert_eq!(
        from_value(j).unwrap_err().field,
        "served_limits.ipv6_prefix"
    );
}

#[test]
fn v4_mapped_prefixes_are_refused_wherever_a_cidr_is_written() {
    assert!(parse_cidr("::ffff:10.0.0.0/104").is_err());
    assert!(parse_cidr("::ffff:0:0/96").is_err());
    assert!(parse_cidr("::ffff:10.0.0.1").is_err());
    parse_cidr("::/0").unwrap(); // contains the mapped range, but is not written as one
    let e = with(
        &["classes", "0", "match", "src", "0"],
        "::ffff:10.71.1.0/120".into(),
    )
    .unwrap_err();
    assert_eq!(e.field, "classes[0].match.src[0]");
}

#[test]
fn unsupported_congestion_control_names_field() {
    let e = with(&["satellite", "congestion_control"], "vegas".into()).unwrap_err();
    assert_eq!(e.field, "satellite.congestion_control");
    let e = with(
        &["classes", "0", "satellite", "congestion_control"],
        "westwood".into(),
    )
    .unwrap_err();
    assert_eq!(e.field, "classes[0].satellite.congestion_control");
    with(&["satellite", "congestion_control"], "bbr".into()).unwrap();
    with(&["satellite", "congestion_control"], "hybla_ld".into()).unwrap();
    with(
        &["classes", "0", "satellite", "congestion_control"],
        "hybla_ld".into(),
    )
    .unwrap();
}

#[test]
fn terrestrial_congestion_control_is_empty_or_supported() {
    let cfg = from_value(example_json()).unwrap();
    assert_eq!(
        cfg.terrestrial.congestion_control, None,
        "default: system default"
    );
    let e = with(&["terrestrial", "congestion_control"], "vegas".into()).unwrap_err();
    assert_eq!(e.field, "terrestrial.congestion_control");
    let cfg = with(&["terrestrial", "congestion_control"], "cubic".into()).unwrap();
    assert_eq!(
        cfg.terrestrial.congestion_control,
        Some(CongestionControl::Cubic)
    );
    let back = serde_json::to_value(&cfg.terrestrial).unwrap();
    assert_eq!(back["congestion_control"], "cubic");
    let none = serde_json::to_value(Terrestrial::default()).unwrap();
    assert_eq!(
        none["congestion_control"], "",
        "the system default is written as \"\""
    );
    let e = with(&["terrestrial", "cc"], "cubic".into()).unwrap_err();
    assert!(e.field.starts_with("terrestrial"), "{}", e.field);
}

#[test]
fn bad_cidr_names_field() {
    let e = with(&["served_subnets", "1"], "fd71::1::/64".into()).unwrap_err();
    assert_eq!(e.field, "served_subnets[1]");
    let e = with(&["classes", "0", "match", "src", "0"], "10.0.0.0/33".into()).unwrap_err();
    assert_eq!(e.field, "classes[0].match.src[0]");
}

#[test]
fn bad_port_range_names_field() {
    let e = with(
        &["classes", "0", "match", "dports", "1"],
        "9000-8000".into(),
    )
    .unwrap_err();
    assert_eq!(e.field, "classes[0].match.dports[1]");
    let e = with(&["bypass", "2", "ports", "0"], "70000".into()).unwrap_err();
    assert_eq!(e.field, "bypass[2].ports[0]");
    let e = with(&["splitter", "tproxy_port"], 0.into()).unwrap_err();
    assert_eq!(e.field, "splitter.tproxy_port");
}

#[test]
fn unknown_field_names_path() {
    let e = with(&["splitter", "tproxy_pot"], 1.into()).unwrap_err();
    assert_eq!(e.field, "splitter.tproxy_pot");
    assert!(e.message.contains("tproxy_pot"), "{}", e.message);
    let e = with(&["bogus"], 1.into()).unwrap_err();
    assert!(e.message.contains("bogus"));
}

#[test]
fn duplicate_and_conflicting_names() {
    let mut j = example_json();
    let c = j["classes"][0].clone();
    j["classes"].as_array_mut().unwrap().push(c);
    assert_eq!(from_value(j).unwrap_err().field, "classes[1].name");
    let e = with(&["bypass", "1", "name"], "ipsec-esp".into()).unwrap_err();
    assert_eq!(e.field, "bypass[1].name");
    let e = with(&["interfaces", "satellite"], "lan0".into()).unwrap_err();
    assert_eq!(e.field, "interfaces.satellite");
    let e = with(&["interfaces", "lan"], serde_json::json!(["lan0", "lan0"])).unwrap_err();
    assert_eq!(e.field, "interfaces.lan[1]");
}

#[test]
fn sysctl_allow_list_and_route_family() {
    let e = with(&["sysctls"], serde_json::json!({"kernel.panic": "1"})).unwrap_err();
    assert_eq!(e.field, "sysctls.kernel.panic");
    let e = with(&["satellite", "routes", "0", "via"], "fd71:2::2".into()).unwrap_err();
    assert_eq!(e.field, "satellite.routes[0].via");
    let e = with(&["role"], "satellite".into()).unwrap_err();
    assert_eq!(e.field, "role");
}

#[test]
fn hybla_cwnd_max_bounds() {
    let c = with(&["hybla", "cwnd_max"], 5180.into()).unwrap();
    assert_eq!(c.hybla.cwnd_max, 5180);
    with(&["hybla", "cwnd_max"], 65536.into()).unwrap();
    let e = with(&["hybla", "cwnd_max"], 65537.into()).unwrap_err();
    assert_eq!(e.field, "hybla.cwnd_max");
    let e = with(&["hybla", "cwnd_max"], (-1).into()).unwrap_err();
    assert_eq!(e.field, "hybla.cwnd_max");
    let d = with(&["hybla"], serde_json::json!({})).unwrap();
    assert_eq!(d.hybla.cwnd_max, 0);
}

#[test]
fn strict_numbers_names_and_nulls() {
    // No sign, no spaces, no netmask: the API's parsers are as strict.
    assert!(parse_cidr("10.0.0.0/+8").is_err());
    assert!(parse_ports("+80").is_err());
    assert!(parse_ports(" 80").is_err());
    assert!(parse_ports("000080").is_err());
    let e = with(&["revision"], serde_json::Value::Null).unwrap_err();
    assert_eq!(e.field, "revision");
    let e = with(
        &["classes", "0", "match", "protocol"],
        serde_json::Value::Null,
    )
    .unwrap_err();
    assert_eq!(e.field, "classes[0].match.protocol");
    let e = with(&["classes", "0", "name"], "-web".into()).unwrap_err();
    assert_eq!(e.field, "classes[0].name");
    let e = with(&["classes", "0", "priority"], 65536.into()).unwrap_err();
    assert_eq!(e.field, "classes[0].priority");
    // A missing protocol is tcp (ports allowed), like the API's default.
    let mut j = example_json();
    j["classes"][0]["match"]
        .as_object_mut()
        .unwrap()
        .remove("protocol");
    let c = from_value(j).unwrap();
    assert_eq!(c.classes[0].matcher.protocol, MatchProtocol::Tcp);
    // Host bits do not make a second route to the same prefix.
    let e = with(
        &["satellite", "routes", "1"],
        serde_json::json!({"dst": "198.51.100.7/24", "via": "203.0.113.2"}),
    )
    .unwrap_err();
    assert_eq!(e.field, "satellite.routes[1].dst");
}

#[test]
fn shaping_defaults_off_and_needs_a_rate_when_enabled() {
    let d = from_value(example_json()).unwrap();
    assert_eq!(d.shaping, Shaping::default());
    assert!(!d.shaping.enabled);
    assert_eq!(d.shaping.queue_packets, 1000);
    let e = with(&["shaping"], serde_json::json!({"enabled": true})).unwrap_err();
    assert_eq!(e.field, "shaping.rate_bps");
    assert!(e.message.contains("required"), "{}", e.message);
    let c = with(
        &["shaping"],
        serde_json::json!({"enabled": true, "rate_bps": 1_536_000}),
    )
    .unwrap();
    assert_eq!(
        (c.shaping.rate_bps, c.shaping.overhead_bytes),
        (1_536_000, 0)
    );
    // A disabled section may keep its rate for later.
    with(
        &["shaping"],
        serde_json::json!({"enabled": false, "rate_bps": 50_000_000}),
    )
    .unwrap();
}

#[test]
fn shaping_bounds_name_the_field() {
    let field = |v: serde_json::Value| with(&["shaping"], v).unwrap_err().field;
    for (bad, name) in [
        (serde_json::json!({"rate_bps": 7_999}), "shaping.rate_bps"),
        (
            serde_json::json!({"rate_bps": 100_000_000_001_u64}),
            "shaping.rate_bps",
        ),
        (serde_json::json!({"rate_bps": -1}), "shaping.rate_bps"),
        (
            serde_json::json!({"overhead_bytes": 257}),
            "shaping.overhead_bytes",
        ),
        (
            serde_json::json!({"queue_packets": 15}),
            "shaping.queue_packets",
        ),
        (
            serde_json::json!({"queue_packets": 100_001}),
            "shaping.queue_packets",
        ),
        (serde_json::json!({"enabled": 1}), "shaping.enabled"),
        (serde_json::json!({"rate": 1_536_000}), "shaping.rate"),
    ] {
        assert_eq!(field(bad.clone()), name, "{bad}");
    }
    for good in [
        serde_json::json!({"enabled": true, "rate_bps": 8_000, "queue_packets": 16}),
        serde_json::json!({"enabled": true, "rate_bps": 100_000_000_000_u64,
                           "overhead_bytes": 256, "queue_packets": 100_000}),
    ] {
        with(&["shaping"], good.clone()).unwrap_or_else(|e| panic!("{good}: {e}"));
    }
}

const HUB_FP: &str = "sha256:00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";
const T1_FP: &str = "sha256:1111111111111111111111111111111111111111111111111111111111111111";
const T2_FP: &str = "sha256:2222222222222222222222222222222222222222222222222222222222222222";

fn peer(role: &str, peer: serde_json::Value) -> Result<GatewayConfig, ConfigError> {
    let mut j = example_json();
    j["role"] = role.into();
    j["peer"] = peer;
    from_value(j)
}

fn terminal(name: &str, fps: &[&str], prefixes: &[&str]) -> serde_json::Value {
    serde_json::json!({"name": name, "fingerprints": fps, "prefixes": prefixes})
}

#[test]
fn peer_defaults_off_and_a_terminal_needs_its_hubs_address_and_key() {
    let d = from_value(example_json()).unwrap();
    assert_eq!(d.peer, Peer::default());
    assert_eq!((d.peer.port, d.peer.pool_size), (7072, 8));
    assert_eq!(d.egress, Egress::default());
    assert!(d.splitter.nodelay, "TCP_NODELAY is on by default");
    assert_eq!(d.quic, QuicPolicy::Fallback, "the benchmark chose fallback");
    let e = peer(
        "terminal",
        serde_json::json!({"enabled": true, "hub": "10.71.2.2"}),
    )
    .unwrap_err();
    assert_eq!(e.field, "peer.hub_fingerprints");
    let e = peer(
        "terminal",
        serde_json::json!({"enabled": true, "hub_fingerprints": [HUB_FP]}),
    )
    .unwrap_err();
    assert_eq!(e.field, "peer.hub");
    let c = peer(
        "terminal",
        serde_json::json!({"enabled": true, "hub_fingerprints": [HUB_FP], "hub": "fd71:2::2"}),
    )
    .unwrap();
    assert_eq!(c.peer.hub_addr(), Some("fd71:2::2".parse().unwrap()));
    // A hub enrolls terminals and binds addresses; it names no hub and pins none.
    let c = peer(
        "hub",
        serde_json::json!({"enabled": true, "listen": ["10.71.2.2"],
            "terminals": [terminal("site-1", &[T1_FP, T2_FP], &["10.71.1.0/24", "fd71:1::/64"])]}),
    )
    .unwrap();
    assert_eq!(c.peer.terminals[0].fingerprints.len(), 2);
    // With no terminal enrolled it serves nobody, which is valid.
    peer("hub", serde_json::json!({"enabled": true})).unwrap();
    for (bad, field) in [
        (serde_json::json!({"hub": "10.71.2.2"}), "peer.hub"),
        (
            serde_json::json!({"hub_fingerprints": [HUB_FP]}),
            "peer.hub_fingerprints",
        ),
    ] {
        assert_eq!(peer("hub", bad).unwrap_err().field, field);
    }
    for (bad, field) in [
        (serde_json::json!({"listen": ["10.71.2.1"]}), "peer.listen"),
        (
            serde_json::json!({"terminals": [terminal("a", &[T1_FP], &["10.71.1.0/24"])]}),
            "peer.terminals",
        ),
    ] {
        assert_eq!(peer("terminal", bad).unwrap_err().field, field);
    }
}

#[test]
fn enrolled_terminals_have_their_own_keys_and_prefixes() {
    let hub = |terminals: serde_json::Value| {
        peer(
            "hub",
            serde_json::json!({"enabled": true, "terminals": terminals}),
        )
        .unwrap_err()
    };
    for (terminals, field, says) in [
        (
            serde_json::json!([
                terminal("a", &[T1_FP], &["10.71.1.0/24"]),
                terminal("a", &[T2_FP], &["10.72.1.0/24"])
            ]),
            "peer.terminals[1].name",
            "twice",
        ),
        (
            serde_json::json!([
                terminal("a", &[T1_FP], &["10.71.1.0/24"]),
                terminal("b", &[T1_FP], &["10.72.1.0/24"])
            ]),
            "peer.terminals[1].fingerprints[0]",
            "one key, one terminal",
        ),
        (
            serde_json::json!([
                terminal("a", &[T1_FP], &["10.71.0.0/16"]),
                terminal("b", &[T2_FP], &["10.71.1.0/24"])
            ]),
            "peer.terminals[1].prefixes[0]",
            "overlaps 10.71.0.0/16 of terminal 'a'",
        ),
        (
            serde_json::json!([terminal("a", &[], &["10.71.1.0/24"])]),
            "peer.terminals[0].fingerprints",
            "1 to 2",
        ),
        (
            serde_json::json!([terminal("a", &[T1_FP, T2_FP, HUB_FP], &["10.71.1.0/24"])]),
            "peer.terminals[0].fingerprints",
            "1 to 2",
        ),
        (
            serde_json::json!([terminal("a", &["sha256:ABC"], &["10.71.1.0/24"])]),
            "peer.terminals[0].fingerprints[0]",
            "not a fingerprint",
        ),
        (
            serde_json::json!([terminal("a", &[T1_FP], &[])]),
            "peer.terminals[0].prefixes",
            "prefixes of its site",
        ),
        (
            serde_json::json!([terminal("a", &[T1_FP], &["0.0.0.0/0"])]),
            "peer.terminals[0].prefixes[0]",
            "never a /0",
        ),
    ] {
        let e = hub(terminals.clone());
        assert_eq!(e.field, field, "{terminals}");
        assert!(e.message.contains(says), "{}", e.message);
    }
}

#[test]
fn peer_fields_are_checked_even_when_disabled() {
    let field = |role: &str, v: serde_json::Value| peer(role, v.clone()).unwrap_err().field;
    for (role, bad, name) in [
        (
            "terminal",
            serde_json::json!({"hub_fingerprints": ["abc"]}),
            "peer.hub_fingerprints[0]",
        ),
        (
            "terminal",
            serde_json::json!({"hub_fingerprints": [HUB_FP, HUB_FP]}),
            "peer.hub_fingerprints[1]",
        ),
        (
            "terminal",
            serde_json::json!({"hub": "hub.example"}),
            "peer.hub",
        ),
        (
            "terminal",
            serde_json::json!({"hub": "10.71.2.2:7072"}),
            "peer.hub",
        ),
        (
            "terminal",
            serde_json::json!({"hub": "0.0.0.0"}),
            "peer.hub",
        ),
        (
            "terminal",
            serde_json::json!({"hub": "224.0.0.1"}),
            "peer.hub",
        ),
        ("terminal", serde_json::json!({"port": 0}), "peer.port"),
        ("terminal", serde_json::json!({"port": 65536}), "peer.port"),
        (
            "terminal",
            serde_json::json!({"pool_size": 0}),
            "peer.pool_size",
        ),
        (
            "terminal",
            serde_json::json!({"pool_size": 257}),
            "peer.pool_size",
        ),
        (
            "hub",
            serde_json::json!({"listen": ["0.0.0.0"]}),
            "peer.listen[0]",
        ),
        (
            "hub",
            serde_json::json!({"listen": ["10.71.2.2", "10.71.2.2"]}),
            "peer.listen[1]",
        ),
        (
            "hub",
            serde_json::json!({"listen": ["not-an-ip"]}),
            "peer.listen[0]",
        ),
        ("hub", serde_json::json!({"port": 7071}), "peer.port"),
        ("hub", serde_json::json!({"port": 3129}), "peer.port"),
        (
            "terminal",
            serde_json::json!({"enabled": "yes"}),
            "peer.enabled",
        ),
        // The shared key is gone: a config that still carries one is refused, naming it.
        ("terminal", serde_json::json!({"key": "ab"}), "peer.key"),
        ("hub", serde_json::json!({"allowed": []}), "peer.allowed"),
    ] {
        assert_eq!(field(role, bad.clone()), name, "{role} {bad}");
    }
    // At a terminal the port is the hub's: it may equal the terminal's own listeners.
    peer("terminal", serde_json::json!({"port": 7071})).unwrap();
}

#[test]
fn egress_lists_are_cidrs() {
    let mut j = example_json();
    j["egress"] = serde_json::json!({"allow": ["10.0.0.0/8"], "deny": ["192.168.0.0/33"]});
    assert_eq!(from_value(j).unwrap_err().field, "egress.deny[0]");
    let mut j = example_json();
    j["egress"] = serde_json::json!({"allow": ["10.0.0.0/8"], "deny": ["192.168.0.0/16"]});
    assert_eq!(from_value(j).unwrap().egress.deny.len(), 1);
}

#[test]
fn quic_policy_and_nodelay_parse_strictly() {
    let c = with(&["quic"], "fallback".into()).unwrap();
    assert_eq!(c.quic, QuicPolicy::Fallback);
    assert_eq!(with(&["quic"], "block".into()).unwrap_err().field, "quic");
    assert_eq!(
        with(&["quic"], serde_json::Value::Null).unwrap_err().field,
        "quic"
    );
    let c = with(&["splitter", "nodelay"], false.into()).unwrap();
    assert!(!c.splitter.nodelay);
    let e = with(&["splitter", "nodelay"], 0.into()).unwrap_err();
    assert_eq!(e.field, "splitter.nodelay");
}

#[test]
fn cidr_and_port_matching() {
    let c = parse_cidr("10.71.1.0/24").unwrap();
    assert!(c.contains("10.71.1.200".parse().unwrap()));
    assert!(!c.contains("10.71.2.1".parse().unwrap()));
    let c6 = parse_cidr("fd71:1::/64").unwrap();
    assert!(c6.contains("fd71:1::10".parse().unwrap()));
    assert!(!c6.contains("10.71.1.1".parse().unwrap()));
    assert!(parse_ports("8000-8080").unwrap().contains(8080));
    assert!(parse_ports("0").is_err());
}

#[test]
fn the_satellite_leg_defaults_to_hybla_ld_with_hybla_behind_it() {
    // A config that names no congestion control gets the loss-tolerant one (docs/hybla.md).
    let mut v = example_json();
    v["satellite"]
        .as_object_mut()
        .unwrap()
        .remove("congestion_control");
    let cfg = from_value(v).unwrap();
    assert_eq!(cfg.satellite.congestion_control, CongestionControl::HyblaLd);
    assert_eq!(
        CongestionControl::HyblaLd.fallback(),
        Some(CongestionControl::Hybla)
    );
    assert_eq!(CongestionControl::Hybla.fallback(), None);
    assert_eq!(CongestionControl::Bbr.fallback(), None);
}

#[test]
fn a_terminal_resolver_reaches_its_upstream_through_the_peer_path_when_it_is_on() {
    use perigee_dns::Forwarding;
    let mut j = example_json();
    j["dns"] = serde_json::json!({"enabled": true, "upstream": ["10.71.3.53"]});
    let mut c = from_value(j).unwrap();
    assert_eq!(c.dns_forwarding(), Forwarding::Direct);
    let clear = c.dns_in_clear().expect("the peer path is off: in clear");
    assert!(
        clear.contains("in clear") && clear.contains("10.71.3.53@53"),
        "{clear}"
    );
    // The peer path's own validation is its section's; here only the switch matters.
    c.peer.enabled = true;
    assert_eq!(c.dns_forwarding(), Forwarding::PeerPath);
    assert_eq!(c.dns_in_clear(), None);
    // Squid asking the upstream itself (dns off) crosses in clear whatever the peer path does.
    c.dns.enabled = false;
    c.cache.enabled = true;
    assert_eq!(c.dns_forwarding(), Forwarding::Direct);
    assert!(c.dns_in_clear().unwrap().contains("Squid's lookups"));
    // A hub's upstream is on its own side of the satellite.
    c.role = Role::Hub;
    c.dns.enabled = true;
    assert_eq!(c.dns_forwarding(), Forwarding::Direct);
    assert_eq!(c.dns_in_clear(), None);
}

#[test]
fn dns_interception_and_rebinding_fields_keep_their_paths_in_the_gateway_config() {
    assert_eq!(
        dns_field(serde_json::json!({"intercept_for": ["127.0.0.1"]})),
        "dns.intercept_for[0]"
    );
    assert_eq!(
        dns_field(serde_json::json!({"private_domains": ["corp example"]})),
        "dns.private_domains[0]"
    );
    let ok = with(
        &["dns"],
        serde_json::json!({"enabled": true, "upstream": ["10.71.3.53"],
                           "intercept_for": ["192.0.2.1"], "private_domains": ["corp.example"],
                           "rebind_protection": false, "dnssec_validation": false}),
    )
    .unwrap();
    assert!(!ok.dns.rebind_protection && !ok.dns.dnssec_validation);
}
