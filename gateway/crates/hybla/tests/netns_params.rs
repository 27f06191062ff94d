//! Root-only: per-network-namespace parameters of the BPF Hybla against the running kernel.
//! Three namespaces, each with a loopback flow using hybla: two with their own cwnd ceilings,
//! one without an entry (the host-wide one applies), all checked with `ss -tin` while the
//! three flows run at once; then a live retune, removal, and the map's capacity. Shares the
//! lock file of hybla_kernel.rs because the registration is global kernel state.
use std::io::Write;
use std::net::{TcpListener, TcpStream};
use std::os::fd::{AsRawFd, FromRawFd};
use std::sync::{Arc, Barrier};
use std::thread;

mod common;
use common::{connect_v4, in_netns, snd_cwnd_of};
use perigee_hybla::{HyblaError, HyblaParams, Implementation};
use perigee_testkit::{count_to_eof, run, NetnsGuard};

const NS: [&str; 3] = ["pt-hyn-a", "pt-hyn-b", "pt-hyn-c"];
/// rho = 600 / 25 = 24: the initial window (10 x 24 = 240) always reaches the ceiling.
const GEO: HyblaParams = HyblaParams {
    rtt0_ms: 25,
    base_rtt_ms: 600,
};
const CEILING_A: u32 = 20;
const CEILING_B: u32 = 40;
const CEILING_GLOBAL: u32 = 30;
const MSS: libc::c_int = 1448;
const CHUNK: usize = 1 << 16;

fn setsockopt_raw(fd: i32, level: i32, opt: i32, val: &[u8]) {
    // SAFETY: `val` is valid readable memory of the given length.
    let rc = unsafe { libc::setsockopt(fd, level, opt, val.as_ptr().cast(), val.len() as u32) };
    assert_eq!(
        rc,
        0,
        "setsockopt {opt}: {}",
        std::io::Error::last_os_error()
    );
}

/// A loopback connection to 127.0.0.1:`port` that uses hybla with a 1448-byte MSS (so a
/// 64 KiB write is a window's worth of segments, not one).
fn hybla_connect(port: u16) -> TcpStream {
    // SAFETY: plain socket(2); the fd goes to TcpStream, which owns it from then on.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0) };
    assert!(fd >= 0);
    let s = unsafe { TcpStream::from_raw_fd(fd) };
    setsockopt_raw(fd, libc::IPPROTO_TCP, libc::TCP_CONGESTION, b"hybla");
    setsockopt_raw(fd, libc::IPPROTO_TCP, libc::TCP_MAXSEG, &MSS.to_ne_bytes());
    if let Err(e) = connect_v4(fd, std::net::Ipv4Addr::LOCALHOST, port) {
        panic!("connect: {e}");
    }
    s
}

/// What one namespace's flow saw: TCP_INFO cwnd samples before and after the pause, and
/// the bytes the sink received.
struct Flow {
    before: Vec<u32>,
    after: Vec<u32>,
    received: usize,
}

/// In `ns`: a sink and a hybla sender over loopback. The sender writes `chunks` chunks,
/// waits at `paused` (all flows are open and mid-transfer there), then `resume`, and writes
/// `chunks` more.
fn flow_in(
    ns: &'static str,
    port: u16,
    chunks: usize,
    paused: Arc<Barrier>,
    resume: Arc<Barrier>,
) -> thread::JoinHandle<Flow> {
    in_netns(ns, move || {
        let l = TcpListener::bind(("127.0.0.1", port)).expect("bind sink");
        let sink = thread::spawn(move || {
            let (mut s, _) = l.accept().expect("accept");
            count_to_eof(&mut s)
        });
        let mut s = hybla_connect(port);
        let fd = s.as_raw_fd();
        let buf = vec![5u8; CHUNK];
        let mut before = vec![snd_cwnd_of(fd)];
        for _ in 0..chunks {
            s.write_all(&buf).unwrap();
            before.push(snd_cwnd_of(fd));
        }
        paused.wait();
        resume.wait();
        let mut after = Vec::new();
        for _ in 0..chunks {
            s.write_all(&buf).unwrap();
            after.push(snd_cwnd_of(fd));
        }
        drop(s);
        Flow {
            before,
            after,
            received: sink.join().unwrap(),
        }
    })
}

/// cwnd of every hybla socket in `ss -tin` of namespace `ns`.
fn ss_hybla_cwnds(ns: &str) -> (Vec<u32>, String) {
    let out = run(&["ip", "netns", "exec", ns, "ss", "-tinH"]);
    let cwnds = out
        .lines()
        .filter(|l| l.split_whitespace().any(|w| w == "hybla"))
        .filter_map(|l| {
            l.split_whitespace()
                .find_map(|t| t.strip_prefix("cwnd:"))
                .and_then(|v| v.parse().ok())
        })
        .collect();
    (cwnds, out)
}

