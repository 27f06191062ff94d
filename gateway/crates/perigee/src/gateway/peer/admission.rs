//! The hub's peer listener: who may open flows through it, and which (docs/splitter.md, *The
//! peer path*).
//!
//! The listener binds the satellite-side addresses only (`peer.listen`). A connection must finish
//! a TLS 1.3 handshake within `AUTH_TIMEOUT` presenting the key of an enrolled terminal
//! (`peer.terminals[].fingerprints`); anything else (an unknown or revoked key, no certificate,
//! garbage, silence) is reset and counted as refused from an unknown identity. At most
//! `MAX_UNAUTHENTICATED` handshakes wait per worker. An identified connection gets READY and
//! waits, idle, for one OPEN; a flow whose client is outside that terminal's own prefixes, or
//! whose destination the egress policy refuses, gets STATUS(refused) and is counted for the
//! terminal; no server is contacted for it. Then the connection is handed to the worker.
use super::super::config::Cidr;
use super::super::egress::EgressPolicy;
use super::super::epoll::Epoll;
use super::super::render::DUP_MARK;
use super::super::satleg::{Opening, SatLeg};
use super::super::{log, sys};
use super::channel::{Channel, ChannelError};
use super::identity::{Fingerprint, Identity};
use super::tunnel::Tunnel;
use super::wire::{self, Open, Status, OPEN_LEN};
use serde_json::json;
use std::collections::{HashMap, HashSet};
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub const AUTH_TIMEOUT: Duration = Duration::from_secs(10);
pub const MAX_UNAUTHENTICATED: usize = 256;
/// Bounds of the identified idle connections a worker holds (`max_idle`).
pub const MIN_IDLE: usize = 256;
pub const MAX_IDLE: usize = 262_144;

/// Identified idle connections a worker holds with `nofile` descriptors: two fifths of them, so
/// that if every one became a flow (one more socket each) its splice pipes (at most a quarter of
/// the budget, `worker::Worker::new`) would still fit. Under the packaged unit's LimitNOFILE of
/// 65,536, 26,214: a 2-worker hub gateway holds the pools of 3,000 packaged terminals (16 each).
pub fn max_idle(nofile: u64) -> usize {
    usize::try_from(nofile / 5 * 2)
        .unwrap_or(MAX_IDLE)
        .clamp(MIN_IDLE, MAX_IDLE)
}
/// Refusals logged per worker and second (the counters count them all).
const LOG_BUDGET: u32 = 10;

/// An enrolled terminal as the hub knows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TerminalEntry {
    pub name: String,
    pub fingerprints: Vec<Fingerprint>,
    pub prefixes: Vec<Cidr>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdmissionConfig {
    /// The addresses the listener binds (the satellite side's).
    pub listen: Vec<IpAddr>,
    pub port: u16,
    /// The hub's own identity (its fingerprint: a new one means a new TLS config).
    pub identity: Fingerprint,
    pub terminals: Vec<TerminalEntry>,
    pub egress: EgressPolicy,
    pub sat: SatLeg,
    pub opening: Opening,
    pub nodelay: bool,
}

/// One terminal's refusals since the last report, and when it was last heard from.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TerminalCounters {
    pub refused_prefix: u64,
    pub refused_other: u64,
    /// Unix time of its last identified connection.
    pub last_seen: Option<f64>,
}

enum Phase {
    /// Only while a step moves the channel from one phase to the next.
    Moving,
    Handshake(Box<Channel>),
    Identified {
        ch: Box<Channel>,
        fingerprint: Fingerprint,
        terminal: String,
        got: Vec<u8>,
    },
}

struct Conn {
    fd: OwnedFd,
    from: SocketAddr,
    phase: Phase,
    since: Instant,
}

/// A flow a terminal opened: its connection (the satellite leg) and where it goes.
pub struct Admitted {
    pub fd: OwnedFd,
    /// The flow's relay, OPEN read, the terminal's bytes after it held until the hub connected.
    pub tunnel: Tunnel,
    pub open: Open,
    pub from: SocketAddr,
    pub terminal: String,
    pub fingerprint: Fingerprint,
}

/// What a config apply revoked: terminals whose live flows end too (removed, or none of their
/// keys kept: a re-enrolment, not a rotation).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Revoked {
    pub terminals: Vec<String>,
}

