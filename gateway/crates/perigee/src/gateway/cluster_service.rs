//! How a hub cluster's table crosses the satellite (docs/cluster.md, *The peer path through the
//! cluster*): a terminal keeps one long poll open to its hub, as a peer flow of its own kind
//! (OPEN kind 3) inside the same mutually authenticated TLS connections as its clients' flows.
//!
//! - Hub: the table service on 127.0.0.1:8854, which the hub's workers connect such flows to. A
//!   poll names the epoch the terminal holds; it is answered with the table (JSON, then the
//!   connection closes) as soon as the hub holds another one, or closed empty after `HOLD`.
//! - Terminal: a thread polls through 127.0.0.1:8855 (the workers' loopback entry into the peer
//!   path, `worker/local_tunnel.rs`) and holds what arrives like a pushed table: checked
//!   against its own hash with the routers' flows, never older than the one it holds.
use super::cluster::table::ClusterTable;
use super::cluster_control::hold;
use crate::gateway::config::Role;
use crate::gateway::log;
use crate::gateway::state::Shared;
use serde_json::json;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Hub: where its workers connect the terminals' table polls.
pub const TABLE_SERVICE: SocketAddr = SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 8854);
/// Terminal: where its poll enters the peer path.
pub const TABLE_TUNNEL: SocketAddr = SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 8855);
/// How long a poll waits for a newer table before it is closed empty (and made again).
const HOLD: Duration = Duration::from_secs(50);
/// A poll's wait at the terminal: the hub's hold, plus the satellite and a lost segment or two.
const POLL_TIMEOUT: Duration = Duration::from_secs(65);
/// At most this many polls wait at once (one per terminal is what they keep).
const MAX_WAITING: usize = 16_384;
/// At most this many new polls are being read at once.
const MAX_READING: usize = 64;
/// The longest table accepted (16 members, 256 buckets and 256 checks stay well under it).
const MAX_TABLE_BYTES: u64 = 1 << 20;

struct Waiting {
    conn: TcpStream,
    epoch: u64,
    since: Instant,
}

/// Hub: accept polls and answer them when the table changes. Runs for the daemon's life; at a
/// terminal nothing connects to it.
pub fn serve(shared: Arc<Shared>) {
    let listener = match TcpListener::bind(TABLE_SERVICE) {
        Ok(l) => l,
        Err(e) => {
            log::error(
                "cluster table service not listening: terminals behind a hub cluster get no table",
                json!({"listen": TABLE_SERVICE.to_string(), "error": e.to_string()}),
            );
            return;
        }
    };
    let waiting = Arc::new(Mutex::new(Vec::<Waiting>::new()));
    {
        let (shared, waiting) = (shared.clone(), waiting.clone());
        std::thread::spawn(move || answer(&shared, &waiting));
    }
    let reading = Arc::new(AtomicUsize::new(0));
    for conn in listener.incoming().flatten() {
        // Each poll's first line is read on a thread of its own, so one that sends nothing (an
        // enrolled terminal's flow is all that reaches this port) holds up no other.
        if reading.fetch_add(1, Ordering::AcqRel) >= MAX_READING {
            reading.fetch_sub(1, Ordering::AcqRel);
            continue;
        }
        let (shared, waiting, reading) = (shared.clone(), waiting.clone(), reading.clone());
        std::thread::spawn(move || {
            if let Some(epoch) = read_epoch(&conn) {
                let mut w = waiting.lock().unwrap();
                if w.len() < MAX_WAITING {
                    w.push(Waiting {
                        conn,
                        epoch,
                        since: Instant::now(),
                    });
                }
                drop(w);
                shared.peer.cluster_changed.notify_all();
            }
            reading.fetch_sub(1, Ordering::AcqRel);
        });
    }
}

/// The epoch a poll names: its first line, which arrives with the flow's first bytes; a
/// connection that sends none within seconds is not a poll.
fn read_epoch(conn: &TcpStream) -> Option<u64> {
    conn.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    let mut line = String::new();
    BufReader::new(conn).take(32).read_line(&mut line).ok()?;
    line.trim().parse().ok()
}

