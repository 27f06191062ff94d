//! The gateway's resolver against a real kernel and a real unbound: namespaces
//! pd-<tag>-{c,g,s} (client, gateway, server; prefix `pd` is this file's). The server namespace
//! holds the upstream resolver (a responder that counts what it is asked) and an HTTP origin.
mod common;
use common::*;
use perigee_testkit::dns::{address_of, query, Reply, Responder, TYPE_A, TYPE_AAAA};
use perigee_testkit::run_stdin;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

/// The upstream resolver on the server's addresses; `delay` stands in for the satellite.
fn upstream(t: &Topo, delay: Duration) -> Responder {
    in_ns(&t.s, move || {
        Responder::bind(&[sa(SERVER4, 53), sa(SERVER6, 53)], delay)
    })
}

/// The test topology's config with the resolver on, forwarding to the server's responder.
fn dns_config(t: &Topo) -> serde_json::Value {
    let mut cfg = t.config();
    // The responder is no DNSSEC-aware resolver: validation would refuse its answers.
    cfg["dns"] = serde_json::json!({"enabled": true, "upstream": [SERVER4],
                                    "probe_timeout_ms": 300, "dnssec_validation": false});
    cfg
}

/// One query from the client namespace, answered within HUNG.
fn ask(t: &Topo, server: SocketAddr, name: &str, qtype: u16, tcp: bool) -> std::io::Result<Reply> {
    ask_within(t, server, name, qtype, tcp, HUNG)
}

/// `ask` giving up after `within` (a query that must go unanswered).
fn ask_within(
    t: &Topo,
    server: SocketAddr,
    name: &str,
    qtype: u16,
    tcp: bool,
    within: Duration,
) -> std::io::Result<Reply> {
    let name = name.to_string();
    in_ns(&t.c, move || query(server, &name, qtype, tcp, within))
}

fn dns_stats(t: &Topo) -> serde_json::Value {
    let (st, v) = control(&t.sock(), "GET", "/v1/dns/stats", None).unwrap();
    assert_eq!(st, 200, "{v}");
    v
}

/// Makes the upstream unreachable (or reachable again): its namespace drops port 53.
fn block_upstream(t: &Topo, on: bool) {
    let rules = if on {
        "table inet pdblock {\n chain input {\n  type filter hook input priority 0; policy accept;\n  \
         meta l4proto { udp, tcp } th dport 53 drop\n }\n}\n"
            .to_string()
    } else {
        "table inet pdblock {}\ndelete table inet pdblock\n".to_string()
    };
    run_stdin(&["ip", "netns", "exec", &t.s, "nft", "-f", "-"], &rules);
}

