//! The terminal's warm pool: authenticated connections to the hub's peer listener, opened
//! ahead of time so a new flow's first bytes leave at once (docs/splitter.md, *The peer path*).
//!
//! Each connection: connect (the satellite leg's congestion control, buffers, pacing; the route
//! to the hub carries the satellite initcwnd) -> HELLO (the hub's nonce) -> AUTH -> AUTH_OK (the
//! hub's proof) -> ready. A flow takes a ready one; the pool opens a replacement at once. Any
//! failure (refused, timed out, wrong proof, a ready connection closed by the hub, a flow that
//! lost its connection before the hub's status) stops new attempts for a backoff (1 s doubling
//! to 15 s) and then sends one probe; only when a probe is ready does the pool fill again. With
//! no ready connection, flows take the direct path, so a missing hub costs nothing but the
//! probes: one SYN per backoff period.
use super::super::epoll::Epoll;
use super::super::satleg::{Opening, SatLeg};
use super::super::{log, sys};
use super::frame::{FrameIn, Outbox};
use super::wire::{self, Key, Nonce, AUTH_OK_LEN, HELLO_LEN};
use serde_json::json;
use std::collections::HashMap;
use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, OwnedFd};
use std::time::{Duration, Instant};

const PHASE_TIMEOUT: Duration = Duration::from_secs(10);
const BACKOFF_FIRST: Duration = Duration::from_secs(1);
const BACKOFF_MAX: Duration = Duration::from_secs(15);

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolConfig {
    pub hub: SocketAddr,
    pub key: Key,
    pub size: usize,
    pub sat: SatLeg,
    pub opening: Opening,
    pub nodelay: bool,
    pub connect_timeout: Duration,
}

enum Phase {
    Connecting,
    Hello(FrameIn<HELLO_LEN>),
    AuthOk {
        nonce: Nonce,
        auth: Outbox,
        ok: FrameIn<AUTH_OK_LEN>,
    },
    Ready(Nonce),
}

struct Conn {
    fd: OwnedFd,
    phase: Phase,
    deadline: Instant,
}

/// A ready connection handed to a flow.
pub struct Warm {
    pub fd: OwnedFd,
    pub nonce: Nonce,
    pub rtt: Duration,
}

pub struct Pool {
    cfg: PoolConfig,
    token_base: u64,
    next: u64,
    conns: HashMap<u64, Conn>,
    failures: u32,
    retry_at: Option<Instant>,
    /// Why the last attempt failed (for /v1/health), None once a connection is ready again.
    pub last_error: Option<String>,
    /// Sockets left on the default congestion control (the configured one is missing).
    pub cc_fallback: u64,
}

/// 1 s, 2 s, 4 s, ... up to 15 s after the n-th failure in a row.
pub fn backoff(failures: u32) -> Duration {
    let doubled = BACKOFF_FIRST.saturating_mul(1u32 << failures.saturating_sub(1).min(8));
    doubled.min(BACKOFF_MAX)
}

impl Pool {
    /// Tokens `token_base..` are the pool's (the worker routes their events here).
    pub fn new(cfg: PoolConfig, token_base: u64) -> Pool {
        Pool {
            cfg,
            token_base,
            next: 0,
            conns: HashMap::new(),
            failures: 0,
            retry_at: None,
            last_error: None,
            cc_fallback: 0,
        }
    }

    pub fn config(&self) -> &PoolConfig {
        &self.cfg
    }

    pub fn owns(&self, token: u64) -> bool {
        token >= self.token_base
    }

    /// Take `new` without closing the connections, when it reaches the same hub with the same key,
    /// their window scale covers its receive buffer and they opened with the windows its routes
    /// give (`Opening::covers`); false leaves the pool as it was. A
    /// config apply that only retunes the satellite leg (BoD tuning) thus keeps the warm
    /// connections: replacing them costs every flow that starts meanwhile the direct path's
    /// round trip, and their handshakes share the return link's small capacity with that flow.
    pub fn retune(&mut self, new: &PoolConfig, ep: &Epoll, now: Instant) -> bool {
        if (new.hub, &new.key) != (self.cfg.hub, &self.cfg.key)
            || !self.cfg.sat.retunable_to(&new.sat)
            || !self.cfg.opening.covers(&new.opening)
        {
            return false;
        }
        for c in self.conns.values() {
            new.sat.apply_live(c.fd.as_raw_fd(), new.nodelay);
        }
        self.cfg = new.clone();
        // A smaller pool: drop the surplus ready connections; a larger one fills up.
        let surplus: Vec<u64> = self
            .conns
            .iter()
            .filter(|(_, c)| matches!(c.phase, Phase::Ready(_)))
            .map(|(t, _)| *t)
            .skip(self.cfg.size)
            .collect();
        for t in surplus {
            if let Some(c) = self.conns.remove(&t) {
                ep.forget(c.fd.as_raw_fd());
            }
        }
        self.fill(ep, now);
        true
    }

