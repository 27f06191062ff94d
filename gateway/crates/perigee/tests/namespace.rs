//! Namespace integration tests: drive the real `perigee gateway run` against a real kernel.
mod common;
use common::*;
use std::io::{BufRead, BufReader, ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr};
use std::time::{Duration, Instant};

fn who(t: &Topo, server: SocketAddr) -> (SocketAddr, SocketAddr, String) {
    let mut c = connect(&t.c, server).expect("connect");
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    c.write_all(b"WHO\n").unwrap();
    let mut line = String::new();
    BufReader::new(c.try_clone().unwrap())
        .read_line(&mut line)
        .unwrap();
    (
        c.local_addr().unwrap(),
        c.peer_addr().unwrap(),
        line.trim().to_string(),
    )
}

fn find_flow(t: &Topo, client: SocketAddr) -> Option<serde_json::Value> {
    t.flows("all")
        .into_iter()
        .find(|f| f["client"] == client.to_string())
}

/// Flows show up in the closed list within a report period (1 s).
fn wait_flow(t: &Topo, client: SocketAddr) -> Option<serde_json::Value> {
    let deadline = Instant::now() + Duration::from_secs(3);
    while Instant::now() < deadline {
        if let Some(f) = find_flow(t, client) {
            return Some(f);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    None
}

#[test]
fn transparency_v4_and_v6() {
    let _g = serial();
    let mut t = Topo::new("tr");
    t.start(&t.config());
    for (srv, port) in [(SERVER4, 5001), (SERVER6, 5002)] {
        let _rx = server(&t.s, sa(srv, port));
        let (local, peer, seen_by_server) = who(&t, sa(srv, port));
        // The server sees the client's own address and port; the client sees the server's.
        assert_eq!(seen_by_server, local.to_string());
        assert_eq!(peer, sa(srv, port));
        let f = wait_flow(&t, local)
            .unwrap_or_else(|| panic!("flow for {local} not split; log:\n{}", t.log()));
        assert_eq!(f["server"], sa(srv, port).to_string());
        assert_eq!(f["legs"]["satellite"], "server");
    }
}

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

#[test]
fn satellite_leg_congestion_control() {
    let _g = serial();
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
    std::thread::sleep(Duration::from_millis(300));
    let (client_leg, server_leg) = leg_cc(&t, 5001);
    assert_eq!(
        server_leg,
        sat_cc,
        "ss output:\n{}",
        run(&["ip", "netns", "exec", &t.g, "ss", "-tin"])
    );
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
    std::thread::sleep(Duration::from_millis(300));
    let (client_leg, server_leg) = leg_cc(&t, 5003);
    assert_eq!(client_leg, "bbr");
    assert_eq!(server_leg, default_cc);
    let f = wait_flow(&t, c.local_addr().unwrap()).unwrap();
    assert_eq!(f["class"], "bulk");
    assert_eq!(f["legs"]["satellite"], "client");
    // Sampled at least once a second.
    std::thread::sleep(Duration::from_millis(1300));
    let f = find_flow(&t, c.local_addr().unwrap()).unwrap();
    assert_eq!(f["legs"]["client"]["cc"], "bbr");
    assert!(f["legs"]["client"]["srtt_us"].as_u64().unwrap() > 0, "{f}");
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
    let deadline = Instant::now() + Duration::from_secs(3);
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
    let _g = serial();
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
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(leg_cc(&t, 5001).0, other);
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

fn transfer_up(t: &Topo, srv: SocketAddr, n: usize) {
    let data = payload(n);
    let mut c = connect(&t.c, srv).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let w = {
        let mut c2 = c.try_clone().unwrap();
        std::thread::spawn(move || {
            c2.write_all(b"UP\n").unwrap();
            c2.write_all(&data).unwrap();
            // Half-close: the server answers only after seeing our EOF.
            c2.shutdown(Shutdown::Write).unwrap();
        })
    };
    let mut reply = String::new();
    c.read_to_string(&mut reply).unwrap();
    w.join().unwrap();
    assert_eq!(
        reply.trim(),
        format!("{} {}", n, sha(&payload(n))),
        "upload of {n} bytes"
    );
}

fn transfer_down(t: &Topo, srv: SocketAddr, n: usize) {
    let mut c = connect(&t.c, srv).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    c.write_all(format!("DOWN {n}\n").as_bytes()).unwrap();
    let mut got = Vec::new();
    c.read_to_end(&mut got).unwrap();
    assert_eq!(got.len(), n);
    assert_eq!(sha(&got), sha(&payload(n)), "download of {n} bytes");
}

#[test]
fn exact_transfers_both_ways() {
    let _g = serial();
    let mut t = Topo::new("xf");
    t.start(&t.config());
    let _rx = server(&t.s, sa(SERVER4, 5001));
    let _rx6 = server(&t.s, sa(SERVER6, 5001));
    for n in [0usize, 1, 65536, 100 << 20] {
        transfer_up(&t, sa(SERVER4, 5001), n);
        transfer_down(&t, sa(SERVER4, 5001), n);
    }
    transfer_up(&t, sa(SERVER6, 5001), 1 << 20);
    transfer_down(&t, sa(SERVER6, 5001), 1 << 20);
    std::thread::sleep(Duration::from_millis(1200));
    let (_, c) = control(&t.sock(), "GET", "/v1/counters", None).unwrap();
    assert!(c["bytes_up"].as_u64().unwrap() >= 100 << 20, "{c}");
    assert!(c["bytes_down"].as_u64().unwrap() >= 100 << 20, "{c}");
    assert_eq!(c["flows_live"], 0);
}

#[test]
fn half_close_and_resets() {
    let _g = serial();
    let mut t = Topo::new("hc");
    t.start(&t.config());
    let rx = server(&t.s, sa(SERVER4, 5001));
    // Server closes its sending side first; the client can still send.
    let mut c = connect(&t.c, sa(SERVER4, 5001)).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    c.write_all(b"HALF\n").unwrap();
    let mut buf = [0u8; 16];
    assert_eq!(c.read(&mut buf).unwrap(), 0, "EOF forwarded to the client");
    c.write_all(&payload(100_000)).unwrap();
    c.shutdown(Shutdown::Write).unwrap();
    let seen = rx.recv_timeout(Duration::from_secs(5)).unwrap();
    assert_eq!(seen.result, "got 100000");

    // Client resets → the server gets a reset.
    let c = connect(&t.c, sa(SERVER4, 5001)).unwrap();
    (&c).write_all(b"HOLD\n").unwrap();
    std::thread::sleep(Duration::from_millis(200));
    set_linger0(&c);
    drop(c);
    let seen = rx.recv_timeout(Duration::from_secs(5)).unwrap();
    assert_eq!(seen.result, "reset");

    // Server resets → the client gets a reset.
    let mut c = connect(&t.c, sa(SERVER4, 5001)).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    c.write_all(b"RST\n").unwrap();
    let e = c.read(&mut buf).expect_err("reset expected");
    assert_eq!(e.kind(), ErrorKind::ConnectionReset, "{e}");
}

#[test]
fn refused_server_resets_client_quickly() {
    let _g = serial();
    let mut t = Topo::new("rf");
    t.start(&t.config());
    let started = Instant::now();
    // Nothing listens on 5999: the gateway accepted the SYN, then resets once its connect fails.
    // The reset may land before the client's connect() returns, or on its first read.
    let e = match connect(&t.c, sa(SERVER4, 5999)) {
        Err(e) => e,
        Ok(mut c) => {
            c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            let mut buf = [0u8; 4];
            c.read(&mut buf).expect_err("reset expected")
        }
    };
    assert_eq!(e.kind(), ErrorKind::ConnectionReset, "{e}");
    assert!(started.elapsed() < Duration::from_secs(2));
    std::thread::sleep(Duration::from_millis(1200));
    let (_, v) = control(&t.sock(), "GET", "/v1/counters", None).unwrap();
    assert!(v["flows_failed_connect"].as_u64().unwrap() >= 1, "{v}");
    // A server that never answers: reset after connect_timeout_ms (3 s in the test config).
    let nft = |args: &[&str]| {
        let mut v = vec!["ip", "netns", "exec", t.s.as_str(), "nft"];
        v.extend_from_slice(args);
        run(&v);
    };
    nft(&["add", "table", "inet", "t"]);
    nft(&[
        "add",
        "chain",
        "inet",
        "t",
        "i",
        "{ type filter hook input priority 0; }",
    ]);
    nft(&[
        "add", "rule", "inet", "t", "i", "tcp", "dport", "5998", "drop",
    ]);
    let started = Instant::now();
    let e = match connect(&t.c, sa(SERVER4, 5998)) {
        Err(e) => e,
        Ok(mut c) => {
            c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            let mut buf = [0u8; 4];
            c.read(&mut buf).expect_err("reset expected")
        }
    };
    assert_eq!(e.kind(), ErrorKind::ConnectionReset, "{e}");
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(2500) && took < Duration::from_secs(6),
        "{took:?}"
    );
    std::thread::sleep(Duration::from_millis(1200));
    let closed = t.flows("closed");
    assert!(
        closed.iter().any(|f| f["end_reason"] == "connect_timeout"),
        "{closed:?}"
    );
}

#[test]
fn thousand_concurrent_flows() {
    let _g = serial();
    let mut t = Topo::new("k1");
    t.start(&t.config());
    let _rx = server(&t.s, sa(SERVER4, 5001));
    let conns: Vec<_> = (0..1000)
        .map(|i| {
            let mut c =
                connect(&t.c, sa(SERVER4, 5001)).unwrap_or_else(|e| panic!("conn {i}: {e}"));
            c.write_all(b"WHO\n").unwrap();
            c
        })
        .collect();
    for c in &conns {
        c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut line = String::new();
        BufReader::new(c).read_line(&mut line).unwrap();
        assert_eq!(line.trim(), c.local_addr().unwrap().to_string());
    }
    std::thread::sleep(Duration::from_millis(1200));
    let (_, v) = control(&t.sock(), "GET", "/v1/counters", None).unwrap();
    assert_eq!(v["flows_live"], 1000, "{v}\n{}", t.log());
    assert_eq!(t.flows("live").len(), 1000);
    for mut c in conns {
        c.write_all(b"x").unwrap();
        let mut b = [0u8; 1];
        c.read_exact(&mut b).unwrap();
        assert_eq!(&b, b"x");
    }
}

#[test]
fn fail_open_when_killed_and_split_again_after_restart() {
    let _g = serial();
    let mut t = Topo::new("fo");
    let cfg = t.config();
    t.start(&cfg);
    let _rx = server(&t.s, sa(SERVER4, 5001));
    let (local, _, seen) = who(&t, sa(SERVER4, 5001));
    assert_eq!(seen, local.to_string());
    assert!(wait_flow(&t, local).is_some());
    t.kill9();
    let killed = Instant::now();
    // Workers die with the master; the tproxy rule no longer finds a listener and breaks.
    let mut ok = false;
    while killed.elapsed() < Duration::from_secs(1) {
        if let Ok(mut c) = connect(&t.c, sa(SERVER4, 5001)) {
            c.set_read_timeout(Some(Duration::from_millis(500)))
                .unwrap();
            let _ = c.write_all(b"WHO\n");
            let mut line = String::new();
            if BufReader::new(c).read_line(&mut line).is_ok() && !line.is_empty() {
                ok = true;
                break;
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(ok, "no unsplit connection within 1 s of SIGKILL");
    t.start(&cfg);
    let (local, _, seen) = who(&t, sa(SERVER4, 5001));
    assert_eq!(seen, local.to_string());
    assert!(wait_flow(&t, local).is_some(), "split again after restart");
    // A worker killed on its own is restarted by the master.
    let (_, h) = control(&t.sock(), "GET", "/v1/health", None).unwrap();
    let pid = h["workers"][0]["pid"].as_i64().unwrap() as i32;
    // SAFETY: signalling a worker process this test's daemon spawned.
    unsafe { libc::kill(pid, libc::SIGKILL) };
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let (_, h) = control(&t.sock(), "GET", "/v1/health", None).unwrap();
        let w = &h["workers"][0];
        if w["alive"] == true && w["restarts"] == 1 && w["pid"].as_i64() != Some(pid as i64) {
            break;
        }
        assert!(Instant::now() < deadline, "worker not restarted: {h}");
        std::thread::sleep(Duration::from_millis(100));
    }
    for _ in 0..4 {
        let (local, _, seen) = who(&t, sa(SERVER4, 5001));
        assert_eq!(seen, local.to_string());
    }
}

fn esp_roundtrip(t: &Topo) -> bool {
    // Raw ESP (IP protocol 50) from client to server must arrive byte-identical.
    let recv = in_ns(&t.s, || {
        // SAFETY: plain socket syscall.
        let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_RAW, 50) };
        assert!(fd >= 0);
        let tv = libc::timeval {
            tv_sec: 3,
            tv_usec: 0,
        };
        // SAFETY: valid timeval for SO_RCVTIMEO.
        unsafe {
            libc::setsockopt(
                fd,
                libc::SOL_SOCKET,
                libc::SO_RCVTIMEO,
                &tv as *const _ as *const libc::c_void,
                std::mem::size_of::<libc::timeval>() as u32,
            )
        };
        fd
    });
    let body: Vec<u8> = (0..200u32).map(|i| (i * 7 + 3) as u8).collect();
    let sent = body.clone();
    in_ns(&t.c, move || {
        // SAFETY: plain socket syscalls with a valid sockaddr_in.
        unsafe {
            let fd = libc::socket(libc::AF_INET, libc::SOCK_RAW, 50);
            let dst = libc::sockaddr_in {
                sin_family: libc::AF_INET as u16,
                sin_port: 0,
                sin_addr: libc::in_addr {
                    s_addr: u32::from_ne_bytes([10, 99, 2, 10]),
                },
                sin_zero: [0; 8],
            };
            let n = libc::sendto(
                fd,
                sent.as_ptr() as *const libc::c_void,
                sent.len(),
                0,
                &dst as *const _ as *const libc::sockaddr,
                std::mem::size_of::<libc::sockaddr_in>() as u32,
            );
            assert_eq!(n as usize, sent.len());
            libc::close(fd);
        }
    });
    let mut buf = vec![0u8; 2048];
    // SAFETY: buf is valid for writes of its length.
    let n = unsafe { libc::recv(recv, buf.as_mut_ptr() as *mut libc::c_void, buf.len(), 0) };
    // SAFETY: closing our own fd.
    unsafe { libc::close(recv) };
    if n < 20 {
        return false;
    }
    let ihl = ((buf[0] & 0x0f) as usize) * 4;
    let src = &buf[12..16];
    src == [10, 99, 1, 10] && buf[ihl..n as usize] == body[..]
}

#[test]
fn bypass_is_not_split() {
    let _g = serial();
    let mut t = Topo::new("bp");
    t.start(&t.config());
    let _rx = server(&t.s, sa(SERVER4, 4500));
    let (local, _, seen) = who(&t, sa(SERVER4, 4500));
    assert_eq!(seen, local.to_string());
    std::thread::sleep(Duration::from_millis(1200));
    assert!(find_flow(&t, local).is_none(), "TCP 4500 must not be split");
    assert!(esp_roundtrip(&t), "ESP did not pass byte-identical");
    // The gateway's own addresses are never intercepted: a closed port is refused directly.
    let e = connect(&t.c, sa("10.99.1.1", 5999)).expect_err("nothing listens there");
    assert_eq!(e.kind(), ErrorKind::ConnectionRefused, "{e}");
    let (_, v) = control(&t.sock(), "GET", "/v1/counters", None).unwrap();
    assert!(
        v["by_action"]["bypass"]["packets"].as_u64().unwrap() >= 2,
        "{v}"
    );
}

#[test]
fn failed_apply_keeps_previous_state() {
    let _g = serial();
    let mut t = Topo::new("ap");
    let cfg = t.config();
    t.start(&cfg);
    let before = run(&[
        "ip", "netns", "exec", &t.g, "nft", "-s", "list", "table", "inet", "perigee",
    ]);
    let mut bad = cfg.clone();
    bad["revision"] = "bad".into();
    bad["served_subnets"] = serde_json::json!(["10.99.1.0/24", "fd99:1::/64", "10.55.0.0/16"]);
    // The gateway is not on-link with this next hop: `ip route` fails after nft applied.
    bad["satellite"]["routes"] = serde_json::json!([{"dst": "10.77.0.0/16", "via": "10.250.0.1"}]);
    let (st, v) = control(&t.sock(), "PUT", "/v1/config", Some(&bad)).unwrap();
    assert_eq!(st, 409, "{v}");
    assert_eq!(v["error"]["step"], "routes");
    let after = run(&[
        "ip", "netns", "exec", &t.g, "nft", "-s", "list", "table", "inet", "perigee",
    ]);
    assert_eq!(before, after, "nft ruleset changed by a failed apply");
    let (_, c) = control(&t.sock(), "GET", "/v1/config", None).unwrap();
    assert_eq!(c["revision"], "t1");
    // Invalid configs are refused naming the field, and validate changes nothing.
    bad["satellite"]["routes"] = serde_json::json!([]);
    bad["splitter"]["tproxy_port"] = 70000.into();
    let (st, v) = control(&t.sock(), "POST", "/v1/config/validate", Some(&bad)).unwrap();
    assert_eq!(st, 422);
    assert_eq!(v["error"]["field"], "splitter.tproxy_port");
    // A good apply with an open flow keeps the flow.
    let _rx = server(&t.s, sa(SERVER4, 5001));
    let mut c = connect(&t.c, sa(SERVER4, 5001)).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    c.write_all(b"WHO\n").unwrap();
    let mut r = BufReader::new(c.try_clone().unwrap());
    let mut line = String::new();
    r.read_line(&mut line).unwrap();
    let mut good = cfg.clone();
    good["revision"] = "t3".into();
    let (st, v) = control(&t.sock(), "PUT", "/v1/config", Some(&good)).unwrap();
    assert_eq!(st, 200, "{v}");
    c.write_all(b"still here\n").unwrap();
    let mut echo = String::new();
    r.read_line(&mut echo).unwrap();
    assert_eq!(echo, "still here\n");
    drop(c);
    // A satellite route over an existing one: restored as it was when the daemon stops.
    run(&[
        "ip",
        "-n",
        &t.g,
        "route",
        "add",
        "10.77.0.0/16",
        "via",
        "10.99.2.10",
    ]);
    good["revision"] = "t4".into();
    good["satellite"]["routes"] = serde_json::json!([{"dst": "10.77.0.0/16", "via": "10.99.2.10"}]);
    let (st, v) = control(&t.sock(), "PUT", "/v1/config", Some(&good)).unwrap();
    assert_eq!(st, 200, "{v}");
    let route = run(&["ip", "-n", &t.g, "route", "show", "10.77.0.0/16"]);
    assert!(route.contains("initcwnd 10"), "{route}");
    t.stop();
    let route = run(&["ip", "-n", &t.g, "route", "show", "10.77.0.0/16"]);
    assert!(
        route.contains("via 10.99.2.10") && !route.contains("initcwnd"),
        "{route}"
    );
    assert!(run(&["ip", "netns", "exec", &t.g, "nft", "list", "tables"]).is_empty());
}

#[test]
fn started_without_a_config_it_intercepts_nothing_until_one_is_put() {
    let _g = serial();
    let mut t = Topo::new("nc");
    let good = t.config();
    let child = start_daemon_until(&t.g, &t.dir, "gw", &serde_json::Value::Null, |h| {
        h["status"] == "degraded"
    });
    t.daemon = Some(child);
    let (_, h) = control(&t.sock(), "GET", "/v1/health", None).unwrap();
    assert!(h["config_revision"].is_null() && h["role"].is_null(), "{h}");
    assert!(
        h["problems"].to_string().contains("no config is installed"),
        "{h}"
    );
    let (st, v) = control(&t.sock(), "GET", "/v1/config", None).unwrap();
    assert_eq!((st, v["error"]["code"].as_str()), (404, Some("no_config")));
    let (st, ifs) = control(&t.sock(), "GET", "/v1/interfaces", None).unwrap();
    assert_eq!(st, 200);
    let names: Vec<&str> = ifs["interfaces"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|i| i["name"].as_str())
        .collect();
    assert!(names.contains(&"lan0") && names.contains(&"sat0"), "{ifs}");
    assert!(run(&["ip", "netns", "exec", &t.g, "nft", "list", "tables"]).is_empty());
    let (st, v) = control(&t.sock(), "PUT", "/v1/config", Some(&good)).unwrap();
    assert_eq!(st, 200, "{v}");
    let deadline = Instant::now() + Duration::from_secs(10);
    let h = loop {
        let (_, h) = control(&t.sock(), "GET", "/v1/health", None).unwrap();
        if h["status"] == "ok" || Instant::now() > deadline {
            break h;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(
        (h["status"].as_str(), h["role"].as_str()),
        (Some("ok"), Some("terminal")),
        "{h}\n{}",
        t.log()
    );
    let (_, ifs) = control(&t.sock(), "GET", "/v1/interfaces", None).unwrap();
    let lan0 = ifs["interfaces"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["name"] == "lan0")
        .unwrap()
        .clone();
    assert_eq!(lan0["configured_as"], "lan", "{lan0}");
    assert!(lan0["addresses"].to_string().contains("/24"), "{lan0}");
}

#[test]
fn failed_initial_apply_runs_degraded_until_a_good_config() {
    let _g = serial();
    let mut t = Topo::new("ia");
    let good = t.config();
    let mut bad = good.clone();
    bad["revision"] = "bad".into();
    // sat9 does not exist here: the satellite route step of the first apply fails.
    bad["interfaces"]["satellite"] = "sat9".into();
    bad["satellite"]["routes"] = serde_json::json!([{"dst": "10.77.0.0/16", "via": "10.99.2.10"}]);
    let child = start_daemon_until(&t.g, &t.dir, "gw", &bad, |h| h["status"] == "degraded");
    t.daemon = Some(child);
    let (st, h) = control(&t.sock(), "GET", "/v1/health", None).unwrap();
    assert_eq!(st, 200);
    assert_eq!(h["status"], "degraded", "{h}");
    assert!(h["config_revision"].is_null(), "{h}");
    let problems = h["problems"].to_string();
    assert!(problems.contains("initial apply failed"), "{h}");
    assert!(problems.contains("routes"), "{h}");
    assert!(t.daemon.as_mut().unwrap().try_wait().unwrap().is_none());
    // Nothing installed: no table, and connections pass unsplit.
    assert!(run(&["ip", "netns", "exec", &t.g, "nft", "list", "tables"]).is_empty());
    let _rx = server(&t.s, sa(SERVER4, 5001));
    let (local, _, seen) = who(&t, sa(SERVER4, 5001));
    assert_eq!(seen, local.to_string());
    assert!(find_flow(&t, local).is_none());
    // A correct config pushed through the API installs everything and starts the workers.
    let (st, v) = control(&t.sock(), "PUT", "/v1/config", Some(&good)).unwrap();
    assert_eq!(st, 200, "{v}");
    let deadline = Instant::now() + Duration::from_secs(10);
    let h = loop {
        let (_, h) = control(&t.sock(), "GET", "/v1/health", None).unwrap();
        if h["status"] == "ok" || Instant::now() > deadline {
            break h;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(h["status"], "ok", "{h}\n{}", t.log());
    assert_eq!(h["config_revision"], "t1");
    std::thread::sleep(Duration::from_millis(200));
    let (local, _, seen) = who(&t, sa(SERVER4, 5001));
    assert_eq!(seen, local.to_string());
    let f = wait_flow(&t, local)
        .unwrap_or_else(|| panic!("flow for {local} not split; log:\n{}", t.log()));
    assert_eq!(f["legs"]["satellite"], "server");
}

#[test]
fn max_flows_overflow_routes_unsplit() {
    let _g = serial();
    let mut t = Topo::new("mf");
    let mut cfg = t.config();
    cfg["splitter"]["max_flows"] = 3.into();
    t.start(&cfg);
    let _rx = server(&t.s, sa(SERVER4, 5001));
    let mut conns = Vec::new();
    for _ in 0..3 {
        let mut c = connect(&t.c, sa(SERVER4, 5001)).unwrap();
        c.write_all(b"WHO\n").unwrap();
        conns.push(c);
    }
    std::thread::sleep(Duration::from_millis(1500));
    let (local, _, seen) = who(&t, sa(SERVER4, 5001));
    assert_eq!(
        seen,
        local.to_string(),
        "unsplit flows still reach the server"
    );
    let (_, v) = control(&t.sock(), "GET", "/v1/counters", None).unwrap();
    assert!(v["flows_unsplit_overflow"].as_u64().unwrap() >= 1, "{v}");
    assert!(find_flow(&t, local).is_none());
    drop(conns);
}

#[test]
fn hub_and_terminal_in_series() {
    let _g = serial();
    let mut n = Series::new("se");
    let cfg = |role: &str| {
        serde_json::json!({
            "schema": 1, "revision": role, "role": role,
            "interfaces": {"lan": ["lan0"], "satellite": "sat0"},
            "served_subnets": ["10.99.1.0/24"],
            "satellite": {"congestion_control": "reno", "sndbuf_bytes": 0, "rcvbuf_bytes": 0, "routes": []}
        })
    };
    let (c, t, h, s, dir) = (
        n.c.clone(),
        n.t.clone(),
        n.h.clone(),
        n.s.clone(),
        n.dir.clone(),
    );
    n.daemons
        .push(start_daemon(&t, &dir, "term", &cfg("terminal")));
    n.daemons.push(start_daemon(&h, &dir, "hub", &cfg("hub")));
    let server_addr = sa("10.99.3.10", 5001);
    let _rx = server(&s, server_addr);
    let mut conn = connect(&c, server_addr).unwrap();
    conn.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    conn.write_all(b"WHO\n").unwrap();
    let mut line = String::new();
    BufReader::new(conn.try_clone().unwrap())
        .read_line(&mut line)
        .unwrap();
    let local = conn.local_addr().unwrap();
    assert_eq!(
        line.trim(),
        local.to_string(),
        "the server sees the client through both splitters"
    );
    std::thread::sleep(Duration::from_millis(1200));
    for (name, sat_leg) in [("term", "server"), ("hub", "client")] {
        let (_, v) = control(&n.sock(name), "GET", "/v1/flows?state=live", None).unwrap();
        let f = v["flows"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["client"] == local.to_string())
            .cloned();
        let f = f.unwrap_or_else(|| panic!("{name} did not split the flow: {v}"));
        assert_eq!(f["legs"]["satellite"], sat_leg);
        assert_eq!(f["legs"][sat_leg]["cc"], "reno", "{name}: {f}");
    }
    drop(conn);
    let data = payload(1 << 20);
    let mut up = connect(&c, server_addr).unwrap();
    up.write_all(b"UP\n").unwrap();
    up.write_all(&data).unwrap();
    up.shutdown(Shutdown::Write).unwrap();
    let mut reply = String::new();
    up.read_to_string(&mut reply).unwrap();
    assert_eq!(reply.trim(), format!("{} {}", data.len(), sha(&data)));
}

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
    let _g = serial();
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
    assert!(
        took > 0.9 * wire && took < 3.0 * wire,
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
    let _g = serial();
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
