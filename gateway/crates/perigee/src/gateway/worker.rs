//! A worker process: owns its share of split flows. It listens on the TPROXY port (v4 and v6,
//! SO_REUSEPORT shared with the other workers), opens the spoofed outbound connection for each
//! accepted one, relays both directions in a level-triggered epoll loop, samples TCP_INFO and
//! reports to the master over its stdin/stdout socketpair (JSON lines).
use super::config::{parse_cidr, parse_ports, Action, GatewayConfig, Role};
use super::session::{Direction, Failed, PipePool};
use super::sys;
use super::telemetry::{parse_tcp_info, Flow, Legs, TcpInfo};
use super::{ipc, log};
use serde::Serialize;
use serde_json::json;
use std::collections::{HashMap, HashSet};
use std::io::{self, Write};
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::rc::Rc;
use std::time::{Duration, Instant};

const TOKEN_CONTROL: u64 = 0;
const TOKEN_LISTEN4: u64 = 1;
const TOKEN_LISTEN6: u64 = 2;
const TOKEN_FLOW_BASE: u64 = 16;

const CLIENT: u64 = 0;
const SERVER: u64 = 1;

struct Epoll(OwnedFd);

impl Epoll {
    fn new() -> io::Result<Epoll> {
        // SAFETY: plain syscall; the fd is owned right away.
        let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: fresh descriptor we own.
        Ok(Epoll(unsafe { std::os::fd::FromRawFd::from_raw_fd(fd) }))
    }

    fn ctl(&self, op: libc::c_int, fd: RawFd, token: u64, events: u32) -> io::Result<()> {
        let mut ev = libc::epoll_event { events, u64: token };
        // SAFETY: ev is a valid epoll_event for the call.
        if unsafe { libc::epoll_ctl(self.0.as_raw_fd(), op, fd, &mut ev) } < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    fn wait(&self, evs: &mut [libc::epoll_event], timeout_ms: i32) -> usize {
        // SAFETY: evs is a valid buffer of its length.
        let n = unsafe {
            libc::epoll_wait(
                self.0.as_raw_fd(),
                evs.as_mut_ptr(),
                evs.len() as i32,
                timeout_ms,
            )
        };
        n.max(0) as usize
    }
}

/// Per-socket epoll registration state.
#[derive(Default)]
struct Reg {
    registered: bool,
    mask: u32,
    /// The kernel reported HUP: with an empty mask the socket would wake us forever.
    hup: bool,
}

struct Sat {
    cc: String,
    sndbuf: u64,
    rcvbuf: u64,
    pacing_bps: u64,
}

struct Session {
    id: u64,
    client: OwnedFd,
    server: OwnedFd,
    client_addr: SocketAddr,
    server_addr: SocketAddr,
    connecting: bool,
    started: Instant,
    started_at: f64,
    last_active: Instant,
    up: Direction,
    down: Direction,
    class: String,
    action: Action,
    sat_is_client: bool,
    cc: [String; 2],
    info: [TcpInfo; 2],
    sampled_bytes: (u64, u64),
    sampled_at: Instant,
    rates: (f64, f64),
    regs: [Reg; 2],
}

impl Session {
    fn fd(&self, side: u64) -> RawFd {
        if side == CLIENT {
            self.client.as_raw_fd()
        } else {
            self.server.as_raw_fd()
        }
    }

    fn state(&self) -> &'static str {
        if self.connecting {
            "connecting"
        } else if self.up.eof || self.down.eof {
            "half_closed"
        } else {
            "established"
        }
    }

