//! The worker's side of the peer path (docs/splitter.md, *The peer path*): keeping the pool or
//! the peer listener in step with the config, starting a terminal's flow on a warm connection,
//! admitting a hub's flow, the handover phase until the hub's status, and the fall back to the
//! direct path when the peer connection is lost first.
use super::admit::NewFlow;
use super::relay::set_interest;
use super::{Worker, TOKEN_PEER_BASE};
use crate::gateway::config::{GatewayConfig, Role};
use crate::gateway::dscp;
use crate::gateway::flow::{Path, Reg, Session, CLIENT, SERVER};
use crate::gateway::ipc::PeerReport;
use crate::gateway::log;
use crate::gateway::peer::admission::{Admission, AdmissionConfig, Admitted};
use crate::gateway::peer::handover::{Handover, Progress};
use crate::gateway::peer::pool::{Pool, PoolConfig, Warm};
use crate::gateway::peer::wire::{self, Open, Status};
use crate::gateway::satleg::{Opening, SatLeg};
use crate::gateway::sys;
use serde_json::json;
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

/// The pool a terminal's config asks for (None: peer path off, or not a terminal).
fn pool_config(cfg: &GatewayConfig) -> Option<PoolConfig> {
    let p = &cfg.peer;
    if !p.enabled || cfg.role != Role::Terminal {
        return None;
    }
    Some(PoolConfig {
        hub: SocketAddr::new(p.hub_addr()?, p.port as u16),
        key: p.key_bytes()?,
        size: p.pool_size as usize,
        sat: SatLeg::of(cfg, None),
        opening: Opening::of(cfg),
        nodelay: cfg.splitter.nodelay,
        connect_timeout: Duration::from_millis(cfg.splitter.connect_timeout_ms),
    })
}

/// The peer listener a hub's config asks for.
fn admission_config(cfg: &GatewayConfig) -> Option<AdmissionConfig> {
    let p = &cfg.peer;
    if !p.enabled || cfg.role != Role::Hub {
        return None;
    }
    Some(AdmissionConfig {
        port: p.port as u16,
        key: p.key_bytes()?,
        allowed: p.allowed.clone(),
        served: cfg.served(),
        sat: SatLeg::of(cfg, None),
        opening: Opening::of(cfg),
        nodelay: cfg.splitter.nodelay,
    })
}

/// Hub: the connect to the server finished; STATUS(connected) goes ahead of the server's bytes.
pub(super) fn owe_status_connected(s: &mut Session) {
    s.down.preload(wire::status(Status::Connected).to_vec());
    s.status_owed = false;
}

/// Hub: tell the terminal its flow's server could not be reached (it resets its client). The
/// connection is fresh and idle: its send buffer takes the 8 bytes.
pub(super) fn send_status_failed(s: &Session, errno: i32) {
    let _ = sys::send(s.fd(CLIENT), &wire::status(Status::Failed(errno)));
}

impl Worker {
    /// Start, keep or replace the pool (terminal) or the peer listener (hub) for `cfg`. Open
    /// flows keep their connections; only new flows see the change.
    pub(super) fn configure_peer(&mut self, cfg: &GatewayConfig) {
        let want_pool = pool_config(cfg);
        let retuned = match (self.warm.as_mut(), want_pool.as_ref()) {
            (Some(p), Some(w)) if p.config() != w => p.retune(w, &self.ep, Instant::now()),
            _ => false,
        };
        if !retuned && self.warm.as_ref().map(|p| p.config()) != want_pool.as_ref() {
            self.warm = want_pool.map(|c| Pool::new(c, TOKEN_PEER_BASE));
            if let Some(p) = self.warm.as_mut() {
                p.fill(&self.ep, Instant::now());
            }
        }
        let want_adm = admission_config(cfg);
        if let (Some(a), Some(w)) = (self.admission.as_mut(), want_adm.as_ref()) {
            // Who may connect and which clients it serves change in place: the terminals'
            // authenticated idle connections stay.
            if a.same_listener(w) {
                a.set_policy(w.allowed.clone(), w.served.clone());
                a.retune(w.sat.clone(), w.opening, w.nodelay);
            }
        }
        if self.admission.as_ref().map(|a| a.config()) != want_adm.as_ref() {
            self.admission = None; // unbinds before the new one binds the same port
            if let Some(c) = want_adm {
                let port = c.port;
                match Admission::new(c, &self.ep, TOKEN_PEER_BASE) {
                    Ok(a) => self.admission = Some(a),
                    Err(e) => log::error(
                        "peer listener failed: terminals' flows take the direct path",
                        json!({"port": port, "error": e.to_string()}),
                    ),
                }
            }
        }
    }

    /// Terminal: a ready connection to the hub, if the peer path is on and has one.
    pub(super) fn take_warm(&mut self) -> Option<Warm> {
        self.warm.as_mut()?.take(&self.ep, Instant::now())
    }

