//! The hub's peer listener: who may open flows through it (docs/splitter.md, *The peer path*).
//!
//! A connection from outside `allowed` is reset at once. Otherwise the hub sends HELLO with a
//! fresh nonce and waits at most `AUTH_TIMEOUT` for AUTH (HMAC of the nonce under the shared key);
//! a wrong proof, garbage, or silence (slowloris) resets it. At most `MAX_UNAUTHENTICATED` wait per
//! worker; past that new connections are reset. An authenticated connection answers AUTH_OK
//! (the hub's own proof) and waits, idle, for one OPEN whose MAC binds the flow's addresses to
//! this connection's nonce; its client must be inside `served_subnets`. Then it is handed to the
//! worker as a flow. Nothing an outsider sends reaches a server.
use super::super::config::Cidr;
use super::super::epoll::Epoll;
use super::super::satleg::{Opening, SatLeg};
use super::super::{log, sys};
use super::frame::{FrameIn, Outbox};
use super::wire::{self, Key, Nonce, Open, Refusal, AUTH_LEN, OPEN_LEN};
use serde_json::json;
use std::collections::HashMap;
use std::io;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::time::{Duration, Instant};

pub const AUTH_TIMEOUT: Duration = Duration::from_secs(10);
pub const MAX_UNAUTHENTICATED: usize = 256;
/// Authenticated idle connections per worker (a terminal keeps pool_size per worker of its own).
pub const MAX_IDLE: usize = 4096;
/// Refusals logged per worker and second (the counter counts them all).
const LOG_BUDGET: u32 = 10;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdmissionConfig {
    pub port: u16,
    pub key: Key,
    pub allowed: Vec<Cidr>,
    pub served: Vec<Cidr>,
    pub sat: SatLeg,
    pub opening: Opening,
    pub nodelay: bool,
}

enum Phase {
    Auth {
        hello: Outbox,
        proof: FrameIn<AUTH_LEN>,
    },
    Idle {
        ok: Outbox,
        open: FrameIn<OPEN_LEN>,
    },
}

struct Conn {
    fd: OwnedFd,
    from: SocketAddr,
    nonce: Nonce,
    phase: Phase,
    since: Instant,
}

/// A flow a terminal opened: its connection (the satellite leg) and where it goes.
pub struct Admitted {
    pub fd: OwnedFd,
    pub terminal: SocketAddr,
    pub open: Open,
}

pub struct Admission {
    cfg: AdmissionConfig,
    token_base: u64,
    next: u64,
    listeners: Vec<(u64, OwnedFd)>,
    conns: HashMap<u64, Conn>,
    /// Connections refused since the last report (the worker adds them to its counters).
    pub refused: u64,
    log_budget: u32,
}

impl Admission {
    /// Bind the peer listeners (v4 and v6, SO_REUSEPORT across the workers). Tokens `token_base..`
    /// are the admission's.
    pub fn new(cfg: AdmissionConfig, ep: &Epoll, token_base: u64) -> io::Result<Admission> {
        let mut a = Admission {
            cfg,
            token_base,
            next: 2,
            listeners: Vec::new(),
            conns: HashMap::new(),
            refused: 0,
            log_budget: LOG_BUDGET,
        };
        for (i, v6) in [false, true].into_iter().enumerate() {
            let l = a.listener(v6)?;
            ep.watch(l.as_raw_fd(), token_base + i as u64, libc::EPOLLIN as u32)?;
            a.listeners.push((token_base + i as u64, l));
        }
        Ok(a)
    }

    fn listener(&self, v6: bool) -> io::Result<OwnedFd> {
        let s = sys::socket(v6)?;
        let fd = s.as_raw_fd();
        sys::set_int(fd, libc::SOL_SOCKET, libc::SO_REUSEADDR, 1)?;
        sys::set_int(fd, libc::SOL_SOCKET, libc::SO_REUSEPORT, 1)?;
        if v6 {
            sys::set_int(fd, libc::IPPROTO_IPV6, libc::IPV6_V6ONLY, 1)?;
        }
        // Accepted connections start with the listener's congestion control (its init runs
        // with the route's initcwnd) and need buffers whose window scale the SYN-ACK carries.
        let _ = sys::set_cc(fd, &self.cfg.sat.cc);
        sys::set_bufs(fd, self.cfg.sat.sndbuf, self.cfg.sat.rcvbuf);
        if self.cfg.nodelay {
            let _ = sys::set_nodelay(fd);
        }
        let addr: SocketAddr = if v6 {
            (Ipv6Addr::UNSPECIFIED, self.cfg.port).into()
        } else {
            (Ipv4Addr::UNSPECIFIED, self.cfg.port).into()
        };
        sys::bind(fd, &addr)?;
        perigee_netsys::listen(fd, 1024)?;
        Ok(s)
    }

