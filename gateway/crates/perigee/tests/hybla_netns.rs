//! Two real gateways in two namespaces with different Hybla cwnd ceilings: each writes its
//! own per-namespace entry of Perigee's BPF Hybla, the satellite leg of a flow through each is
//! capped at its own ceiling at the same time, the host-wide entry is never written, and a
//! clean stop removes the stopped gateway's entry only. Root only (namespaces, BPF).
mod common;
use common::*;
use std::io::Write;
use std::net::SocketAddr;
use std::os::fd::AsRawFd;

/// Shared with perigee-hybla's kernel tests: they unload and reload the registration.
const LOCK: &str = "/run/lock/perigee-hybla-test.lock";

fn hybla_config(t: &Topo, cwnd_max: u32) -> serde_json::Value {
    let mut cfg = t.config();
    cfg["satellite"]["congestion_control"] = "hybla".into();
    // Named by a class: a leg on the default would switch to BBR on this zero-delay veth (a short
    // path, satleg_auto); a class's choice is never switched.
    cfg["classes"] = serde_json::json!([{"name": "all", "priority": 10, "match": {"protocol": "tcp"},
                                         "action": "accelerate", "satellite": {"congestion_control": "hybla"}}]);
    // rho = 600 / 25 = 24: the initial window (10 x 24) always reaches the ceiling.
    cfg["hybla"] = serde_json::json!({"rtt0_ms": 25, "base_rtt_ms": 600, "cwnd_max": cwnd_max});
    cfg
}

/// cwnd of the gateway's hybla sockets (the satellite leg) in `ss -tin`.
fn gateway_hybla_cwnds(t: &Topo) -> (Vec<u32>, String) {
    let out = run(&["ip", "netns", "exec", &t.g, "ss", "-tinH"]);
    let cwnds = out
        .lines()
        .filter(|l| l.split_whitespace().any(|w| w == "hybla"))
        .filter_map(|l| {
            l.split_whitespace()
                .find_map(|w| w.strip_prefix("cwnd:"))
                .and_then(|v| v.parse().ok())
        })
        .collect();
    (cwnds, out)
}

fn cookie_of(ns: &str) -> u64 {
    in_ns(ns, || {
        perigee_hybla::netns_cookie().expect("SO_NETNS_COOKIE")
    })
}

fn entry(cookie: u64) -> Option<(u32, u32, u32)> {
    perigee_hybla::status()
        .netns
        .iter()
        .find(|e| e.cookie == cookie)
        .map(|e| (e.rtt0_ms, e.base_rtt_ms, e.cwnd_max))
}

/// Open a split flow client -> server through `t`'s gateway; kept open by the caller.
fn open_flow(t: &Topo) -> std::net::TcpStream {
    let _rx = server(&t.s, SocketAddr::new(SERVER4.parse().unwrap(), 5001));
    let mut c = connect(&t.c, SocketAddr::new(SERVER4.parse().unwrap(), 5001)).unwrap();
    c.write_all(b"WHO\n").unwrap();
    // Split: the gateway lists the flow once both legs are up.
    wait_flow(t, c.local_addr().unwrap()).expect("the flow split");
    c
}

/// None when not root or when hybla here is not Perigee's BPF one (SKIPPED, or a failure when
/// root tests are required: perigee_testkit::cannot_run); otherwise the held locks (this
/// binary's and the one shared with perigee-hybla's kernel tests).
fn root_and_hybla_lock() -> Option<(std::sync::MutexGuard<'static, ()>, std::fs::File)> {
    let g = serial()?;
    let lock = std::fs::File::create(LOCK).expect("lock file");
    // SAFETY: valid fd; blocks while perigee-hybla's kernel tests run.
    assert_eq!(unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX) }, 0);
    let st = perigee_hybla::load().expect("hybla available");
    if !st.owned {
        perigee_testkit::cannot_run(
            "hybla here is not Perigee's BPF one: per-namespace entries do not apply",
        );
        return None;
    }
    Some((g, lock))
}

