//! Root-only: `hybla_ld` in the running kernel. Namespaces pb-ld-a <-> pb-ld-b over a veth, and
//! pb-ld-a <-> pb-ld-r (a router) <-> pb-ld-b for the bottleneck:
//! - one lost segment (an nft rule drops one packet) with no queue: `hybla` halves its window,
//!   `hybla_ld` keeps it (the bit-error case);
//! - a 20 Mbit/s HTB bottleneck at the router with a 2000-packet FIFO and no loss: `hybla`
//!   keeps tens of ms queued (all the stack lets one socket queue), `hybla_ld` stays near its
//!   5 ms threshold (congestion still counts);
//! - the registration: next to hybla over the same pinned maps, replaced when its info says an
//!   older build or other maps, left alone when a newer build registered it, re-registered
//!   when gone; hybla's own registration is never touched (others use it meanwhile).
//!
//! Needs Perigee's BPF hybla (per-namespace parameters); with the kernel's tcp_hybla the flow
//! tests say SKIPPED. Serialised with the other Hybla tests (common::root_and_lock).
use std::io::Write;
use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::os::fd::FromRawFd;
use std::sync::mpsc;
use std::thread;

mod common;
use common::{connect_v4, in_netns};
use perigee_hybla::{HyblaParams, BPF_VERSION, LD_INFO_PIN, LD_NAME, LD_OPS_PIN};
use perigee_testkit::{count_to_eof, run, run_stdin, tcp_info, NetnsGuard};

const NS_A: &str = "pb-ld-a";
const NS_B: &str = "pb-ld-b";
const ADDR_A: &str = "10.214.0.1";
const ADDR_B: &str = "10.214.0.2";
const DEV_A: &str = "pbld-a";
const DEV_B: &str = "pbld-b";

fn namespaces() -> NetnsGuard {
    let nets = NetnsGuard::with_loopback_up(&[NS_A, NS_B]);
    run(&[
        "ip", "link", "add", DEV_A, "netns", NS_A, "type", "veth", "peer", "name", DEV_B, "netns",
        NS_B,
    ]);
    for (ns, dev, addr) in [(NS_A, DEV_A, ADDR_A), (NS_B, DEV_B, ADDR_B)] {
        run(&[
            "ip",
            "-n",
            ns,
            "addr",
            "add",
            &format!("{addr}/30"),
            "dev",
            dev,
        ]);
        run(&["ip", "-n", ns, "link", "set", dev, "up"]);
    }
    nets
}

/// Perigee's BPF hybla and hybla_ld loaded, and namespace A's own entry (base RTT, ceiling).
/// None when the flows cannot run here.
fn ready(base_rtt_ms: u32, cwnd_max: u32) -> Option<()> {
    let st = perigee_hybla::load().expect("load");
    if !st.owned {
        perigee_testkit::cannot_run(
            "hybla is not Perigee's BPF one here (per-namespace parameters needed)",
        );
        return None;
    }
    assert!(st.ld.loaded, "hybla_ld not loaded: {:?}", st.ld);
    in_netns(NS_A, move || {
        perigee_hybla::set_netns_params(
            HyblaParams {
                rtt0_ms: 25,
                base_rtt_ms,
            },
            cwnd_max,
        )
    })
    .join()
    .unwrap()
    .expect("namespace A's entry");
    Some(())
}

fn unset_entry() {
    let _ = in_netns(NS_A, || perigee_hybla::unset_netns_params(None)).join();
}

