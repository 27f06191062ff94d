//! The resolver health probe behind the cache's port-80 gate: is any upstream answering?
//!
//! Each probe asks every upstream, in parallel, for the root's NS records over UDP (over TCP
//! to the peer path's local end when the resolver forwards through it: the probe crosses the
//! satellite the way the resolver's queries do, never in clear beside them). Any
//! well-formed answer with the probe's id counts, whatever its rcode (a server that refuses
//! recursion still proves the path and the server are up). Two failed rounds in a row mark the
//! resolver down; one answered round marks it up again.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::config::Upstream;
use crate::forwarding::{Forwarding, PEER_PATH_RESOLVER};
use crate::wire;

/// Failed rounds in a row before the resolver counts as down (one lost datagram is not an outage).
pub const FAILS_BEFORE_DOWN: u32 = 2;

/// A random query id (std's hasher keys are random per process and per `RandomState`).
fn random_id() -> u16 {
    let mut h = RandomState::new().build_hasher();
    h.write_u128(Instant::now().elapsed().as_nanos());
    h.finish() as u16
}

/// Sends one `. NS` query to `server` and waits up to `timeout` for its answer.
pub fn probe_one(server: SocketAddr, timeout: Duration) -> Result<Duration, String> {
    let bind: SocketAddr = if server.is_ipv4() {
        "0.0.0.0:0".parse().unwrap_or(server)
    } else {
        "[::]:0".parse().unwrap_or(server)
    };
    let sock = UdpSocket::bind(bind).map_err(|e| format!("socket: {e}"))?;
    sock.connect(server).map_err(|e| format!("{server}: {e}"))?;
    let id = random_id();
    let q = wire::query(id, ".", wire::TYPE_NS)?;
    let started = Instant::now();
    sock.send(&q).map_err(|e| format!("{server}: {e}"))?;
    let mut buf = [0u8; 1500];
    loop {
        let left = timeout.saturating_sub(started.elapsed());
        if left.is_zero() {
            return Err(format!(
                "{server}: no answer within {} ms",
                timeout.as_millis()
            ));
        }
        sock.set_read_timeout(Some(left))
            .map_err(|e| format!("socket: {e}"))?;
        match sock.recv(&mut buf) {
            Ok(n) => {
                if wire::response_header(&buf[..n]).is_some_and(|h| h.id == id) {
                    return Ok(started.elapsed());
                }
                // Someone else's datagram (or a late answer to an old probe): keep waiting.
            }
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                return Err(format!(
                    "{server}: no answer within {} ms",
                    timeout.as_millis()
                ));
            }
            // ICMP port/host unreachable comes back as ECONNREFUSED/EHOSTUNREACH on a
            // connected UDP socket: a definite failure, reported as such.
            Err(e) => return Err(format!("{server}: {e}")),
        }
    }
}

/// Sends one `. NS` query over TCP (RFC 7766 framing: a two-byte length before each message)
/// to `server` and waits up to `timeout`, connection included, for its answer.
pub fn probe_one_tcp(server: SocketAddr, timeout: Duration) -> Result<Duration, String> {
    let started = Instant::now();
    let failed = |e: std::io::Error| {
        if matches!(
            e.kind(),
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
        ) {
            format!("{server}: no answer within {} ms", timeout.as_millis())
        } else {
            format!("{server}: {e}")
        }
    };
    let mut c = TcpStream::connect_timeout(&server, timeout).map_err(failed)?;
    let left = timeout
        .saturating_sub(started.elapsed())
        .max(Duration::from_millis(1));
    c.set_read_timeout(Some(left)).map_err(failed)?;
    c.set_write_timeout(Some(left)).map_err(failed)?;
    let id = random_id();
    let q = wire::query(id, ".", wire::TYPE_NS)?;
    let mut framed = (q.len() as u16).to_be_bytes().to_vec();
    framed.extend_from_slice(&q);
    c.write_all(&framed).map_err(failed)?;
    let mut len = [0u8; 2];
    c.read_exact(&mut len).map_err(failed)?;
    let mut answer = vec![0u8; usize::from(u16::from_be_bytes(len))];
    c.read_exact(&mut answer).map_err(failed)?;
    match wire::response_header(&answer) {
        Some(h) if h.id == id => Ok(started.elapsed()),
        _ => Err(format!("{server}: not an answer to the probe")),
    }
}

