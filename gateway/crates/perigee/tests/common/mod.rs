//! Namespace test topology: <prefix>-<tag>-c (client) — <prefix>-<tag>-g (gateway) —
//! <prefix>-<tag>-s (server), joined by veth pairs, no emulator (prefix `pt`, or `pd` for the
//! resolver tests). Everything is removed on drop, also after a panic.
#![allow(dead_code)]
use sha2::{Digest, Sha256};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::process::{Child, Command, Stdio};
use std::sync::{mpsc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use perigee_testkit::NetnsGuard;
pub use perigee_testkit::{run, HUNG};

pub const CLIENT4: &str = "10.99.1.10";
pub const CLIENT6: &str = "fd99:1::10";
pub const SERVER4: &str = "10.99.2.10";
pub const SERVER6: &str = "fd99:2::10";

static SERIAL: Mutex<()> = Mutex::new(());

/// Tests share the kernel: run them one at a time. None when they cannot run here (not root):
/// the test then returns, SKIPPED, or fails when root tests are required (perigee_testkit::root).
pub fn serial() -> Option<MutexGuard<'static, ()>> {
    perigee_testkit::root("network namespaces")
        .then(|| SERIAL.lock().unwrap_or_else(|e| e.into_inner()))
}

/// A veth pair: `dev_a` in namespace `a`, its peer `dev_b` in namespace `b`.
fn veth(a: &str, dev_a: &str, b: &str, dev_b: &str) {
    run(&[
        "ip", "link", "add", dev_a, "netns", a, "type", "veth", "peer", "name", dev_b, "netns", b,
    ]);
}

/// Put the addresses on `dev` (IPv6 ones without duplicate detection) and bring it up.
fn addrs_up(ns: &str, dev: &str, addrs: &[&str]) {
    for a in addrs {
        if a.contains(':') {
            run(&["ip", "-n", ns, "addr", "add", a, "dev", dev, "nodad"]);
        } else {
            run(&["ip", "-n", ns, "addr", "add", a, "dev", dev]);
        }
    }
    run(&["ip", "-n", ns, "link", "set", dev, "up"]);
}

/// `ip route add dst via gw` in `ns`, IPv6 when the gateway is.
fn route(ns: &str, dst: &str, via: &str) {
    if via.contains(':') {
        run(&["ip", "-n", ns, "-6", "route", "add", dst, "via", via]);
    } else {
        run(&["ip", "-n", ns, "route", "add", dst, "via", via]);
    }
}

fn sysctl(ns: &str, settings: &[&str]) {
    let mut args = vec!["ip", "netns", "exec", ns, "sysctl", "-qw"];
    args.extend_from_slice(settings);
    run(&args);
}

pub struct Topo {
    pub c: String,
    pub g: String,
    pub s: String,
    pub dir: std::path::PathBuf,
    pub daemon: Option<Child>,
    /// The three namespaces, deleted after Drop has stopped the daemon.
    _nets: NetnsGuard,
}

impl Topo {
    pub fn new(tag: &str) -> Topo {
        Topo::with_prefix("pt", tag)
    }

    /// The same topology with namespaces `<prefix>-<tag>-{c,g,s}` (a test file's own prefix).
    pub fn with_prefix(prefix: &str, tag: &str) -> Topo {
        let [c, g, s] = ["c", "g", "s"].map(|r| format!("{prefix}-{tag}-{r}"));
        let t = Topo {
            _nets: NetnsGuard::with_loopback_up(&[&c, &g, &s]),
            c,
            g,
            s,
            dir: std::env::temp_dir().join(format!("{prefix}-{tag}-{}", std::process::id())),
            daemon: None,
        };
        std::fs::create_dir_all(&t.dir).unwrap();
        veth(&t.c, "c0", &t.g, "lan0");
        veth(&t.s, "s0", &t.g, "sat0");
        addrs_up(&t.c, "c0", &["10.99.1.10/24", "fd99:1::10/64"]);
        addrs_up(&t.g, "lan0", &["10.99.1.1/24", "fd99:1::1/64"]);
        addrs_up(&t.g, "sat0", &["10.99.2.1/24", "fd99:2::1/64"]);
        addrs_up(&t.s, "s0", &["10.99.2.10/24", "fd99:2::10/64"]);
        route(&t.c, "default", "10.99.1.1");
        route(&t.c, "default", "fd99:1::1");
        route(&t.s, "default", "10.99.2.1");
        route(&t.s, "default", "fd99:2::1");
        sysctl(
            &t.g,
            &["net.ipv4.ip_forward=1", "net.ipv6.conf.all.forwarding=1"],
        );
        t
    }