    fn to_flow(&self, ended: Option<(&str, f64)>) -> Flow {
        Flow {
            id: self.id,
            state: if ended.is_some() {
                "closed".into()
            } else {
                self.state().into()
            },
            class: self.class.clone(),
            action: self.action.as_str().into(),
            client: self.client_addr.to_string(),
            server: self.server_addr.to_string(),
            family: if self.client_addr.is_ipv4() { 4 } else { 6 },
            started_at: self.started_at,
            ended_at: ended.map(|e| e.1),
            end_reason: ended.map(|e| e.0.to_string()),
            bytes_up: self.up.bytes,
            bytes_down: self.down.bytes,
            rate_up_bps: self.rates.0,
            rate_down_bps: self.rates.1,
            legs: Legs {
                client: self.info[0].clone(),
                server: self.info[1].clone(),
                satellite: if self.sat_is_client {
                    "client"
                } else {
                    "server"
                }
                .into(),
            },
        }
    }

    fn sample(&mut self) {
        for side in [CLIENT, SERVER] {
            if let Some(raw) = sys::tcp_info_raw(self.fd(side)) {
                self.info[side as usize] = parse_tcp_info(&raw, &self.cc[side as usize]);
            }
        }
        let dt = self.sampled_at.elapsed().as_secs_f64();
        if dt > 0.0 {
            self.rates = (
                (self.up.bytes - self.sampled_bytes.0) as f64 * 8.0 / dt,
                (self.down.bytes - self.sampled_bytes.1) as f64 * 8.0 / dt,
            );
        }
        self.sampled_bytes = (self.up.bytes, self.down.bytes);
        self.sampled_at = Instant::now();
    }
}

/// Counters accumulated since the last report (the master sums them).
#[derive(Default)]
struct Deltas {
    flows: u64,
    failed_connect: u64,
    bytes_up: u64,
    bytes_down: u64,
    cc_fallback: u64,
    by_action: HashMap<&'static str, (u64, u64, u64)>,
}

pub struct Worker {
    index: u32,
    generation: u32,
    seq: u64,
    ep: Epoll,
    /// Shared, not cloned, per new flow: a deep copy of the config per accept was measurable.
    cfg: Option<Rc<GatewayConfig>>,
    listeners: Vec<(u64, OwnedFd)>,
    listen_port: u16,
    listeners_paused: bool,
    flows: HashMap<u64, Session>,
    pool: PipePool,
    closed: Vec<Flow>,
    deltas: Deltas,
    ctl_in: Vec<u8>,
    available_cc: Vec<String>,
    cc_warned: HashSet<String>,
    /// What a leg runs when we do not set its congestion control: accepted sockets (from a
    /// listener given this name when the config leaves their leg to the default) and new outbound
    /// ones get the namespace default. Kept here, refreshed each tick, so a new flow costs no
    /// getsockopt(TCP_CONGESTION) calls.
    default_cc: String,
    out: std::io::Stdout,
}

/// The congestion control of the leg the TPROXY listener accepts: the client's leg, which is the
/// terrestrial one at a terminal and the satellite one at a hub (its default, before any class).
fn accepted_leg_cc(cfg: &GatewayConfig) -> &str {
    match cfg.role {
        Role::Hub => &cfg.satellite.congestion_control,
        Role::Terminal => &cfg.terrestrial.congestion_control,
    }
}

fn flow_token(id: u64, side: u64) -> u64 {
    TOKEN_FLOW_BASE + id * 2 + side
}

impl Worker {
    pub fn new(index: u32, generation: u32) -> io::Result<Worker> {
        let limit = sys::raise_nofile() as usize;
        let ep = Epoll::new()?;
        // stdin is the master's socketpair end: watch it for config and snapshot requests. It
        // shares its file description with stdout, so it stays blocking (reads use MSG_DONTWAIT).
        ep.ctl(libc::EPOLL_CTL_ADD, 0, TOKEN_CONTROL, libc::EPOLLIN as u32)?;
        // Pipes come after sockets in the fd budget: at most a quarter of it, 2 fds each.
        let max_pipes = (limit / 8).clamp(16, 1024);
        Ok(Worker {
            index,
            generation,
            seq: 0,
            ep,
            cfg: None,
            listeners: Vec::new(),
            listen_port: 0,
            listeners_paused: false,
            flows: HashMap::new(),
            pool: PipePool::new(max_pipes, 1 << 20),
            closed: Vec::new(),
            deltas: Deltas::default(),
            ctl_in: Vec::new(),
            available_cc: sys::available_cc(),
            default_cc: sys::default_cc(),
            cc_warned: HashSet::new(),
            out: std::io::stdout(),
        })
    }