/// One upstream's result in a round.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct ProbeResult {
    pub upstream: String,
    pub ok: bool,
    /// Round trip of the answer, when there was one.
    pub rtt_ms: Option<f64>,
    pub error: Option<String>,
}

/// Probes every upstream at once; the round takes at most `timeout`.
pub fn probe_all(upstreams: &[Upstream], timeout: Duration) -> Vec<ProbeResult> {
    let handles: Vec<_> = upstreams
        .iter()
        .map(|u| {
            let (u, addr) = (*u, u.socket_addr());
            std::thread::spawn(move || (u, probe_one(addr, timeout)))
        })
        .collect();
    handles
        .into_iter()
        .filter_map(|h| h.join().ok())
        .map(|(u, r)| ProbeResult {
            upstream: u.to_string(),
            ok: r.is_ok(),
            rtt_ms: r.as_ref().ok().map(|d| d.as_secs_f64() * 1000.0),
            error: r.err(),
        })
        .collect()
}

/// One round the way the resolver reaches its upstream: each upstream over UDP, or the peer
/// path's local end over TCP (its result named `127.0.0.1@8853 (peer path)`).
pub fn probe_route(
    forwarding: Forwarding,
    upstreams: &[Upstream],
    timeout: Duration,
) -> Vec<ProbeResult> {
    match forwarding {
        Forwarding::Direct => probe_all(upstreams, timeout),
        Forwarding::PeerPath => {
            let r = probe_one_tcp(PEER_PATH_RESOLVER, timeout);
            vec![ProbeResult {
                upstream: format!(
                    "{}@{} (peer path)",
                    PEER_PATH_RESOLVER.ip(),
                    PEER_PATH_RESOLVER.port()
                ),
                ok: r.is_ok(),
                rtt_ms: r.as_ref().ok().map(|d| d.as_secs_f64() * 1000.0),
                error: r.err(),
            }]
        }
    }
}

/// The probe's verdict over rounds, with hysteresis.
#[derive(Debug, Clone, Serialize)]
pub struct ResolverHealth {
    pub healthy: bool,
    pub failed_rounds: u32,
    pub last: Vec<ProbeResult>,
}

impl Default for ResolverHealth {
    /// Healthy until proven otherwise: a gateway just started has not probed yet, and a cache
    /// that stays aside for its first seconds would miss what it could have cached.
    fn default() -> Self {
        ResolverHealth {
            healthy: true,
            failed_rounds: 0,
            last: Vec::new(),
        }
    }
}

impl ResolverHealth {
    /// Takes one round's results; returns the new verdict when it changed.
    pub fn record(&mut self, round: Vec<ProbeResult>) -> Option<bool> {
        let answered = round.iter().any(|r| r.ok);
        self.last = round;
        let was = self.healthy;
        if answered {
            self.failed_rounds = 0;
            self.healthy = true;
        } else {
            self.failed_rounds = self.failed_rounds.saturating_add(1);
            if self.failed_rounds >= FAILS_BEFORE_DOWN {
                self.healthy = false;
            }
        }
        (self.healthy != was).then_some(self.healthy)
    }

