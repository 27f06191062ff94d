//! A worker process: owns its share of split flows. It listens on the TPROXY port (v4 and v6,
//! SO_REUSEPORT shared with the other workers), opens the spoofed outbound connection for each
//! accepted one, relays both directions in a level-triggered epoll loop, samples TCP_INFO and
//! reports to the master over its stdin/stdout socketpair (JSON lines). The peer path's flows
//! (a terminal's warm connections, a hub's peer listener) are set up in `peer`.
mod peer;

use super::classify::Classifier;
use super::config::{Action, CongestionControl, GatewayConfig, Role};
use super::dscp;
use super::epoll::Epoll;
use super::flow::{Path, Session, CLIENT, SERVER};
use super::ipc::Usage;
use super::meter::{Crossed, LinkBytes};
use super::peer::admission::Admission;
use super::peer::pool::Pool;
use super::satleg::SatLeg;
use super::session::{Direction, Failed, PipePool};
use super::sites::SiteMap;
use super::sys;
use super::telemetry::Flow;
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
/// Sampling and reporting period.
const TICK: Duration = Duration::from_secs(1);
/// Tokens from here on belong to the peer path (the pool's or the peer listener's sockets).
const TOKEN_PEER_BASE: u64 = 1 << 62;

/// Counters accumulated since the last report (the master sums them).
#[derive(Default)]
struct Deltas {
    flows: u64,
    failed_connect: u64,
    bytes_up: u64,
    bytes_down: u64,
    cc_fallback: u64,
    by_action: HashMap<&'static str, Usage>,
    by_class: HashMap<String, Usage>,
    by_site: HashMap<String, Usage>,
    link: LinkBytes,
    /// Flows started on the peer path, of them those that fell back to the direct path before
    /// the hub's status, and peer connections the hub refused.
    peer_flows: u64,
    peer_fallbacks: u64,
    peer_refused: u64,
}

impl Deltas {
    /// What crossed a flow's satellite leg since its last sample: the link's two directions
    /// (a hub's satellite sockets send forward), and the flow's action, class and site.
    fn account_crossed(&mut self, hub: bool, s: &Session, c: &Crossed) {
        if *c == Crossed::default() {
            return;
        }
        self.link.add(c, hub);
        let (up, down) = s.sat_up_down((c.tx_payload, c.rx_payload));
        let usage = Usage {
            bytes_up: up,
            bytes_down: down,
            flows: 0,
            retrans_segments: c.retrans_segs,
        };
        self.by_action
            .entry(s.action.as_str())
            .or_default()
            .add(&usage);
        for (map, key) in [(&mut self.by_class, &s.class), (&mut self.by_site, &s.site)] {
            match map.get_mut(key) {
                Some(u) => u.add(&usage),
                None => {
                    map.insert(key.clone(), usage);
                }
            }
        }
    }
}

