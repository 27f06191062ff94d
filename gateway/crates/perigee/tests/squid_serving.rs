//! A Squid that runs but does not serve: the daemon probes it, takes port 80 away from it
//! (to the splitter), restarts it and gives port 80 back once it answers. Namespaces
//! sq-<tag>-{c,g,s} (client, gateway, server; prefix `sq` is this file's). The server namespace
//! holds the resolver Squid asks and an HTTP origin.
mod common;
use common::*;
use perigee_testkit::dns::Responder;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The test topology's config with the cache on, Squid resolving through the server's responder.
fn cache_config(t: &Topo, disk_mb: u32) -> serde_json::Value {
    let mut cfg = t.config();
    cfg["dns"] = serde_json::json!({"enabled": false, "upstream": [SERVER4]});
    cfg["cache"] = serde_json::json!({"enabled": true, "port": 3129, "admin_port": 3130,
                                      "memory_mb": 8, "disk_mb": disk_mb,
                                      "max_memory_object_mb": 1});
    cfg
}

/// An HTTP origin on the server's port 80: `/big<anything>` is 2 MB, everything else a small
/// page; all cacheable.
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
                let big = String::from_utf8_lossy(&req).starts_with("GET /big");
                let body = if big {
                    vec![b'x'; 2 << 20]
                } else {
                    b"hello from the origin\n".to_vec()
                };
                let _ = write!(
                    c,
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nCache-Control: max-age=600\r\nConnection: close\r\n\r\n",
                    body.len()
                );
                let _ = c.write_all(&body);
            });
        }
    });
}

/// GET http://<host><path> from the client to the server's address: the status (0: no
/// answer) and how long it took.
fn fetch(t: &Topo, host: &str, path: &str) -> (u16, Duration) {
    let req = format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n");
    in_ns(&t.c, move || {
        let started = Instant::now();
        let Ok(mut c) = TcpStream::connect_timeout(&sa(SERVER4, 80), HUNG) else {
            return (0, started.elapsed());
        };
        c.set_read_timeout(Some(HUNG)).unwrap();
        let _ = c.write_all(req.as_bytes());
        let mut resp = Vec::new();
        let _ = c.read_to_end(&mut resp);
        let status = String::from_utf8_lossy(&resp[..resp.len().min(64)])
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        (status, started.elapsed())
    })
}

fn cache_problems(t: &Topo) -> Vec<String> {
    health_problems(t)
        .into_iter()
        .filter(|p| p.starts_with("cache:"))
        .collect()
}