/// Polls /v1/health until `cond` holds on its problems (or panics after `within`).
fn wait_problems(t: &Topo, within: Duration, what: &str, cond: impl Fn(&[String]) -> bool) {
    let deadline = Instant::now() + within;
    loop {
        let p = health_problems(t);
        if cond(&p) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{what} not seen within {within:?}: {p:?}\n{}",
            t.log()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn a_repeated_name_is_answered_from_the_cache_without_the_upstream() {
    let Some(_g) = serial() else { return };
    let mut t = Topo::with_prefix("pd", "hit");
    let up = upstream(&t, Duration::from_millis(300));
    t.start_with_services(&dns_config(&t));
    let name = "www.pd.example";
    let first = ask(&t, sa(SERVER4, 53), name, TYPE_A, false)
        .unwrap_or_else(|e| panic!("{e}\n{}", t.log()));
    assert_eq!(first.addrs, vec![address_of(name, TYPE_A)]);
    assert!(
        first.elapsed >= Duration::from_millis(300),
        "a miss waits for the upstream: {:?}",
        first.elapsed
    );
    assert_eq!(up.count(name), 1);
    let second = ask(&t, sa(SERVER4, 53), name, TYPE_A, false).unwrap();
    assert_eq!(second.addrs, first.addrs);
    assert_eq!(
        up.count(name),
        1,
        "the second query never reached the upstream"
    );
    // A hit does not wait for the upstream: the count above says it was never asked.
    eprintln!("miss {:?}, hit {:?}", first.elapsed, second.elapsed);
    let s = dns_stats(&t);
    assert_eq!(s["running"], true, "{s}");
    assert!(s["queries"].as_u64().unwrap() >= 2, "{s}");
    assert!(s["cache_hits"].as_u64().unwrap() >= 1, "{s}");
    assert!(s["upstream_resolutions"].as_u64().unwrap() >= 1, "{s}");
    let mean_ms = s["mean_upstream_ms"].as_f64().unwrap();
    // At least the upstream's delay (a timer); more only means a busy machine.
    assert!(mean_ms >= 300.0 && mean_ms < HUNG.as_millis() as f64, "{s}");
    // Satellite time saved = hits × the mean upstream resolution time.
    let saved = s["satellite_time_saved_s"].as_f64().unwrap();
    let expected = s["cache_hits"].as_f64().unwrap() * mean_ms / 1000.0;
    assert!((saved - expected).abs() < 1e-6, "{s}");
    assert!(s["hit_ratio"].as_f64().unwrap() > 0.0, "{s}");
    assert!(s["intercepted_packets"].as_u64().unwrap() >= 2, "{s}");
}

#[test]
fn an_expired_name_is_served_stale_while_the_upstream_is_unreachable() {
    let Some(_g) = serial() else { return };
    let mut t = Topo::with_prefix("pd", "stale");
    let up = upstream(&t, Duration::ZERO);
    t.start_with_services(&dns_config(&t));
    // A one-second TTL: expired by the time the upstream goes away.
    let name = "ttl1-stale.pd.example";
    let fresh = ask(&t, sa(SERVER4, 53), name, TYPE_A, false)
        .unwrap_or_else(|e| panic!("{e}\n{}", t.log()));
    assert_eq!(fresh.ttl, Some(1));
    std::thread::sleep(Duration::from_millis(2_200));
    block_upstream(&t, true);
    let stale = ask(&t, sa(SERVER4, 53), name, TYPE_A, false)
        .unwrap_or_else(|e| panic!("expired name not served while the upstream is down: {e}"));
    assert_eq!(stale.addrs, fresh.addrs);
    // At once, not after a client timeout or the upstream's retries (seconds: the upstream drops
    // every query): the bound tells the two apart, it is no performance target.
    assert!(
        stale.elapsed < Duration::from_secs(1),
        "served at once, not after the upstream: {:?}",
        stale.elapsed
    );
    assert_eq!(stale.ttl, Some(30), "RFC 8767's stale answer TTL");
    assert_eq!(up.count(name), 1);
    // The upstream really is gone: a name never seen gets no address.
    let never = ask_within(
        &t,
        sa(SERVER4, 53),
        "never-seen.pd.example",
        TYPE_A,
        false,
        Duration::from_secs(3),
    );
    assert!(
        never.as_ref().map(|r| r.addrs.is_empty()).unwrap_or(true),
        "{never:?}"
    );
    assert_eq!(up.count("never-seen.pd.example"), 0);
    let s = dns_stats(&t);
    assert!(s["stale_answers"].as_u64().unwrap() >= 1, "{s}");
}

/// A customer's own resolver beside the upstream, on addresses of its own in the server namespace.
const CUSTOMER4: &str = "10.99.2.20";
const CUSTOMER6: &str = "fd99:2::20";

#[test]
fn queries_to_listed_resolvers_are_answered_here_and_a_customers_own_resolver_stays_theirs() {
    let Some(_g) = serial() else { return };
    let mut t = Topo::with_prefix("pd", "icpt");
    let up = upstream(&t, Duration::ZERO);
    for (cidr, dad) in [("10.99.2.20/24", false), ("fd99:2::20/64", true)] {
        let mut args = vec!["ip", "-n", &t.s, "addr", "add", cidr, "dev", "s0"];
        if dad {
            args.push("nodad");
        }
        perigee_testkit::run(&args);
    }
    let own = in_ns(&t.s, || {
        Responder::bind(&[sa(CUSTOMER4, 53), sa(CUSTOMER6, 53)], Duration::ZERO)
    });
    let mut cfg = dns_config(&t);
    cfg["dns"]["intercept_for"] = serde_json::json!(["192.0.2.99", "2001:db8::99"]);
    t.start_with_services(&cfg);
    // Under test. (as satlab's web): a zone unbound would answer itself unless told to forward it.
    let name = "icpt.pd.test";
    // The upstream's configured address, the gateway's own, and listed addresses where no resolver
    // exists. (The upstream's IPv6 address is not in `dns.upstream` nor listed: like any unlisted
    // resolver it is asked itself.)
    let ours = [
        sa(SERVER4, 53),
        sa("10.99.1.1", 53),
        sa("192.0.2.99", 53),
        sa("fd99:1::1", 53),
        sa("2001:db8::99", 53),
    ];
    // The first pass fills the gateway's cache (one upstream query per type, more if unbound
    // retried a slow answer); from then on nothing asked of a listed address reaches the upstream.
    let mut after_first_pass = None;
    for server in ours {
        for tcp in [false, true] {
            for qtype in [TYPE_A, TYPE_AAAA] {
                let r = ask(&t, server, name, qtype, tcp).unwrap_or_else(|e| {
                    panic!("{server} tcp={tcp}: {e}\n{}", t.log());
                });
                assert_eq!(r.from, server, "the answer comes from the address asked");
                assert_eq!(r.addrs, vec![address_of(name, qtype)], "{server} tcp={tcp}");
            }
            after_first_pass.get_or_insert_with(|| up.count(name));
        }
    }
    let first = after_first_pass.unwrap();
    assert!(first >= 2, "each type asked upstream once: {first}");
    assert_eq!(
        up.count(name),
        first,
        "every answer after the first (even to the upstream's own address) came from the gateway"
    );
    let s = dns_stats(&t);
    // Three intercepted addresses, each asked both types over UDP and over TCP.
    assert!(s["intercepted_packets"].as_u64().unwrap() >= 12, "{s}");
    assert_eq!(
        s["intercepted_resolvers"],
        serde_json::json!([SERVER4, "192.0.2.99", "2001:db8::99"]),
        "{s}"
    );

    // The customer's own resolver, which the operator did not list: it gets the query and answers it.
    let theirs = "theirs.pd.test";
    for (i, server) in [sa(CUSTOMER4, 53), sa(CUSTOMER6, 53)]
        .into_iter()
        .enumerate()
    {
        for tcp in [false, true] {
            let r = ask(&t, server, theirs, TYPE_A, tcp)
                .unwrap_or_else(|e| panic!("{server} tcp={tcp}: {e}\n{}", t.log()));
            assert_eq!(
                (r.from, r.addrs.clone()),
                (server, vec![address_of(theirs, TYPE_A)])
            );
            assert_eq!(
                own.count(theirs),
                2 * i as u32 + u32::from(tcp) + 1,
                "{server} tcp={tcp}"
            );
        }
    }
    assert_eq!(
        up.count(theirs),
        0,
        "never answered by the gateway's upstream"
    );
    // An address nobody listed and where no resolver is: the query goes there, unanswered.
    for tcp in [false, true] {
        let lost = ask_within(
            &t,
            sa("198.51.100.7", 53),
            theirs,
            TYPE_A,
            tcp,
            Duration::from_secs(1),
        );
        assert!(lost.is_err(), "tcp={tcp}: {lost:?}");
    }

    // Interception off: the gateway answers only what is sent to it; the rest goes where it was sent.
    let mut cfg = dns_config(&t);
    cfg["dns"]["intercept"] = false.into();
    cfg["revision"] = "t2".into();
    let (st, v) = control(&t.sock(), "PUT", "/v1/config", Some(&cfg)).unwrap();
    assert_eq!(st, 200, "{v}");
    let direct = ask(&t, sa(SERVER4, 53), name, TYPE_A, false).unwrap();
    assert_eq!(direct.addrs, vec![address_of(name, TYPE_A)]);
    assert_eq!(up.count(name), 3, "this one went to the upstream itself");
    let via_tcp = ask(&t, sa(SERVER4, 53), name, TYPE_AAAA, true).unwrap();
    assert_eq!(via_tcp.addrs, vec![address_of(name, TYPE_AAAA)]);
    assert_eq!(up.count(name), 4, "over TCP too");
    for tcp in [false, true] {
        let unanswered = ask_within(
            &t,
            sa("192.0.2.99", 53),
            name,
            TYPE_A,
            tcp,
            Duration::from_secs(3),
        );
        assert!(unanswered.is_err());
    }
    let own = ask(&t, sa("10.99.1.1", 53), name, TYPE_A, true).unwrap();
    assert_eq!(own.addrs, vec![address_of(name, TYPE_A)]);
}

/// An HTTP origin on the server's port 80: every request gets a small cacheable page.
fn origin(t: &Topo) {
    let l = in_ns(&t.s, || TcpListener::bind(sa(SERVER4, 80)).unwrap());
    std::thread::spawn(move || {
        for c in l.incoming() {
            let Ok(mut c) = c else { return };
            std::thread::spawn(move || {
                let mut req = Vec::new();
                let mut buf = [0u8; 4096];
                while !req.windows(4).any(|w| w == b"\r\n\r\n") {
                    match c.read(&mut buf) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => req.extend_from_slice(&buf[..n]),
                    }
                }
                let body = "hello from the origin\n";
                let _ = write!(
                    c,
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nCache-Control: max-age=60\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
            });
        }
    });
}

/// GET http://<host><path> from the client, to the server's address (as a browser does once
/// it has the name's address); the status and how long it took.
fn fetch(t: &Topo, host: &str, path: &str) -> (u16, Duration) {
    let req = format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n");
    in_ns(&t.c, move || {
        let started = Instant::now();
        let mut c = TcpStream::connect_timeout(&sa(SERVER4, 80), HUNG).unwrap();
        c.set_read_timeout(Some(HUNG)).unwrap();
        c.write_all(req.as_bytes()).unwrap();
        let mut resp = String::new();
        let _ = c.read_to_string(&mut resp);
        let status = resp
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        (status, started.elapsed())
    })
}

/// The cache with its resolver unreachable: port 80 steps aside to the splitter within a few
/// seconds, a fetch by host name completes at once, and the cache comes back with the resolver.
fn cache_steps_aside(tag: &str, dns_enabled: bool) {
    let Some(_g) = serial() else { return };
    let mut t = Topo::with_prefix("pd", tag);
    let _up = upstream(&t, Duration::ZERO);
    origin(&t);
    let mut cfg = dns_config(&t);
    cfg["dns"]["enabled"] = dns_enabled.into();
    cfg["cache"] = serde_json::json!({"enabled": true, "port": 3129, "admin_port": 3130,
                                      "memory_mb": 16, "disk_mb": 0});
    t.start_with_services(&cfg);
    // A name Squid has not looked up before in each phase: it must ask its resolver.
    wait_problems(&t, HUNG, "the cache serving", |p| {
        !p.iter().any(|x| x.starts_with("cache:"))
    });
    let (status, _) = fetch(&t, "before.pd.example", "/before");
    assert_eq!(status, 200);
    assert!(
        wait_logged(&t, "/before"),
        "through Squid while the resolver answers: {:?}",
        squid_urls(&t)
    );

    block_upstream(&t, true);
    wait_problems(&t, HUNG, "the cache stepping aside", |p| {
        p.iter()
            .any(|x| x.starts_with("cache:") && x.contains("resolver"))
    });
    // Through Squid it would wait for the dead resolver and answer 503 (dns_timeout, 5 s).
    let (status, took) = fetch(&t, "aside.pd.example", "/aside");
    eprintln!("a fetch by host name with the resolver dead: {status} after {took:?}");
    assert_eq!(status, 200);
    assert!(
        never_logged(&t, "/aside"),
        "went to the splitter, not to Squid"
    );

    block_upstream(&t, false);
    wait_problems(&t, HUNG, "the cache back", |p| {
        !p.iter().any(|x| x.starts_with("cache:"))
    });
    let (status, _) = fetch(&t, "back.pd.example", "/back");
    assert_eq!(status, 200);
    assert!(wait_logged(&t, "/back"), "through Squid again");
}

#[test]
fn the_cache_steps_aside_when_the_gateway_resolver_cannot_reach_its_upstream() {
    cache_steps_aside("aside", true);
}

#[test]
fn the_cache_steps_aside_when_squid_resolver_is_unreachable() {
    cache_steps_aside("asidens", false);
}
