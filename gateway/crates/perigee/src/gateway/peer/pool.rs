//! The terminal's warm pool: connections to the hub's peer listener with their TLS handshake
//! done and the hub's READY in, opened ahead of time so a new flow's first bytes leave at once
//! (docs/splitter.md, *The peer path*).
//!
//! Each connection: connect (the satellite leg's congestion control, buffers, pacing; the route
//! to the hub carries the satellite initcwnd) -> TLS 1.3 handshake (this terminal's identity,
//! the hub's key pinned) -> READY (the hub identified this terminal) -> ready. A flow takes a
//! ready one; the pool opens a replacement at once. Any failure (refused, timed out, a key
//! either side does not accept, a ready connection closed by the hub, a flow that lost its
//! connection before the hub's status) stops new attempts for a backoff (1 s doubling to 15 s)
//! and then sends one probe; only when a probe is ready does the pool fill again. With no ready
//! connection, flows take the direct path, so a missing hub costs nothing but the probes.
use super::super::epoll::Epoll;
use super::super::render::DUP_MARK;
use super::super::satleg::{Opening, SatLeg};
use super::super::{log, sys};
use super::channel::{Channel, ChannelError};
use super::identity::{Fingerprint, Identity};
use super::{tls, wire};
use serde_json::json;
use std::collections::HashMap;
use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::Arc;
use std::time::{Duration, Instant};

const PHASE_TIMEOUT: Duration = Duration::from_secs(10);
const BACKOFF_FIRST: Duration = Duration::from_secs(1);
const BACKOFF_MAX: Duration = Duration::from_secs(15);

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolConfig {
    pub hub: SocketAddr,
    /// The hub's keys this terminal accepts.
    pub hub_pins: Vec<Fingerprint>,
    /// This terminal's own identity (its fingerprint: a new one means new connections).
    pub identity: Fingerprint,
    pub size: usize,
    pub sat: SatLeg,
    pub opening: Opening,
    pub nodelay: bool,
    pub connect_timeout: Duration,
}

enum Phase {
    Connecting,
    Handshake(Box<Channel>, Vec<u8>),
    Ready(Box<Channel>),
}

struct Conn {
    fd: OwnedFd,
    phase: Phase,
    deadline: Instant,
    /// Opened under settings a retune could not put on it in full: still served, after the
    /// fresh ones, and replaced (`Pool::fill`).
    stale: Option<Stale>,
}

/// Why a connection no longer matches the pool's settings, the worse last.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Stale {
    /// Its SYN announced a smaller window scale: its window tops out below the new receive
    /// buffer (at least half of it), otherwise it serves as a fresh one would.
    Scale,
    /// It opened a smaller receive window (the route's initrwnd), which an idle connection
    /// never grew: a flow on it ramps up through that window (t90 on geo-skyplex 7.0 s against
    /// 4.3 s on a fresh one).
    Opening,
}

/// A ready connection handed to a flow.
pub struct Warm {
    pub fd: OwnedFd,
    pub channel: Channel,
    pub rtt: Duration,
}

pub struct Pool {
    cfg: PoolConfig,
    tls: Arc<rustls::ClientConfig>,
    #[cfg_attr(not(feature = "peer-plaintext"), allow(dead_code))]
    identity: Arc<Identity>,
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

/// How many event tokens one pool may use: pools of one worker sit `TOKEN_SPAN` apart.
pub const TOKEN_SPAN: u64 = 1 << 44;

/// 1 s, 2 s, 4 s, ... up to 15 s after the n-th failure in a row.
pub fn backoff(failures: u32) -> Duration {
    let doubled = BACKOFF_FIRST.saturating_mul(1u32 << failures.saturating_sub(1).min(8));
    doubled.min(BACKOFF_MAX)
}

impl Pool {
    /// Tokens `token_base..token_base + TOKEN_SPAN` are the pool's (the worker routes their
    /// events here).
    pub fn new(cfg: PoolConfig, identity: Arc<Identity>, token_base: u64) -> Result<Pool, String> {
        debug_assert_eq!(cfg.identity, identity.fingerprint);
        let tls = tls::client_config(&identity, &cfg.hub_pins)?;
        Ok(Pool {
            cfg,
            tls,
            identity,
            token_base,
            next: 0,
            conns: HashMap::new(),
            failures: 0,
            retry_at: None,
            last_error: None,
            cc_fallback: 0,
        })
    }

    pub fn config(&self) -> &PoolConfig {
        &self.cfg
    }

    pub fn owns(&self, token: u64) -> bool {
        (self.token_base..self.token_base + TOKEN_SPAN).contains(&token)
    }