    fn sat_settings(&self, cfg: &GatewayConfig, class: Option<&super::config::Class>) -> Sat {
        let s = &cfg.satellite;
        let mut sat = Sat {
            cc: s.congestion_control.clone(),
            sndbuf: s.sndbuf_bytes,
            rcvbuf: s.rcvbuf_bytes,
            pacing_bps: s.pacing_rate_bps,
        };
        if let Some(c) = class {
            if let Some(cc) = c
                .satellite
                .congestion_control
                .as_ref()
                .filter(|c| !c.is_empty())
            {
                sat.cc = cc.clone();
            }
            if c.satellite.buffer_bytes > 0 {
                sat.sndbuf = c.satellite.buffer_bytes;
                sat.rcvbuf = c.satellite.buffer_bytes;
            }
            if c.satellite.pacing_rate_bps > 0 {
                sat.pacing_bps = c.satellite.pacing_rate_bps;
            }
        }
        sat
    }

    fn apply_config(&mut self, cfg: GatewayConfig) {
        let port = cfg.splitter.tproxy_port as u16;
        self.pool.pipe_size = (cfg.splitter.relay_buffer_bytes as usize).min(1 << 20);
        let hub_bufs = (cfg.role == Role::Hub)
            .then_some((cfg.satellite.sndbuf_bytes, cfg.satellite.rcvbuf_bytes));
        if port != self.listen_port || !cfg.splitter.enabled {
            for (_, l) in self.listeners.drain(..) {
                let _ = self.ep.ctl(libc::EPOLL_CTL_DEL, l.as_raw_fd(), 0, 0);
            }
            self.listen_port = 0;
            self.listeners_paused = false;
            if cfg.splitter.enabled {
                for (token, v6) in [(TOKEN_LISTEN4, false), (TOKEN_LISTEN6, true)] {
                    match sys::tproxy_listener(port, v6, hub_bufs) {
                        Ok(l) => {
                            let _ = self.ep.ctl(
                                libc::EPOLL_CTL_ADD,
                                l.as_raw_fd(),
                                token,
                                libc::EPOLLIN as u32,
                            );
                            self.listeners.push((token, l));
                        }
                        Err(e) => log::error(
                            "tproxy listener failed",
                            json!({"port": port, "v6": v6, "error": e.to_string()}),
                        ),
                    }
                }
                self.listen_port = port;
            }
        }
        self.set_listener_cc(accepted_leg_cc(&cfg));
        self.cfg = Some(Rc::new(cfg));
    }

    /// Give the listeners the congestion control of the leg they accept. An accepted socket
    /// starts with its listener's, and that one's init has run by the time we could change it:
    /// BBR's init turns on the kernel's internal pacing for good, so a leg switched from the
    /// namespace default bbr to cubic afterwards still paced every burst through a high-resolution
    /// timer (measured on the overhead bench: ~11,000 timer interrupts a second on the gateway's
    /// core, and under half the routed throughput). "" leaves the namespace default.
    fn set_listener_cc(&mut self, cc: &str) {
        let cc = if cc.is_empty() {
            self.default_cc.clone()
        } else {
            cc.to_string()
        };
        for (_, l) in &self.listeners {
            if let Err(e) = sys::set_cc(l.as_raw_fd(), &cc) {
                if self.cc_warned.insert(format!("listener {cc}")) {
                    log::warn(
                        "congestion control unavailable for the listener, accepted legs start with the default",
                        json!({"wanted": cc, "error": e.to_string(), "available": self.available_cc}),
                    );
                }
            }
        }
    }