/// The table a terminal gets: the hub's, without naming the hub gateway it came through.
fn for_terminal(shared: &Shared) -> Option<(u64, Vec<u8>)> {
    let held = shared.peer.cluster.lock().unwrap();
    let (t, _, _) = held.as_ref()?;
    let mut t = t.clone();
    t.member = None;
    Some((t.epoch, serde_json::to_vec(&t).ok()?))
}

fn answer(shared: &Shared, waiting: &Mutex<Vec<Waiting>>) {
    loop {
        {
            let held = shared.peer.cluster.lock().unwrap();
            let _ = shared
                .peer
                .cluster_changed
                .wait_timeout(held, Duration::from_secs(1));
        }
        let table = for_terminal(shared);
        let mut w = waiting.lock().unwrap();
        let due: Vec<Waiting> = {
            let (due, keep): (Vec<Waiting>, Vec<Waiting>) = w.drain(..).partition(|p| {
                table.as_ref().is_some_and(|(e, _)| *e != p.epoch) || p.since.elapsed() >= HOLD
            });
            *w = keep;
            due
        };
        drop(w);
        for mut p in due {
            if let Some((e, body)) = table.as_ref().filter(|(e, _)| *e != p.epoch) {
                let _ = p.conn.set_write_timeout(Some(Duration::from_secs(5)));
                if p.conn.write_all(body).is_err() {
                    log::warn(
                        "cluster table: a terminal's poll went away",
                        json!({"epoch": e}),
                    );
                }
            }
            // Dropped: closed, the terminal polls again.
        }
    }
}

/// Terminal: keep one poll open to the hub while the peer path is on, and hold each table that
/// arrives.
pub fn poll(shared: Arc<Shared>) {
    let mut failures = 0u32;
    loop {
        let on = shared.configured.load(Ordering::Relaxed) && {
            let cfg = shared.config.lock().unwrap();
            cfg.role == Role::Terminal && cfg.peer.enabled && cfg.peer.hub_cluster
        };
        if !on {
            std::thread::sleep(Duration::from_secs(1));
            continue;
        }
        match poll_once(&shared) {
            Ok(()) => failures = 0,
            Err(e) => {
                failures += 1;
                if failures == 3 {
                    log::warn("cluster table poll failing", json!({"error": e}));
                }
                // The first retry at once: the gateway it went through may have failed, and a
                // survivor holds the table that says so.
                let wait_ms = [0u64, 200, 500, 1000, 2000, 5000][(failures as usize).min(5)];
                std::thread::sleep(Duration::from_millis(wait_ms));
            }
        }
    }
}

fn poll_once(shared: &Shared) -> Result<(), String> {
    let epoch = shared
        .peer
        .cluster
        .lock()
        .unwrap()
        .as_ref()
        .map_or(0, |(t, _, _)| t.epoch);
    let mut conn = TcpStream::connect_timeout(&TABLE_TUNNEL, Duration::from_secs(2))
        .map_err(|e| e.to_string())?;
    conn.set_read_timeout(Some(POLL_TIMEOUT))
        .map_err(|e| e.to_string())?;
    conn.write_all(format!("{epoch}\n").as_bytes())
        .map_err(|e| e.to_string())?;
    let started = Instant::now();
    let mut body = Vec::new();
    conn.take(MAX_TABLE_BYTES)
        .read_to_end(&mut body)
        .map_err(|e| e.to_string())?;
    if body.is_empty() {
        // Held to its end with no newer table; closed at once, it was not heard at all.
        return match started.elapsed() < Duration::from_secs(5) {
            true => Err("the hub closed the poll unanswered".into()),
            false => Ok(()),
        };
    }
    let mut table: ClusterTable = serde_json::from_slice(&body).map_err(|e| e.to_string())?;
    table.member = None;
    hold(shared, table, "hub").map_err(|(code, why)| format!("{code}: {why}"))
}
