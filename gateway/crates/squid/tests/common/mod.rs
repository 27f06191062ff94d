//! Test topology pq-cli — pq-gw — pq-srv (veth, no emulator), a tiny HTTP origin and client.
//! Traffic stays inside these namespaces.

#![allow(dead_code)]

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use perigee_testkit::{run, run_stdin, NetnsGuard};

pub const CLIENT_IP: &str = "10.81.1.10";
/// Same link, outside the served /25.
pub const OUTSIDER_IP: &str = "10.81.1.200";
pub const SERVED: &str = "10.81.1.0/25";
pub const ORIGIN_IP: &str = "10.81.3.10";
pub const CLIENT_IP6: &str = "fd81:1::10";
pub const SERVED6: &str = "fd81:1::/64";
pub const ORIGIN_IP6: &str = "fd81:3::10";
pub const NAMESPACES: [&str; 3] = ["pq-cli", "pq-gw", "pq-srv"];

fn nsx(ns: &str, args: &[&str]) {
    let mut v = vec!["ip", "netns", "exec", ns];
    v.extend_from_slice(args);
    run(&v);
}

/// Removes the namespaces (and with them the veths) when dropped. Holds an exclusive lock so
/// two runs of this suite (e.g. this crate's and a whole-workspace `cargo test`) never share
/// the fixed pq- names.
pub struct Topology {
    // Fields drop in order: the namespaces go before the lock is released.
    _nets: NetnsGuard,
    _lock: File,
}

fn lock_suite() -> File {
    let f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open("/run/lock/perigee-squid-e2e.lock")
        .or_else(|_| File::create(std::env::temp_dir().join("perigee-squid-e2e.lock")))
        .expect("lock file");
    // SAFETY: flock(2) on an fd we own; released when the File is dropped.
    let rc = unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX) };
    assert_eq!(rc, 0, "flock: {}", std::io::Error::last_os_error());
    f
}

/// Builds the three namespaces, routing, and the TPROXY interception of port 80 in pq-gw
/// (what the splitter's nft renderer will do when cache.enabled).
pub fn build_topology(tproxy_port: u16) -> Topology {
    // The lock first: another run may still be using the names.
    let lock = lock_suite();
    let topo = Topology {
        _nets: NetnsGuard::new(&NAMESPACES),
        _lock: lock,
    };
    run(&[
        "ip", "link", "add", "pqc0", "netns", "pq-cli", "type", "veth", "peer", "name", "pqg0",
        "netns", "pq-gw",
    ]);
    run(&[
        "ip", "link", "add", "pqg1", "netns", "pq-gw", "type", "veth", "peer", "name", "pqs0",
        "netns", "pq-srv",
    ]);
    for (ns, ifs) in [
        ("pq-cli", vec!["lo", "pqc0"]),
        ("pq-gw", vec!["lo", "pqg0", "pqg1"]),
        ("pq-srv", vec!["lo", "pqs0"]),
    ] {
        for i in ifs {
            nsx(ns, &["ip", "link", "set", i, "up"]);
        }
    }
    // Addresses and routes, both families; the second address on pq-cli is outside SERVED.
    // TPROXY: marked packets are delivered locally via table 100.
    const SETUP: &[(&str, &str)] = &[
        ("pq-cli", "ip addr add 10.81.1.10/24 dev pqc0"),
        ("pq-cli", "ip addr add 10.81.1.200/24 dev pqc0"),
        ("pq-cli", "ip route add default via 10.81.1.1"),
        ("pq-cli", "ip -6 addr add fd81:1::10/64 dev pqc0 nodad"),
        ("pq-cli", "ip -6 route add default via fd81:1::1"),
        ("pq-gw", "ip addr add 10.81.1.1/24 dev pqg0"),
        ("pq-gw", "ip addr add 10.81.3.1/24 dev pqg1"),
        ("pq-gw", "ip -6 addr add fd81:1::1/64 dev pqg0 nodad"),
        ("pq-gw", "ip -6 addr add fd81:3::1/64 dev pqg1 nodad"),
        ("pq-gw", "sysctl -qw net.ipv4.ip_forward=1"),
        ("pq-gw", "sysctl -qw net.ipv6.conf.all.forwarding=1"),
        ("pq-gw", "ip rule add fwmark 1 lookup 100"),
        ("pq-gw", "ip route add local 0.0.0.0/0 dev lo table 100"),
        ("pq-gw", "ip -6 rule add fwmark 1 lookup 100"),
        ("pq-gw", "ip -6 route add local ::/0 dev lo table 100"),
        ("pq-srv", "ip addr add 10.81.3.10/24 dev pqs0"),
        ("pq-srv", "ip route add default via 10.81.3.1"),
        ("pq-srv", "ip -6 addr add fd81:3::10/64 dev pqs0 nodad"),
        ("pq-srv", "ip -6 route add default via fd81:3::1"),
    ];
    for (ns, cmd) in SETUP {
        let args: Vec<&str> = cmd.split_whitespace().collect();
        nsx(ns, &args);
    }
    // Deliberately intercept every source (not only the served subnet) so Squid's own ACL is
    // what refuses the outsider.
    let mut rules = String::new();
    for family in ["ip", "ip6"] {
        rules.push_str(&format!(
            "table {family} pq_cache {{\n\
               chain prerouting {{\n\
                 type filter hook prerouting priority mangle; policy accept;\n\
                 meta l4proto tcp socket transparent 1 meta mark set 0x1 accept\n\
                 iifname \"pqg0\" tcp dport 80 tproxy to :{tproxy_port} meta mark set 0x1 accept\n\
               }}\n\
             }}\n"
        ));
    }
    run_stdin(&["ip", "netns", "exec", "pq-gw", "nft", "-f", "-"], &rules);
    topo
}