    pub fn sock(&self) -> String {
        self.dir.join("gw.sock").to_string_lossy().into_owned()
    }

    pub fn config(&self) -> serde_json::Value {
        serde_json::json!({
            "schema": 1, "revision": "t1", "role": "terminal",
            "interfaces": {"lan": ["lan0"], "satellite": "sat0"},
            "served_subnets": ["10.99.1.0/24", "fd99:1::/64"],
            "splitter": {"enabled": true, "tproxy_port": 7071, "max_flows": 10000, "connect_timeout_ms": 3000,
                         "idle_timeout_s": 600, "relay_buffer_bytes": 262144},
            "satellite": {"congestion_control": "reno", "sndbuf_bytes": 0, "rcvbuf_bytes": 0, "initcwnd": 10, "initrwnd": 10,
                          "routes": []},
            "bypass": [
                {"name": "ipsec-esp", "builtin": true, "protocol": "esp"},
                {"name": "ipsec-ah", "builtin": true, "protocol": "ah"},
                {"name": "ike", "builtin": true, "protocol": "udp", "ports": ["500"]},
                {"name": "nat-t", "builtin": true, "protocol": "udp", "ports": ["4500"]},
                {"name": "ike-tcp", "builtin": true, "protocol": "tcp", "ports": ["4500"]}
            ]
        })
    }

    /// Start `perigee gateway run` in the gateway namespace and wait for /v1/health.
    pub fn start(&mut self, cfg: &serde_json::Value) {
        let child = start_daemon(&self.g, &self.dir, "gw", cfg);
        self.daemon = Some(child);
    }

    /// Stops the daemon and starts it again on its config file as it is now (what the last apply
    /// through the control socket kept there), waiting until its workers are alive.
    pub fn restart(&mut self) {
        self.stop();
        self.daemon = Some(spawn_daemon(
            &self.g,
            &self.dir,
            "gw",
            true,
            &[],
            workers_alive,
        ));
    }