pub struct Worker {
    index: u32,
    generation: u32,
    seq: u64,
    ep: Epoll,
    /// Shared, not cloned, per new flow: a deep copy of the config per accept was measurable.
    cfg: Option<Rc<GatewayConfig>>,
    /// The classes of `cfg` in evaluation order, built with it.
    classifier: Classifier,
    /// The config's sites, by longest prefix.
    sites: SiteMap,
    listeners: Vec<(u64, OwnedFd)>,
    listen_port: u16,
    listeners_paused: bool,
    flows: HashMap<u64, Session>,
    pool: PipePool,
    /// Terminal with the peer path on: the warm connections to the hub.
    warm: Option<Pool>,
    /// Hub with the peer path on: the peer listener and its connections.
    admission: Option<Admission>,
    /// Flows in their handover phase (waiting for the hub's status), and those that lost their
    /// peer connection in the current batch of events and go to the direct path after it.
    handovers: HashSet<u64>,
    fall_back: Vec<(u64, &'static str)>,
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
fn accepted_leg_cc(cfg: &GatewayConfig) -> Option<CongestionControl> {
    match cfg.role {
        Role::Hub => Some(cfg.satellite.congestion_control),
        Role::Terminal => cfg.terrestrial.congestion_control,
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
            classifier: Classifier::default(),
            sites: SiteMap::default(),
            listeners: Vec::new(),
            listen_port: 0,
            listeners_paused: false,
            flows: HashMap::new(),
            pool: PipePool::new(max_pipes, 1 << 20),
            warm: None,
            admission: None,
            handovers: HashSet::new(),
            fall_back: Vec::new(),
            closed: Vec::new(),
            deltas: Deltas::default(),
            ctl_in: Vec::new(),
            available_cc: sys::available_cc(),
            default_cc: sys::default_cc(),
            cc_warned: HashSet::new(),
            out: std::io::stdout(),
        })
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
        self.configure_peer(&cfg);
        self.classifier = Classifier::new(&cfg);
        self.sites = SiteMap::of(&cfg);
        self.cfg = Some(Rc::new(cfg));
    }

    /// Give the listeners the congestion control of the leg they accept. An accepted socket
    /// starts with its listener's, and that one's init has run by the time we could change it:
    /// BBR's init turns on the kernel's internal pacing for good, so a leg switched from the
    /// namespace default bbr to cubic afterwards still paced every burst through a high-resolution
    /// timer (measured on the overhead bench: ~11,000 timer interrupts a second on the gateway's
    /// core, and under half the routed throughput). None leaves the namespace default.
    fn set_listener_cc(&mut self, cc: Option<CongestionControl>) {
        let cc = cc.map_or_else(|| self.default_cc.clone(), |c| c.to_string());
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
        let client_dscp = dscp::of_accepted(cfd.as_raw_fd());
        let class = self
            .classifier
            .classify(&cfg, &peer, &orig_dst, client_dscp);
        let action = match class.map(|c| c.action) {
            Some(Action::Cache) if cfg.cache.enabled => Action::Cache,
            _ => Action::Accelerate,
        };
        if cfg.splitter.nodelay {
            // Both legs: the relay writes whatever it has read; big splices still leave in
            // full segments (docs/splitter.md, *Nagle*).
            let _ = sys::set_nodelay(cfd.as_raw_fd());
        }
        let flow = NewFlow {
            client: cfd,
            client_addr: peer,
            server_addr: orig_dst,
            class: class.map(|c| c.name.to_string()),
            action,
            sat: SatLeg::of(&cfg, class),
            dscp: dscp::chosen(class.and_then(|c| c.set_dscp), client_dscp),
        };
        // A terminal with a warm connection to its hub: the client's bytes leave at once.
        if let Some(warm) = self.take_warm() {
            self.start_peer_flow(&cfg, flow, warm);
            return Ok(());
        }
        let sat_is_client = cfg.role == Role::Hub;
        let addrs = (flow.client_addr, flow.server_addr);
        let (srv, connected, cc) = match self.connect_outbound(
            &cfg,
            addrs,
            (&flow.sat, flow.dscp),
            flow.client.as_raw_fd(),
            sat_is_client,
        ) {
            Ok(x) => x,
            Err(e) => {
                self.deltas.failed_connect += 1;
                sys::set_linger0(flow.client.as_raw_fd());
                return Err(e);
            }
        };
        let id = self.insert_session(flow, srv, !connected, sat_is_client, cc, Path::Direct);
        self.progress(id);
        Ok(())
    }