/// Moves the calling thread into a named network namespace.
pub fn enter_netns(name: &str) {
    let f = File::open(format!("/run/netns/{name}")).expect("netns file");
    // SAFETY: setns(2) on a valid namespace fd; affects only the calling thread.
    let rc = unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) };
    assert_eq!(rc, 0, "setns {name}: {}", std::io::Error::last_os_error());
}

/// Runs `f` on a fresh thread inside namespace `ns`.
pub fn in_ns<T: Send + 'static>(ns: &'static str, f: impl FnOnce() -> T + Send + 'static) -> T {
    std::thread::spawn(move || {
        enter_netns(ns);
        f()
    })
    .join()
    .expect("namespace thread panicked")
}

/// What the origin saw: (peer address, path) per request.
pub type OriginLog = Arc<Mutex<Vec<(SocketAddr, String)>>>;

pub fn origin_hits(log: &OriginLog, path: &str) -> Vec<SocketAddr> {
    log.lock()
        .unwrap()
        .iter()
        .filter(|(_, p)| p == path)
        .map(|(a, _)| *a)
        .collect()
}

/// Starts the origin on ORIGIN_IP:80 in pq-srv. Paths are `/o/<size>/<policy>/<name>`;
/// policy picks Cache-Control: public → "public, max-age=3600", nostore → "no-store",
/// private → "private, max-age=3600". Keep-alive is supported.
pub fn start_origin() -> OriginLog {
    let log: OriginLog = Arc::new(Mutex::new(Vec::new()));
    let listener = in_ns("pq-srv", || {
        // Dual-stack: IPv4 peers arrive v4-mapped and are logged canonical.
        TcpListener::bind("[::]:80").expect("bind origin")
    });
    let l2 = log.clone();
    std::thread::spawn(move || {
        for conn in listener.incoming().flatten() {
            let log = l2.clone();
            std::thread::spawn(move || serve_conn(conn, log));
        }
    });
    log
}

fn serve_conn(conn: TcpStream, log: OriginLog) {
    let peer = match conn.peer_addr() {
        Ok(p) => SocketAddr::new(p.ip().to_canonical(), p.port()),
        Err(_) => return,
    };
    let mut reader = BufReader::new(conn.try_clone().unwrap());
    let mut out = conn;
    loop {
        let mut request_line = String::new();
        if reader.read_line(&mut request_line).unwrap_or(0) == 0 {
            return;
        }
        let mut headers = HashMap::new();
        loop {
            let mut h = String::new();
            if reader.read_line(&mut h).unwrap_or(0) == 0 {
                return;
            }
            let h = h.trim_end();
            if h.is_empty() {
                break;
            }
            if let Some((k, v)) = h.split_once(':') {
                headers.insert(k.trim().to_ascii_lowercase(), v.trim().to_string());
            }
        }
        let mut parts = request_line.split_whitespace();
        let method = parts.next().unwrap_or("").to_string();
        let path = parts.next().unwrap_or("").to_string();
        log.lock().unwrap().push((peer, path.clone()));
        let seg: Vec<&str> = path.trim_start_matches('/').split('/').collect();
        let (size, policy) = match seg.as_slice() {
            ["o", size, policy, _name] => (size.parse::<u64>().unwrap_or(0), *policy),
            _ => (0, "nostore"),
        };
        let cc = match policy {
            "public" => "public, max-age=3600",
            "private" => "private, max-age=3600",
            _ => "no-store",
        };
        let head = format!(
            "HTTP/1.1 200 OK\r\nDate: {}\r\nContent-Type: application/octet-stream\r\nContent-Length: {size}\r\nCache-Control: {cc}\r\nLast-Modified: Sat, 01 Nov 2025 00:00:00 GMT\r\n\r\n",
            http_date_now()
        );
        if out.write_all(head.as_bytes()).is_err() {
            return;
        }
        if method != "HEAD" {
            let chunk: Vec<u8> = (0..65536u32).map(|i| b'a' + (i % 26) as u8).collect();
            let mut left = size;
            while left > 0 {
                let n = left.min(chunk.len() as u64) as usize;
                if out.write_all(&chunk[..n]).is_err() {
                    return;
                }
                left -= n as u64;
            }
        }
        if headers
            .get("connection")
            .is_some_and(|c| c.eq_ignore_ascii_case("close"))
        {
            return;
        }
    }
}