    /// Terminal: put the flow on a warm connection: OPEN and the client's first bytes leave at
    /// once; the hub's status ends the handover.
    pub(super) fn start_peer_flow(&mut self, cfg: &GatewayConfig, flow: NewFlow, warm: Warm) {
        let Some(pool) = self.warm.as_ref() else {
            return;
        };
        let key = pool.config().key;
        let pooled_sat = pool.config().sat.clone();
        let hub_v6 = pool.config().hub.is_ipv6();
        let open = wire::open(
            &key,
            &warm.nonce,
            &Open {
                client: flow.client_addr,
                server: flow.server_addr,
                dscp: flow.dscp,
            },
        );
        let sat_cc = self.tune_satellite_leg(warm.fd.as_raw_fd(), &flow.sat, Some(&pooled_sat));
        // The peer connection is this flow's re-originated leg over the satellite: it carries
        // the marking too (the hub's connection to the server gets it from OPEN).
        if let Some(d) = flow.dscp {
            let _ = dscp::set(warm.fd.as_raw_fd(), hub_v6, d);
        }
        let terr_cc = self.tune_terrestrial_leg(cfg, flow.client.as_raw_fd());
        let connect_timeout = Duration::from_millis(cfg.splitter.connect_timeout_ms);
        let id = self.insert_session(flow, warm.fd, false, false, [terr_cc, sat_cc], Path::Peer);
        if let Some(s) = self.flows.get_mut(&id) {
            s.handover = Some(Box::new(Handover::new(&open, warm.rtt, connect_timeout)));
        }
        self.handovers.insert(id);
        self.progress(id);
    }

    /// An event on a pool connection (terminal) or the peer listener and its connections (hub).
    pub(super) fn on_peer_event(&mut self, token: u64, events: u32) {
        let now = Instant::now();
        if let Some(pool) = self.warm.as_mut().filter(|p| p.owns(token)) {
            pool.on_event(&self.ep, token, events, now);
            return;
        }
        let admitted = match self.admission.as_mut().filter(|a| a.owns(token)) {
            Some(a) => a.on_event(&self.ep, token, now),
            None => None,
        };
        if let Some(a) = admitted {
            self.admit(a);
        }
    }

    /// Hub: a terminal's authenticated OPEN becomes a flow, re-originated to the server from
    /// the client's address exactly like an intercepted one.
    fn admit(&mut self, a: Admitted) {
        let Some(cfg) = self.cfg.clone() else {
            return;
        };
        let (client, server) = (a.open.client, a.open.server);
        let class = self
            .classifier
            .classify(&cfg, &client, &server, a.open.dscp);
        let action = match class.map(|c| c.action) {
            Some(crate::gateway::config::Action::Cache) if cfg.cache.enabled => {
                crate::gateway::config::Action::Cache
            }
            _ => crate::gateway::config::Action::Accelerate,
        };
        let flow = NewFlow {
            client: a.fd,
            client_addr: client,
            server_addr: server,
            class: class.map(|c| c.name.to_string()),
            action,
            sat: SatLeg::of(&cfg, class),
            dscp: dscp::chosen(class.and_then(|c| c.set_dscp), a.open.dscp),
        };
        let peer_fd = flow.client.as_raw_fd();
        // What the accepted connection has from its listener: congestion control and buffers.
        // Pacing is not a listener's to pass on: it is set here, as on a TPROXY-accepted leg.
        let inherited = SatLeg {
            pacing_bps: 0,
            ..SatLeg::of(&cfg, None)
        };
        let sat_cc = self.tune_satellite_leg(peer_fd, &flow.sat, Some(&inherited));
        let (srv, connected, mut cc) = match self.connect_outbound(
            &cfg,
            (client, server),
            (&flow.sat, flow.dscp),
            peer_fd,
            true,
        ) {
            Ok(x) => x,
            Err(e) => {
                self.deltas.failed_connect += 1;
                let errno = e.raw_os_error().unwrap_or(libc::EIO);
                let _ = sys::send(peer_fd, &wire::status(Status::Failed(errno)));
                log::warn(
                    "peer flow: cannot open the server connection",
                    json!({"terminal": a.terminal.to_string(), "client": client.to_string(),
                           "server": server.to_string(), "error": e.to_string()}),
                );
                return;
            }
        };
        cc[0] = sat_cc;
        let id = self.insert_session(flow, srv, !connected, true, cc, Path::Peer);
        if let Some(s) = self.flows.get_mut(&id) {
            s.status_owed = true;
            if connected {
                owe_status_connected(s);
            }
        }
        self.progress(id);
    }

