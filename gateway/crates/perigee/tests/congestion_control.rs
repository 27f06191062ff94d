//! Each leg's congestion control in a real `perigee gateway run`: the satellite leg's, a class's
//! own, and the listener's (an accepted leg starts with it).
mod common;
use common::*;
use perigee_testkit::wait_for;
use std::io::Write;
use std::time::{Duration, Instant};

fn leg_cc(t: &Topo, port: u16) -> (String, String) {
    // ss -ti in the gateway: the socket toward the server (dport) and the one toward the client (sport).
    let out = run(&[
        "ip",
        "netns",
        "exec",
        &t.g,
        "ss",
        "-tinH",
        "state",
        "established",
    ]);
    let lines: Vec<&str> = out.lines().collect();
    let mut server_leg = String::new();
    let mut client_leg = String::new();
    for (i, l) in lines.iter().enumerate() {
        let info = lines.get(i + 1).copied().unwrap_or("");
        let cc = info.split_whitespace().next().unwrap_or("").to_string();
        if l.contains(&format!("{SERVER4}:{port}")) {
            let fields: Vec<&str> = l.split_whitespace().collect();
            // Local address column first: ours toward the server has the client's address locally.
            if fields
                .get(2)
                .map(|a| a.starts_with(CLIENT4))
                .unwrap_or(false)
            {
                server_leg = cc;
            } else {
                client_leg = cc;
            }
        }
    }
    (client_leg, server_leg)
}

/// `leg_cc` once both legs of the connection to `port` are established.
fn wait_leg_cc(t: &Topo, port: u16) -> (String, String) {
    wait_for("both legs established", HUNG, || {
        let (client_leg, server_leg) = leg_cc(t, port);
        (!client_leg.is_empty() && !server_leg.is_empty()).then_some((client_leg, server_leg))
    })
    .0
}

#[test]
fn satellite_leg_congestion_control() {
    let Some(_g) = serial() else { return };
    let mut t = Topo::new("cc");
    let avail =
        std::fs::read_to_string("/proc/sys/net/ipv4/tcp_available_congestion_control").unwrap();
    let sat_cc = if avail.split_whitespace().any(|c| c == "hybla") {
        "hybla"
    } else {
        "reno"
    };
    let default_cc = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_congestion_control")
        .unwrap()
        .trim()
        .to_string();
    let mut cfg = t.config();
    cfg["satellite"]["congestion_control"] = sat_cc.into();
    t.start(&cfg);
    let _rx = server(&t.s, sa(SERVER4, 5001));
    // Terminal: the leg toward the server faces the satellite.
    let mut c = connect(&t.c, sa(SERVER4, 5001)).unwrap();
    c.write_all(b"WHO\n").unwrap();
    let (client_leg, server_leg) = wait_leg_cc(&t, 5001);
    // This veth has no delay: a short path, on which a leg running the default Hybla switches to
    // BBR once it has measured its RTT (satleg_auto); anything else keeps what it was given.
    let (want, reason) = if sat_cc == "hybla" {
        ("bbr", "automatic")
    } else {
        (sat_cc, "default")
    };
    let (settled, _) = wait_for("the satellite leg's choice", HUNG, || {
        let (_, s) = leg_cc(&t, 5001);
        (s == want).then_some(s)
    });
    assert_eq!(
        settled,
        want,
        "ss output (first seen {server_leg}):\n{}",
        run(&["ip", "netns", "exec", &t.g, "ss", "-tin"])
    );
    let (f, _) = wait_for("the flow reporting its satellite leg", HUNG, || {
        find_flow(&t, c.local_addr().unwrap()).filter(|f| f["satellite"]["cc"] == want)
    });
    assert_eq!(f["satellite"]["cc_reason"], reason, "{f}");
    assert_eq!(client_leg, default_cc);
    drop(c);
    // A class can choose its own: bbr for port 5003, and as a hub the client leg is the satellite one.
    cfg["role"] = "hub".into();
    cfg["revision"] = "t2".into();
    cfg["classes"] = serde_json::json!([{"name": "bulk", "priority": 10, "match": {"protocol": "tcp", "dports": ["5003"]},
                                         "action": "accelerate", "satellite": {"congestion_control": "bbr"}}]);
    let (st, v) = control(&t.sock(), "PUT", "/v1/config", Some(&cfg)).unwrap();
    assert_eq!(st, 200, "{v}");
    let _rx2 = server(&t.s, sa(SERVER4, 5003));
    let mut c = connect(&t.c, sa(SERVER4, 5003)).unwrap();
    c.write_all(b"WHO\n").unwrap();
    let (client_leg, server_leg) = wait_leg_cc(&t, 5003);
    assert_eq!(client_leg, "bbr");
    assert_eq!(server_leg, default_cc);
    let f = wait_flow(&t, c.local_addr().unwrap()).unwrap();
    assert_eq!(f["class"], "bulk");
    assert_eq!(f["legs"]["satellite"], "client");
    // Sampled at least once a second.
    let (f, _) = wait_for("the client leg sampled", HUNG, || {
        find_flow(&t, c.local_addr().unwrap()).filter(|f| {
            f["legs"]["client"]["srtt_us"]
                .as_u64()
                .is_some_and(|s| s > 0)
        })
    });
    assert_eq!(f["legs"]["client"]["cc"], "bbr");
}