    /// Take `new` without closing the connections when it reaches the same hub with the same
    /// keys (false leaves the pool as it was). The new socket settings go on the open
    /// connections at once. Where they cannot take them in full they stay in service marked
    /// stale, flows take fresh ones first, and `fill` replaces them. A config apply that
    /// retunes the satellite leg (BoD tuning) thus never empties the pool: replacing every
    /// connection at once would send each flow that starts meanwhile on the direct path, and the
    /// burst of handshakes would share the return link's small capacity (a DAMA terminal's CRA)
    /// with those flows.
    pub fn retune(&mut self, new: &PoolConfig, ep: &Epoll, now: Instant) -> bool {
        if (new.hub, &new.hub_pins, &new.identity)
            != (self.cfg.hub, &self.cfg.hub_pins, &self.cfg.identity)
        {
            return false;
        }
        let why = if !self.cfg.opening.covers(&new.opening) {
            Some(Stale::Opening)
        } else if !self.cfg.sat.retunable_to(&new.sat) {
            Some(Stale::Scale)
        } else {
            None
        };
        for c in self.conns.values_mut() {
            new.sat.apply_live(c.fd.as_raw_fd(), new.nodelay);
            c.stale = c.stale.max(why);
        }
        self.cfg = new.clone();
        // A smaller pool: drop the surplus ready connections, the stalest first; a larger one
        // fills up.
        let mut ready: Vec<(std::cmp::Reverse<Option<Stale>>, u64)> = self
            .conns
            .iter()
            .filter(|(_, c)| matches!(c.phase, Phase::Ready(_)))
            .map(|(t, c)| (std::cmp::Reverse(c.stale), *t))
            .collect();
        ready.sort();
        let surplus = ready.len().saturating_sub(self.cfg.size);
        for (_, t) in ready.into_iter().take(surplus) {
            if let Some(c) = self.conns.remove(&t) {
                ep.forget(c.fd.as_raw_fd());
            }
        }
        self.fill(ep, now);
        true
    }

    /// Connections on their way to ready (connecting or in the handshake).
    pub fn opening(&self) -> usize {
        self.conns.len() - self.ready()
    }

    /// Connections opened under settings the pool no longer has (see `retune`).
    pub fn stale(&self) -> usize {
        self.conns.values().filter(|c| c.stale.is_some()).count()
    }

    pub fn ready(&self) -> usize {
        self.conns
            .values()
            .filter(|c| matches!(c.phase, Phase::Ready(_)))
            .count()
    }

    /// Open connections until `size` are ready or on their way (one probe while backing off),
    /// and replacements for stale ones: all at once for a smaller opening window (a flow on one
    /// ramps up slowly), one at a time for a smaller window scale (one serves almost as a fresh
    /// one does, and the handshakes stay off a small return link).
    pub fn fill(&mut self, ep: &Epoll, now: Instant) {
        if self.retry_at.is_some_and(|t| now < t) {
            return;
        }
        let opening = self.opening();
        let want = if self.failures > 0 {
            usize::from(opening == 0)
        } else {
            let missing = self.cfg.size.saturating_sub(self.conns.len());
            let fresh = self.conns.values().filter(|c| c.stale.is_none()).count();
            let worst = self.conns.values().filter_map(|c| c.stale).max();
            let replace = match worst {
                Some(Stale::Opening) => self.cfg.size.saturating_sub(fresh),
                Some(Stale::Scale) => usize::from(opening == 0),
                None => 0,
            };
            missing.max(replace)
        };
        for _ in 0..want {
            if let Err(e) = self.open_one(ep, now) {
                self.note_failure(now, format!("cannot open a connection to the hub: {e}"));
                return;
            }
        }
    }