    fn classify<'a>(
        cfg: &'a GatewayConfig,
        client: &SocketAddr,
        server: &SocketAddr,
    ) -> Option<&'a super::config::Class> {
        cfg.sorted_classes().into_iter().find(|c| {
            let m = &c.matcher;
            let cidr_ok = |list: &[String], ip| {
                list.is_empty()
                    || list
                        .iter()
                        .filter_map(|s| parse_cidr(s).ok())
                        .any(|c| c.contains(ip))
            };
            let port_ok = |list: &[String], p| {
                list.is_empty()
                    || list
                        .iter()
                        .filter_map(|s| parse_ports(s).ok())
                        .any(|r| r.contains(p))
            };
            m.protocol.as_deref().unwrap_or("any") != "udp"
                && cidr_ok(&m.src, client.ip())
                && cidr_ok(&m.dst, server.ip())
                && port_ok(&m.dports, server.port())
                && port_ok(&m.sports, client.port())
        })
    }

    /// Set the satellite leg's congestion control; fall back to the system default if missing.
    /// Returns whether `cc` is now the socket's congestion control.
    fn set_cc(&mut self, fd: RawFd, cc: &str) -> bool {
        let ok = sys::set_cc(fd, cc).is_ok();
        if !ok {
            self.deltas.cc_fallback += 1;
            if self.cc_warned.insert(cc.to_string()) {
                log::warn(
                    "congestion control unavailable, using the system default",
                    json!({"wanted": cc, "available": self.available_cc}),
                );
            }
        }
        ok
    }

    fn accept_all(&mut self, lfd: RawFd) {
        for _ in 0..128 {
            let (cfd, peer) = match sys::accept(lfd) {
                Ok(x) => x,
                Err(e) if e.raw_os_error() == Some(libc::EAGAIN) => return,
                Err(e) => {
                    if matches!(e.raw_os_error(), Some(libc::EMFILE) | Some(libc::ENFILE)) {
                        // Out of fds: stop watching the listeners until the next tick, or the
                        // level-triggered loop would spin on them.
                        self.pause_listeners();
                    }
                    log::warn("accept failed", json!({"error": e.to_string()}));
                    return;
                }
            };
            if let Err(e) = self.start_session(cfd, peer) {
                log::warn(
                    "could not start flow",
                    json!({"client": peer.to_string(), "error": e.to_string()}),
                );
            }
        }
    }

    fn pause_listeners(&mut self) {
        for (_, l) in &self.listeners {
            let _ = self.ep.ctl(libc::EPOLL_CTL_DEL, l.as_raw_fd(), 0, 0);
        }
        self.listeners_paused = true;
    }

    fn resume_listeners(&mut self) {
        if self.listeners_paused {
            for (token, l) in &self.listeners {
                let _ = self.ep.ctl(
                    libc::EPOLL_CTL_ADD,
                    l.as_raw_fd(),
                    *token,
                    libc::EPOLLIN as u32,
                );
            }
            self.listeners_paused = false;
        }
    }

    fn start_session(&mut self, cfd: OwnedFd, peer: SocketAddr) -> io::Result<()> {
        let Some(cfg) = self.cfg.clone() else {
            return Ok(());
        };
        let orig_dst = sys::local_addr(cfd.as_raw_fd())?;
        if orig_dst.port() == self.listen_port && sys::is_local_address(orig_dst.ip()) {
            // Someone connected to the TPROXY port itself (the nft ruleset resets such connections
            // before they get here): relaying would connect to this listener again, endlessly. A
            // server elsewhere on the same port number is relayed like any other.
            sys::set_linger0(cfd.as_raw_fd());
            return Ok(());
        }
        let class = Self::classify(&cfg, &peer, &orig_dst);
        let action = match class.map(|c| c.action) {
            Some(Action::Cache) if cfg.cache.enabled => Action::Cache,
            _ => Action::Accelerate,
        };
        let sat = self.sat_settings(&cfg, class);
        let sat_is_client = cfg.role == Role::Hub;
        let v6 = orig_dst.is_ipv6();
        let srv = sys::socket(v6)?;
        let sfd = srv.as_raw_fd();
        sys::set_transparent(sfd, v6)?;
        sys::set_int(sfd, libc::SOL_SOCKET, libc::SO_REUSEADDR, 1)?;
        let (sat_fd, terr_fd) = if sat_is_client {
            (cfd.as_raw_fd(), sfd)
        } else {
            (sfd, cfd.as_raw_fd())
        };
        let sat_cc_set = self.set_cc(sat_fd, &sat.cc);
        let terr_cc = &cfg.terrestrial.congestion_control;
        let terr_cc_set = !terr_cc.is_empty() && self.set_cc(terr_fd, terr_cc);
        sys::set_bufs(sat_fd, sat.sndbuf, sat.rcvbuf);
        if sat.pacing_bps > 0 {
            let _ = sys::set_pacing(sat_fd, sat.pacing_bps);
        }
        // The server must see the client's own address and port.
        let connected = match sys::bind(sfd, &peer).and_then(|_| sys::connect(sfd, &orig_dst)) {
            Ok(c) => c,
            Err(e) => {
                self.deltas.failed_connect += 1;
                sys::set_linger0(cfd.as_raw_fd());
                return Err(e);
            }
        };
        self.seq += 1;
        let id =
            ((self.generation as u64 * 64 + self.index as u64) << 32) | (self.seq & 0xffff_ffff);
        let now = Instant::now();
        // What each leg runs: what we set, else the namespace default. [client side, server side]
        let sat_leg = if sat_cc_set {
            &sat.cc
        } else {
            &self.default_cc
        };
        let terr_leg = if terr_cc_set {
            terr_cc
        } else {
            &self.default_cc
        };
        let cc = if sat_is_client {
            [sat_leg.clone(), terr_leg.clone()]
        } else {
            [terr_leg.clone(), sat_leg.clone()]
        };
        let s = Session {
            id,
            client: cfd,
            server: srv,
            client_addr: peer,
            server_addr: orig_dst,
            connecting: !connected,
            started: now,
            started_at: sys::now_f64(),
            last_active: now,
            up: Direction::default(),
            down: Direction::default(),
            class: class
                .map(|c| c.name.clone())
                .unwrap_or_else(|| "default".into()),
            action,
            sat_is_client,
            cc,
            info: Default::default(),
            sampled_bytes: (0, 0),
            sampled_at: now,
            rates: (0.0, 0.0),
            regs: Default::default(),
        };
        self.deltas.flows += 1;
        self.deltas.by_action.entry(action.as_str()).or_default().2 += 1;
        self.flows.insert(id, s);
        self.progress(id);
        Ok(())
    }

    /// Pump both directions of a flow and update its epoll interest; close it when done.
    fn progress(&mut self, id: u64) {
        let buf_size = self
            .cfg
            .as_ref()
            .map(|c| c.splitter.relay_buffer_bytes as usize)
            .unwrap_or(65536);
        let Some(s) = self.flows.get_mut(&id) else {
            return;
        };
        if !s.connecting {
            let (c, v) = (s.client.as_raw_fd(), s.server.as_raw_fd());
            let up = s.up.pump(c, v, &mut self.pool, buf_size);
            let down = s.down.pump(v, c, &mut self.pool, buf_size);
            for (r, src_side) in [(up, CLIENT), (down, SERVER)] {
                match r {
                    Ok(n) if n > 0 => s.last_active = Instant::now(),
                    Ok(_) => {}
                    Err((failed, errno)) => {
                        let bad = if failed == Failed::Source {
                            src_side
                        } else {
                            1 - src_side
                        };
                        let reason = if bad == CLIENT {
                            "client_reset"
                        } else {
                            "server_reset"
                        };
                        self.finish(id, reason, Some(bad), errno);
                        return;
                    }
                }
            }
            if s.up.done() && s.down.done() {
                self.finish(id, "closed", None, 0);
                return;
            }
        }
        let want = [
            (if !s.connecting && s.up.wants_read() {
                libc::EPOLLIN
            } else {
                0
            }) | (if s.down.pending() { libc::EPOLLOUT } else { 0 }),
            (if !s.connecting && s.down.wants_read() {
                libc::EPOLLIN
            } else {
                0
            }) | (if s.connecting || s.up.pending() {
                libc::EPOLLOUT
            } else {
                0
            }),
        ];
        for side in [CLIENT, SERVER] {
            let fd = s.fd(side);
            let reg = &mut s.regs[side as usize];
            let mask = want[side as usize] as u32;
            let token = flow_token(id, side);
            if mask == 0 && reg.hup {
                if reg.registered {
                    let _ = self.ep.ctl(libc::EPOLL_CTL_DEL, fd, token, 0);
                    reg.registered = false;
                }
            } else if !reg.registered {
                let _ = self.ep.ctl(libc::EPOLL_CTL_ADD, fd, token, mask);
                reg.registered = true;
                reg.mask = mask;
            } else if reg.mask != mask {
                let _ = self.ep.ctl(libc::EPOLL_CTL_MOD, fd, token, mask);
                reg.mask = mask;
            }
        }
    }

    /// Close a flow. `reset_from`: the side that failed; the other side gets a RST.
    fn finish(&mut self, id: u64, reason: &str, reset_from: Option<u64>, errno: i32) {
        let Some(mut s) = self.flows.remove(&id) else {
            return;
        };
        self.account(&s);
        s.sample();
        if let Some(bad) = reset_from {
            sys::set_linger0(s.fd(1 - bad));
            // A local error on the failing socket itself (not a RST from its peer): reset it too.
            if errno != libc::ECONNRESET && errno != libc::EPIPE {
                sys::set_linger0(s.fd(bad));
            }
        }
        // No EPOLL_CTL_DEL: the sockets are closed when `s` drops at the end of this function,
        // and closing the only descriptor of a socket removes it from the epoll set.
        s.up.release(&mut self.pool);
        s.down.release(&mut self.pool);
        let flow = s.to_flow(Some((reason, sys::now_f64())));
        if self.closed.len() < 50_000 {
            self.closed.push(flow);
        }
    }

    fn account(&mut self, s: &Session) {
        // Bytes are reported on close and, for long flows, in the periodic sample.
        let (up, down) = (
            s.up.bytes - s.sampled_bytes.0.min(s.up.bytes),
            s.down.bytes - s.sampled_bytes.1.min(s.down.bytes),
        );
        self.add_bytes(s.action, up, down);
    }

    fn add_bytes(&mut self, action: Action, up: u64, down: u64) {
        self.deltas.bytes_up += up;
        self.deltas.bytes_down += down;
        let e = self.deltas.by_action.entry(action.as_str()).or_default();
        e.0 += up;
        e.1 += down;
    }

    fn on_flow_event(&mut self, token: u64, events: u32) {
        let id = (token - TOKEN_FLOW_BASE) / 2;
        let side = (token - TOKEN_FLOW_BASE) % 2;
        let Some(s) = self.flows.get_mut(&id) else {
            return;
        };
        if events & libc::EPOLLHUP as u32 != 0 {
            s.regs[side as usize].hup = true;
        }
        if s.connecting {
            if side == SERVER {
                // A failed connect always raises EPOLLERR: a plain EPOLLOUT means connected, and
                // needs no getsockopt(SO_ERROR).
                let failed = events & (libc::EPOLLERR | libc::EPOLLHUP) as u32 != 0;
                let e = if failed {
                    sys::so_error(s.server.as_raw_fd())
                } else {
                    0
                };
                if e != 0 {
                    self.deltas.failed_connect += 1;
                    self.finish(id, "connect_failed", Some(SERVER), e);
                    return;
                }
                if events & libc::EPOLLOUT as u32 != 0 {
                    s.connecting = false;
                }
            } else if events & (libc::EPOLLERR | libc::EPOLLHUP) as u32 != 0 {
                self.finish(id, "client_reset", Some(CLIENT), libc::ECONNRESET);
                return;
            }
        } else if events & libc::EPOLLERR as u32 != 0 {
            let e = sys::so_error(s.fd(side));
            if e != 0 {
                let reason = if side == CLIENT {
                    "client_reset"
                } else {
                    "server_reset"
                };
                self.finish(id, reason, Some(side), e);
                return;
            }
        }
        self.progress(id);
    }

    fn on_tick(&mut self) {
        self.resume_listeners();
        let default_cc = sys::default_cc();
        if default_cc != self.default_cc {
            self.default_cc = default_cc;
            // Listeners that follow the namespace default were given it by name: give the new one.
            if let Some(cfg) = self.cfg.clone() {
                if accepted_leg_cc(&cfg).is_empty() {
                    self.set_listener_cc("");
                }
            }
        }
        let Some(cfg) = self.cfg.as_ref() else { return };
        let connect_to = Duration::from_millis(cfg.splitter.connect_timeout_ms);
        let idle_to = Duration::from_secs(cfg.splitter.idle_timeout_s);
        let mut expired = Vec::new();
        let mut bytes = Vec::new();
        for s in self.flows.values_mut() {
            let before = s.sampled_bytes;
            s.sample();
            bytes.push((s.action, s.up.bytes - before.0, s.down.bytes - before.1));
            if s.connecting && s.started.elapsed() > connect_to {
                expired.push((s.id, "connect_timeout"));
            } else if !s.connecting && s.last_active.elapsed() > idle_to {
                expired.push((s.id, "idle_timeout"));
            }
        }
        for (a, up, down) in bytes {
            self.add_bytes(a, up, down);
        }
        for (id, why) in expired {
            if why == "connect_timeout" {
                self.deltas.failed_connect += 1;
                self.finish(id, why, Some(SERVER), libc::ETIMEDOUT);
            } else {
                if let Some(s) = self.flows.get(&id) {
                    sys::set_linger0(s.fd(CLIENT));
                }
                self.finish(id, why, Some(SERVER), libc::ETIMEDOUT);
            }
        }
        self.report();
    }

    /// One JSON line to the master. Serialized straight from typed structs: at thousands of
    /// closed flows a second, building a `serde_json::Value` tree first was the worker's largest
    /// userspace cost.
    fn send_line<T: Serialize>(&mut self, msg: &T) {
        let mut line = serde_json::to_vec(msg).unwrap_or_default();
        line.push(b'\n');
        let mut out = self.out.lock();
        if out.write_all(&line).and_then(|_| out.flush()).is_err() {
            // The master is gone: nothing left to do for us.
            std::process::exit(0);
        }
    }

    fn report(&mut self) {
        let d = std::mem::take(&mut self.deltas);
        let msg = ipc::FromWorker {
            kind: "report".into(),
            live: self.flows.len() as u64,
            pipes_in_use: self.pool.in_use as u64,
            pipes_idle: self.pool.idle() as u64,
            listening: !self.listeners.is_empty(),
            deltas: ipc::Deltas {
                flows: d.flows,
                failed_connect: d.failed_connect,
                bytes_up: d.bytes_up,
                bytes_down: d.bytes_down,
                cc_fallback: d.cc_fallback,
                by_action: d
                    .by_action
                    .iter()
                    .map(|(k, v)| {
                        let a = ipc::ActionDeltas {
                            bytes_up: v.0,
                            bytes_down: v.1,
                            flows: v.2,
                        };
                        (k.to_string(), a)
                    })
                    .collect(),
            },
            closed: std::mem::take(&mut self.closed),
            ..Default::default()
        };
        self.send_line(&msg);
    }

    fn on_control(&mut self) {
        let mut buf = [0u8; 65536];
        loop {
            match sys::recv_nowait(0, &mut buf) {
                Ok(0) => std::process::exit(0),
                Ok(n) => self.ctl_in.extend_from_slice(&buf[..n]),
                Err(e) if e.raw_os_error() == Some(libc::EAGAIN) => break,
                Err(_) => std::process::exit(0),
            }
        }
        while let Some(pos) = self.ctl_in.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = self.ctl_in.drain(..=pos).collect();
            let Ok(msg) = serde_json::from_slice::<ipc::ToWorker>(&line) else {
                continue;
            };
            match msg {
                ipc::ToWorker::Config { config } => self.apply_config(*config),
                ipc::ToWorker::Snapshot { id } => {
                    let flows: Vec<Flow> = self.flows.values().map(|s| s.to_flow(None)).collect();
                    self.send_line(&ipc::FromWorker {
                        kind: "snapshot".into(),
                        id,
                        flows,
                        ..Default::default()
                    });
                }
            }
        }
    }

    pub fn run(mut self) -> ! {
        let mut evs = vec![libc::epoll_event { events: 0, u64: 0 }; 512];
        let mut last_tick = Instant::now();
        loop {
            let n = self.ep.wait(&mut evs, 200);
            for ev in evs.iter().take(n).copied() {
                let (token, events) = (ev.u64, ev.events);
                match token {
                    TOKEN_CONTROL => self.on_control(),
                    TOKEN_LISTEN4 | TOKEN_LISTEN6 => {
                        let fd = self
                            .listeners
                            .iter()
                            .find(|(t, _)| *t == token)
                            .map(|(_, l)| l.as_raw_fd());
                        if let Some(fd) = fd {
                            self.accept_all(fd);
                        }
                    }
                    _ => self.on_flow_event(token, events),
                }
            }
            if last_tick.elapsed() >= Duration::from_secs(1) {
                last_tick = Instant::now();
                self.on_tick();
            }
        }
    }
}