/// A parsed response: status and body length (the body is checked against the origin's pattern).
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub body_len: u64,
    pub headers: HashMap<String, String>,
}

/// Reads one HTTP/1.1 response with a Content-Length body from a kept-alive connection.
pub fn read_reply(reader: &mut BufReader<TcpStream>) -> Reply {
    let mut status_line = String::new();
    reader.read_line(&mut status_line).expect("status line");
    let status: u16 = status_line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .expect("status");
    let mut headers = HashMap::new();
    loop {
        let mut h = String::new();
        reader.read_line(&mut h).expect("header");
        let h = h.trim_end();
        if h.is_empty() {
            break;
        }
        if let Some((k, v)) = h.split_once(':') {
            headers.insert(k.trim().to_ascii_lowercase(), v.trim().to_string());
        }
    }
    let len: u64 = headers
        .get("content-length")
        .and_then(|v| v.parse().ok())
        .expect("content-length");
    let mut buf = vec![0u8; 65536];
    let mut left = len;
    let mut pos: u64 = 0;
    while left > 0 {
        let n = reader
            .read(&mut buf[..left.min(65536) as usize])
            .expect("body");
        assert!(n > 0, "connection closed mid-body");
        for (i, b) in buf[..n].iter().enumerate() {
            let want = b'a' + ((pos + i as u64) % 65536 % 26) as u8;
            assert_eq!(*b, want, "body byte {} differs", pos + i as u64);
        }
        pos += n as u64;
        left -= n as u64;
    }
    Reply {
        status,
        body_len: len,
        headers,
    }
}

/// Connects from pq-cli (source CLIENT_IP) to the origin.
pub fn client_connect() -> BufReader<TcpStream> {
    client_connect_to(ORIGIN_IP)
}

/// Connects from pq-cli to `origin` (v4 or v6) port 80.
pub fn client_connect_to(origin: &'static str) -> BufReader<TcpStream> {
    let s = in_ns("pq-cli", move || {
        TcpStream::connect((origin, 80)).expect("connect")
    });
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    BufReader::new(s)
}

pub fn send(reader: &mut BufReader<TcpStream>, paths: &[&str]) {
    send_host(reader, ORIGIN_IP, paths)
}

/// Writes GETs with `Host: host` (Squid verifies Host against the intercepted destination and
/// does not cache when they disagree).
pub fn send_host(reader: &mut BufReader<TcpStream>, host: &str, paths: &[&str]) {
    let mut req = String::new();
    for p in paths {
        req.push_str(&format!(
            "GET {p} HTTP/1.1\r\nHost: {host}\r\nUser-Agent: pq-test\r\n\r\n"
        ));
    }
    reader.get_mut().write_all(req.as_bytes()).unwrap();
}

/// Writes a raw request text.
pub fn send_raw(reader: &mut BufReader<TcpStream>, request: &str) {
    reader.get_mut().write_all(request.as_bytes()).unwrap();
}

/// One GET on a fresh connection.
pub fn get(path: &str) -> Reply {
    let mut c = client_connect();
    send(&mut c, &[path]);
    read_reply(&mut c)
}

/// curl from pq-cli with a chosen source address; returns the HTTP status (000 = no response).
pub fn curl_status(source: &str, url: &str) -> String {
    let out = Command::new("ip")
        .args([
            "netns",
            "exec",
            "pq-cli",
            "curl",
            "-s",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
            "--max-time",
            "10",
            "--interface",
            source,
            url,
        ])
        .output()
        .expect("curl");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// IMF-fixdate for the current time (origins must send Date; Squid's freshness uses it).
pub fn http_date_now() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Civil-from-days (proleptic Gregorian), days since 1970-01-01.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    const WD: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
    const MON: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    format!(
        "{}, {:02} {} {} {:02}:{:02}:{:02} GMT",
        WD[days.rem_euclid(7) as usize],
        day,
        MON[(month - 1) as usize],
        year,
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}