pub struct Admission {
    cfg: AdmissionConfig,
    tls: Arc<rustls::ServerConfig>,
    token_base: u64,
    next: u64,
    listeners: Vec<(u64, OwnedFd)>,
    conns: HashMap<u64, Conn>,
    by_fingerprint: HashMap<Fingerprint, String>,
    /// Per terminal, since the last report (the worker takes them).
    pub counters: HashMap<String, TerminalCounters>,
    /// Connections refused before they were identified, since the last report.
    pub refused_unknown: u64,
    /// Every refusal since the last report (the `peer.refused` counter).
    pub refused: u64,
    log_budget: u32,
    /// Identified idle connections this worker holds at most (`max_idle` of its fd limit).
    max_idle: usize,
}

fn fingerprint_map(terminals: &[TerminalEntry]) -> HashMap<Fingerprint, String> {
    terminals
        .iter()
        .flat_map(|t| t.fingerprints.iter().map(|f| (f.clone(), t.name.clone())))
        .collect()
}

impl Admission {
    /// Bind the peer listeners (each address, SO_REUSEPORT across the workers). Tokens
    /// `token_base..` are the admission's.
    pub fn new(
        cfg: AdmissionConfig,
        identity: &Identity,
        ep: &Epoll,
        token_base: u64,
    ) -> io::Result<Admission> {
        let tls = Self::tls_config(&cfg, identity)?;
        let mut a = Admission {
            by_fingerprint: fingerprint_map(&cfg.terminals),
            cfg,
            tls,
            token_base,
            next: 0,
            listeners: Vec::new(),
            conns: HashMap::new(),
            counters: HashMap::new(),
            refused_unknown: 0,
            refused: 0,
            log_budget: LOG_BUDGET,
            max_idle: max_idle(sys::nofile()),
        };
        if a.cfg.listen.is_empty() {
            return Err(io::Error::other(
                "no address to listen on (peer.listen is empty and the satellite interface has none)",
            ));
        }
        for ip in a.cfg.listen.clone() {
            let l = a.listener(ip)?;
            let token = a.token_base + a.next;
            a.next += 1;
            ep.watch(l.as_raw_fd(), token, libc::EPOLLIN as u32)?;
            a.listeners.push((token, l));
        }
        Ok(a)
    }

    fn tls_config(
        cfg: &AdmissionConfig,
        identity: &Identity,
    ) -> io::Result<Arc<rustls::ServerConfig>> {
        let pins = cfg
            .terminals
            .iter()
            .flat_map(|t| t.fingerprints.iter().cloned());
        super::tls::server_config(identity, pins).map_err(io::Error::other)
    }

    fn listener(&self, ip: IpAddr) -> io::Result<OwnedFd> {
        let s = sys::socket(ip.is_ipv6())?;
        let fd = s.as_raw_fd();
        sys::set_int(fd, libc::SOL_SOCKET, libc::SO_REUSEADDR, 1)?;
        sys::set_int(fd, libc::SOL_SOCKET, libc::SO_REUSEPORT, 1)?;
        // An address that is still being configured (IPv6 DAD) binds all the same.
        if ip.is_ipv6() {
            sys::set_int(fd, libc::IPPROTO_IPV6, libc::IPV6_V6ONLY, 1)?;
            let _ = sys::set_int(fd, libc::SOL_IPV6, libc::IPV6_FREEBIND, 1);
        } else {
            let _ = sys::set_int(fd, libc::SOL_IP, libc::IP_FREEBIND, 1);
        }
        // Accepted connections start with the listener's congestion control (its init runs
        // with the route's initcwnd) and need buffers whose window scale the SYN-ACK carries.
        let _ = sys::set_cc(fd, &self.cfg.sat.cc);
        sys::set_bufs(fd, self.cfg.sat.sndbuf, self.cfg.sat.rcvbuf);
        if self.cfg.nodelay {
            let _ = sys::set_nodelay(fd);
        }
        sys::bind(fd, &SocketAddr::new(ip, self.cfg.port))?;
        perigee_netsys::listen(fd, 1024)?;
        Ok(s)
    }

    pub fn config(&self) -> &AdmissionConfig {
        &self.cfg
    }