/// Polls /v1/health until `cond` holds on its cache problems; how long that took (panics
/// after `within`, showing the daemon's and Squid's logs).
fn wait_cache(
    t: &Topo,
    within: Duration,
    what: &str,
    cond: impl Fn(&[String]) -> bool,
) -> Duration {
    let started = Instant::now();
    loop {
        let p = cache_problems(t);
        if cond(&p) {
            return started.elapsed();
        }
        assert!(
            started.elapsed() < within,
            "{what} not seen within {within:?}: {p:?}\n{}\n--- cache.log ---\n{}",
            t.log(),
            squid_log(t)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn squid_dir(t: &Topo) -> PathBuf {
    t.dir.join("squid")
}

fn tail(file: &Path, n: usize) -> String {
    let text = std::fs::read_to_string(file).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

fn squid_log(t: &Topo) -> String {
    tail(&squid_dir(t).join("logs/cache.log"), 40)
}

fn serving(p: &[String]) -> bool {
    p.is_empty()
}

fn stepped_aside(p: &[String]) -> bool {
    p.iter().any(|x| x.contains("does not answer"))
}

/// The process group of the running Squid (its master leads it).
fn squid_group(t: &Topo) -> i32 {
    let pid_file = squid_dir(t).join("run/squid.pid");
    let pid: i32 = std::fs::read_to_string(&pid_file)
        .unwrap_or_else(|e| panic!("{}: {e}", pid_file.display()))
        .trim()
        .parse()
        .unwrap();
    // SAFETY: getpgid(2) on a pid; no memory involved.
    let pgid = unsafe { libc::getpgid(pid) };
    assert!(pgid > 0, "squid {pid} has no process group");
    pgid
}

/// A tmpfs of `size_mb` over `dir`, unmounted on drop (like the appliance's disk under the store).
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(dir: &Path, size_mb: u32) -> Tmpfs {
        std::fs::create_dir_all(dir).unwrap();
        run(&[
            "mount",
            "-t",
            "tmpfs",
            "-o",
            &format!("size={size_mb}m,mode=0755"),
            "sq-squid",
            &dir.to_string_lossy(),
        ]);
        Tmpfs(dir.to_path_buf())
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(&self.0)
            .status();
    }
}

/// Fills the filesystem under `dir` until it refuses (ENOSPC); the filler's path.
fn fill(dir: &Path) -> PathBuf {
    let filler = dir.join("sq-filler");
    let mut f = std::fs::File::create(&filler).unwrap();
    let chunk = vec![0u8; 1 << 20];
    while f.write_all(&chunk).and_then(|_| f.flush()).is_ok() {}
    // Whatever a partial chunk left free.
    while f.write_all(&chunk[..4096]).is_ok() {}
    filler
}

/// Before: web fetches go through Squid. Returns the topology with its daemon running.
fn start_serving(
    tag: &str,
    disk_mb: u32,
    store_mb: Option<u32>,
) -> (Topo, Responder, Option<Tmpfs>) {
    let mut t = Topo::with_prefix("sq", tag);
    let resolver = in_ns(&t.s, || Responder::bind(&[sa(SERVER4, 53)], Duration::ZERO));
    origin(&t);
    let disk = store_mb.map(|mb| Tmpfs::mount(&squid_dir(&t), mb));
    let cfg = cache_config(&t, disk_mb);
    t.start_with_services(&cfg);
    wait_cache(&t, HUNG, "the cache serving", serving);
    let (status, _) = fetch(&t, "before.sq.example", "/before");
    assert_eq!(status, 200);
    assert!(
        wait_logged(&t, "/before"),
        "through Squid: {:?}",
        squid_urls(&t)
    );
    (t, resolver, disk)
}

/// Squid alive but frozen (every process of it stopped): port 80 goes to the splitter within
/// seconds, web fetches keep working, and the restarted Squid gets port 80 back.
#[test]
fn a_frozen_squid_loses_port_80_and_is_restarted() {
    let Some(_g) = serial() else { return };
    let (t, _resolver, _) = start_serving("stop", 0, None);
    let frozen = squid_group(&t);
    // SAFETY: signalling the Squid process group our daemon started for this test.
    unsafe { libc::kill(-frozen, libc::SIGSTOP) };
    let took = wait_cache(&t, HUNG, "port 80 withdrawn", stepped_aside);
    eprintln!("frozen squid: port 80 withdrawn after {took:?}");
    // Restarting may already have put it back: either way a fetch is served (one that reached the
    // frozen Squid would get no answer: status 0).
    let (status, fetch_took) = fetch(&t, "aside.sq.example", "/aside");
    eprintln!("frozen squid: a web fetch answered {status} after {fetch_took:?}");
    assert_eq!(status, 200, "a web fetch while Squid is frozen");

    let took = wait_cache(&t, HUNG, "port 80 back on Squid", serving);
    eprintln!("frozen squid: port 80 back after {took:?}");
    assert_ne!(squid_group(&t), frozen, "a new Squid serves");
    let (status, _) = fetch(&t, "back.sq.example", "/back");
    assert_eq!(status, 200);
    assert!(wait_logged(&t, "/back"), "through Squid again");
}

/// The disk under Squid's store and logs full (the soak's fault, shorter): web fetches through
/// the cache keep working while it is full (Squid drops the access-log records it cannot
/// write; by default a failed log write kills its worker, and the cache then answers nothing),
/// and after space is back Squid serves port 80 and its log is read again.
#[test]
fn a_full_store_disk_does_not_stop_web_fetches() {
    let Some(_g) = serial() else { return };
    let (t, _resolver, _disk) = start_serving("full", 24, Some(48));
    let filler = fill(&squid_dir(&t));
    // Traffic that makes Squid write: 2 MB objects to the store, lines to its log.
    let started = Instant::now();
    let mut failed = Vec::new();
    let mut fetches = 0;
    while started.elapsed() < Duration::from_secs(10) {
        let (status, took) = fetch(&t, "full.sq.example", &format!("/big{fetches}"));
        if status != 200 {
            failed.push((fetches, status, took));
        }
        fetches += 1;
        std::thread::sleep(Duration::from_millis(100));
    }
    let problems = cache_problems(&t);
    std::fs::remove_file(&filler).unwrap();
    assert!(
        failed.is_empty(),
        "web fetches failed while the disk was full ({fetches} tried; problems {problems:?}): \
         {failed:?}\n{}\n--- cache.log ---\n{}",
        t.log(),
        squid_log(&t)
    );
    wait_cache(&t, HUNG, "the cache serving", serving);
    let (status, _) = fetch(&t, "back.sq.example", "/back");
    assert_eq!(status, 200);
    assert!(
        wait_logged(&t, "/back"),
        "through Squid again, and its log read: {:?}\n--- access.log ---\n{}",
        squid_urls(&t),
        tail(&squid_dir(&t).join("logs/access.log"), 3)
    );
}