/// Whether the worker's parent is no longer the master that spawned it. Compared with the
/// master's real pid, not with 1: in a container the master itself is PID 1.
fn master_gone(parent: i32, master_pid: Option<i32>) -> bool {
    master_pid.is_some_and(|m| m != parent)
}

/// Entry point of `perigee gateway worker`.
pub fn main(index: u32, generation: u32, master_pid: Option<i32>) -> i32 {
    // Die with the master so a crashed daemon leaves no listener behind (fail-open).
    // SAFETY: prctl with integer arguments.
    unsafe {
        libc::prctl(
            libc::PR_SET_PDEATHSIG,
            libc::SIGKILL as libc::c_ulong,
            0,
            0,
            0,
        )
    };
    // The master may have died before PR_SET_PDEATHSIG took effect: then we were reparented.
    // SAFETY: getppid has no preconditions.
    if master_gone(unsafe { libc::getppid() }, master_pid) {
        return 0;
    }
    match Worker::new(index, generation) {
        Ok(w) => w.run(),
        Err(e) => {
            log::error("worker failed to start", json!({"error": e.to_string()}));
            1
        }
    }
}

#[cfg(test)]
mod tests {
    use super::master_gone;

    #[test]
    fn master_as_pid_1_is_alive() {
        // In a container the master is PID 1: a worker whose parent is 1 must keep running.
        assert!(!master_gone(1, Some(1)));
        assert!(!master_gone(4242, Some(4242)));
    }

    #[test]
    fn reparented_worker_sees_master_gone() {
        assert!(master_gone(1, Some(4242)));
        assert!(master_gone(77, Some(4242)));
    }

    #[test]
    fn unknown_master_relies_on_pdeathsig_only() {
        assert!(!master_gone(1, None));
    }
}