/// The congestion control of every TPROXY listener in the gateway (one v4 and one v6 per worker).
fn listener_ccs(t: &Topo) -> Vec<String> {
    let out = run(&[
        "ip", "netns", "exec", &t.g, "ss", "-tlinH", "sport", "=", ":7071",
    ]);
    // Each socket line is followed by its info line, which starts with the cc name.
    out.lines()
        .filter(|l| l.starts_with(char::is_whitespace))
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .collect()
}

fn wait_listener_ccs(t: &Topo, want: &str) -> Vec<String> {
    let deadline = Instant::now() + HUNG;
    loop {
        let got = listener_ccs(t);
        if (got.len() >= 2 && got.iter().all(|c| c == want)) || Instant::now() > deadline {
            return got;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn accepted_leg_starts_with_its_congestion_control() {
    // An accepted socket starts with its listener's congestion control, whose init has run before
    // we could change it (BBR's leaves the socket pacing through a timer for good): the listener
    // must already hold the cc of the leg it accepts.
    let Some(_g) = serial() else { return };
    let mut t = Topo::new("lcc");
    let default_cc = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_congestion_control")
        .unwrap()
        .trim()
        .to_string();
    let avail =
        std::fs::read_to_string("/proc/sys/net/ipv4/tcp_available_congestion_control").unwrap();
    let other = ["reno", "cubic", "bbr"]
        .into_iter()
        .find(|c| *c != default_cc && avail.split_whitespace().any(|a| a == *c))
        .expect("a second congestion control");
    // Terminal: the listener accepts the client's (terrestrial) leg.
    let mut cfg = t.config();
    cfg["terrestrial"] = serde_json::json!({"congestion_control": other});
    t.start(&cfg);
    let got = wait_listener_ccs(&t, other);
    assert!(
        got.len() >= 2 && got.iter().all(|c| c == other),
        "terminal listeners: {got:?}"
    );
    let _rx = server(&t.s, sa(SERVER4, 5001));
    let mut c = connect(&t.c, sa(SERVER4, 5001)).unwrap();
    c.write_all(b"WHO\n").unwrap();
    assert_eq!(wait_leg_cc(&t, 5001).0, other);
    drop(c);
    // Hub: it accepts the satellite leg, so the listener takes the satellite cc (reno here).
    cfg["role"] = "hub".into();
    cfg["revision"] = "t2".into();
    let (st, v) = control(&t.sock(), "PUT", "/v1/config", Some(&cfg)).unwrap();
    assert_eq!(st, 200, "{v}");
    let got = wait_listener_ccs(&t, "reno");
    assert!(
        got.len() >= 2 && got.iter().all(|c| c == "reno"),
        "hub listeners: {got:?}"
    );
    // Terminal again with the terrestrial leg left to the namespace default.
    cfg["role"] = "terminal".into();
    cfg["revision"] = "t3".into();
    cfg["terrestrial"] = serde_json::json!({"congestion_control": ""});
    let (st, v) = control(&t.sock(), "PUT", "/v1/config", Some(&cfg)).unwrap();
    assert_eq!(st, 200, "{v}");
    let got = wait_listener_ccs(&t, &default_cc);
    assert!(
        got.len() >= 2 && got.iter().all(|c| *c == default_cc),
        "default listeners: {got:?}"
    );
}