    pub fn ready(&self) -> usize {
        self.conns
            .values()
            .filter(|c| matches!(c.phase, Phase::Ready(_)))
            .count()
    }

    /// Open connections until `size` are ready or on their way (one probe while backing off).
    pub fn fill(&mut self, ep: &Epoll, now: Instant) {
        if self.retry_at.is_some_and(|t| now < t) {
            return;
        }
        let opening = self.conns.len() - self.ready();
        let want = if self.failures > 0 {
            usize::from(opening == 0)
        } else {
            self.cfg.size.saturating_sub(self.conns.len())
        };
        for _ in 0..want {
            if let Err(e) = self.open_one(ep, now) {
                self.note_failure(now, format!("cannot open a connection to the hub: {e}"));
                return;
            }
        }
    }

    fn open_one(&mut self, ep: &Epoll, now: Instant) -> io::Result<()> {
        let fd = sys::socket(self.cfg.hub.is_ipv6())?;
        let raw = fd.as_raw_fd();
        // The satellite leg's settings, before connect: the SYN carries the window scale that
        // fits the buffers, and the congestion control's init sees the route's initcwnd.
        if sys::set_cc(raw, &self.cfg.sat.cc).is_err() {
            self.cc_fallback += 1;
        }
        sys::set_bufs(raw, self.cfg.sat.sndbuf, self.cfg.sat.rcvbuf);
        if self.cfg.sat.pacing_bps > 0 {
            let _ = sys::set_pacing(raw, self.cfg.sat.pacing_bps);
        }
        if self.cfg.nodelay {
            let _ = sys::set_nodelay(raw);
        }
        // A hub that vanished without a FIN shows up as a dead idle connection.
        sys::set_keepalive(raw, 15, 5, 3);
        let connected = sys::connect(raw, &self.cfg.hub)?;
        let token = self.token_base + self.next;
        self.next += 1;
        let (phase, events) = if connected {
            (Phase::Hello(FrameIn::default()), libc::EPOLLIN)
        } else {
            (Phase::Connecting, libc::EPOLLOUT)
        };
        ep.watch(raw, token, events as u32)?;
        self.conns.insert(
            token,
            Conn {
                fd,
                phase,
                deadline: now
                    + if connected {
                        PHASE_TIMEOUT
                    } else {
                        self.cfg.connect_timeout
                    },
            },
        );
        Ok(())
    }

    fn note_failure(&mut self, now: Instant, why: String) {
        self.failures = self.failures.saturating_add(1);
        let wait = backoff(self.failures);
        self.retry_at = Some(now + wait);
        if self.failures == 1 {
            log::warn(
                "peer path unavailable: new flows take the direct path",
                json!({"hub": self.cfg.hub.to_string(), "error": why, "retry_in_s": wait.as_secs_f64()}),
            );
        }
        self.last_error = Some(why);
    }

    fn fail(&mut self, token: u64, now: Instant, why: String) {
        self.conns.remove(&token); // closing the socket removes it from the epoll set
        self.note_failure(now, why);
    }

    fn became_ready(&mut self) {
        if self.failures > 0 {
            log::info(
                "peer path available again",
                json!({"hub": self.cfg.hub.to_string(), "after_failures": self.failures}),
            );
        }
        self.failures = 0;
        self.retry_at = None;
        self.last_error = None;
    }

    /// An event on one of the pool's connections.
    pub fn on_event(&mut self, ep: &Epoll, token: u64, events: u32, now: Instant) {
        let Some(c) = self.conns.get_mut(&token) else {
            return;
        };
        match advance(c, &self.cfg.key, ep, token, events, now) {
            Step::Pending => {}
            Step::Ready => self.became_ready(),
            Step::Failed(why) => self.fail(token, now, why),
        }
    }

    /// Expire connections stuck in a phase, then fill up.
    pub fn tick(&mut self, ep: &Epoll, now: Instant) {
        let stuck: Vec<u64> = self
            .conns
            .iter()
            .filter(|(_, c)| !matches!(c.phase, Phase::Ready(_)) && now >= c.deadline)
            .map(|(t, _)| *t)
            .collect();
        for t in stuck {
            self.fail(t, now, "the hub did not answer in time".into());
        }
        self.fill(ep, now);
    }