/// The initial cwnd of a fresh hybla connection in `ns`.
fn initial_cwnd_in(ns: &'static str, port: u16) -> u32 {
    in_netns(ns, move || {
        let _l = TcpListener::bind(("127.0.0.1", port)).expect("bind");
        let s = hybla_connect(port);
        snd_cwnd_of(s.as_raw_fd())
    })
    .join()
    .unwrap()
}

fn cookie_of(ns: &'static str) -> u64 {
    in_netns(ns, || {
        perigee_hybla::netns_cookie().expect("SO_NETNS_COOKIE")
    })
    .join()
    .unwrap()
}

fn set_in(ns: &'static str, cwnd_max: u32) -> u64 {
    in_netns(ns, move || perigee_hybla::set_netns_params(GEO, cwnd_max))
        .join()
        .unwrap()
        .expect("set_netns_params")
}

fn entry(cookie: u64) -> Option<perigee_hybla::NetnsParams> {
    perigee_hybla::status()
        .netns
        .into_iter()
        .find(|e| e.cookie == cookie)
}

#[test]
fn per_namespace_parameters() {
    let Some(_lock) = common::root_and_lock() else {
        return;
    };

    if perigee_hybla::status().implementation == Implementation::Kernel {
        eprintln!("kernel has its own tcp_hybla: per-namespace parameters are BPF-only");
        assert!(matches!(
            perigee_hybla::set_netns_params(GEO, 0),
            Err(HyblaError::Unsupported(_))
        ));
        return;
    }
    perigee_hybla::unload().expect("clean start");
    perigee_hybla::load().expect("load");
    let nets = NetnsGuard::with_loopback_up(&NS);
    // A sender descheduled for an RTO on a busy host would be counted idle or application-limited and
    // have its window cut (seen once: B at 14 for one chunk): only the ceilings may change a window here.
    for ns in NS {
        run(&[
            "ip",
            "netns",
            "exec",
            ns,
            "sysctl",
            "-qw",
            "net.ipv4.tcp_slow_start_after_idle=0",
        ]);
    }

    // Host-wide entry: GEO rho, ceiling 30. A and B get their own ceilings; C has none.
    perigee_hybla::set_params(GEO).unwrap();
    perigee_hybla::set_cwnd_ceiling(CEILING_GLOBAL).unwrap();
    let cookie_a = set_in(NS[0], CEILING_A);
    let cookie_b = set_in(NS[1], CEILING_B);
    assert_eq!(cookie_a, cookie_of(NS[0]));
    assert_ne!(cookie_a, cookie_b);
    assert_ne!(cookie_of(NS[2]), cookie_a);
    let st = perigee_hybla::status();
    assert_eq!(st.cwnd_max, CEILING_GLOBAL, "host-wide entry untouched");
    let a = entry(cookie_a).expect("A's entry listed");
    assert_eq!((a.rtt0_ms, a.base_rtt_ms, a.cwnd_max), (25, 600, CEILING_A));
    assert_eq!(entry(cookie_b).map(|e| e.cwnd_max), Some(CEILING_B));
    assert!(entry(cookie_of(NS[2])).is_none());
    assert_eq!(
        st.own_netns(),
        None,
        "the test's own namespace has no entry"
    );
    let own = in_netns(NS[1], || perigee_hybla::status().own_netns().copied())
        .join()
        .unwrap();
    assert_eq!(own.map(|e| e.cookie), Some(cookie_b));
    let json = serde_json::to_value(&st).unwrap();
    assert!(
        json["netns"].as_array().is_some_and(|a| a.len() >= 2),
        "{json}"
    );

    // 1. Three flows at once, each capped by its own namespace's ceiling.
    let paused = Arc::new(Barrier::new(4));
    let resume = Arc::new(Barrier::new(4));
    let ports = [5311u16, 5312, 5313];
    let flows: Vec<_> = NS
        .iter()
        .zip(ports)
        .map(|(ns, port)| flow_in(ns, port, 64, paused.clone(), resume.clone()))
        .collect();
    paused.wait();
    let expected = [CEILING_A, CEILING_B, CEILING_GLOBAL];
    for (ns, want) in NS.iter().zip(expected) {
        let (cwnds, out) = ss_hybla_cwnds(ns);
        assert!(
            !cwnds.is_empty() && cwnds.iter().all(|&c| c == want),
            "{ns}: ss -tin hybla cwnd should be {want} while all three flows run:\n{out}"
        );
    }
    // 2. Retune A while its flow runs: the live window follows on its next ACKs.
    set_in(NS[0], 10);
    resume.wait();
    let results: Vec<Flow> = flows.into_iter().map(|h| h.join().unwrap()).collect();
    for ((ns, want), f) in NS.iter().zip(expected).zip(&results) {
        assert_eq!(
            f.before[0], want,
            "{ns}: initial window = min(10 x 24, ceiling)"
        );
        assert!(
            f.before.iter().all(|&c| c <= want),
            "{ns}: above {want}: {:?}",
            f.before
        );
        assert_eq!(f.received, 128 * CHUNK, "{ns}: flow intact");
    }
    let first_capped = results[0].after.iter().position(|&c| c <= 10);
    assert!(
        matches!(first_capped, Some(i) if i < 16),
        "A's ceiling lowered to 10 mid-flow not applied within 16 chunks: {:?}",
        results[0].after
    );
    assert!(
        results[0].after[first_capped.unwrap()..]
            .iter()
            .all(|&c| c <= 10),
        "{:?}",
        results[0].after
    );
    assert!(
        results[1].after.iter().all(|&c| c == CEILING_B),
        "B unaffected by A's retune: {:?}",
        results[1].after
    );

    // 3. Removing A's entry: A falls back to the host-wide entry; B keeps its own.
    let removed = in_netns(NS[0], || perigee_hybla::unset_netns_params(None))
        .join()
        .unwrap();
    assert!(removed.unwrap(), "A had an entry to remove");
    assert!(entry(cookie_a).is_none());
    assert_eq!(initial_cwnd_in(NS[0], 5314), CEILING_GLOBAL);
    assert_eq!(initial_cwnd_in(NS[1], 5314), CEILING_B);
    assert!(!perigee_hybla::unset_netns_params(Some(cookie_a)).unwrap());

    // 4. Capacity: stale entries of namespaces that are gone fill the map; the next one is
    // refused with a clear error, and they can be removed by cookie.
    let taken = perigee_hybla::status().netns.len() as u32;
    let stale = thread::spawn(move || {
        let mut cookies = Vec::new();
        for _ in taken..perigee_hybla::NETNS_MAX {
            // SAFETY: moves only this thread into a fresh namespace (the previous one dies).
            assert_eq!(unsafe { libc::unshare(libc::CLONE_NEWNET) }, 0);
            cookies.push(perigee_hybla::set_netns_params(GEO, 7).expect("room left"));
        }
        assert_eq!(unsafe { libc::unshare(libc::CLONE_NEWNET) }, 0);
        (cookies, perigee_hybla::set_netns_params(GEO, 7))
    });
    let (cookies, full) = stale.join().unwrap();
    let e = full.expect_err("map full");
    assert!(matches!(e, HyblaError::NetnsFull(256)), "{e:?}");
    assert!(
        e.to_string().contains("perigee hybla unset --cookie"),
        "{e}"
    );
    // An existing entry can still be rewritten when the map is full.
    set_in(NS[1], CEILING_B + 1);
    for c in &cookies {
        assert!(perigee_hybla::unset_netns_params(Some(*c)).unwrap());
    }
    assert_eq!(perigee_hybla::status().netns.len() as u32, taken);

    drop(nets);
    // Entries of deleted namespaces stay until removed; leave the host as the test found it.
    perigee_hybla::unset_netns_params(Some(cookie_b)).unwrap();

    // 5. A registration without the per-namespace map (an older Perigee's; simulated by
    // dropping the pin) is refused with what to do, and `load` replaces it, keeping the
    // host-wide parameters.
    std::fs::remove_file(perigee_hybla::NETNS_PARAMS_PIN).unwrap();
    assert!(perigee_hybla::outdated());
    let e = perigee_hybla::set_netns_params(GEO, 0).expect_err("outdated");
    assert!(matches!(e, HyblaError::Outdated), "{e:?}");
    assert!(e.to_string().contains("perigee hybla load"), "{e}");
    let st = perigee_hybla::load().expect("load upgrades");
    assert!(st.owned && !perigee_hybla::outdated(), "{st:?}");
    assert_eq!(
        (st.base_rtt_ms, st.cwnd_max),
        (600, CEILING_GLOBAL),
        "host-wide parameters carried over"
    );
    perigee_hybla::set_cwnd_ceiling(0).unwrap();
    perigee_hybla::set_params(HyblaParams::default()).unwrap();
}