#[test]
fn two_gateways_each_cap_their_own_flows_and_a_stop_removes_only_its_entry() {
    let Some(_locks) = root_and_hybla_lock() else {
        return;
    };
    let global_before = perigee_hybla::status();

    let mut a = Topo::new("hna");
    let mut b = Topo::new("hnb");
    a.start(&hybla_config(&a, 77));
    b.start(&hybla_config(&b, 55));
    let (cookie_a, cookie_b) = (cookie_of(&a.g), cookie_of(&b.g));
    assert_eq!(entry(cookie_a), Some((25, 600, 77)), "{}", a.log());
    assert_eq!(entry(cookie_b), Some((25, 600, 55)), "{}", b.log());
    let (st, v) = control(&a.sock(), "GET", "/v1/hybla", None).unwrap();
    assert_eq!(st, 200);
    assert_eq!(v["netns_cookie"], cookie_a, "{v}");

    // Both satellite legs at once, each at its own gateway's ceiling.
    let fa = open_flow(&a);
    let fb = open_flow(&b);
    for (t, want) in [(&a, 77), (&b, 55)] {
        let (cwnds, out) = gateway_hybla_cwnds(t);
        assert!(
            !cwnds.is_empty() && cwnds.iter().all(|&c| c == want),
            "{}: hybla cwnd should be {want}:\n{out}",
            t.g
        );
    }
    drop((fa, fb));

    // A new config reaches the entry; the other gateway's and the host-wide one stay.
    let mut cfg = hybla_config(&a, 66);
    cfg["revision"] = "t2".into();
    let (st, v) = control(&a.sock(), "PUT", "/v1/config", Some(&cfg)).unwrap();
    assert_eq!(st, 200, "{v}");
    assert_eq!(entry(cookie_a), Some((25, 600, 66)));
    assert_eq!(entry(cookie_b), Some((25, 600, 55)));

    // A clean stop removes A's entry only.
    a.stop();
    assert_eq!(entry(cookie_a), None, "{}", a.log());
    assert_eq!(entry(cookie_b), Some((25, 600, 55)));
    b.stop();
    assert_eq!(entry(cookie_b), None, "{}", b.log());
    let global_after = perigee_hybla::status();
    assert_eq!(
        (
            global_after.rtt0_ms,
            global_after.base_rtt_ms,
            global_after.cwnd_max
        ),
        (
            global_before.rtt0_ms,
            global_before.base_rtt_ms,
            global_before.cwnd_max
        ),
        "the host-wide entry is never written by a gateway"
    );
}

#[test]
fn a_starting_gateway_prunes_the_entry_of_a_killed_one_whose_namespace_is_gone() {
    let Some(_locks) = root_and_hybla_lock() else {
        return;
    };
    let mut a = Topo::new("hnk");
    let mut c = Topo::new("hnm");
    a.start(&hybla_config(&a, 44));
    c.start(&hybla_config(&c, 22));
    let (cookie_a, cookie_c) = (cookie_of(&a.g), cookie_of(&c.g));
    assert_eq!(entry(cookie_a), Some((25, 600, 44)), "{}", a.log());
    // SIGKILL: no clean stop removes the entry; then the lab is torn down.
    a.kill9();
    drop(a);
    assert_eq!(
        entry(cookie_a),
        Some((25, 600, 44)),
        "a killed gateway leaves its entry"
    );

    // The next gateway's first write of its own entry removes it; the running one's stays.
    let mut b = Topo::new("hnl");
    b.start(&hybla_config(&b, 33));
    let cookie_b = cookie_of(&b.g);
    assert_eq!(entry(cookie_a), None, "stale entry left:\n{}", b.log());
    assert!(
        b.log()
            .contains("removed the Hybla entries of namespaces that no longer exist"),
        "{}",
        b.log()
    );
    assert_eq!(entry(cookie_b), Some((25, 600, 33)));
    assert_eq!(
        entry(cookie_c),
        Some((25, 600, 22)),
        "a live gateway's entry"
    );
    b.stop();
    c.stop();
    assert_eq!((entry(cookie_b), entry(cookie_c)), (None, None));
}
