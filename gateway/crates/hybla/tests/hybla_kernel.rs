//! Root-only: registers the BPF Hybla in the running kernel, runs flows through it in a
//! namespace pair (pt-hy-a <-> pt-hy-b), changes parameters live and unloads. One test
//! function plus a lock file, because the congestion-control list is global kernel state.
use std::io::Write;
use std::net::{TcpListener, TcpStream};
use std::os::fd::{AsRawFd, FromRawFd};
use std::sync::mpsc;
use std::thread;

mod common;
use common::{connect_v4, in_netns, snd_cwnd_of};
use perigee_hybla::{HyblaParams, Implementation};
use perigee_testkit::{count_to_eof, run, NetnsGuard};

const NS_A: &str = "pt-hy-a";
const NS_B: &str = "pt-hy-b";
const ADDR_A: &str = "10.213.0.1";
const ADDR_B: &str = "10.213.0.2";

/// The namespace pair joined by a veth, A -> B routed with congctl hybla; deleted when dropped.
fn namespaces() -> NetnsGuard {
    let nets = NetnsGuard::new(&[NS_A, NS_B]);
    run(&[
        "ip", "link", "add", "pthy-a", "netns", NS_A, "type", "veth", "peer", "name", "pthy-b",
        "netns", NS_B,
    ]);
    for (ns, dev, addr) in [(NS_A, "pthy-a", ADDR_A), (NS_B, "pthy-b", ADDR_B)] {
        let cidr = format!("{addr}/30");
        run(&["ip", "-n", ns, "addr", "add", &cidr, "dev", dev]);
        run(&["ip", "-n", ns, "link", "set", dev, "up"]);
        run(&["ip", "-n", ns, "link", "set", "lo", "up"]);
    }
    // Only A -> B is steered to hybla by the route; B -> A uses setsockopt instead.
    run(&[
        "ip",
        "-n",
        NS_A,
        "route",
        "add",
        &format!("{ADDR_B}/32"),
        "dev",
        "pthy-a",
        "congctl",
        "hybla",
    ]);
    nets
}

fn congestion_of(fd: i32) -> String {
    let mut buf = [0u8; 16];
    let mut len = buf.len() as libc::socklen_t;
    // SAFETY: buffer and length describe valid writable memory.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_CONGESTION,
            buf.as_mut_ptr().cast(),
            &mut len,
        )
    };
    assert_eq!(
        rc,
        0,
        "getsockopt TCP_CONGESTION: {}",
        std::io::Error::last_os_error()
    );
    String::from_utf8_lossy(&buf[..len as usize])
        .trim_end_matches('\0')
        .to_string()
}

/// Sink: accept `conns` connections and count the bytes each one sends.
fn sink(
    ns: &'static str,
    addr: &'static str,
    port: u16,
    conns: usize,
) -> thread::JoinHandle<Vec<usize>> {
    let (ready_tx, ready_rx) = mpsc::channel();
    let h = in_netns(ns, move || {
        let l = TcpListener::bind((addr, port)).expect("bind sink");
        ready_tx.send(()).unwrap();
        (0..conns)
            .map(|_| {
                let (mut s, _) = l.accept().expect("accept");
                count_to_eof(&mut s)
            })
            .collect()
    });
    ready_rx.recv().expect("sink ready");
    h
}

fn ss(ns: &str) -> String {
    run(&["ip", "netns", "exec", ns, "ss", "-tin"])
}

fn available() -> String {
    std::fs::read_to_string("/proc/sys/net/ipv4/tcp_available_congestion_control").unwrap()
}

/// `cwnd:N` of every connection in `ss -tin` output.
fn ss_cwnds(out: &str) -> Vec<u32> {
    out.split_whitespace()
        .filter_map(|t| t.strip_prefix("cwnd:"))
        .filter_map(|v| v.parse().ok())
        .collect()
}

/// Send `chunks` x 64 KiB A -> B, sampling TCP_INFO's cwnd after each write; halfway, pause
/// for `mid` (run by the main thread: inspect ss, change params). Returns (cc, samples
/// before mid, samples after mid, ss output at mid).
fn sampled_flow(
    port: u16,
    chunks: usize,
    mid: impl FnOnce() + Send + 'static,
) -> (String, Vec<u32>, Vec<u32>, String) {
    let (mid_tx, mid_rx) = mpsc::channel::<()>();
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let sender = in_netns(NS_A, move || {
        let mut s = TcpStream::connect((ADDR_B, port)).expect("connect A->B");
        let fd = s.as_raw_fd();
        let buf = vec![3u8; 1 << 16];
        let mut before = vec![snd_cwnd_of(fd)];
        for _ in 0..chunks / 2 {
            s.write_all(&buf).unwrap();
            before.push(snd_cwnd_of(fd));
        }
        mid_tx.send(()).unwrap();
        go_rx.recv().unwrap();
        // Give the new params a few ACKs to take effect before judging.
        for _ in 0..4 {
            s.write_all(&buf).unwrap();
        }
        let mut after = Vec::new();
        for _ in 0..chunks / 2 {
            s.write_all(&buf).unwrap();
            after.push(snd_cwnd_of(fd));
        }
        (congestion_of(fd), before, after)
    });
    mid_rx.recv().unwrap();
    let ss_out = ss(NS_A);
    mid();
    go_tx.send(()).unwrap();
    let (cc, before, after) = sender.join().unwrap();
    (cc, before, after, ss_out)
}