    pub fn config(&self) -> &AdmissionConfig {
        &self.cfg
    }

    /// Whether `other` needs no new listener or new proofs: the same port and key, and socket
    /// settings the open connections can take in place (`retune`).
    pub fn same_listener(&self, other: &AdmissionConfig) -> bool {
        (self.cfg.port, &self.cfg.key) == (other.port, &other.key)
            && self.cfg.sat.retunable_to(&other.sat)
            && self.cfg.opening.covers(&other.opening)
    }

    /// New satellite-leg settings on the listeners (for what they accept from now on) and on the
    /// terminals' open connections, which stay: closing them would cost each terminal its warm
    /// pool and a backoff (a BoD tuning apply changes only these settings).
    pub fn retune(&mut self, sat: SatLeg, opening: Opening, nodelay: bool) {
        for (_, l) in &self.listeners {
            let fd = l.as_raw_fd();
            let _ = sys::set_cc(fd, &sat.cc);
            sys::set_bufs(fd, sat.sndbuf, sat.rcvbuf);
            let _ = sys::set_int(fd, libc::IPPROTO_TCP, libc::TCP_NODELAY, i32::from(nodelay));
        }
        for c in self.conns.values() {
            sat.apply_live(c.fd.as_raw_fd(), nodelay);
        }
        self.cfg.sat = sat;
        self.cfg.opening = opening;
        self.cfg.nodelay = nodelay;
    }

    /// New `allowed` and served subnets: they apply to connections and flows from now on.
    pub fn set_policy(&mut self, allowed: Vec<Cidr>, served: Vec<Cidr>) {
        self.cfg.allowed = allowed;
        self.cfg.served = served;
    }

    pub fn owns(&self, token: u64) -> bool {
        token >= self.token_base
    }

    fn unauthenticated(&self) -> usize {
        self.conns
            .values()
            .filter(|c| matches!(c.phase, Phase::Auth { .. }))
            .count()
    }

    fn refuse(&mut self, fd: RawFd, from: SocketAddr, why: &str) {
        self.refused += 1;
        sys::set_linger0(fd);
        if self.log_budget > 0 {
            self.log_budget -= 1;
            log::warn(
                "peer connection refused",
                json!({"from": from.to_string(), "why": why}),
            );
        }
    }

    /// An event on a listener or a connection; Some when a flow was admitted.
    pub fn on_event(&mut self, ep: &Epoll, token: u64, now: Instant) -> Option<Admitted> {
        if let Some(lfd) = self
            .listeners
            .iter()
            .find(|(t, _)| *t == token)
            .map(|(_, l)| l.as_raw_fd())
        {
            self.accept_all(ep, lfd, now);
            return None;
        }
        let c = self.conns.get_mut(&token)?;
        let fd = c.fd.as_raw_fd();
        match step(c, &self.cfg, ep, token) {
            Ok(None) => None,
            Ok(Some(open)) => {
                let c = self.conns.remove(&token)?;
                ep.forget(fd);
                Some(Admitted {
                    fd: c.fd,
                    terminal: c.from,
                    open,
                })
            }
            Err(Outcome::Closed) => {
                self.conns.remove(&token);
                None
            }
            Err(Outcome::Refused(why)) => {
                let c = self.conns.remove(&token)?;
                self.refuse(c.fd.as_raw_fd(), c.from, why);
                None
            }
        }
    }

