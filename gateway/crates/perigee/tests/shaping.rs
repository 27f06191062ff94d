//! The satellite interface's shaper (HTB with a pfifo leaf, network control in its own class):
//! applied, changed, rolled back with the rest of a failed apply, removed, and after a SIGKILL
//! taken over or removed by the next daemon.
mod common;
use common::*;
use std::time::Instant;

/// `tc -j <what> show dev <dev>` in the gateway namespace, as JSON.
fn tc_show(t: &Topo, what: &str, dev: &str) -> Vec<serde_json::Value> {
    let out = run(&[
        "ip", "netns", "exec", &t.g, "tc", "-j", what, "show", "dev", dev,
    ]);
    serde_json::from_str::<serde_json::Value>(&out)
        .unwrap_or_else(|e| panic!("tc -j {what} show dev {dev}: {e}: {out}"))
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// The root qdisc of `dev` as "kind handle".
fn root_qdisc(t: &Topo, dev: &str) -> String {
    tc_show(t, "qdisc", dev)
        .iter()
        .find(|q| q["root"] == true)
        .map(|q| {
            format!(
                "{} {}",
                q["kind"].as_str().unwrap(),
                q["handle"].as_str().unwrap()
            )
        })
        .unwrap_or_default()
}

/// The shaper's class rate as `tc class show` prints it (iproute2 6.1 has no JSON for HTB
/// classes) and its pfifo leaf's limit.
fn shaper_rate_and_limit(t: &Topo, dev: &str) -> (String, u64) {
    let classes = run(&[
        "ip", "netns", "exec", &t.g, "tc", "class", "show", "dev", dev,
    ]);
    let class = classes
        .lines()
        .find(|l| l.starts_with("class htb 5047:1 root"))
        .unwrap_or_else(|| panic!("no class 5047:1 on {dev}: {classes}"));
    let words: Vec<&str> = class.split_whitespace().collect();
    let at = |w: &str| words[words.iter().position(|x| *x == w).unwrap() + 1].to_string();
    assert_eq!(at("rate"), at("ceil"), "{class}");
    let qdiscs = tc_show(t, "qdisc", dev);
    let leaf = qdiscs
        .iter()
        .find(|q| q["parent"] == "5047:1")
        .unwrap_or_else(|| panic!("no leaf under 5047:1 on {dev}: {qdiscs:?}"));
    assert_eq!(leaf["kind"], "pfifo", "{leaf}");
    (at("rate"), leaf["options"]["limit"].as_u64().unwrap())
}

/// The u32 filters that send network control to the shaper's class 5047:2, and the packets
/// that class has sent.
fn control_filters_and_sent(t: &Topo, dev: &str) -> (usize, u64) {
    let filters = run(&[
        "ip", "netns", "exec", &t.g, "tc", "filter", "show", "dev", dev,
    ]);
    let classes = run(&[
        "ip", "netns", "exec", &t.g, "tc", "-s", "class", "show", "dev", dev,
    ]);
    let after = classes
        .split("class htb 5047:2 ")
        .nth(1)
        .unwrap_or_else(|| panic!("no class 5047:2 on {dev}: {classes}"));
    let words: Vec<&str> = after.split_whitespace().collect();
    let sent = words[words.iter().position(|w| *w == "bytes").unwrap() + 1];
    (
        filters.matches("flowid 5047:2").count(),
        sent.parse().unwrap(),
    )
}

#[test]
fn shaping_applies_rolls_back_and_is_removed() {
    let Some(_g) = serial() else { return };
    let mut t = Topo::new("sp");
    let mut cfg = t.config();
    t.start(&cfg);
    assert_eq!(root_qdisc(&t, "sat0"), "noqueue 0:", "off by default");
    let _rx = server(&t.s, sa(SERVER4, 5001));
    // On: everything leaving sat0 (here the upload's satellite leg) is held to the rate.
    cfg["revision"] = "t2".into();
    cfg["shaping"] =
        serde_json::json!({"enabled": true, "rate_bps": 16_000_000, "queue_packets": 200});
    let (st, v) = control(&t.sock(), "PUT", "/v1/config", Some(&cfg)).unwrap();
    assert_eq!(st, 200, "{v}");
    assert_eq!(root_qdisc(&t, "sat0"), "htb 5047:");
    assert_eq!(shaper_rate_and_limit(&t, "sat0"), ("16Mbit".into(), 200));
    // Network control (CS6, as BGP and BFD mark it) goes through its own class.
    let (filters, sent_before) = control_filters_and_sent(&t, "sat0");
    assert_eq!(filters, 2, "one u32 filter for IPv4, one for IPv6");
    run(&[
        "ip", "netns", "exec", &t.g, "ping", "-c", "3", "-i", "0.2", "-Q", "0xc0", SERVER4,
    ]);
    let (_, sent_after) = control_filters_and_sent(&t, "sat0");
    assert!(
        sent_after >= sent_before + 3,
        "{sent_before} -> {sent_after}"
    );
    let n = 2 << 20;
    let started = Instant::now();
    transfer_up(&t, sa(SERVER4, 5001), n);
    let took = started.elapsed().as_secs_f64();
    let wire = n as f64 * 8.0 / 16e6; // payload alone, at the shaped rate
    eprintln!("{n} B through a 16 Mbit/s shaper in {took:.2} s (payload at the rate: {wire:.2} s)");
    // Held to the rate: never faster (a machine cannot make it so); slower only means a busy machine.
    assert!(
        took > 0.9 * wire,
        "{n} B through a 16 Mbit/s shaper in {took:.2} s"
    );
    // A new rate changes the class in place.
    cfg["revision"] = "t3".into();
    cfg["shaping"]["rate_bps"] = 24_000_000.into();
    let (st, v) = control(&t.sock(), "PUT", "/v1/config", Some(&cfg)).unwrap();
    assert_eq!(st, 200, "{v}");
    assert_eq!(shaper_rate_and_limit(&t, "sat0"), ("24Mbit".into(), 200));
    assert_eq!(
        control_filters_and_sent(&t, "sat0").0,
        2,
        "a re-apply adds none"
    );
    // Moving the satellite to an interface with somebody else's root qdisc fails at the
    // shaping step, after nft and routes applied: all of it rolls back, our shaper on sat0
    // keeps its rate and the other qdisc is left alone.
    run(&[
        "ip", "-n", &t.g, "link", "add", "sat1", "type", "veth", "peer", "name", "sat1p",
    ]);
    run(&["ip", "-n", &t.g, "link", "set", "sat1", "up"]);
    run(&[
        "ip", "netns", "exec", &t.g, "tc", "qdisc", "add", "dev", "sat1", "root", "handle", "1:",
        "tbf", "rate", "100mbit", "burst", "32kb", "latency", "50ms",
    ]);
    let nft_before = run(&[
        "ip", "netns", "exec", &t.g, "nft", "-s", "list", "table", "inet", "perigee",
    ]);
    let mut moved = cfg.clone();
    moved["revision"] = "t4".into();
    moved["interfaces"]["satellite"] = "sat1".into();
    moved["served_subnets"] = serde_json::json!(["10.99.1.0/24", "fd99:1::/64", "10.55.0.0/16"]);
    moved["shaping"]["rate_bps"] = 8_000_000.into();
    let (st, v) = control(&t.sock(), "PUT", "/v1/config", Some(&moved)).unwrap();
    assert_eq!(st, 409, "{v}");
    assert_eq!(v["error"]["step"], "shaping", "{v}");
    assert_eq!(v["error"]["field"], "shaping.enabled", "{v}");
    assert!(
        v["error"]["message"].as_str().unwrap().contains("tbf 1:"),
        "{v}"
    );
    let nft_after = run(&[
        "ip", "netns", "exec", &t.g, "nft", "-s", "list", "table", "inet", "perigee",
    ]);
    assert_eq!(
        nft_before, nft_after,
        "nft ruleset changed by a failed apply"
    );
    assert_eq!(root_qdisc(&t, "sat1"), "tbf 1:");
    assert_eq!(shaper_rate_and_limit(&t, "sat0"), ("24Mbit".into(), 200));
    let (_, c) = control(&t.sock(), "GET", "/v1/config", None).unwrap();
    assert_eq!(c["revision"], "t3");
    // With sat1 free, the shaper moves: on sat1 at the new rate, sat0 back to its default.
    run(&[
        "ip", "netns", "exec", &t.g, "tc", "qdisc", "del", "dev", "sat1", "root",
    ]);
    let (st, v) = control(&t.sock(), "PUT", "/v1/config", Some(&moved)).unwrap();
    assert_eq!(st, 200, "{v}");
    assert_eq!(root_qdisc(&t, "sat0"), "noqueue 0:");
    assert_eq!(shaper_rate_and_limit(&t, "sat1"), ("8Mbit".into(), 200));
    // Back on sat0, then disabled: removed, the default qdisc is back.
    cfg["revision"] = "t5".into();
    let (st, v) = control(&t.sock(), "PUT", "/v1/config", Some(&cfg)).unwrap();
    assert_eq!(st, 200, "{v}");
    assert_eq!(root_qdisc(&t, "sat1"), "noqueue 0:");
    assert_eq!(root_qdisc(&t, "sat0"), "htb 5047:");
    cfg["revision"] = "t6".into();
    cfg["shaping"]["enabled"] = false.into();
    let (st, v) = control(&t.sock(), "PUT", "/v1/config", Some(&cfg)).unwrap();
    assert_eq!(st, 200, "{v}");
    assert_eq!(root_qdisc(&t, "sat0"), "noqueue 0:");
    // On again, then a clean stop removes it like the nft table.
    cfg["revision"] = "t7".into();
    cfg["shaping"]["enabled"] = true.into();
    let (st, v) = control(&t.sock(), "PUT", "/v1/config", Some(&cfg)).unwrap();
    assert_eq!(st, 200, "{v}");
    assert_eq!(root_qdisc(&t, "sat0"), "htb 5047:");
    t.stop();
    assert_eq!(root_qdisc(&t, "sat0"), "noqueue 0:");
    assert!(run(&["ip", "netns", "exec", &t.g, "nft", "list", "tables"]).is_empty());
}

#[test]
fn shaper_left_by_a_killed_daemon_is_taken_over_or_removed_on_restart() {
    let Some(_g) = serial() else { return };
    let mut t = Topo::new("sk");
    let mut cfg = t.config();
    cfg["shaping"] = serde_json::json!({"enabled": true, "rate_bps": 16_000_000});
    t.start(&cfg);
    assert_eq!(shaper_rate_and_limit(&t, "sat0"), ("16Mbit".into(), 1000));
    // SIGKILL: no teardown, the shaper stays.
    t.kill9();
    assert_eq!(root_qdisc(&t, "sat0"), "htb 5047:");
    // Restarted with shaping on (another rate, another queue): the leftover is taken over.
    cfg["shaping"]["rate_bps"] = 8_000_000.into();
    cfg["shaping"]["queue_packets"] = 300.into();
    t.start(&cfg);
    assert_eq!(shaper_rate_and_limit(&t, "sat0"), ("8Mbit".into(), 300));
    t.kill9();
    assert_eq!(root_qdisc(&t, "sat0"), "htb 5047:");
    // Restarted with shaping off: the leftover goes, sat0 is back to the kernel's default.
    cfg["shaping"]["enabled"] = false.into();
    t.start(&cfg);
    let qdiscs = tc_show(&t, "qdisc", "sat0");
    assert_eq!(qdiscs.len(), 1, "leaf left behind: {qdiscs:?}\n{}", t.log());
    assert_eq!(root_qdisc(&t, "sat0"), "noqueue 0:", "{}", t.log());
    assert!(
        t.log().contains("shaper left by a previous daemon"),
        "{}",
        t.log()
    );
    t.kill9();
    // Somebody else's root qdisc, even one with our handle, is never touched by a restart.
    for handle in ["1:", "5047:"] {
        run(&[
            "ip", "netns", "exec", &t.g, "tc", "qdisc", "add", "dev", "sat0", "root", "handle",
            handle, "tbf", "rate", "100mbit", "burst", "32kb", "latency", "50ms",
        ]);
        t.start(&cfg);
        assert_eq!(root_qdisc(&t, "sat0"), format!("tbf {handle}"));
        t.kill9();
        run(&[
            "ip", "netns", "exec", &t.g, "tc", "qdisc", "del", "dev", "sat0", "root",
        ]);
    }
}