fn check_cwnd_ceiling() {
    // rho = 24 (GEO): one slow-start ACK would reach 65536 without the ceiling.
    perigee_hybla::set_params(HyblaParams {
        rtt0_ms: 25,
        base_rtt_ms: 600,
    })
    .unwrap();
    perigee_hybla::set_cwnd_ceiling(20).expect("set_cwnd_ceiling");
    assert!(matches!(
        perigee_hybla::set_cwnd_ceiling(70_000),
        Err(perigee_hybla::HyblaError::InvalidParams(_))
    ));
    let st = perigee_hybla::status();
    assert_eq!((st.base_rtt_ms, st.cwnd_max), (600, 20), "{st:?}");
    let json = serde_json::to_value(&st).unwrap();
    assert_eq!(json["cwnd_max"], 20, "{json}");

    let sink_b = sink(NS_B, ADDR_B, 5203, 2);
    // Ceiling 20 throughout: IW 10 x 24 is capped, and no sample (nor ss) ever exceeds 20.
    let (cc, before, after, ss_out) = sampled_flow(5203, 128, || {});
    assert_eq!(cc, "hybla");
    assert_eq!(before[0], 20, "initial window capped: min(10 x 24, 20)");
    assert!(
        before.iter().chain(&after).all(|&c| c <= 20),
        "cwnd above the ceiling 20: {before:?} {after:?}"
    );
    let ss_cw = ss_cwnds(&ss_out);
    assert!(
        !ss_cw.is_empty() && ss_cw.iter().all(|&c| c <= 20),
        "ss -tin cwnd above 20 or missing:
{ss_out}"
    );
    // Lifted mid-flow, then lowered again mid-flow: the window follows both changes.
    perigee_hybla::set_cwnd_ceiling(0).unwrap();
    assert_eq!(perigee_hybla::status().cwnd_max, 0);
    let (_, before, after, _) = sampled_flow(5203, 128, || {
        perigee_hybla::set_cwnd_ceiling(30).unwrap();
    });
    assert_eq!(before[0], 240, "no ceiling: IW 10 x rho 24");
    // On a veth the flow is rarely cwnd-limited, so the window may stay at 240: the point is
    // that nothing caps it below that, and that the lowered ceiling cuts it anyway.
    assert!(
        before.iter().all(|&c| c >= 240),
        "without a ceiling the window is not capped: {before:?}"
    );
    // The ceiling is enforced in cong_avoid, which runs only on an ACK while the flow is
    // cwnd-limited; on a fast veth that can take a few more chunks. Once it bites it holds.
    let first_capped = after.iter().position(|&c| c <= 30);
    assert!(
        matches!(first_capped, Some(i) if i < 16),
        "ceiling lowered to 30 at run time not applied within 16 chunks: {after:?}"
    );
    assert!(
        after[first_capped.unwrap()..].iter().all(|&c| c <= 30),
        "ceiling lowered to 30 did not hold once applied: {after:?}"
    );
    let got = sink_b.join().unwrap();
    assert_eq!(got, vec![132 << 16, 132 << 16], "both flows intact");

    perigee_hybla::set_cwnd_ceiling(0).unwrap();
}