    /// `start`, with Squid's and the resolver's files in this topology's directory (so the
    /// daemon never touches the host's /var/lib/perigee or /run/perigee).
    pub fn start_with_services(&mut self, cfg: &serde_json::Value) {
        let d = |x: &str| self.dir.join(x).to_string_lossy().into_owned();
        let service: String = format!("perigee{}", self.g)
            .chars()
            .filter(|c| c.is_ascii_alphanumeric())
            .collect();
        let args: Vec<String> = vec![
            "--squid-state-dir".into(),
            d("squid"),
            "--squid-run-dir".into(),
            d("squid/run"),
            "--squid-service".into(),
            service,
            "--dns-state-dir".into(),
            d("dns"),
            "--dns-run-dir".into(),
            d("dns/run"),
        ];
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let child = start_daemon_with(&self.g, &self.dir, "gw", cfg, &args, workers_alive);
        self.daemon = Some(child);
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("gw.log")).unwrap_or_default()
    }

    pub fn kill9(&mut self) {
        if let Some(mut c) = self.daemon.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    pub fn stop(&mut self) {
        if let Some(mut c) = self.daemon.take() {
            // SAFETY: signalling our own child.
            unsafe { libc::kill(c.id() as i32, libc::SIGTERM) };
            // Squid takes seconds to stop: a daemon killed before it has stopped its children
            // would leave them behind.
            let deadline = Instant::now() + Duration::from_secs(20);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = c.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    pub fn flows(&self, state: &str) -> Vec<serde_json::Value> {
        let (st, v) = control(
            &self.sock(),
            "GET",
            &format!("/v1/flows?state={state}"),
            None,
        )
        .unwrap();
        assert_eq!(st, 200);
        v["flows"].as_array().cloned().unwrap_or_default()
    }
}

impl Drop for Topo {
    fn drop(&mut self) {
        self.stop();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Start `perigee gateway run` in namespace `ns` (files `<dir>/<name>.{json,sock,log}`) and
/// wait until /v1/health shows every worker alive. The caller owns (and reaps) the child.
pub fn start_daemon(ns: &str, dir: &std::path::Path, name: &str, cfg: &serde_json::Value) -> Child {
    start_daemon_until(ns, dir, name, cfg, workers_alive)
}

/// Whether a /v1/health answer shows every worker alive.
pub fn workers_alive(h: &serde_json::Value) -> bool {
    h["workers"]
        .as_array()
        .map(|w| w.iter().all(|x| x["alive"] == true))
        .unwrap_or(false)
}

/// `start_daemon`, waiting until the /v1/health answer satisfies `ready`.
pub fn start_daemon_until(
    ns: &str,
    dir: &std::path::Path,
    name: &str,
    cfg: &serde_json::Value,
    ready: impl Fn(&serde_json::Value) -> bool,
) -> Child {
    start_daemon_with(ns, dir, name, cfg, &[], ready)
}

/// `start_daemon_until` with `extra` arguments for `perigee gateway run` (e.g. Squid's dirs). A null
/// `cfg` starts the daemon without a config.
pub fn start_daemon_with(
    ns: &str,
    dir: &std::path::Path,
    name: &str,
    cfg: &serde_json::Value,
    extra: &[&str],
    ready: impl Fn(&serde_json::Value) -> bool,
) -> Child {
    if !cfg.is_null() {
        std::fs::write(dir.join(format!("{name}.json")), cfg.to_string()).unwrap();
    }
    spawn_daemon(ns, dir, name, !cfg.is_null(), extra, ready)
}

/// Starts `perigee gateway run` in namespace `ns` with `--config <dir>/<name>.json` as that file is
/// now (`with_config`; else none) and waits until /v1/health satisfies `ready`.
#[allow(clippy::zombie_processes)]
pub fn spawn_daemon(
    ns: &str,
    dir: &std::path::Path,
    name: &str,
    with_config: bool,
    extra: &[&str],
    ready: impl Fn(&serde_json::Value) -> bool,
) -> Child {
    let path = dir.join(format!("{name}.json"));
    let sock = dir
        .join(format!("{name}.sock"))
        .to_string_lossy()
        .into_owned();
    let config_args: Vec<String> = if with_config {
        vec!["--config".into(), path.to_string_lossy().into_owned()]
    } else {
        Vec::new()
    };
    let log_path = dir.join(format!("{name}.log"));
    let log = std::fs::File::create(&log_path).unwrap();
    // nsenter --net, as satlab does: `ip netns exec` remounts /sys, which hides the BPF
    // filesystem and so the pinned maps of Perigee's Hybla (its per-namespace parameters).
    let mut child = Command::new("nsenter")
        .arg(format!("--net=/run/netns/{ns}"))
        .args(["--", env!("CARGO_BIN_EXE_perigee"), "gateway", "run"])
        .args(&config_args)
        .args([
            "--control-socket",
            &sock,
            "--workers",
            "2",
            "--metrics",
            "off",
        ])
        .args(extra)
        .stderr(Stdio::from(log))
        .spawn()
        .unwrap();
    // Squid and unbound, when enabled, start before the first answer.
    let deadline = Instant::now() + HUNG;
    loop {
        if let Ok((200, h)) = control(&sock, "GET", "/v1/health", None) {
            if ready(&h) {
                // Workers open their listeners right after their first config message.
                std::thread::sleep(Duration::from_millis(200));
                return child;
            }
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            let log = std::fs::read_to_string(&log_path).unwrap_or_default();
            panic!("daemon in {ns} did not come up: {log}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// client -- terminal -- hub -- server, a gateway in each of the middle two.
pub struct Series {
    pub c: String,
    pub t: String,
    pub h: String,
    pub s: String,
    pub dir: std::path::PathBuf,
    pub daemons: Vec<Child>,
    /// The four namespaces, deleted after Drop has stopped the daemons.
    _nets: NetnsGuard,
}

impl Series {
    pub fn new(tag: &str) -> Series {
        let [c, t, h, s] = ["c", "t", "h", "s"].map(|r| format!("pt-{tag}-{r}"));
        let t = Series {
            _nets: NetnsGuard::with_loopback_up(&[&c, &t, &h, &s]),
            c,
            t,
            h,
            s,
            dir: std::env::temp_dir().join(format!("pt-{tag}-{}", std::process::id())),
            daemons: Vec::new(),
        };
        std::fs::create_dir_all(&t.dir).unwrap();
        veth(&t.c, "c0", &t.t, "lan0");
        veth(&t.t, "sat0", &t.h, "sat0");
        veth(&t.h, "lan0", &t.s, "s0");
        addrs_up(&t.c, "c0", &["10.99.1.10/24"]);
        addrs_up(&t.t, "lan0", &["10.99.1.1/24"]);
        addrs_up(&t.t, "sat0", &["10.99.2.1/24"]);
        addrs_up(&t.h, "sat0", &["10.99.2.2/24"]);
        addrs_up(&t.h, "lan0", &["10.99.3.1/24"]);
        addrs_up(&t.s, "s0", &["10.99.3.10/24"]);
        route(&t.c, "default", "10.99.1.1");
        route(&t.t, "default", "10.99.2.2");
        route(&t.h, "10.99.1.0/24", "10.99.2.1");
        route(&t.s, "default", "10.99.3.1");
        for ns in [&t.t, &t.h] {
            sysctl(ns, &["net.ipv4.ip_forward=1"]);
        }
        t
    }

    pub fn sock(&self, name: &str) -> String {
        self.dir
            .join(format!("{name}.sock"))
            .to_string_lossy()
            .into_owned()
    }
}

impl Drop for Series {
    fn drop(&mut self) {
        for mut d in self.daemons.drain(..) {
            // SAFETY: signalling our own child.
            unsafe { libc::kill(d.id() as i32, libc::SIGTERM) };
            let _ = d.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Run `f` on a thread that has entered network namespace `ns`; sockets it creates stay there.
pub fn in_ns<T: Send + 'static>(ns: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let path = format!("/run/netns/{ns}");
    std::thread::spawn(move || {
        let file = std::fs::File::open(&path).unwrap();
        // SAFETY: setns on this thread only, with a valid namespace fd.
        let r = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
        assert_eq!(r, 0, "setns {path}");
        f()
    })
    .join()
    .unwrap()
}

pub fn connect(ns: &str, addr: SocketAddr) -> std::io::Result<TcpStream> {
    in_ns(ns, move || TcpStream::connect_timeout(&addr, HUNG))
}

/// What the test server saw on one connection.
#[derive(Debug, Clone)]
pub struct Seen {
    pub cmd: String,
    pub peer: SocketAddr,
    pub result: String,
}

/// Deterministic payload of `n` bytes (xorshift), identical on both ends.
pub fn payload(n: usize) -> Vec<u8> {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15 ^ n as u64;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

pub fn sha(data: &[u8]) -> String {
    Sha256::digest(data)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A multi-purpose server in the server namespace. First line of each connection is a command:
/// `WHO` (reply with the peer address, then echo), `UP` (read to EOF, reply "len sha256"),
/// `DOWN n` (send n payload bytes, shut down, read to EOF), `HALF` (shut down first, then count
/// what still arrives), `HOLD` (read until EOF or error), `RST` (reset the connection).
pub fn server(ns: &str, addr: SocketAddr) -> mpsc::Receiver<Seen> {
    let l = in_ns(ns, move || TcpListener::bind(addr).unwrap());
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for c in l.incoming() {
            let Ok(c) = c else { return };
            let tx = tx.clone();
            std::thread::spawn(move || serve_one(c, tx));
        }
    });
    rx
}

fn serve_one(c: TcpStream, tx: mpsc::Sender<Seen>) {
    let peer = c.peer_addr().unwrap();
    let mut r = BufReader::new(c.try_clone().unwrap());
    let mut w = c;
    let mut line = String::new();
    if r.read_line(&mut line).is_err() {
        return;
    }
    let cmd = line.trim().to_string();
    let mut words = cmd.split_whitespace();
    let result = match words.next().unwrap_or("") {
        "WHO" => {
            let _ = writeln!(w, "{peer}");
            let _ = std::io::copy(&mut r, &mut w);
            "ok".into()
        }
        "UP" => {
            let mut data = Vec::new();
            let _ = r.read_to_end(&mut data);
            let _ = writeln!(w, "{} {}", data.len(), sha(&data));
            format!("{}", data.len())
        }
        "DOWN" => {
            let n: usize = words.next().and_then(|n| n.parse().ok()).unwrap_or(0);
            let _ = w.write_all(&payload(n));
            let _ = w.shutdown(Shutdown::Write);
            let mut rest = Vec::new();
            let _ = r.read_to_end(&mut rest);
            "ok".into()
        }
        "HALF" => {
            let _ = w.shutdown(Shutdown::Write);
            let mut data = Vec::new();
            match r.read_to_end(&mut data) {
                Ok(_) => format!("got {}", data.len()),
                Err(e) => format!("error {e}"),
            }
        }
        "HOLD" => {
            let mut data = Vec::new();
            match r.read_to_end(&mut data) {
                Ok(_) => "eof".into(),
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => "reset".into(),
                Err(e) => format!("error {e}"),
            }
        }
        "RST" => {
            set_linger0(&w);
            "reset sent".into()
        }
        _ => "unknown".into(),
    };
    let _ = tx.send(Seen { cmd, peer, result });
}

/// One HTTP request on the control socket: the CLI's own client (`perigee::gateway::http`).
pub use perigee::gateway::http::request as control;

/// Make the next close of `s` send a RST instead of a FIN.
pub fn set_linger0(s: &TcpStream) {
    let l = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    let _ = perigee_netsys::setsockopt(s.as_raw_fd(), libc::SOL_SOCKET, libc::SO_LINGER, &l);
}

pub fn sa(ip: &str, port: u16) -> SocketAddr {
    SocketAddr::new(ip.parse().unwrap(), port)
}

/// The problems /v1/health lists now.
pub fn health_problems(t: &Topo) -> Vec<String> {
    let (_, h) = control(&t.sock(), "GET", "/v1/health", None).unwrap();
    h["problems"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|p| p.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

/// The URLs Squid logged so far.
pub fn squid_urls(t: &Topo) -> Vec<String> {
    let (_, v) = control(&t.sock(), "GET", "/v1/cache/requests?limit=1000", None).unwrap();
    v["requests"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|r| r["url"].as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

/// Whether Squid logs a URL ending in `url_end`: it does within HUNG, or it does not within 3 s
/// (`expected` false: a request that must not go through Squid, given time to show up).
pub fn logged(t: &Topo, url_end: &str, expected: bool) -> bool {
    let within = if expected {
        HUNG
    } else {
        Duration::from_secs(3)
    };
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if squid_urls(t).iter().any(|u| u.ends_with(url_end)) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    false
}

/// Whether Squid logs a URL ending in `url_end` (waiting up to HUNG).
pub fn wait_logged(t: &Topo, url_end: &str) -> bool {
    logged(t, url_end, true)
}

/// Whether Squid never logs a URL ending in `url_end` (given 3 s to show up).
pub fn never_logged(t: &Topo, url_end: &str) -> bool {
    !logged(t, url_end, false)
}

/// Connects to `server` from the client, says WHO: (our address, the peer we reached, what the
/// server saw as our address).
pub fn who(t: &Topo, server: SocketAddr) -> (SocketAddr, SocketAddr, String) {
    let mut c = connect(&t.c, server).expect("connect");
    c.set_read_timeout(Some(HUNG)).unwrap();
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

/// The gateway's flow record (live or closed) of the client address `client`.
pub fn find_flow(t: &Topo, client: SocketAddr) -> Option<serde_json::Value> {
    t.flows("all")
        .into_iter()
        .find(|f| f["client"] == client.to_string())
}

/// The flow of `client` once the gateway lists it (within a report period, 1 s; None after HUNG).
pub fn wait_flow(t: &Topo, client: SocketAddr) -> Option<serde_json::Value> {
    let deadline = Instant::now() + HUNG;
    while Instant::now() < deadline {
        if let Some(f) = find_flow(t, client) {
            return Some(f);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    None
}

/// Uploads `n` payload bytes to `srv` and checks the server's length and sha256.
pub fn transfer_up(t: &Topo, srv: SocketAddr, n: usize) {
    let data = payload(n);
    let mut c = connect(&t.c, srv).unwrap();
    c.set_read_timeout(Some(HUNG)).unwrap();
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

/// Downloads `n` payload bytes from `srv` and checks them.
pub fn transfer_down(t: &Topo, srv: SocketAddr, n: usize) {
    let mut c = connect(&t.c, srv).unwrap();
    c.set_read_timeout(Some(HUNG)).unwrap();
    c.write_all(format!("DOWN {n}\n").as_bytes()).unwrap();
    let mut got = Vec::new();
    c.read_to_end(&mut got).unwrap();
    assert_eq!(got.len(), n);
    assert_eq!(sha(&got), sha(&payload(n)), "download of {n} bytes");
}

/// Polls the gateway's /v1/counters until `check` holds (a worker's deltas reach the master once
/// a report period, 1 s); panics after HUNG with the last counters.
pub fn wait_counters(
    t: &Topo,
    what: &str,
    check: impl Fn(&serde_json::Value) -> bool,
) -> serde_json::Value {
    let deadline = Instant::now() + HUNG;
    loop {
        let (_, c) = control(&t.sock(), "GET", "/v1/counters", None).unwrap();
        if check(&c) {
            return c;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: not within {HUNG:?}: {c}\n{}",
            t.log()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}