    /// A ready connection for a new flow (none: the flow takes the direct path).
    pub fn take(&mut self, ep: &Epoll, now: Instant) -> Option<Warm> {
        let mut got = None;
        while got.is_none() {
            let token = self
                .conns
                .iter()
                .find(|(_, c)| matches!(c.phase, Phase::Ready(_)))
                .map(|(t, _)| *t)?;
            let c = self.conns.remove(&token)?;
            let Phase::Ready(nonce) = c.phase else {
                continue;
            };
            let fd = c.fd;
            ep.forget(fd.as_raw_fd());
            // Still open? (An EOF or RST may be queued that the loop has not seen yet.)
            let mut probe = [0u8; 1];
            // SAFETY: probe is a valid 1-byte buffer; MSG_PEEK leaves the data in place.
            let r = unsafe {
                libc::recv(
                    fd.as_raw_fd(),
                    probe.as_mut_ptr() as *mut libc::c_void,
                    1,
                    libc::MSG_PEEK | libc::MSG_DONTWAIT,
                )
            };
            let alive = r < 0 && io::Error::last_os_error().raw_os_error() == Some(libc::EAGAIN);
            if !alive {
                self.note_failure(now, "the hub closed an idle connection".into());
                continue;
            }
            let rtt =
                Duration::from_micros(u64::from(sys::tcp_srtt_us(fd.as_raw_fd()).unwrap_or(0)));
            got = Some(Warm { fd, nonce, rtt });
        }
        self.fill(ep, now);
        got
    }

    /// A flow lost its connection before the hub's status: the hub is likely gone, so the
    /// idle connections are suspect too. Close them and back off.
    pub fn peer_lost(&mut self, now: Instant, why: &str) {
        self.conns
            .retain(|_, c| !matches!(c.phase, Phase::Ready(_)));
        self.note_failure(now, why.to_string());
    }
}

enum Step {
    Pending,
    Ready,
    Failed(String),
}

/// Move one connection through connect -> HELLO -> AUTH -> AUTH_OK as far as it can go now.
fn advance(c: &mut Conn, key: &Key, ep: &Epoll, token: u64, events: u32, now: Instant) -> Step {
    let fd = c.fd.as_raw_fd();
    if matches!(c.phase, Phase::Connecting) {
        let e = sys::so_error(fd);
        if e != 0 || events & (libc::EPOLLERR | libc::EPOLLHUP) as u32 != 0 {
            let e = if e != 0 { e } else { libc::ECONNREFUSED };
            return Step::Failed(format!(
                "connect to the hub's peer port: {}",
                io::Error::from_raw_os_error(e)
            ));
        }
        c.phase = Phase::Hello(FrameIn::default());
        c.deadline = now + PHASE_TIMEOUT;
        if let Err(e) = ep.watch(fd, token, libc::EPOLLIN as u32) {
            return Step::Failed(e.to_string());
        }
    }
    if let Phase::Hello(rd) = &mut c.phase {
        let f = match rd.read(fd) {
            Ok(Some(f)) => f,
            Ok(None) => return Step::Pending,
            Err(e) => return Step::Failed(format!("waiting for the hub's hello: {e}")),
        };
        let nonce = match wire::parse_hello(&f) {
            Ok(n) => n,
            Err(r) => return Step::Failed(format!("the hub's hello: {}", r.as_str())),
        };
        c.phase = Phase::AuthOk {
            nonce,
            auth: Outbox::new(&wire::auth(key, &nonce)),
            ok: FrameIn::default(),
        };
        c.deadline = now + PHASE_TIMEOUT;
    }
    if let Phase::AuthOk { nonce, auth, ok } = &mut c.phase {
        let flushed = match auth.flush(fd) {
            Ok(f) => f,
            Err(e) => return Step::Failed(format!("sending our proof: {e}")),
        };
        let want = libc::EPOLLIN | if flushed { 0 } else { libc::EPOLLOUT };
        if let Err(e) = ep.watch(fd, token, want as u32) {
            return Step::Failed(e.to_string());
        }
        let f = match ok.read(fd) {
            Ok(Some(f)) => f,
            Ok(None) => return Step::Pending,
            Err(e) => {
                return Step::Failed(format!(
                    "the hub closed the connection after our proof \
                     (wrong key, or this terminal's address is not allowed): {e}"
                ))
            }
        };
        if let Err(r) = wire::check_auth_ok(key, nonce, &f) {
            return Step::Failed(format!("the hub's proof: {}", r.as_str()));
        }
        c.phase = Phase::Ready(*nonce);
        if let Err(e) = ep.watch(fd, token, libc::EPOLLIN as u32) {
            return Step::Failed(e.to_string());
        }
        return Step::Ready;
    }
    // Ready and idle: the hub speaks only after OPEN, so any event means it closed (or broke
    // the protocol).
    Step::Failed("the hub closed an idle connection".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_to_a_ceiling() {
        let secs: Vec<u64> = (1..=7).map(|n| backoff(n).as_secs()).collect();
        assert_eq!(secs, vec![1, 2, 4, 8, 15, 15, 15]);
        assert_eq!(backoff(u32::MAX), BACKOFF_MAX);
    }
}
