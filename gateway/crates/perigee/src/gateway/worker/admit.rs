//! A new flow: where the accepted connection was going (its original destination), the class
//! and action policy gives it, its DSCP, the path (a warm peer connection or direct), and the
//! spoofed outbound socket with each leg's congestion control, buffers and pacing.
use super::Worker;
use crate::gateway::config::{Action, CongestionControl, GatewayConfig, Role};
use crate::gateway::dscp;
use crate::gateway::flow::{Path, Session};
use crate::gateway::peer::wire::Open;
use crate::gateway::satleg::SatLeg;
use crate::gateway::satleg_auto;
use crate::gateway::session::Direction;
use crate::gateway::telemetry::CcReason;
use crate::gateway::{log, sys};
use serde_json::json;
use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::time::Instant;

/// What a new flow is before it has its second socket.
pub(super) struct NewFlow {
    pub(super) client: OwnedFd,
    pub(super) client_addr: SocketAddr,
    pub(super) server_addr: SocketAddr,
    pub(super) class: Option<String>,
    pub(super) action: Action,
    pub(super) sat: SatLeg,
    /// What the re-originated leg is marked with.
    pub(super) dscp: Option<u8>,
}

impl Worker {
    pub(super) fn start_session(&mut self, cfd: OwnedFd, peer: SocketAddr) -> io::Result<()> {
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
        if cfg.role == Role::Hub {
            // A connection the hub opens for a terminal's client goes only where the egress
            // policy allows (nft on the hub's own output holds the same line).
            let site = self.egress.site_of(peer.ip());
            if let Err(why) = self.egress.check(site, orig_dst.ip()) {
                self.deltas.egress_refused += 1;
                sys::set_linger0(cfd.as_raw_fd());
                return Err(io::Error::new(
                    io::ErrorKind::PermissionDenied,
                    format!("destination {orig_dst} refused by the egress policy: {why}"),
                ));
            }
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
        let flow = match self.take_warm_for(flow.client_addr, flow.server_addr) {
            Some(warm) => {
                let open = Open::Flow {
                    client: flow.client_addr,
                    server: flow.server_addr,
                    dscp: flow.dscp,
                };
                match self.start_peer_flow(&cfg, flow, warm, &open) {
                    Ok(()) => return Ok(()),
                    // Nothing of it reached the hub: the direct path is safe.
                    Err(flow) => *flow,
                }
            }
            None => flow,
        };
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
    pub(super) fn connect_outbound(
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
    pub(super) fn tune_satellite_leg(
        &mut self,
        fd: RawFd,
        sat: &SatLeg,
        already: Option<&SatLeg>,
    ) -> String {
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
            return sat.cc.clone();
        }
        // hybla_ld not registered (a verifier that refuses it): its own growth without the loss
        // differentiation is still better on a satellite than the system default.
        let fallback = CongestionControl::HyblaLd
            .fallback()
            .filter(|_| sat.cc == CongestionControl::HyblaLd.as_str());
        match fallback {
            Some(fb) if sys::set_cc(fd, fb.as_str()).is_ok() => fb.to_string(),
            _ => self.default_cc.clone(),
        }
    }

    /// The terrestrial leg: only its congestion control, when the config names one.
    pub(super) fn tune_terrestrial_leg(&mut self, cfg: &GatewayConfig, fd: RawFd) -> String {
        match cfg.terrestrial.congestion_control {
            Some(cc) if self.set_cc(fd, cc.as_str()) => cc.to_string(),
            _ => self.default_cc.clone(),
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

    /// Why a flow of class `class` asks for its satellite congestion control: its class names
    /// one, or the config's default applies.
    fn cc_reason_asked(&self, class: Option<&str>) -> CcReason {
        let named = self.cfg.as_ref().is_some_and(|cfg| {
            cfg.classes
                .iter()
                .any(|c| Some(&*c.name) == class && c.satellite.congestion_control.is_some())
        });
        if named {
            CcReason::Class
        } else {
            CcReason::Default
        }
    }

    /// A new flow's record, counted; returns its id.
    pub(super) fn insert_session(
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
        let sat_side = usize::from(!sat_is_client);
        let sat_reason = Session::cc_reason(
            &flow.sat.cc,
            self.cc_reason_asked(flow.class.as_deref()),
            &cc[sat_side],
        );
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
            sat_reason,
            sat_crossed: Default::default(),
            sat_retrans_at_admit: 0,
            info: Default::default(),
            sampled_bytes: (0, 0),
            sampled_at: now,
            meters: Default::default(),
            leg_v6,
            regs: Default::default(),
            site: site.clone(),
            dscp: flow.dscp,
            path,
            tunnel: None,
            opened_by: None,
            peer_hub: None,
        };
        self.deltas.flows += 1;
        self.deltas
            .by_action
            .entry(flow.action.as_str())
            .or_default()
            .flows += 1;
        self.deltas.by_class.entry(class).or_default().flows += 1;
        self.deltas.by_site.entry(site).or_default().flows += 1;
        self.deltas.count_cc_flow(&s);
        if path == Path::Peer {
            self.deltas.peer_flows += 1;
        }
        s.read_info();
        s.sat_retrans_at_admit = s.info[s.sat_side()].retrans_total;
        // A leg that already measured its path (a warm peer connection, an accepted one).
        if satleg_auto::apply(&mut s, &self.available_cc).is_some() {
            self.deltas.count_cc_flow(&s);
        }
        self.flows.insert(id, s);
        id
    }
}