    /// A fresh connection became ready: one stale ready connection beyond `size` goes.
    fn retire_stale(&mut self, ep: &Epoll) {
        if self.ready() <= self.cfg.size {
            return;
        }
        let old = self
            .conns
            .iter()
            .filter(|(_, c)| c.stale.is_some() && matches!(c.phase, Phase::Ready(_)))
            .max_by_key(|(_, c)| c.stale)
            .map(|(t, _)| *t);
        if let Some(c) = old.and_then(|t| self.conns.remove(&t)) {
            ep.forget(c.fd.as_raw_fd());
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
        let phase = if connected {
            self.handshake()?
        } else {
            Phase::Connecting
        };
        let events = libc::EPOLLOUT | if connected { libc::EPOLLIN } else { 0 };
        ep.watch(raw, token, events as u32)?;
        let wait = if connected {
            PHASE_TIMEOUT
        } else {
            self.cfg.connect_timeout
        };
        self.conns.insert(
            token,
            Conn {
                fd,
                phase,
                deadline: now + wait,
                stale: None,
            },
        );
        Ok(())
    }

    /// A new handshake on a connected socket (the ClientHello waits in its send queue).
    fn handshake(&self) -> io::Result<Phase> {
        #[cfg(feature = "peer-plaintext")]
        {
            let _ = &self.tls;
            let p = super::plain::Plain::terminal(&self.identity.fingerprint);
            Ok(Phase::Handshake(Box::new(Channel::plain(p)), Vec::new()))
        }
        #[cfg(not(feature = "peer-plaintext"))]
        {
            let name = tls::server_name(self.cfg.hub.ip());
            let c =
                rustls::ClientConnection::new(self.tls.clone(), name).map_err(io::Error::other)?;
            Ok(Phase::Handshake(
                Box::new(Channel::tls(c.into())),
                Vec::new(),
            ))
        }
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
        let Some(mut c) = self.conns.remove(&token) else {
            return;
        };
        match self.advance(&mut c, ep, token, events, now) {
            Ok(ready) => {
                let fresh = c.stale.is_none();
                self.conns.insert(token, c);
                if ready {
                    self.became_ready();
                    if fresh {
                        self.retire_stale(ep);
                        self.fill(ep, now);
                    }
                }
            }
            Err(why) => self.note_failure(now, why),
        }
    }

    /// Move one connection through connect -> handshake -> READY as far as it can go now;
    /// Ok(true) when it became ready.
    fn advance(
        &self,
        c: &mut Conn,
        ep: &Epoll,
        token: u64,
        events: u32,
        now: Instant,
    ) -> Result<bool, String> {
        let fd = c.fd.as_raw_fd();
        if matches!(c.phase, Phase::Connecting) {
            let e = sys::so_error(fd);
            if e != 0 || events & (libc::EPOLLERR | libc::EPOLLHUP) as u32 != 0 {
                let e = if e != 0 { e } else { libc::ECONNREFUSED };
                return Err(format!(
                    "connect to the hub's peer port: {}",
                    io::Error::from_raw_os_error(e)
                ));
            }
            c.phase = self.handshake().map_err(|e| e.to_string())?;
            c.deadline = now + PHASE_TIMEOUT;
        }
        let Phase::Handshake(ch, got) = &mut c.phase else {
            // Ready and idle: the hub speaks only after OPEN, so any event means it closed (or
            // broke the protocol).
            return Err("the hub closed an idle connection".into());
        };
        ch.flush(fd)
            .map_err(|e| format!("handshake with the hub: {e}"))?;
        let r = ch
            .recv(fd, got, wire::READY_LEN)
            .map_err(|e| handshake_error(&e))?;
        ch.flush(fd)
            .map_err(|e| format!("handshake with the hub: {e}"))?;
        if got.len() < wire::READY_LEN {
            if r.closed {
                return Err("the hub closed the connection before READY".into());
            }
            ep.watch(fd, token, ch.interest())
                .map_err(|e| e.to_string())?;
            return Ok(false);
        }
        wire::parse_ready(got).map_err(|r| format!("the hub's READY: {}", r.as_str()))?;
        let Phase::Handshake(ch, _) = std::mem::replace(&mut c.phase, Phase::Connecting) else {
            unreachable!("matched above");
        };
        c.phase = Phase::Ready(ch);
        ep.watch(fd, token, libc::EPOLLIN as u32)
            .map_err(|e| e.to_string())?;
        Ok(true)
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
            // Fresh connections first: a stale one may hold a smaller window.
            let token = self
                .conns
                .iter()
                .filter(|(_, c)| matches!(c.phase, Phase::Ready(_)))
                .min_by_key(|(_, c)| c.stale)
                .map(|(t, _)| *t)?;
            let c = self.conns.remove(&token)?;
            let Phase::Ready(channel) = c.phase else {
                continue;
            };
            let fd = c.fd;
            ep.forget(fd.as_raw_fd());
            // Still open? (A close_notify, an alert, an EOF or a RST may be queued that the loop
            // has not seen yet: the hub sends nothing else on an idle connection.)
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
            // From OPEN on, what it sends may leave twice (render::redundancy); the handshake
            // before it did not.
            let _ = sys::set_mark(fd.as_raw_fd(), DUP_MARK);
            let rtt =
                Duration::from_micros(u64::from(sys::tcp_srtt_us(fd.as_raw_fd()).unwrap_or(0)));
            got = Some(Warm {
                fd,
                channel: *channel,
                rtt,
            });
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

/// A failed handshake, in words an operator can act on.
fn handshake_error(e: &ChannelError) -> String {
    match e {
        ChannelError::Tls(rustls::Error::InvalidCertificate(_)) => {
            "the hub's key is not one of peer.hub_fingerprints".into()
        }
        ChannelError::Tls(rustls::Error::AlertReceived(a)) => format!(
            "the hub refused this terminal's identity ({a:?}): not enrolled at the hub, or revoked"
        ),
        ChannelError::Truncated => {
            "the hub closed the connection during the handshake (this terminal's identity is not \
             enrolled there, or the hub serves the peer path on another address)"
                .into()
        }
        other => format!("handshake with the hub: {other}"),
    }
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