    /// The spoofed outbound socket to the server: bound to the client's address and port (the
    /// server sees the client), tuned and marked with the flow's DSCP, connect started (so
    /// even its SYN carries the marking). `other` is the flow's other socket;
    /// `sat_is_client` says which of the two faces the satellite. Returns the socket, whether it
    /// connected at once, and the congestion control each leg runs [client side, server side].
    fn connect_outbound(
        &mut self,
        cfg: &GatewayConfig,
        (client, server): (SocketAddr, SocketAddr),
        (sat, mark): (&SatLeg, Option<u8>),
        other: RawFd,
        sat_is_client: bool,
    ) -> io::Result<(OwnedFd, bool, [String; 2])> {
        let v6 = server.is_ipv6();
        let srv = sys::socket(v6)?;
        let sfd = srv.as_raw_fd();
        sys::set_transparent(sfd, v6)?;
        if let Some(d) = mark {
            let _ = dscp::set(sfd, v6, d);
        }
        sys::set_int(sfd, libc::SOL_SOCKET, libc::SO_REUSEADDR, 1)?;
        if cfg.splitter.nodelay {
            let _ = sys::set_nodelay(sfd);
        }
        let (sat_fd, terr_fd) = if sat_is_client {
            (other, sfd)
        } else {
            (sfd, other)
        };
        let sat_cc = self.tune_satellite_leg(sat_fd, sat, None);
        let terr_cc = self.tune_terrestrial_leg(cfg, terr_fd);
        let connected = sys::bind(sfd, &client).and_then(|_| sys::connect(sfd, &server))?;
        let cc = if sat_is_client {
            [sat_cc, terr_cc]
        } else {
            [terr_cc, sat_cc]
        };
        Ok((srv, connected, cc))
    }

    /// Congestion control, buffers and pacing of a satellite-facing socket; `already`: what the
    /// socket got before (a peer connection), so only a class's differences are set again.
    /// Returns the congestion control it runs.
    fn tune_satellite_leg(&mut self, fd: RawFd, sat: &SatLeg, already: Option<&SatLeg>) -> String {
        let cc_set = match already {
            Some(a) if a.cc == sat.cc => true,
            _ => self.set_cc(fd, &sat.cc),
        };
        if already.is_none_or(|a| (a.sndbuf, a.rcvbuf) != (sat.sndbuf, sat.rcvbuf)) {
            sys::set_bufs(fd, sat.sndbuf, sat.rcvbuf);
        }
        if sat.pacing_bps > 0 && already.is_none_or(|a| a.pacing_bps != sat.pacing_bps) {
            let _ = sys::set_pacing(fd, sat.pacing_bps);
        }
        if cc_set {
            sat.cc.clone()
        } else {
            self.default_cc.clone()
        }
    }

    /// The terrestrial leg: only its congestion control, when the config names one.
    fn tune_terrestrial_leg(&mut self, cfg: &GatewayConfig, fd: RawFd) -> String {
        match cfg.terrestrial.congestion_control {
            Some(cc) if self.set_cc(fd, cc.as_str()) => cc.to_string(),
            _ => self.default_cc.clone(),
        }
    }

    /// A new flow's record, counted; returns its id.
    fn insert_session(
        &mut self,
        flow: NewFlow,
        server: OwnedFd,
        connecting: bool,
        sat_is_client: bool,
        cc: [String; 2],
        path: Path,
    ) -> u64 {
        self.seq += 1;
        let id =
            ((self.generation as u64 * 64 + self.index as u64) << 32) | (self.seq & 0xffff_ffff);
        let now = Instant::now();
        let leg_v6 = [
            sys::local_addr(flow.client.as_raw_fd())
                .map_or(flow.client_addr.is_ipv6(), |a| a.is_ipv6()),
            sys::local_addr(server.as_raw_fd()).map_or(flow.server_addr.is_ipv6(), |a| a.is_ipv6()),
        ];
        let site = self.sites.site_of(flow.client_addr.ip()).to_string();
        let class = flow.class.unwrap_or_else(|| "default".into());
        let mut s = Session {
            id,
            client: flow.client,
            server,
            client_addr: flow.client_addr,
            server_addr: flow.server_addr,
            connecting,
            started: now,
            started_at: sys::now_f64(),
            last_active: now,
            up: Direction::default(),
            down: Direction::default(),
            class: class.clone(),
            action: flow.action,
            sat_is_client,
            cc,
            info: Default::default(),
            sampled_bytes: (0, 0),
            sampled_at: now,
            meters: Default::default(),
            leg_v6,
            regs: Default::default(),
            site: site.clone(),
            dscp: flow.dscp,
            path,
            handover: None,
            status_owed: false,
        };
        self.deltas.flows += 1;
        self.deltas
            .by_action
            .entry(flow.action.as_str())
            .or_default()
            .flows += 1;
        self.deltas.by_class.entry(class).or_default().flows += 1;
        self.deltas.by_site.entry(site).or_default().flows += 1;
        if path == Path::Peer {
            self.deltas.peer_flows += 1;
        }
        s.read_info();
        self.flows.insert(id, s);
        id
    }