#[test]
fn bpf_hybla_load_flow_params_unload() {
    let Some(_lock) = common::root_and_lock() else {
        return;
    };

    let before = perigee_hybla::status();
    if before.implementation == Implementation::Kernel {
        eprintln!("kernel has its own tcp_hybla: the BPF registration path cannot be tested here");
        assert!(perigee_hybla::load().unwrap().loaded);
        return;
    }
    perigee_hybla::unload().expect("clean start");

    // Load (twice: idempotent) and check the registration is visible everywhere.
    let st = perigee_hybla::load().expect("load");
    assert_eq!(st.implementation, Implementation::Bpf, "{st:?}");
    assert!(st.loaded && st.owned, "{st:?}");
    let st = perigee_hybla::load().expect("second load is a no-op");
    assert!(st.owned);
    assert!(
        available().split_whitespace().any(|n| n == "hybla"),
        "{}",
        available()
    );
    let json = serde_json::to_value(perigee_hybla::status()).unwrap();
    assert_eq!(json["implementation"], "bpf", "{json}");
    assert_eq!(json["rtt0_ms"], 25);
    assert_eq!(json["base_rtt_ms"], 0);
    assert!(std::path::Path::new(perigee_hybla::OPS_PIN).exists());
    assert!(std::path::Path::new(perigee_hybla::PARAMS_PIN).exists());

    let nets = namespaces();

    // 1. Route congctl: A -> B flow uses hybla; set_params while it runs doesn't disturb it.
    let sink_b = sink(NS_B, ADDR_B, 5201, 2);
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let (mid_tx, mid_rx) = mpsc::channel::<String>();
    const CHUNK: usize = 1 << 20;
    let sender = in_netns(NS_A, move || {
        let mut s = TcpStream::connect((ADDR_B, 5201)).expect("connect A->B");
        let cc = congestion_of(s.as_raw_fd());
        let buf = vec![7u8; CHUNK];
        for _ in 0..8 {
            s.write_all(&buf).unwrap();
        }
        mid_tx.send(cc).unwrap();
        go_rx.recv().unwrap(); // main thread inspects ss and changes params meanwhile
        for _ in 0..8 {
            s.write_all(&buf).unwrap();
        }
        16 * CHUNK
    });
    let cc = mid_rx.recv().unwrap();
    assert_eq!(cc, "hybla", "route congctl hybla must select it");
    let ss_out = ss(NS_A);
    assert!(
        ss_out.contains("hybla"),
        "ss -ti in {NS_A} shows no hybla:\n{ss_out}"
    );
    perigee_hybla::set_params(HyblaParams {
        rtt0_ms: 25,
        base_rtt_ms: 250,
    })
    .expect("set_params");
    go_tx.send(()).unwrap();
    let sent = sender.join().unwrap();

    let st = perigee_hybla::status();
    assert_eq!((st.rtt0_ms, st.base_rtt_ms), (25, 250), "{st:?}");

    // 2. With base RTT 250 ms and RTT0 25 ms, rho = 10: a new connection starts at IW * 10.
    let cwnd = in_netns(NS_A, || {
        let s = TcpStream::connect((ADDR_B, 5201)).expect("connect A->B again");
        (congestion_of(s.as_raw_fd()), snd_cwnd_of(s.as_raw_fd()))
    })
    .join()
    .unwrap();
    assert_eq!(cwnd.0, "hybla");
    assert_eq!(cwnd.1, 100, "initial window 10 segments x rho 10");
    let got = sink_b.join().unwrap();
    assert_eq!(
        got[0], sent,
        "the flow running across set_params completed intact"
    );

    // 3. The operator cwnd ceiling, at init, during a flow, and lowered at run time.
    check_cwnd_ceiling();

    // 4. setsockopt(TCP_CONGESTION, "hybla") on a plain socket, B -> A (no congctl route).
    perigee_hybla::set_params(HyblaParams {
        rtt0_ms: 25,
        base_rtt_ms: 0,
    })
    .unwrap();
    let sink_a = sink(NS_A, ADDR_A, 5202, 1);
    let (cc, ss_b) = in_netns(NS_B, || {
        // SAFETY: plain socket syscalls on an fd we own, handed to TcpStream afterwards.
        let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0) };
        assert!(fd >= 0);
        let name = b"hybla";
        let rc = unsafe {
            libc::setsockopt(
                fd,
                libc::IPPROTO_TCP,
                libc::TCP_CONGESTION,
                name.as_ptr().cast(),
                name.len() as u32,
            )
        };
        assert_eq!(
            rc,
            0,
            "setsockopt TCP_CONGESTION hybla: {}",
            std::io::Error::last_os_error()
        );
        if let Err(e) = connect_v4(fd, ADDR_A.parse().unwrap(), 5202) {
            panic!("connect B->A: {e}");
        }
        let mut s = unsafe { TcpStream::from_raw_fd(fd) };
        s.write_all(&vec![1u8; 4 * CHUNK]).unwrap();
        let out = ss(NS_B);
        (congestion_of(fd), out)
    })
    .join()
    .unwrap();
    assert_eq!(cc, "hybla");
    assert!(
        ss_b.contains("hybla"),
        "ss -ti in {NS_B} shows no hybla:\n{ss_b}"
    );
    assert_eq!(sink_a.join().unwrap(), vec![4 * CHUNK]);
    drop(nets);

    // 5. Unload (twice: idempotent) leaves nothing behind.
    perigee_hybla::unload().expect("unload");
    perigee_hybla::unload().expect("second unload is a no-op");
    assert!(
        !available().split_whitespace().any(|n| n == "hybla"),
        "{}",
        available()
    );
    assert!(
        !std::path::Path::new(perigee_hybla::PIN_DIR).exists(),
        "pins left under {}",
        perigee_hybla::PIN_DIR
    );
    let st = perigee_hybla::status();
    assert_eq!(st.implementation, Implementation::None);
    assert!(matches!(
        perigee_hybla::set_cwnd_ceiling(10),
        Err(perigee_hybla::HyblaError::NotLoaded)
    ));
    assert!(st.problem.is_some());
    assert!(matches!(
        perigee_hybla::set_params(HyblaParams::default()),
        Err(perigee_hybla::HyblaError::NotLoaded)
    ));
}