/// A -> B: `bytes` with congestion control `cc` from a fresh socket; after each 64 KiB write
/// `probe` sees TCP_INFO. Returns the last TCP_INFO and the bytes B received.
fn flow(
    cc: &'static str,
    port: u16,
    bytes: usize,
    mut probe: impl FnMut(&libc::tcp_info) + Send + 'static,
) -> (libc::tcp_info, usize) {
    let (ready_tx, ready_rx) = mpsc::channel();
    let sink = in_netns(NS_B, move || {
        let l = TcpListener::bind((ADDR_B, port)).expect("bind sink");
        ready_tx.send(()).unwrap();
        let (mut s, _) = l.accept().expect("accept");
        count_to_eof(&mut s)
    });
    ready_rx.recv().unwrap();
    let info = in_netns(NS_A, move || {
        // SAFETY: plain socket syscalls on an fd handed to TcpStream afterwards.
        let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0) };
        assert!(fd >= 0);
        let rc = unsafe {
            libc::setsockopt(
                fd,
                libc::IPPROTO_TCP,
                libc::TCP_CONGESTION,
                cc.as_ptr().cast(),
                cc.len() as u32,
            )
        };
        assert_eq!(
            rc,
            0,
            "TCP_CONGESTION {cc}: {}",
            std::io::Error::last_os_error()
        );
        connect_v4(fd, ADDR_B.parse::<Ipv4Addr>().unwrap(), port).expect("connect A->B");
        let mut s = unsafe { TcpStream::from_raw_fd(fd) };
        let buf = vec![5u8; 1 << 16];
        for _ in 0..bytes >> 16 {
            s.write_all(&buf).unwrap();
            probe(&tcp_info(fd).unwrap());
        }
        // Wait until everything is acknowledged, so the last TCP_INFO is after any recovery.
        for _ in 0..500 {
            let i = tcp_info(fd).unwrap();
            if i.tcpi_unacked == 0 {
                break;
            }
            thread::sleep(std::time::Duration::from_millis(10));
        }
        let info = tcp_info(fd).unwrap();
        assert_eq!(
            info.tcpi_ca_state, 0,
            "{cc}: ended in CA state {}",
            info.tcpi_ca_state
        );
        info
    })
    .join()
    .unwrap();
    (info, sink.join().unwrap())
}

/// One table in B that drops the `nth` large packet to `port` (numgen counts per rule, so a
/// fresh table drops exactly one).
fn drop_one_packet(port: u16, nth: u32) {
    let _ = std::process::Command::new("ip")
        .args([
            "netns", "exec", NS_B, "nft", "delete", "table", "inet", "pbld",
        ])
        .output();
    run_stdin(
        &["ip", "netns", "exec", NS_B, "nft", "-f", "-"],
        &format!(
            "table inet pbld {{\n chain input {{\n  type filter hook input priority 0;\n  \
             tcp dport {port} meta length > 1000 numgen inc mod 1000000 == {nth} counter drop\n \
             }}\n}}\n"
        ),
    );
}