    /// Pump both directions of a flow and update its epoll interest; close it when done.
    fn progress(&mut self, id: u64) {
        if self.handovers.contains(&id) && !self.progress_handover(id) {
            return;
        }
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
        set_interest(&self.ep, s, [want[0] as u32, want[1] as u32]);
    }

    /// Close a flow. `reset_from`: the side that failed; the other side gets a RST.
    fn finish(&mut self, id: u64, reason: &str, reset_from: Option<u64>, errno: i32) {
        let Some(mut s) = self.flows.remove(&id) else {
            return;
        };
        self.account(&s);
        let crossed = s.sample();
        self.account_crossed(&s, &crossed);
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

    /// The relay's bytes not reported yet (on close; long flows also in the periodic sample).
    fn account(&mut self, s: &Session) {
        self.deltas.bytes_up += s.up.bytes - s.sampled_bytes.0.min(s.up.bytes);
        self.deltas.bytes_down += s.down.bytes - s.sampled_bytes.1.min(s.down.bytes);
    }

    fn account_crossed(&mut self, s: &Session, c: &Crossed) {
        let hub = self.is_hub();
        self.deltas.account_crossed(hub, s, c);
    }

    fn is_hub(&self) -> bool {
        self.cfg.as_ref().is_some_and(|cfg| cfg.role == Role::Hub)
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
        if s.handover.is_some() {
            // Errors show up in the handover's own reads and writes (a lost peer connection
            // falls back to the direct path rather than resetting the client).
            self.progress(id);
            return;
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
                    self.connect_failed(id, "connect_failed", e);
                    return;
                }
                if events & libc::EPOLLOUT as u32 != 0 {
                    s.connecting = false;
                    if s.status_owed {
                        peer::owe_status_connected(s);
                    }
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
                if accepted_leg_cc(&cfg).is_none() {
                    self.set_listener_cc(None);
                }
            }
        }
        let Some(cfg) = self.cfg.as_ref() else { return };
        let connect_to = Duration::from_millis(cfg.splitter.connect_timeout_ms);
        let idle_to = Duration::from_secs(cfg.splitter.idle_timeout_s);
        let mut expired = Vec::new();
        let hub = cfg.role == Role::Hub;
        for s in self.flows.values_mut() {
            let c = s.sample();
            self.deltas.account_crossed(hub, s, &c);
            self.deltas.bytes_up += s.up.bytes - s.sampled_bytes.0.min(s.up.bytes);
            self.deltas.bytes_down += s.down.bytes - s.sampled_bytes.1.min(s.down.bytes);
            s.sampled_bytes = (s.up.bytes, s.down.bytes);
            if s.handover.is_some() {
                // Its own deadlines (peer::check_handovers).
            } else if s.connecting && s.started.elapsed() > connect_to {
                expired.push((s.id, "connect_timeout"));
            } else if !s.connecting && s.last_active.elapsed() > idle_to {
                expired.push((s.id, "idle_timeout"));
            }
        }
        for (id, why) in expired {
            if why == "connect_timeout" {
                self.connect_failed(id, why, libc::ETIMEDOUT);
            } else {
                if let Some(s) = self.flows.get(&id) {
                    sys::set_linger0(s.fd(CLIENT));
                }
                self.finish(id, why, Some(SERVER), libc::ETIMEDOUT);
            }
        }
        self.tick_peer();
        self.report();
    }

