//! What the resolver's namespace tests share: a gateway namespace `pd-<tag>-g` (where unbound
//! runs) joined by a veth to an upstream namespace `pd-<tag>-s`, one pair per test so tests
//! in a binary can run at once.
#![allow(dead_code)] // each test binary uses its own part

pub mod dnssec;

use perigee_dns::{Cidr, DnsConfig, UnboundPaths};
use perigee_testkit::dns::{query, Reply, TYPE_A};
use perigee_testkit::{run, NetnsGuard};
use std::fs::File;
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

/// The upstream namespace's address (the gateway's is 10.98.2.1).
pub const UPSTREAM: &str = "10.98.2.10";

/// The two namespaces of one test; deleted (with the veth) when dropped.
pub struct Lab {
    pub gw: String,
    pub up: String,
    _nets: NetnsGuard,
}

impl Lab {
    pub fn new(tag: &str) -> Lab {
        let (gw, up) = (format!("pd-{tag}-g"), format!("pd-{tag}-s"));
        let nets = NetnsGuard::with_loopback_up(&[&gw, &up]);
        run(&[
            "ip", "link", "add", "g0", "netns", &gw, "type", "veth", "peer", "name", "s0", "netns",
            &up,
        ]);
        run(&["ip", "-n", &gw, "addr", "add", "10.98.2.1/24", "dev", "g0"]);
        run(&["ip", "-n", &up, "addr", "add", "10.98.2.10/24", "dev", "s0"]);
        run(&["ip", "-n", &gw, "link", "set", "g0", "up"]);
        run(&["ip", "-n", &up, "link", "set", "s0", "up"]);
        Lab {
            gw,
            up,
            _nets: nets,
        }
    }
}

/// Runs `f` on a thread inside namespace `ns`; processes and threads it starts live there too.
pub fn in_ns<T: Send + 'static>(ns: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let path = format!("/run/netns/{ns}");
    std::thread::spawn(move || {
        let file = File::open(&path).unwrap();
        // SAFETY: setns on this thread only, with a valid namespace fd.
        let rc = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
        assert_eq!(rc, 0, "setns {path}");
        f()
    })
    .join()
    .unwrap_or_else(|e| std::panic::resume_unwind(e))
}

pub fn temp_dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("pd-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

pub fn paths(dir: &Path) -> UnboundPaths {
    UnboundPaths {
        state_dir: dir.join("state"),
        run_dir: dir.join("run"),
        ..UnboundPaths::default()
    }
}

/// The resolver on, forwarding to the counting responder at UPSTREAM. That responder is no
/// DNSSEC-aware resolver: validation is off (the DNSSEC test has a signed zone of its own).
pub fn forwarding_to_upstream() -> DnsConfig {
    DnsConfig {
        enabled: true,
        upstream: vec![UPSTREAM.parse().unwrap()],
        dnssec_validation: false,
        ..DnsConfig::default()
    }
}

pub fn served() -> Vec<Cidr> {
    vec!["10.98.1.0/24".parse().unwrap()]
}

/// Asks the resolver on the gateway's loopback (the calling thread must be in the gateway's
/// namespace); the whole reply.
pub fn ask_reply(name: &str, qtype: u16) -> std::io::Result<Reply> {
    let server: SocketAddr = "127.0.0.1:53".parse().unwrap();
    query(server, name, qtype, false, perigee_testkit::HUNG)
}

/// The addresses of an A query.
pub fn ask(name: &str) -> std::io::Result<Vec<std::net::IpAddr>> {
    ask_reply(name, TYPE_A).map(|r| r.addrs)
}