    /// A flow in its handover phase: move its first bytes, look for the hub's status. Returns
    /// true when the flow has become a plain relay and `progress` should go on pumping it.
    pub(super) fn progress_handover(&mut self, id: u64) -> bool {
        let Some(s) = self.flows.get_mut(&id) else {
            return false;
        };
        let Some(h) = s.handover.as_mut() else {
            self.handovers.remove(&id);
            return true;
        };
        let (c, p) = (s.client.as_raw_fd(), s.server.as_raw_fd());
        match h.pump(c, p) {
            Progress::Waiting => {
                let want_client = if h.wants_client() { libc::EPOLLIN } else { 0 };
                let want_peer = libc::EPOLLIN | if h.has_unsent() { libc::EPOLLOUT } else { 0 };
                set_interest(&self.ep, s, [want_client as u32, want_peer as u32]);
                false
            }
            Progress::Connected => {
                let h = s.handover.take().expect("in handover");
                let (unsent, client_eof) = h.into_unsent();
                s.up.preload(unsent);
                s.up.eof |= client_eof;
                s.last_active = Instant::now();
                self.handovers.remove(&id);
                true
            }
            Progress::Refused(errno) => {
                self.handovers.remove(&id);
                self.deltas.failed_connect += 1;
                let reason = if errno == libc::ETIMEDOUT {
                    "connect_timeout"
                } else {
                    "connect_failed"
                };
                self.finish(id, reason, Some(SERVER), errno);
                false
            }
            Progress::ClientFailed(errno) => {
                self.handovers.remove(&id);
                self.finish(id, "client_reset", Some(CLIENT), errno);
                false
            }
            Progress::PeerLost(why) => {
                if !self.fall_back.iter().any(|(f, _)| *f == id) {
                    self.fall_back.push((id, why));
                }
                // Nothing to watch until the flow has its direct connection (after the batch).
                set_interest(&self.ep, s, [0, 0]);
                false
            }
        }
    }

    /// After each batch of events: flows that lost their peer connection (now or by deadline)
    /// go to the direct path.
    pub(super) fn after_batch(&mut self) {
        if !self.handovers.is_empty() {
            let now = Instant::now();
            for id in self.handovers.iter().copied().collect::<Vec<_>>() {
                let Some(s) = self.flows.get(&id) else {
                    continue;
                };
                let overdue = s
                    .handover
                    .as_ref()
                    .and_then(|h| h.overdue(s.server.as_raw_fd(), now));
                if let Some(why) = overdue {
                    if !self.fall_back.iter().any(|(f, _)| *f == id) {
                        self.fall_back.push((id, why));
                    }
                }
            }
        }
        for (id, why) in std::mem::take(&mut self.fall_back) {
            self.fall_back_to_direct(id, why);
        }
    }

    /// The peer connection failed before the hub's status: the server has seen nothing of this
    /// flow, so it starts again on the direct path with the client's bytes replayed.
    fn fall_back_to_direct(&mut self, id: u64, why: &'static str) {
        let Some(cfg) = self.cfg.clone() else {
            return;
        };
        self.handovers.remove(&id);
        if let Some(pool) = self.warm.as_mut() {
            pool.peer_lost(Instant::now(), why);
        }
        let Some(s) = self.flows.get_mut(&id) else {
            return;
        };
        let Some(h) = s.handover.take() else {
            return;
        };
        let waited = h.elapsed();
        let (replay, client_eof) = h.into_replay();
        let addrs = (s.client_addr, s.server_addr);
        let client_fd = s.client.as_raw_fd();
        let mark = s.dscp;
        let sat = SatLeg::of(
            &cfg,
            self.classifier.classify(&cfg, &addrs.0, &addrs.1, mark),
        );
        self.deltas.peer_fallbacks += 1;
        log::info(
            "peer flow falls back to the direct path",
            json!({"client": addrs.0.to_string(), "server": addrs.1.to_string(),
                   "why": why, "waited_s": waited.as_secs_f64()}),
        );
        let outbound = self.connect_outbound(&cfg, addrs, (&sat, mark), client_fd, false);
        let hub = self.is_hub();
        let Some(s) = self.flows.get_mut(&id) else {
            return;
        };
        match outbound {
            Ok((srv, connected, cc)) => {
                // What the lost peer connection carried counts; the new socket starts at 0.
                let crossed = s.retire_server_leg(addrs.1.is_ipv6());
                self.deltas.account_crossed(hub, s, &crossed);
                sys::set_linger0(s.server.as_raw_fd()); // the hub drops its half at once
                s.server = srv; // the old socket closes here, leaving the epoll set
                s.regs[SERVER as usize] = Reg::default();
                s.cc[SERVER as usize] = cc[SERVER as usize].clone();
                s.connecting = !connected;
                s.path = Path::Direct;
                s.up.preload(replay);
                s.up.eof |= client_eof;
                self.progress(id);
            }
            Err(e) => {
                let errno = e.raw_os_error().unwrap_or(libc::EIO);
                self.deltas.failed_connect += 1;
                self.finish(id, "connect_failed", Some(SERVER), errno);
            }
        }
    }

    /// Once a second: expire and refill the pool, expire unauthenticated peer connections.
    pub(super) fn tick_peer(&mut self) {
        let now = Instant::now();
        if let Some(p) = self.warm.as_mut() {
            p.tick(&self.ep, now);
        }
        if let Some(a) = self.admission.as_mut() {
            a.tick(now);
        }
    }

    pub(super) fn peer_report(&self) -> Option<PeerReport> {
        if let Some(p) = &self.warm {
            return Some(PeerReport {
                ready: p.ready() as u64,
                error: p.last_error.clone(),
                listening: false,
            });
        }
        self.admission.as_ref().map(|_| PeerReport {
            ready: 0,
            error: None,
            listening: true,
        })
    }
}