    /// The connect to the server failed: the client gets a RST (today's behaviour), or, for a
    /// flow a terminal opened on the peer path, the terminal gets STATUS(failed) and resets its
    /// client itself.
    fn connect_failed(&mut self, id: u64, reason: &str, errno: i32) {
        self.deltas.failed_connect += 1;
        let owed = self.flows.get(&id).is_some_and(|s| s.status_owed);
        if owed {
            if let Some(s) = self.flows.get(&id) {
                peer::send_status_failed(s, errno);
            }
            self.finish(id, reason, None, errno);
        } else {
            self.finish(id, reason, Some(SERVER), errno);
        }
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
                cc_fallback: d.cc_fallback
                    + self
                        .warm
                        .as_mut()
                        .map_or(0, |p| std::mem::take(&mut p.cc_fallback)),
                peer_flows: d.peer_flows,
                peer_fallbacks: d.peer_fallbacks,
                peer_refused: d.peer_refused
                    + self
                        .admission
                        .as_mut()
                        .map_or(0, |a| std::mem::take(&mut a.refused)),
                by_action: d
                    .by_action
                    .iter()
                    .map(|(k, v)| (k.to_string(), *v))
                    .collect(),
                link: d.link,
                by_class: d.by_class.into_iter().collect(),
                by_site: d.by_site.into_iter().collect(),
            },
            closed: std::mem::take(&mut self.closed),
            peer: self.peer_report(),
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
        // Ticks (sample, report) on whole wall-clock seconds, like every other worker and the
        // cache's sampler: a reading of the master's counters shortly after a second has one
        // round of each (docs/splitter.md, *Rates*).
        let mut next_tick = Instant::now() + sys::until_next_boundary(TICK);
        loop {
            let wait = next_tick
                .saturating_duration_since(Instant::now())
                .min(Duration::from_millis(200));
            let n = self.ep.wait(&mut evs, wait.as_millis() as i32 + 1);
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
                    t if t >= TOKEN_PEER_BASE => self.on_peer_event(token, events),
                    _ => self.on_flow_event(token, events),
                }
            }
            // After the batch: no event of a replaced socket can still be pending.
            self.after_batch();
            if Instant::now() >= next_tick {
                self.on_tick();
                next_tick = Instant::now() + sys::until_next_boundary(TICK);
            }
        }
    }
}

/// What a new flow is before it has its second socket.
struct NewFlow {
    client: OwnedFd,
    client_addr: SocketAddr,
    server_addr: SocketAddr,
    class: Option<String>,
    action: Action,
    sat: SatLeg,
    /// What the re-originated leg is marked with.
    dscp: Option<u8>,
}

/// Bring a flow's epoll registrations to `want` [client side, server side].
fn set_interest(ep: &Epoll, s: &mut Session, want: [u32; 2]) {
    for side in [CLIENT, SERVER] {
        let fd = s.fd(side);
        let reg = &mut s.regs[side as usize];
        let mask = want[side as usize];
        let token = flow_token(s.id, side);
        if mask == 0 && reg.hup {
            if reg.registered {
                let _ = ep.ctl(libc::EPOLL_CTL_DEL, fd, token, 0);
                reg.registered = false;
            }
        } else if !reg.registered {
            let _ = ep.ctl(libc::EPOLL_CTL_ADD, fd, token, mask);
            reg.registered = true;
            reg.mask = mask;
        } else if reg.mask != mask {
            let _ = ep.ctl(libc::EPOLL_CTL_MOD, fd, token, mask);
            reg.mask = mask;
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
