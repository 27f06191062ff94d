//! The relay through a real `perigee gateway run` in namespaces: transparency, exact bytes both
//! ways, half-close and resets, a thousand flows at once, and a terminal and a hub in series.
mod common;
use common::*;
use perigee_testkit::wait_for;
use std::io::{BufRead, BufReader, ErrorKind, Read, Write};
use std::net::Shutdown;
use std::time::Duration;

#[test]
fn transparency_v4_and_v6() {
    let Some(_g) = serial() else { return };
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

#[test]
fn exact_transfers_both_ways() {
    let Some(_g) = serial() else { return };
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
    // The workers report to the master once a second.
    wait_counters(&t, "every byte counted, no flow left live", |c| {
        c["bytes_up"].as_u64().unwrap() >= 100 << 20
            && c["bytes_down"].as_u64().unwrap() >= 100 << 20
            && c["flows_live"] == 0
    });
}

#[test]
fn half_close_and_resets() {
    let Some(_g) = serial() else { return };
    let mut t = Topo::new("hc");
    t.start(&t.config());
    let rx = server(&t.s, sa(SERVER4, 5001));
    // Server closes its sending side first; the client can still send.
    let mut c = connect(&t.c, sa(SERVER4, 5001)).unwrap();
    c.set_read_timeout(Some(HUNG)).unwrap();
    c.write_all(b"HALF\n").unwrap();
    let mut buf = [0u8; 16];
    assert_eq!(c.read(&mut buf).unwrap(), 0, "EOF forwarded to the client");
    c.write_all(&payload(100_000)).unwrap();
    c.shutdown(Shutdown::Write).unwrap();
    let seen = rx.recv_timeout(HUNG).unwrap();
    assert_eq!(seen.result, "got 100000");

    // Client resets → the server gets a reset.
    let c = connect(&t.c, sa(SERVER4, 5001)).unwrap();
    (&c).write_all(b"HOLD\n").unwrap();
    // Both legs up before the reset (the flow is listed once the server leg has connected).
    wait_flow(&t, c.local_addr().unwrap()).expect("the HOLD flow split");
    std::thread::sleep(Duration::from_millis(200));
    set_linger0(&c);
    drop(c);
    let seen = rx.recv_timeout(HUNG).unwrap();
    assert_eq!(seen.result, "reset");

    // Server resets → the client gets a reset.
    let mut c = connect(&t.c, sa(SERVER4, 5001)).unwrap();
    c.set_read_timeout(Some(HUNG)).unwrap();
    c.write_all(b"RST\n").unwrap();
    let e = c.read(&mut buf).expect_err("reset expected");
    assert_eq!(e.kind(), ErrorKind::ConnectionReset, "{e}");
}

#[test]
fn thousand_concurrent_flows() {
    let Some(_g) = serial() else { return };
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
        c.set_read_timeout(Some(HUNG)).unwrap();
        let mut line = String::new();
        BufReader::new(c).read_line(&mut line).unwrap();
        assert_eq!(line.trim(), c.local_addr().unwrap().to_string());
    }
    wait_counters(&t, "1000 live flows", |v| v["flows_live"] == 1000);
    assert_eq!(t.flows("live").len(), 1000);
    for mut c in conns {
        c.write_all(b"x").unwrap();
        let mut b = [0u8; 1];
        c.read_exact(&mut b).unwrap();
        assert_eq!(&b, b"x");
    }
}

#[test]
fn hub_and_terminal_in_series() {
    let Some(_g) = serial() else { return };
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
    conn.set_read_timeout(Some(HUNG)).unwrap();
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
    for (name, sat_leg) in [("term", "server"), ("hub", "client")] {
        // Listed, its legs sampled, within a report period (1 s).
        let (f, _) = wait_for(&format!("{name} splitting the flow"), HUNG, || {
            let (_, v) = control(&n.sock(name), "GET", "/v1/flows?state=live", None).unwrap();
            v["flows"]
                .as_array()?
                .iter()
                .find(|f| {
                    f["client"] == local.to_string()
                        && f["legs"][sat_leg]["cc"]
                            .as_str()
                            .is_some_and(|cc| !cc.is_empty())
                })
                .cloned()
        });
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