    /// Whether `other` needs no new listener: the same addresses and port. Socket settings go
    /// on the listeners and the open connections in place (`retune`): a connection accepted
    /// with a smaller window scale keeps working and the terminal replaces it in turn.
    /// Terminals, the egress policy and the hub's identity change in place (`set_policy`).
    pub fn same_listener(&self, other: &AdmissionConfig) -> bool {
        (&self.cfg.listen, self.cfg.port) == (&other.listen, other.port)
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

    /// New enrolled terminals, egress policy or hub identity, in place. Connections whose key is
    /// no longer enrolled close at once (handshakes and idle ones; a flow's live connection is
    /// the worker's, which ends those of the `Revoked` terminals).
    pub fn set_policy(
        &mut self,
        new: &AdmissionConfig,
        identity: &Identity,
    ) -> io::Result<Revoked> {
        let tls = Self::tls_config(new, identity)?;
        let old: HashMap<&str, HashSet<&Fingerprint>> = self
            .cfg
            .terminals
            .iter()
            .map(|t| (t.name.as_str(), t.fingerprints.iter().collect()))
            .collect();
        let mut revoked = Revoked::default();
        for (name, keys) in &old {
            let kept = new
                .terminals
                .iter()
                .find(|t| t.name == *name)
                .is_some_and(|t| t.fingerprints.iter().any(|f| keys.contains(f)));
            if !kept {
                revoked.terminals.push(name.to_string());
            }
        }
        let by_fingerprint = fingerprint_map(&new.terminals);
        let stale: Vec<u64> = self
            .conns
            .iter()
            .filter(|(_, c)| match &c.phase {
                Phase::Moving => true,
                // Handshakes made under the old pins start over (the terminal retries).
                Phase::Handshake(_) => new.terminals != self.cfg.terminals,
                Phase::Identified {
                    fingerprint,
                    terminal,
                    ..
                } => by_fingerprint.get(fingerprint) != Some(terminal),
            })
            .map(|(t, _)| *t)
            .collect();
        for t in stale {
            if let Some(c) = self.conns.remove(&t) {
                sys::set_linger0(c.fd.as_raw_fd());
            }
        }
        self.tls = tls;
        self.by_fingerprint = by_fingerprint;
        self.counters
            .retain(|name, _| new.terminals.iter().any(|t| &t.name == name));
        self.cfg.terminals = new.terminals.clone();
        self.cfg.egress = new.egress.clone();
        self.cfg.identity = new.identity.clone();
        Ok(revoked)
    }

    pub fn owns(&self, token: u64) -> bool {
        token >= self.token_base
    }

    fn unauthenticated(&self) -> usize {
        self.conns
            .values()
            .filter(|c| matches!(c.phase, Phase::Handshake(_)))
            .count()
    }

    /// Identified idle connections per terminal (for GET /v1/peer).
    pub fn idle_by_terminal(&self) -> HashMap<String, u64> {
        let mut out: HashMap<String, u64> = HashMap::new();
        for c in self.conns.values() {
            if let Phase::Identified { terminal, .. } = &c.phase {
                *out.entry(terminal.clone()).or_default() += 1;
            }
        }
        out
    }

    /// A flow the worker refused after its OPEN (its bucket is another gateway's): counted and
    /// logged with the terminal's other refusals.
    pub fn refused_flow(&mut self, from: SocketAddr, terminal: &str, why: &str) {
        self.counters
            .entry(terminal.to_string())
            .or_default()
            .refused_other += 1;
        self.log_refusal(from, Some(terminal), why);
    }

    fn log_refusal(&mut self, from: SocketAddr, terminal: Option<&str>, why: &str) {
        self.refused += 1;
        if self.log_budget > 0 {
            self.log_budget -= 1;
            log::warn(
                "peer connection refused",
                json!({"from": from.to_string(), "terminal": terminal, "why": why}),
            );
        }
    }

    /// Reset a connection that was never identified.
    fn refuse_unknown(&mut self, fd: RawFd, from: SocketAddr, why: &str) {
        self.refused_unknown += 1;
        sys::set_linger0(fd);
        self.log_refusal(from, None, why);
    }

    /// A failed handshake: rustls's alert (which says why: an unknown key) goes out before the
    /// connection closes, so the terminal can tell the operator; then a plain close.
    fn refuse_handshake(&mut self, c: &mut Conn, why: &str) {
        self.refused_unknown += 1;
        if let Phase::Handshake(ch) = &mut c.phase {
            let _ = ch.flush(c.fd.as_raw_fd());
        }
        sys::shutdown_wr(c.fd.as_raw_fd());
        self.log_refusal(c.from, None, why);
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
        let mut c = self.conns.remove(&token)?;
        match self.step(&mut c, ep, token) {
            Ok(None) => {
                self.conns.insert(token, c);
                None
            }
            Ok(Some((open, early))) => {
                ep.forget(c.fd.as_raw_fd());
                let Phase::Identified {
                    ch,
                    fingerprint,
                    terminal,
                    ..
                } = c.phase
                else {
                    return None;
                };
                let mut tunnel = Tunnel::hub(*ch, early);
                let denied = self.policy(&terminal, &open);
                if let Err((why, prefix)) = denied {
                    tunnel.refuse(c.fd.as_raw_fd(), Status::Refused(libc::EACCES));
                    let n = self.counters.entry(terminal.clone()).or_default();
                    if prefix {
                        n.refused_prefix += 1;
                    } else {
                        n.refused_other += 1;
                    }
                    self.log_refusal(c.from, Some(&terminal), why);
                    return None;
                }
                // From STATUS on, what it sends may leave twice (render::redundancy).
                let _ = sys::set_mark(c.fd.as_raw_fd(), DUP_MARK);
                Some(Admitted {
                    fd: c.fd,
                    tunnel,
                    open,
                    from: c.from,
                    terminal,
                    fingerprint,
                })
            }
            Err(Outcome::Closed) => None,
            Err(Outcome::Unknown(why)) => {
                self.refuse_handshake(&mut c, &why);
                None
            }
            Err(Outcome::Refused(terminal, why)) => {
                sys::set_linger0(c.fd.as_raw_fd());
                self.counters
                    .entry(terminal.clone())
                    .or_default()
                    .refused_other += 1;
                self.log_refusal(c.from, Some(&terminal), why);
                None
            }
        }
    }

    /// Err((why, whether it is the client's prefix)) when the hub will not open this flow.
    fn policy(&self, terminal: &str, open: &Open) -> Result<(), (&'static str, bool)> {
        let Open::Flow { client, server, .. } = open else {
            return Ok(()); // the resolver: the hub's own, chosen by the hub
        };
        let own = self
            .cfg
            .terminals
            .iter()
            .find(|t| t.name == terminal)
            .is_some_and(|t| t.prefixes.iter().any(|p| p.contains(client.ip())));
        if !own {
            return Err(("the flow's client is outside the terminal's prefixes", true));
        }
        self.cfg
            .egress
            .check(Some(terminal), server.ip())
            .map_err(|why| (why, false))
    }

    fn accept_all(&mut self, ep: &Epoll, lfd: RawFd, now: Instant) {
        for _ in 0..64 {
            let (fd, from) = match sys::accept(lfd) {
                Ok(x) => x,
                Err(_) => return,
            };
            let raw = fd.as_raw_fd();
            if self.unauthenticated() >= MAX_UNAUTHENTICATED {
                self.refuse_unknown(raw, from, "too many unidentified peer connections");
                continue;
            }
            if self.conns.len() >= MAX_UNAUTHENTICATED + self.max_idle {
                self.refuse_unknown(raw, from, "too many idle peer connections");
                continue;
            }
            let ch = match self.new_channel() {
                Ok(ch) => ch,
                Err(_) => continue,
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
                phase: Phase::Handshake(Box::new(ch)),
                since: now,
            };
            if ep.watch(raw, token, libc::EPOLLIN as u32).is_ok() {
                // The ClientHello may be in already.
                match self.step(&mut c, ep, token) {
                    Ok(None) => {
                        self.conns.insert(token, c);
                    }
                    Err(Outcome::Unknown(why)) => self.refuse_handshake(&mut c, &why),
                    _ => {}
                }
            }
        }
    }

    fn new_channel(&self) -> io::Result<Channel> {
        #[cfg(feature = "peer-plaintext")]
        {
            let _ = &self.tls;
            Ok(Channel::plain(super::plain::Plain::hub()))
        }
        #[cfg(not(feature = "peer-plaintext"))]
        {
            let c = rustls::ServerConnection::new(self.tls.clone()).map_err(io::Error::other)?;
            Ok(Channel::tls(c.into()))
        }
    }

    /// Reset connections that were not identified in time (a slowloris is one).
    pub fn tick(&mut self, now: Instant) {
        self.log_budget = LOG_BUDGET;
        let late: Vec<u64> = self
            .conns
            .iter()
            .filter(|(_, c)| {
                matches!(c.phase, Phase::Handshake(_)) && now.duration_since(c.since) > AUTH_TIMEOUT
            })
            .map(|(t, _)| *t)
            .collect();
        for t in late {
            if let Some(c) = self.conns.remove(&t) {
                self.refuse_unknown(
                    c.fd.as_raw_fd(),
                    c.from,
                    "no TLS handshake within the time limit",
                );
            }
        }
    }

    /// Move one connection through handshake -> READY -> OPEN as far as it can go now.
    fn step(
        &mut self,
        c: &mut Conn,
        ep: &Epoll,
        token: u64,
    ) -> Result<Option<(Open, Vec<u8>)>, Outcome> {
        let fd = c.fd.as_raw_fd();
        if let Phase::Handshake(ch) = &mut c.phase {
            let mut early = Vec::new();
            let r = ch.recv(fd, &mut early, 1 << 16).map_err(|e| unknown(&e))?;
            ch.flush(fd).map_err(|_| Outcome::Closed)?;
            if ch.is_handshaking() {
                if r.closed {
                    return Err(Outcome::Closed);
                }
                ep.watch(fd, token, ch.interest())
                    .map_err(|_| Outcome::Closed)?;
                return Ok(None);
            }
            let fingerprint = ch
                .peer_fingerprint()
                .ok_or_else(|| Outcome::Unknown("no identity presented".into()))?;
            let terminal = self
                .by_fingerprint
                .get(&fingerprint)
                .cloned()
                .ok_or_else(|| Outcome::Unknown(format!("unknown identity {fingerprint}")))?;
            let seen = self.counters.entry(terminal.clone()).or_default();
            seen.last_seen = Some(sys::now_f64());
            ch.send(&wire::ready());
            let Phase::Handshake(ch) = std::mem::replace(&mut c.phase, Phase::Moving) else {
                unreachable!("matched above");
            };
            c.phase = Phase::Identified {
                ch,
                fingerprint,
                terminal,
                got: early,
            };
        }
        let Phase::Identified {
            ch, terminal, got, ..
        } = &mut c.phase
        else {
            return Ok(None);
        };
        let r = ch.recv(fd, got, OPEN_LEN).map_err(|e| match e {
            // An idle connection the terminal dropped (its pool shrank, it stopped).
            ChannelError::Truncated | ChannelError::Io(_) => Outcome::Closed,
            ChannelError::Tls(_) => {
                Outcome::Refused(terminal.clone(), "TLS error after the handshake")
            }
        })?;
        ch.flush(fd).map_err(|_| Outcome::Closed)?;
        if got.len() < OPEN_LEN {
            if r.closed {
                return Err(Outcome::Closed);
            }
            ep.watch(fd, token, ch.interest())
                .map_err(|_| Outcome::Closed)?;
            return Ok(None);
        }
        if ch.wants_write() {
            // READY must be out before the flow's bytes follow it.
            return Err(Outcome::Refused(
                terminal.clone(),
                "the terminal sent OPEN before READY left",
            ));
        }
        let open =
            wire::parse_open(got).map_err(|r| Outcome::Refused(terminal.clone(), r.as_str()))?;
        let early = got.split_off(OPEN_LEN);
        Ok(Some((open, early)))
    }
}

enum Outcome {
    /// The terminal closed it (no flow, nothing to count).
    Closed,
    /// Refused before it was identified.
    Unknown(String),
    /// An identified terminal broke the protocol.
    Refused(String, &'static str),
}

fn unknown(e: &ChannelError) -> Outcome {
    if matches!(e, ChannelError::Io(_)) {
        return Outcome::Closed;
    }
    Outcome::Unknown(if e.is_unknown_identity() {
        "its key is not enrolled (peer.terminals)".to_string()
    } else {
        format!("handshake: {e}")
    })
}