    fn accept_all(&mut self, ep: &Epoll, lfd: RawFd, now: Instant) {
        for _ in 0..64 {
            let (fd, from) = match sys::accept(lfd) {
                Ok(x) => x,
                Err(_) => return,
            };
            let raw = fd.as_raw_fd();
            let allowed = self.cfg.allowed.is_empty()
                || self.cfg.allowed.iter().any(|c| c.contains(from.ip()));
            if !allowed {
                self.refuse(raw, from, "source address not in peer.allowed");
                continue;
            }
            if self.unauthenticated() >= MAX_UNAUTHENTICATED {
                self.refuse(raw, from, "too many unauthenticated peer connections");
                continue;
            }
            if self.conns.len() >= MAX_UNAUTHENTICATED + MAX_IDLE {
                self.refuse(raw, from, "too many idle peer connections");
                continue;
            }
            let Ok(nonce) = wire::nonce() else {
                continue;
            };
            if self.cfg.nodelay {
                let _ = sys::set_nodelay(raw);
            }
            sys::set_keepalive(raw, 15, 5, 3);
            let token = self.token_base + self.next;
            self.next += 1;
            let mut c = Conn {
                fd,
                from,
                nonce,
                phase: Phase::Auth {
                    hello: Outbox::new(&wire::hello(&nonce)),
                    proof: FrameIn::default(),
                },
                since: now,
            };
            match step(&mut c, &self.cfg, ep, token) {
                Ok(None) => {
                    self.conns.insert(token, c);
                }
                _ => {
                    // A fresh socket takes 40 bytes; anything else is a connection already gone.
                }
            }
        }
    }

    /// Reset connections that did not authenticate in time (a slowloris is one).
    pub fn tick(&mut self, now: Instant) {
        self.log_budget = LOG_BUDGET;
        let late: Vec<u64> = self
            .conns
            .iter()
            .filter(|(_, c)| {
                matches!(c.phase, Phase::Auth { .. }) && now.duration_since(c.since) > AUTH_TIMEOUT
            })
            .map(|(t, _)| *t)
            .collect();
        for t in late {
            if let Some(c) = self.conns.remove(&t) {
                let why = match &c.phase {
                    Phase::Auth { proof, .. } if proof.received() > 0 => {
                        "incomplete authentication within the time limit"
                    }
                    _ => "no authentication within the time limit",
                };
                self.refuse(c.fd.as_raw_fd(), c.from, why);
            }
        }
    }
}

enum Outcome {
    /// The terminal closed it (no flow, nothing to count).
    Closed,
    Refused(&'static str),
}

/// Move one connection through HELLO -> AUTH -> AUTH_OK -> OPEN as far as it can go now.
fn step(
    c: &mut Conn,
    cfg: &AdmissionConfig,
    ep: &Epoll,
    token: u64,
) -> Result<Option<Open>, Outcome> {
    let fd = c.fd.as_raw_fd();
    let watch = |flushed: bool| {
        let want = libc::EPOLLIN | if flushed { 0 } else { libc::EPOLLOUT };
        ep.watch(fd, token, want as u32)
            .map_err(|_| Outcome::Closed)
    };
    if let Phase::Auth { hello, proof } = &mut c.phase {
        let flushed = hello.flush(fd).map_err(|_| Outcome::Closed)?;
        watch(flushed)?;
        let got = proof.read(fd).map_err(|_| Outcome::Closed)?;
        if !proof.may_start_with(wire::AUTH) {
            return Err(Outcome::Refused(Refusal::Magic.as_str()));
        }
        let Some(f) = got else {
            return Ok(None);
        };
        wire::check_auth(&cfg.key, &c.nonce, &f).map_err(|r| Outcome::Refused(r.as_str()))?;
        c.phase = Phase::Idle {
            ok: Outbox::new(&wire::auth_ok(&cfg.key, &c.nonce)),
            open: FrameIn::default(),
        };
    }
    let Phase::Idle { ok, open } = &mut c.phase else {
        return Ok(None);
    };
    let flushed = ok.flush(fd).map_err(|_| Outcome::Closed)?;
    watch(flushed)?;
    let got = open.read(fd).map_err(|_| Outcome::Closed)?;
    if !open.may_start_with(wire::OPEN) {
        return Err(Outcome::Refused(Refusal::Magic.as_str()));
    }
    let Some(f) = got else {
        return Ok(None);
    };
    let o = wire::parse_open(&cfg.key, &c.nonce, &f).map_err(|r| Outcome::Refused(r.as_str()))?;
    if !cfg.served.iter().any(|s| s.contains(o.client.ip())) {
        return Err(Outcome::Refused(
            "the flow's client is outside served_subnets",
        ));
    }
    if !ok.done() {
        // AUTH_OK must be out before the flow's bytes follow it.
        return Err(Outcome::Refused(
            "the terminal sent OPEN before reading AUTH_OK",
        ));
    }
    Ok(Some(o))
}
