//! What the resolver protects, against the installed unbound (root; namespaces
//! pd-<tag>-{g,s} per test): rebinding (a public name never answers a private address),
//! DNSSEC (a forged answer in a signed zone is refused, a genuine one carries AD; NSD serves a
//! zone ldns-signzone signed), and the peer path (every upstream query goes over TCP to the
//! tunnel's local end, connections reused, never as UDP to the upstream).
mod common;
use common::dnssec::{forge_address, signed_zone, write_zone, Nsd};
use common::*;
use perigee_dns::{probe_route, DnsConfig, Forwarding, ManagerOptions, UnboundManager};
use perigee_testkit::dns::{address_of, Responder, TYPE_A, TYPE_AAAA};
use perigee_testkit::run;
use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Generous: only a hung resolver takes this long.
const HUNG: Duration = Duration::from_secs(30);

fn upstream53() -> SocketAddr {
    format!("{UPSTREAM}:53").parse().unwrap()
}

fn manager(dir: &Path) -> UnboundManager {
    UnboundManager::new(ManagerOptions {
        paths: paths(dir),
        ..ManagerOptions::default()
    })
}

#[test]
fn a_public_name_answering_a_private_address_is_refused_unless_its_zone_is_private() {
    let lab = Lab::new("rb");
    let dir = temp_dir("rb");
    let up = in_ns(&lab.up, || Responder::bind(&[upstream53()], Duration::ZERO));
    in_ns(&lab.gw, move || {
        let mut mgr = manager(&dir);
        let cfg = DnsConfig {
            private_domains: vec!["corp.pd.example".parse().unwrap()],
            ..forwarding_to_upstream()
        };
        mgr.apply(&cfg, &served(), Forwarding::Direct).unwrap();
        // A public address is answered as usual.
        let www = "www.pd.example";
        assert_eq!(ask(www).unwrap(), vec![address_of(www, TYPE_A)]);
        // The upstream answers a public name with a LAN address: the gateway drops the address.
        let rebind = "lan-nas.pd.example";
        for qtype in [TYPE_A, TYPE_AAAA] {
            let r = ask_reply(rebind, qtype).unwrap();
            assert_eq!((r.rcode, r.addrs.clone()), (0, vec![]), "{qtype}: {r:?}");
        }
        assert_eq!(
            up.count(rebind),
            2,
            "the upstream did answer, with a private address"
        );
        // The operator's internal zone, and the site zones built in, may answer private addresses.
        for name in ["lan-nas.corp.pd.example", "lan-printer.home.arpa"] {
            for qtype in [TYPE_A, TYPE_AAAA] {
                let r = ask_reply(name, qtype).unwrap();
                assert_eq!(r.addrs, vec![address_of(name, qtype)], "{name} {qtype}");
            }
        }
        // Protection off: any name may answer any address.
        let off = DnsConfig {
            rebind_protection: false,
            ..cfg
        };
        mgr.apply(&off, &served(), Forwarding::Direct).unwrap();
        let other = "lan-cam.pd.example";
        assert_eq!(ask(other).unwrap(), vec![address_of(other, TYPE_A)]);
        mgr.stop();
        let _ = std::fs::remove_dir_all(&dir);
    });
}

#[test]
fn dnssec_answers_are_validated_a_forged_one_refused_a_genuine_one_marked_ad() {
    let lab = Lab::new("sec");
    let dir = temp_dir("sec");
    let zone = "sec.pd.example";
    let (signed, ds) = signed_zone(&dir, zone, "good IN A 192.0.2.7\nforged IN A 192.0.2.8\n");
    forge_address(
        &signed,
        &format!("forged.{zone}."),
        "192.0.2.8",
        "192.0.2.66",
    );
    let _nsd = Nsd::start(&lab.up, &dir, &[(zone, &signed)]);
    // The test zone's key is the trust anchor (the daemon's default is the root's).
    let anchor = dir.join("anchor.ds");
    std::fs::write(&anchor, &ds).unwrap();
    let (good, forged) = (format!("good.{zone}"), format!("forged.{zone}"));
    in_ns(&lab.gw, move || {
        let mut p = paths(&dir);
        p.trust_anchor_file = Some(anchor);
        let mut mgr = UnboundManager::new(ManagerOptions {
            paths: p,
            ..ManagerOptions::default()
        });
        let validating = DnsConfig {
            dnssec_validation: true,
            ..forwarding_to_upstream()
        };
        mgr.apply(&validating, &served(), Forwarding::Direct)
            .unwrap();
        let r = ask_reply(&good, TYPE_A).unwrap();
        assert_eq!((r.rcode, r.ad), (0, true), "validated: {r:?}");
        assert_eq!(r.addrs, vec!["192.0.2.7".parse::<IpAddr>().unwrap()]);
        let r = ask_reply(&forged, TYPE_A).unwrap();
        assert_eq!(
            (r.rcode, r.addrs.clone()),
            (2, vec![]),
            "a forged answer is SERVFAIL: {r:?}"
        );
        let s = mgr.stats();
        assert!(s.dnssec_validation, "{s:?}");
        assert!(
            s.dnssec_secure_answers >= 1 && s.dnssec_bogus_answers >= 1,
            "{s:?}"
        );

        // Without validation the forgery goes through, and nothing carries AD.
        let trusting = DnsConfig {
            dnssec_validation: false,
            ..validating
        };
        mgr.apply(&trusting, &served(), Forwarding::Direct).unwrap();
        mgr.flush(None).unwrap();
        let r = ask_reply(&forged, TYPE_A).unwrap();
        assert_eq!(
            r.addrs,
            vec!["192.0.2.66".parse::<IpAddr>().unwrap()],
            "{r:?}"
        );
        assert!(!r.ad);
        assert!(!ask_reply(&good, TYPE_A).unwrap().ad);
        mgr.stop();
        let _ = std::fs::remove_dir_all(&dir);
    });
}

