//! The worker's event loop: one epoll wait over the master's socketpair, the TPROXY
//! listeners, the flows' sockets and the peer path's; accepting new connections; the tick on
//! whole seconds (sampling, timeouts, the report to the master); the master's messages (a new
//! config, a snapshot request).
use super::local_tunnel::LocalTunnel;
use super::{
    Worker, TICK, TOKEN_CONTROL, TOKEN_LISTEN4, TOKEN_LISTEN6, TOKEN_PEER_BASE, TOKEN_RESOLVER,
    TOKEN_TABLE,
};
use crate::gateway::classify::Classifier;
use crate::gateway::config::{CongestionControl, GatewayConfig, Role};
use crate::gateway::sites::SiteMap;
use crate::gateway::telemetry::Flow;
use crate::gateway::{ipc, log, satleg_auto, sys};
use serde::Serialize;
use serde_json::json;
use std::io::Write;
use std::os::fd::{AsRawFd, RawFd};
use std::rc::Rc;
use std::time::{Duration, Instant};

/// The congestion control of the leg the TPROXY listener accepts: the client's leg, which is the
/// terrestrial one at a terminal and the satellite one at a hub (its default, before any class).
fn accepted_leg_cc(cfg: &GatewayConfig) -> Option<CongestionControl> {
    match cfg.role {
        Role::Hub => Some(cfg.satellite.congestion_control),
        Role::Terminal => cfg.terrestrial.congestion_control,
    }
}

impl Worker {
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
        self.egress = super::peer::egress_policy(&cfg);
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
        if self.cfg.is_none() {
            return;
        }
        self.sample_flows();
        self.tick_peer();
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
        // Before the deltas: it takes the admission's refusals.
        let peer = self.peer_report();
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
                cc_fallback: d.cc_fallback + self.warm.take_cc_fallback(),
                peer_flows: d.peer_flows,
                peer_fallbacks: d.peer_fallbacks,
                peer_refused: d.peer_refused
                    + self
                        .admission
                        .as_mut()
                        .map_or(0, |a| std::mem::take(&mut a.refused)),
                peer_failed: d.peer_failed,
                peer_pool_empty: self.warm.take_pool_empty(),
                egress_refused: d.egress_refused,
                by_action: d
                    .by_action
                    .iter()
                    .map(|(k, v)| (k.to_string(), *v))
                    .collect(),
                link: d.link,
                by_class: d.by_class.into_iter().collect(),
                by_site: d.by_site.into_iter().collect(),
                by_cc: d.by_cc.into_iter().collect(),
                by_cc_reason: d
                    .by_cc_reason
                    .into_iter()
                    .map(|(k, v)| (k.to_string(), v))
                    .collect(),
            },
            closed: std::mem::take(&mut self.closed),
            peer,
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
                ipc::ToWorker::Cluster { table } => {
                    self.set_cluster(table.map(|t| std::sync::Arc::new(*t)))
                }
                ipc::ToWorker::Identity { path, fingerprint } => {
                    self.set_identity(&path, &fingerprint)
                }
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
        let mut next_watch = Instant::now() + satleg_auto::WATCH_PERIOD;
        loop {
            let wait = next_tick
                .min(next_watch)
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
                    TOKEN_RESOLVER => self.accept_local(LocalTunnel::Resolver),
                    TOKEN_TABLE => self.accept_local(LocalTunnel::Table),
                    t if t >= TOKEN_PEER_BASE => self.on_peer_event(token, events),
                    _ => self.on_flow_event(token, events),
                }
            }
            if Instant::now() >= next_watch {
                if self.cfg.is_some() {
                    self.watch_legs();
                }
                next_watch = Instant::now() + satleg_auto::WATCH_PERIOD;
            }
            if Instant::now() >= next_tick {
                self.on_tick();
                next_tick = Instant::now() + sys::until_next_boundary(TICK);
            }
        }
    }
}