fn dropped() -> u64 {
    let out = run(&[
        "ip", "netns", "exec", NS_B, "nft", "list", "table", "inet", "pbld",
    ]);
    out.split("packets ")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

#[test]
fn a_bit_error_halves_hybla_but_not_hybla_ld() {
    let Some(_lock) = common::root_and_lock() else {
        return;
    };
    let nets = namespaces();
    // rho 24 (base RTT 600 ms, as on a GEO link), ceiling 200: slow start's first ACK takes
    // the window to 200, where the one loss finds it.
    if ready(600, 200).is_none() {
        return;
    }
    let mut got = Vec::new();
    for (cc, port) in [("hybla", 5311u16), (LD_NAME, 5312)] {
        drop_one_packet(port, 50);
        let (info, received) = flow(cc, port, 8 << 20, |_| {});
        assert_eq!(received, 8 << 20, "{cc}: the flow completed intact");
        assert_eq!(dropped(), 1, "{cc}: exactly one packet dropped");
        assert!(info.tcpi_total_retrans >= 1, "{cc}: the loss was repaired");
        got.push((cc, info.tcpi_snd_ssthresh, info.tcpi_snd_cwnd));
    }
    unset_entry();
    drop(nets);
    // The window was at the ceiling (200) when the segment was lost. hybla halves it (the
    // kernel may then restore 3/4 of it as ssthresh when it undoes part of the recovery);
    // hybla_ld keeps what the path carries within its 5 ms queue threshold (a veth carries far
    // more than 200 segments in 5 ms), so the whole window.
    let (_, hybla_ssthresh, _) = got[0];
    let (_, ld_ssthresh, ld_cwnd) = got[1];
    assert!(
        hybla_ssthresh <= 150,
        "hybla halves on any loss: ssthresh {hybla_ssthresh} ({got:?})"
    );
    assert!(
        ld_ssthresh >= 190 && ld_cwnd >= 190,
        "hybla_ld keeps the window after a loss without a queue ({got:?})"
    );
}

#[test]
fn a_standing_queue_cuts_hybla_ld_but_not_hybla() {
    let Some(_lock) = common::root_and_lock() else {
        return;
    };
    let nets = namespaces();
    // A short path: hybla's rho 1 (Reno's growth), hybla_ld's its floor (6, 36 segments per RTT:
    // its queue cuts, not its growth, must hold the queue); ceiling 1000 segments (1.45 MB).
    if ready(0, 1000).is_none() {
        return;
    }
    // A 20 Mbit/s bottleneck with a deep FIFO (2000 packets, 1.2 s at that rate), no loss.
    for argv in [
        vec![
            "tc", "qdisc", "add", "dev", DEV_A, "root", "handle", "1:", "htb", "default", "1",
        ],
        vec![
            "tc", "class", "add", "dev", DEV_A, "parent", "1:", "classid", "1:1", "htb", "rate",
            "20mbit", "ceil", "20mbit",
        ],
        vec![
            "tc", "qdisc", "add", "dev", DEV_A, "parent", "1:1", "handle", "10:", "pfifo", "limit",
            "2000",
        ],
    ] {
        let mut full = vec!["ip", "netns", "exec", NS_A];
        full.extend(argv);
        run(&full);
    }
    // 8 MB at 20 Mbit/s: ~3.4 s each. The RTT over the second half (after start-up).
    let mut rtts = Vec::new();
    for (cc, port) in [("hybla", 5313u16), (LD_NAME, 5314)] {
        let (tx, rx) = mpsc::channel();
        let (info, _) = flow(cc, port, 8 << 20, move |i| {
            let _ = tx.send((i.tcpi_rtt, i.tcpi_snd_cwnd));
        });
        let both: Vec<(u32, u32)> = rx.try_iter().collect();
        eprintln!(
            "{cc}: (rtt us, cwnd) {:?}",
            both.iter().step_by(8).collect::<Vec<_>>()
        );
        let s: Vec<u32> = both.iter().map(|x| x.0).collect();
        let late = &s[s.len() / 2..];
        let median = {
            let mut v = late.to_vec();
            v.sort_unstable();
            v[v.len() / 2]
        };
        rtts.push((cc, median, info.tcpi_total_retrans));
    }
    unset_entry();
    drop(nets);
    let (_, hybla_rtt, hybla_retrans) = rtts[0];
    let (_, ld_rtt, ld_retrans) = rtts[1];
    assert_eq!(
        (hybla_retrans, ld_retrans),
        (0, 0),
        "no loss in this test: {rtts:?}"
    );
    // hybla grows until something else stops it (here the stack keeps ~90 segments of one
    // socket queued: tens of ms); hybla_ld cuts its window to the rate times (min RTT + 2.5 ms).
    assert!(
        ld_rtt < 10_000,
        "hybla_ld keeps the standing queue near its 5 ms threshold: median RTT {ld_rtt} us ({rtts:?})"
    );
    assert!(
        hybla_rtt > 3 * ld_rtt,
        "hybla, which has no delay response, queues far more: {rtts:?}"
    );
}

/// `bpftool map show pinned PATH` -> the map's id.
fn pinned_id(path: &str) -> u32 {
    let out = run(&["bpftool", "map", "show", "pinned", path]);
    out.split(':')
        .next()
        .and_then(|n| n.trim().parse().ok())
        .expect("map id")
}

/// Rewrite the info map (version, params map id, netns map id), as another build would have.
fn write_info(version: u32, params_id: u32, netns_id: u32) {
    let mut argv = vec![
        "bpftool".to_string(),
        "map".into(),
        "update".into(),
        "pinned".into(),
        LD_INFO_PIN.into(),
        "key".into(),
    ];
    argv.extend(["0", "0", "0", "0"].map(String::from));
    argv.push("value".into());
    for v in [version, params_id, netns_id, 0] {
        argv.extend(v.to_le_bytes().iter().map(|b| b.to_string()));
    }
    let refs: Vec<&str> = argv.iter().map(String::as_str).collect();
    run(&refs);
}

fn info() -> perigee_hybla::LdInfo {
    let out = run(&[
        "bpftool",
        "-j",
        "map",
        "lookup",
        "pinned",
        LD_INFO_PIN,
        "key",
        "0",
        "0",
        "0",
        "0",
    ]);
    let v: serde_json::Value = serde_json::from_str(&out).expect("bpftool json");
    let bytes: Vec<u8> = v["value"]
        .as_array()
        .expect("value bytes")
        .iter()
        .map(|b| u8::from_str_radix(b.as_str().unwrap().trim_start_matches("0x"), 16).unwrap())
        .collect();
    let word = |i: usize| u32::from_le_bytes(bytes[i * 4..i * 4 + 4].try_into().unwrap());
    perigee_hybla::LdInfo {
        version: word(0),
        params_map_id: word(1),
        netns_map_id: word(2),
        reserved: word(3),
    }
}

fn registration() -> String {
    perigee_hybla::status().ld.registration
}

#[test]
fn hybla_ld_registration_follows_versions_and_maps() {
    let Some(_lock) = common::root_and_lock() else {
        return;
    };
    let st = perigee_hybla::load().expect("load");
    if !st.owned {
        perigee_testkit::cannot_run(
            "hybla is not Perigee's BPF one here (the maps are not shared)",
        );
        return;
    }
    let hybla_ops = pinned_id(perigee_hybla::OPS_PIN);
    let params = pinned_id(perigee_hybla::PARAMS_PIN);
    let netns = pinned_id(perigee_hybla::NETNS_PARAMS_PIN);
    assert_eq!(registration(), "current");
    assert!(!perigee_hybla::needs_load());
    let i = info();
    assert_eq!(
        (i.version, i.params_map_id, i.netns_map_id),
        (BPF_VERSION, params, netns),
        "hybla_ld reads hybla's pinned maps"
    );

    // An older build's registration: replaced.
    let before = pinned_id(LD_OPS_PIN);
    write_info(BPF_VERSION - 1, params, netns);
    assert_eq!(registration(), "stale");
    assert!(perigee_hybla::needs_load());
    perigee_hybla::load().unwrap();
    assert_eq!(registration(), "current");
    assert_ne!(pinned_id(LD_OPS_PIN), before, "re-registered");
    assert_eq!(info().version, BPF_VERSION);

    // Registered over maps that are no longer the pinned ones: replaced.
    let before = pinned_id(LD_OPS_PIN);
    write_info(BPF_VERSION, params + 1_000_000, netns);
    assert_eq!(registration(), "stale");
    perigee_hybla::load().unwrap();
    assert_ne!(pinned_id(LD_OPS_PIN), before);
    assert_eq!(info().params_map_id, params);

    // A newer build's registration: left alone, no flip-flop.
    let before = pinned_id(LD_OPS_PIN);
    write_info(BPF_VERSION + 1, params, netns);
    assert_eq!(registration(), "newer");
    assert!(!perigee_hybla::needs_load());
    perigee_hybla::load().unwrap();
    assert_eq!(
        pinned_id(LD_OPS_PIN),
        before,
        "a newer registration is not replaced"
    );
    write_info(BPF_VERSION, params, netns);

    // Gone (unregistered by hand), pins left behind: registered again. By the pinned map's id, not
    // by name: each registration replaced above lingers under the same name until the last socket
    // of another lab that runs it closes, and bpftool's unregister by name fails on those.
    let id = pinned_id(LD_OPS_PIN).to_string();
    run(&["bpftool", "struct_ops", "unregister", "id", &id]);
    assert_eq!(registration(), "missing");
    assert!(perigee_hybla::needs_load());
    perigee_hybla::load().unwrap();
    assert_eq!(registration(), "current");

    // Through all of it hybla's own registration and maps stayed the same.
    assert_eq!(pinned_id(perigee_hybla::OPS_PIN), hybla_ops);
    assert_eq!(pinned_id(perigee_hybla::PARAMS_PIN), params);
}