/// Stands in for the peer path's local end: accepts DNS-over-TCP connections on
/// 127.0.0.1:8853 and relays each to the upstream over TCP, counting connections and messages.
#[derive(Clone, Default)]
struct Tunnel {
    connections: Arc<AtomicU32>,
    queries: Arc<AtomicU32>,
}

impl Tunnel {
    /// Call from the gateway's namespace; serves on threads of its own.
    fn start(&self) {
        let l = TcpListener::bind(perigee_dns::PEER_PATH_RESOLVER).expect("127.0.0.1:8853");
        let t = self.clone();
        std::thread::spawn(move || {
            for c in l.incoming() {
                let Ok(client) = c else { return };
                t.connections.fetch_add(1, Ordering::Relaxed);
                let t = t.clone();
                std::thread::spawn(move || t.relay(client));
            }
        });
    }

    fn relay(&self, mut client: TcpStream) {
        let Ok(mut server) = TcpStream::connect_timeout(&upstream53(), HUNG) else {
            return;
        };
        while let Some(q) = framed(&mut client) {
            self.queries.fetch_add(1, Ordering::Relaxed);
            let Some(a) = server.write_all(&q).ok().and_then(|_| framed(&mut server)) else {
                return;
            };
            if client.write_all(&a).is_err() {
                return;
            }
        }
    }
}

/// One length-prefixed DNS message, prefix included.
fn framed(c: &mut TcpStream) -> Option<Vec<u8>> {
    let mut len = [0u8; 2];
    c.read_exact(&mut len).ok()?;
    let mut m = vec![0u8; usize::from(u16::from_be_bytes(len))];
    c.read_exact(&mut m).ok()?;
    let mut out = len.to_vec();
    out.extend_from_slice(&m);
    Some(out)
}

#[test]
fn through_the_peer_path_every_upstream_query_goes_over_tcp_to_its_local_end() {
    let lab = Lab::new("pp");
    let dir = temp_dir("pp");
    let up = in_ns(&lab.up, || Responder::bind(&[upstream53()], Duration::ZERO));
    // Counts any datagram the gateway would send to the upstream's port 53 (and drops it).
    run(&[
        "ip",
        "netns",
        "exec",
        &lab.gw,
        "nft",
        "add table inet pdpp; \
         add chain inet pdpp out { type filter hook output priority 0; }; \
         add rule inet pdpp out ip daddr 10.98.2.10 udp dport 53 counter drop",
    ]);
    let tunnel = Tunnel::default();
    let seen = tunnel.clone();
    let names: Vec<String> = (0..5).map(|i| format!("n{i}.pp.pd.example")).collect();
    let asked = names.clone();
    in_ns(&lab.gw, move || {
        tunnel.start();
        let mut mgr = manager(&dir);
        mgr.apply(&forwarding_to_upstream(), &served(), Forwarding::PeerPath)
            .unwrap();
        for name in &asked {
            assert_eq!(ask(name).unwrap(), vec![address_of(name, TYPE_A)], "{name}");
        }
        let round = probe_route(Forwarding::PeerPath, &[], HUNG);
        assert!(round.len() == 1 && round[0].ok, "{round:?}");
        assert_eq!(round[0].upstream, "127.0.0.1@8853 (peer path)");
        mgr.stop();
        let _ = std::fs::remove_dir_all(&dir);
    });
    for name in &names {
        assert_eq!(
            up.count(name),
            1,
            "{name} reached the upstream once, through the tunnel"
        );
    }
    let (connections, queries) = (
        seen.connections.load(Ordering::Relaxed),
        seen.queries.load(Ordering::Relaxed),
    );
    // Every query the upstream saw came through the tunnel (the probe's too); unbound keeps its
    // upstream connection open for the next query.
    assert!(queries > names.len() as u32, "{queries}");
    assert!(
        connections >= 1 && connections < queries,
        "reused: {connections} connections for {queries} queries"
    );
    let udp = run(&[
        "ip",
        "netns",
        "exec",
        &lab.gw,
        "nft",
        "list chain inet pdpp out",
    ]);
    assert!(
        udp.contains("counter packets 0 bytes 0"),
        "no DNS over UDP: {udp}"
    );
}