    /// Why the resolver counts as down, for /v1/health.
    pub fn reason(&self) -> Option<String> {
        if self.healthy {
            return None;
        }
        let errors: Vec<String> = self.last.iter().filter_map(|r| r.error.clone()).collect();
        Some(format!(
            "no upstream resolver answered {} probes in a row ({})",
            self.failed_rounds,
            if errors.is_empty() {
                "no upstream configured".to_string()
            } else {
                errors.join("; ")
            }
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(ok: bool) -> ProbeResult {
        ProbeResult {
            upstream: "192.0.2.53@53".into(),
            ok,
            rtt_ms: ok.then_some(600.0),
            error: (!ok).then(|| "192.0.2.53:53: no answer within 3000 ms".into()),
        }
    }

    #[test]
    fn two_failed_rounds_mark_it_down_and_one_answer_brings_it_back() {
        let mut h = ResolverHealth::default();
        assert!(h.healthy && h.reason().is_none());
        assert_eq!(
            h.record(vec![result(false)]),
            None,
            "one lost probe is not an outage"
        );
        assert_eq!(h.record(vec![result(false)]), Some(false));
        let why = h.reason().unwrap();
        assert!(
            why.contains("2 probes in a row") && why.contains("no answer"),
            "{why}"
        );
        assert_eq!(h.record(vec![result(false)]), None);
        assert_eq!(h.record(vec![result(false), result(true)]), Some(true));
        assert_eq!(h.failed_rounds, 0);
        // An empty round (no upstream) is a failure.
        h.record(Vec::new());
        assert_eq!(h.record(Vec::new()), Some(false));
        assert!(h.reason().unwrap().contains("no upstream configured"));
    }

    #[test]
    fn a_local_responder_answers_and_a_closed_port_does_not() {
        // A one-shot responder on loopback that echoes the query back as a REFUSED answer.
        let srv = UdpSocket::bind("127.0.0.1:0").unwrap();
        let addr = srv.local_addr().unwrap();
        let t = std::thread::spawn(move || {
            let mut buf = [0u8; 512];
            let (n, from) = srv.recv_from(&mut buf).unwrap();
            // Some stray datagram first, then the answer: the prober must skip the stray one.
            let mut stray = buf[..n].to_vec();
            stray[0] ^= 0xff;
            stray[2] |= 0x80;
            srv.send_to(&stray, from).unwrap();
            buf[2] |= 0x80;
            buf[3] = 0x05;
            srv.send_to(&buf[..n], from).unwrap();
        });
        // Answered within the timeout (a generous one: this checks the answer, not the machine).
        let rtt = probe_one(addr, Duration::from_secs(60)).unwrap();
        assert!(rtt < Duration::from_secs(60));
        t.join().unwrap();
        // Nothing listens there any more: refused at once, or silence until the timeout.
        let e = probe_one(addr, Duration::from_millis(300)).unwrap_err();
        assert!(e.contains(&addr.to_string()), "{e}");
    }

    #[test]
    fn a_round_reports_each_upstream() {
        let quiet = UdpSocket::bind("127.0.0.1:0").unwrap();
        let u = Upstream {
            addr: "127.0.0.1".parse().unwrap(),
            port: quiet.local_addr().unwrap().port(),
        };
        let started = Instant::now();
        let round = probe_all(&[u], Duration::from_millis(200));
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "gave up, not hung"
        );
        assert_eq!(round.len(), 1);
        assert!(!round[0].ok && round[0].rtt_ms.is_none());
        assert!(
            round[0].error.as_deref().unwrap().contains("no answer"),
            "{round:?}"
        );
    }

    #[test]
    fn the_tcp_probe_frames_its_query_and_reads_the_framed_answer() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let t = std::thread::spawn(move || {
            let (mut c, _) = l.accept().unwrap();
            let mut len = [0u8; 2];
            c.read_exact(&mut len).unwrap();
            let mut q = vec![0u8; usize::from(u16::from_be_bytes(len))];
            c.read_exact(&mut q).unwrap();
            assert_eq!(&q[q.len() - 5..], &[0, 0, 2, 0, 1], ". NS IN");
            q[2] |= 0x80;
            let mut out = len.to_vec();
            out.extend_from_slice(&q);
            c.write_all(&out).unwrap();
            // Then a listener that accepts but never answers.
            let _silent = l.accept().unwrap();
            std::thread::sleep(Duration::from_millis(400));
        });
        probe_one_tcp(addr, Duration::from_secs(60)).unwrap();
        let e = probe_one_tcp(addr, Duration::from_millis(200)).unwrap_err();
        assert!(e.contains("no answer within 200 ms"), "{e}");
        t.join().unwrap();
        // Nothing listens any more: refused.
        let e = probe_one_tcp(addr, Duration::from_millis(200)).unwrap_err();
        assert!(e.contains(&addr.to_string()), "{e}");
    }
}
