//! A connection addressed to one of the gateway's own TPROXY ports (the splitter's, Squid's) is
//! refused, never relayed to the port itself; a server elsewhere on the same port number is split
//! like any other. Namespaces `ph-<tag>-{c,g,s}`.
mod common;
use common::*;
use std::io::{BufRead, BufReader, ErrorKind, Write};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

const GATEWAY_LAN4: &str = "10.99.1.1";
const GATEWAY_LAN6: &str = "fd99:1::1";
const SPLITTER_PORT: u16 = 7071;
const CACHE_PORT: u16 = 3129;

/// Connecting (from namespace `ns`) is refused at once: the SYN is answered with a reset (which
/// a loopback connect reports as "reset", a routed one as "refused"); it is never accepted. (A
/// dropped SYN would end in a timeout, another error.)
fn assert_refused(ns: &str, addr: SocketAddr, log: impl Fn() -> String) {
    match connect(ns, addr) {
        Err(e)
            if matches!(
                e.kind(),
                ErrorKind::ConnectionRefused | ErrorKind::ConnectionReset
            ) => {}
        Err(e) => panic!("{addr} from {ns}: expected a refusal, got {e}"),
        Ok(_) => panic!(
            "{addr} from {ns}: accepted a connection to the gateway's own TPROXY port; log:\n{}",
            log()
        ),
    }
}

/// No flow of the gateway's has its own address as the server (nothing was relayed to itself).
fn assert_no_flow_to_itself(t: &Topo) {
    for f in t.flows("all") {
        let server = f["server"].as_str().unwrap_or_default();
        assert!(
            !server.starts_with(GATEWAY_LAN4) && !server.contains(GATEWAY_LAN6),
            "a flow to the gateway itself: {f}"
        );
    }
}

#[test]
fn direct_connections_to_the_splitter_port_are_refused() {
    let Some(_g) = serial() else { return };
    let mut t = Topo::with_prefix("ph", "own");
    t.start(&t.config());
    for addr in [
        sa(GATEWAY_LAN4, SPLITTER_PORT),
        sa(GATEWAY_LAN6, SPLITTER_PORT),
    ] {
        assert_refused(&t.c, addr, || t.log());
    }
    // From the gateway's own namespace too (loopback never passes the intercept chain).
    assert_refused(&t.g, sa("127.0.0.1", SPLITTER_PORT), || t.log());
    std::thread::sleep(Duration::from_millis(1200)); // one report period
    assert_no_flow_to_itself(&t);

    // A server elsewhere that happens to listen on the splitter's port number is split as usual.
    let _rx = server(&t.s, sa(SERVER4, SPLITTER_PORT));
    let mut c = connect(&t.c, sa(SERVER4, SPLITTER_PORT)).expect("connect to a remote port 7071");
    c.set_read_timeout(Some(HUNG)).unwrap();
    c.write_all(b"WHO\n").unwrap();
    let mut line = String::new();
    BufReader::new(c.try_clone().unwrap())
        .read_line(&mut line)
        .expect("the server answers through the gateway");
    assert_eq!(line.trim(), c.local_addr().unwrap().to_string());
    let deadline = Instant::now() + HUNG;
    let client = c.local_addr().unwrap().to_string();
    while !t.flows("all").iter().any(|f| f["client"] == client) {
        assert!(
            Instant::now() < deadline,
            "the flow to {SERVER4}:7071 was not split; log:\n{}",
            t.log()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn direct_connections_to_the_cache_port_are_refused() {
    let Some(_g) = serial() else { return };
    if which("squid").is_none() {
        perigee_testkit::cannot_run(
            "squid is not installed (scripts/apt/squid.txt): the cache port case cannot run",
        );
        return;
    }
    let t = Topo::with_prefix("ph", "sq");
    let mut cfg = t.config();
    cfg["cache"] = serde_json::json!({"enabled": true, "port": CACHE_PORT, "admin_port": 3130,
                                      "memory_mb": 16, "disk_mb": 0});
    // The cache needs an explicit resolver; none has to answer for this test (Squid listens either way).
    cfg["dns"] = serde_json::json!({"upstream": [SERVER4]});
    let squid = t.dir.join("squid");
    let (state, run) = (
        squid.to_string_lossy().into_owned(),
        squid.join("run").to_string_lossy().into_owned(),
    );
    let service = format!("phsq{}", std::process::id()); // Squid's -n: alphanumeric only
    let extra = [
        "--squid-state-dir",
        &state,
        "--squid-run-dir",
        &run,
        "--squid-service",
        &service,
    ];
    let daemon = start_daemon_with(&t.g, &t.dir, "gw", &cfg, &extra, |h| h["status"] == "ok");
    // SIGTERM, so the daemon stops its Squid (the topology's drop would SIGKILL it and leave Squid
    // running, outside any namespace); also after a failed assertion.
    let _stop = TermOnDrop(daemon);
    // Squid listens on the cache port (it is up: health is ok); a direct connection must not reach it.
    let log = || std::fs::read_to_string(t.dir.join("gw.log")).unwrap_or_default();
    for addr in [sa(GATEWAY_LAN4, CACHE_PORT), sa(GATEWAY_LAN6, CACHE_PORT)] {
        assert_refused(&t.c, addr, log);
    }
    assert_refused(&t.g, sa("127.0.0.1", CACHE_PORT), log);
}

/// Stops a daemon with SIGTERM (its graceful stop, Squid included) and waits for it.
struct TermOnDrop(std::process::Child);

impl Drop for TermOnDrop {
    fn drop(&mut self) {
        // SAFETY: signalling our own child.
        unsafe { libc::kill(self.0.id() as i32, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(15);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.0.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn which(program: &str) -> Option<std::path::PathBuf> {
    std::env::var_os("PATH")?
        .to_str()?
        .split(':')
        .chain(["/usr/sbin", "/sbin"])
        .map(|d| std::path::Path::new(d).join(program))
        .find(|p| p.is_file())
}