/// What validation costs across the satellite, counted as upstream queries at the peer path's
/// local end (each a satellite round trip at a terminal, one after the other): a signed root of
/// the test's own (its key the trust anchor) delegates `example.`, which delegates two signed
/// zones and an unsigned one.
#[test]
fn validation_asks_for_a_new_zones_keys_once_and_a_known_zone_costs_nothing_more() {
    let lab = Lab::new("cost");
    let dir = temp_dir("cost");
    let delegation =
        |child: &str| format!("{child} IN NS ns.{child}\nns.{child} IN A {UPSTREAM}\n");
    let (sec, sec_ds) = signed_zone(
        &dir,
        "sec.example",
        "www IN A 192.0.2.11\nwww2 IN A 192.0.2.12\n",
    );
    let (sec2, sec2_ds) = signed_zone(&dir, "sec2.example", "www IN A 192.0.2.21\n");
    let plain = write_zone(&dir, "plain.example", "www IN A 192.0.2.31\n");
    let (example, example_ds) = signed_zone(
        &dir,
        "example",
        &format!(
            "{}{sec_ds}\n{}{sec2_ds}\n{}",
            delegation("sec"),
            delegation("sec2"),
            delegation("plain")
        ),
    );
    let (root, root_ds) = signed_zone(
        &dir,
        ".",
        &format!("{}{example_ds}\n", delegation("example.")),
    );
    let _nsd = Nsd::start(
        &lab.up,
        &dir,
        &[
            (".", &root),
            ("example", &example),
            ("sec.example", &sec),
            ("sec2.example", &sec2),
            ("plain.example", &plain),
        ],
    );
    let anchor = dir.join("anchor.ds");
    std::fs::write(&anchor, &root_ds).unwrap();
    let tunnel = Tunnel::default();
    let seen = tunnel.clone();
    let costs = in_ns(&lab.gw, move || {
        tunnel.start();
        let mut p = paths(&dir);
        p.trust_anchor_file = Some(anchor);
        let mut mgr = UnboundManager::new(ManagerOptions {
            paths: p,
            ..ManagerOptions::default()
        });
        let mut costs = Vec::new();
        for validate in [true, false] {
            let cfg = DnsConfig {
                dnssec_validation: validate,
                ..forwarding_to_upstream()
            };
            mgr.apply(&cfg, &served(), Forwarding::PeerPath).unwrap();
            mgr.flush(None).unwrap();
            for (name, addr, secure) in [
                ("www.sec.example", "192.0.2.11", true),
                ("www2.sec.example", "192.0.2.12", true),
                ("www.sec2.example", "192.0.2.21", true),
                ("www.plain.example", "192.0.2.31", false),
            ] {
                let before = seen.queries.load(Ordering::Relaxed);
                let r = ask_reply(name, TYPE_A).unwrap();
                assert_eq!(
                    r.addrs,
                    vec![addr.parse::<IpAddr>().unwrap()],
                    "{name}: {r:?}"
                );
                assert_eq!(
                    r.ad,
                    validate && secure,
                    "{name} validate={validate}: {r:?}"
                );
                costs.push((
                    validate,
                    name,
                    seen.queries.load(Ordering::Relaxed) - before,
                ));
            }
        }
        mgr.stop();
        let _ = std::fs::remove_dir_all(&dir);
        costs
    });
    eprintln!("upstream queries per lookup (validate, name, queries): {costs:?}");
    let cost = |validate: bool, name: &str| {
        costs
            .iter()
            .find(|c| c.0 == validate && c.1 == name)
            .unwrap()
            .2
    };
    for name in [
        "www.sec.example",
        "www2.sec.example",
        "www.sec2.example",
        "www.plain.example",
    ] {
        assert_eq!(
            cost(false, name),
            1,
            "without validation one query per name: {costs:?}"
        );
    }
    // The first name: the trust anchor's keys, then each zone's DS and DNSKEY down the chain.
    assert!(cost(true, "www.sec.example") > 3, "{costs:?}");
    // Another name in a zone whose keys are cached: nothing more.
    assert_eq!(cost(true, "www2.sec.example"), 1, "{costs:?}");
    // A new signed zone under a known parent: its DS and its DNSKEY.
    assert_eq!(cost(true, "www.sec2.example"), 3, "{costs:?}");
    // A new unsigned zone: the parent's proof that it has no DS.
    assert_eq!(cost(true, "www.plain.example"), 2, "{costs:?}");
}
