//! The worker's side of the peer path (docs/splitter.md, *The peer path*): keeping the pool or
//! the peer listener in step with the config and the identity, starting a terminal's flow on a
//! warm connection (a client's, or the resolver's upstream), admitting a hub's flow, ending the
//! flows of a revoked terminal, and the reports.
use super::admit::NewFlow;
use super::{Worker, TOKEN_PEER_BASE};
use crate::gateway::cluster::table::{ClusterTable, Owner};
use crate::gateway::cluster_service::TABLE_SERVICE;
use crate::gateway::config::{Action, GatewayConfig, Role};
use crate::gateway::dscp;
use crate::gateway::egress::EgressPolicy;
use crate::gateway::flow::{Path, CLIENT, SERVER};
use crate::gateway::interfaces;
use crate::gateway::ipc::{PeerReport, TerminalReport};
use crate::gateway::log;
use crate::gateway::peer::admission::{Admission, AdmissionConfig, Admitted, TerminalEntry};
use crate::gateway::peer::identity::{Fingerprint, Identity};
use crate::gateway::peer::pool::{PoolConfig, Warm};
use crate::gateway::peer::pools::Aim;
use crate::gateway::peer::tunnel::Tunnel;
use crate::gateway::peer::wire::{self, Open, Status};
use crate::gateway::satleg::{Opening, SatLeg};
use crate::gateway::sys;
use serde_json::json;
use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Terminal: where its resolver sends upstream queries when the peer path is on (DNS over TCP,
/// each connection a flow to the hub's resolver).
pub const RESOLVER_TUNNEL: SocketAddr =
    SocketAddr::new(IpAddr::V4(std::net::Ipv4Addr::LOCALHOST), 8853);

fn fingerprints(list: &[String]) -> Vec<Fingerprint> {
    list.iter()
        .filter_map(|f| Fingerprint::parse(f).ok())
        .collect()
}

/// The pool a terminal's config asks for (None: peer path off, or not a terminal).
fn pool_config(cfg: &GatewayConfig, identity: &Identity) -> Option<PoolConfig> {
    let p = &cfg.peer;
    if !p.enabled || cfg.role != Role::Terminal {
        return None;
    }
    Some(PoolConfig {
        hub: SocketAddr::new(p.hub_addr()?, p.port as u16),
        hub_pins: fingerprints(&p.hub_fingerprints),
        identity: identity.fingerprint.clone(),
        size: p.pool_size as usize,
        sat: SatLeg::of(cfg, None),
        opening: Opening::of(cfg),
        nodelay: cfg.splitter.nodelay,
        connect_timeout: Duration::from_millis(cfg.splitter.connect_timeout_ms),
    })
}

/// The hub's egress policy (docs/splitter.md, *Where the hub connects*).
pub(super) fn egress_policy(cfg: &GatewayConfig) -> EgressPolicy {
    EgressPolicy {
        allow: cfg.egress.allow.clone(),
        deny: cfg.egress.deny.clone(),
        sites: cfg
            .peer
            .terminals
            .iter()
            .flat_map(|t| t.prefixes.iter().map(|c| (t.name.to_string(), *c)))
            .collect(),
    }
}

/// The addresses the hub's peer listener binds: `peer.listen`, else the satellite interface's
/// (link-local IPv6 ones need a scope and are left out).
fn listen_addresses(cfg: &GatewayConfig) -> Vec<IpAddr> {
    if !cfg.peer.listen.is_empty() {
        return cfg.peer.listen.clone();
    }
    let sat = cfg.interfaces.satellite.to_string();
    let Ok(list) = interfaces::list(None) else {
        return Vec::new();
    };
    list.interfaces
        .iter()
        .filter(|i| i.name == sat)
        .flat_map(|i| i.addresses.iter())
        .filter_map(|a| a.split('/').next()?.parse::<IpAddr>().ok())
        .filter(|ip| !matches!(ip, IpAddr::V6(v6) if (v6.segments()[0] & 0xffc0) == 0xfe80))
        .collect()
}

/// The pools a terminal keeps: to its hub, and behind a hub cluster to each of the cluster's
/// gateways (the table names their peer listeners).
fn pool_configs(base: Option<PoolConfig>, cluster: Option<&ClusterTable>) -> Vec<PoolConfig> {
    let Some(base) = base else {
        return Vec::new();
    };
    let mut list = vec![base.clone()];
    for m in cluster.map_or(&[][..], |t| &t.members[..]) {
        if !list.iter().any(|c| c.hub == m.peer) {
            list.push(PoolConfig {
                hub: m.peer,
                ..base.clone()
            });
        }
    }
    list
}

/// The peer listener a hub's config asks for.
fn admission_config(cfg: &GatewayConfig, identity: &Identity) -> Option<AdmissionConfig> {
    let p = &cfg.peer;
    if !p.enabled || cfg.role != Role::Hub {
        return None;
    }
    Some(AdmissionConfig {
        listen: listen_addresses(cfg),
        port: p.port as u16,
        identity: identity.fingerprint.clone(),
        terminals: p
            .terminals
            .iter()
            .map(|t| TerminalEntry {
                name: t.name.to_string(),
                fingerprints: fingerprints(&t.fingerprints),
                prefixes: t.prefixes.clone(),
            })
            .collect(),
        egress: egress_policy(cfg),
        sat: SatLeg::of(cfg, None),
        opening: Opening::of(cfg),
        nodelay: cfg.splitter.nodelay,
    })
}

/// The hub's resolver, which the terminals' resolver flows reach: its own (unbound on
/// loopback) when it runs one, else the first upstream.
fn hub_resolver(cfg: &GatewayConfig) -> Option<SocketAddr> {
    if cfg.dns.enabled {
        return Some(SocketAddr::new(
            IpAddr::V4(std::net::Ipv4Addr::LOCALHOST),
            53,
        ));
    }
    let u = cfg.dns.upstreams().ok()?.into_iter().next()?;
    Some(SocketAddr::new(u.addr, u.port))
}

impl Worker {
    /// The identity the master named: loaded here (the key stays in this process), then the
    /// pool or listener take it for new connections.
    pub(super) fn set_identity(&mut self, path: &str, fingerprint: &str) {
        match Identity::load(std::path::Path::new(path)) {
            Ok(id) if id.fingerprint.as_str() == fingerprint => {
                self.identity = Some(Arc::new(id));
                if let Some(cfg) = self.cfg.clone() {
                    self.configure_peer(&cfg);
                }
            }
            // Replaced meanwhile: a newer message follows.
            Ok(_) => {}
            Err(e) => log::error(
                "cannot read the peer identity: the peer path is off",
                json!({"error": e}),
            ),
        }
    }

    /// Start, keep or replace the pool (terminal) or the peer listener (hub) for `cfg`. Open
    /// flows keep their connections; only new flows see the change, except the flows of a
    /// terminal the hub no longer serves.
    pub(super) fn configure_peer(&mut self, cfg: &GatewayConfig) {
        let Some(identity) = self.identity.clone() else {
            self.warm.clear();
            self.admission = None;
            return;
        };
        let want_pools = pool_configs(pool_config(cfg, &identity), self.cluster.as_deref());
        self.warm
            .configure(want_pools, &identity, &self.ep, Instant::now());
        self.configure_local_tunnels(cfg);
        let want_adm = admission_config(cfg, &identity);
        let mut revoked = Vec::new();
        if let (Some(a), Some(w)) = (self.admission.as_mut(), want_adm.as_ref()) {
            // Terminals, the egress policy and the identity change in place: the enrolled
            // terminals' idle connections stay.
            if a.same_listener(w) {
                match a.set_policy(w, &identity) {
                    Ok(r) => revoked = r.terminals,
                    Err(e) => log::error("peer policy failed", json!({"error": e.to_string()})),
                }
                a.retune(w.sat.clone(), w.opening, w.nodelay);
            }
        }
        if self.admission.as_ref().map(|a| a.config()) != want_adm.as_ref() {
            // Everything of the old listener goes: a revoked terminal's live flows too.
            if let Some(a) = &self.admission {
                revoked.extend(a.config().terminals.iter().map(|t| t.name.clone()));
                if let Some(w) = &want_adm {
                    revoked.retain(|n| !w.terminals.iter().any(|t| &t.name == n));
                }
            }
            self.admission = None; // unbinds before the new one binds the same port
            if let Some(c) = want_adm {
                let port = c.port;
                match Admission::new(c, &identity, &self.ep, TOKEN_PEER_BASE) {
                    Ok(a) => self.admission = Some(a),
                    Err(e) => log::error(
                        "peer listener failed: terminals' flows take the direct path",
                        json!({"port": port, "error": e.to_string()}),
                    ),
                }
            }
        }
        self.end_revoked(&revoked);
    }

    /// Hub: a revoked terminal's live flows end (both sides reset).
    fn end_revoked(&mut self, terminals: &[String]) {
        if terminals.is_empty() {
            return;
        }
        let ids: Vec<u64> = self
            .flows
            .values()
            .filter(|s| {
                s.opened_by
                    .as_ref()
                    .is_some_and(|(t, _)| terminals.contains(t))
            })
            .map(|s| s.id)
            .collect();
        for id in ids {
            self.finish(id, "revoked", Some(CLIENT), libc::EACCES);
        }
    }

    /// Terminal: a ready connection for the flow `client` -> `server`, if the peer path is on and
    /// has one. Behind a hub cluster only the gateway that receives the server's answers can
    /// carry it: with no ready connection to that one (or no gateway holding its bucket) the
    /// flow takes the direct path, which the routers send to the right gateway.
    pub(super) fn take_warm_for(
        &mut self,
        client: SocketAddr,
        server: SocketAddr,
    ) -> Option<(SocketAddr, Warm)> {
        if self.warm.is_empty() {
            return None;
        }
        let aim = match self.cluster.as_deref().map(|t| t.owner(client, server)) {
            None => Aim::Any,
            Some(Owner::Other { peer, .. }) => Aim::At(peer),
            Some(Owner::Me | Owner::Unknown) => return None,
        };
        self.warm.take_for_client(aim, &self.ep, Instant::now())
    }

    /// A new cluster table (or none): a terminal opens or closes pools for the gateways it
    /// names; a hub checks each peer flow's bucket against it.
    pub(super) fn set_cluster(&mut self, table: Option<Arc<ClusterTable>>) {
        self.cluster = table;
        if let Some(cfg) = self.cfg.clone() {
            self.configure_peer(&cfg);
        }
    }

    /// Terminal: put the flow on a warm connection: OPEN and the client's first bytes leave at
    /// once; the hub's STATUS comes back ahead of the server's bytes. Err(flow): the connection
    /// refused OPEN's very first byte, so nothing of this flow reached the hub and it may take
    /// the direct path.
    pub(super) fn start_peer_flow(
        &mut self,
        cfg: &GatewayConfig,
        flow: NewFlow,
        (hub, warm): (SocketAddr, Warm),
        open: &Open,
    ) -> Result<(), Box<NewFlow>> {
        let Some(pool) = self.warm.to_hub(hub) else {
            return Err(Box::new(flow));
        };
        let pooled_sat = pool.config().sat.clone();
        let hub_v6 = hub.is_ipv6();
        let Warm { fd, channel, .. } = warm;
        let peer_fd = fd.as_raw_fd();
        let mut tunnel = Tunnel::terminal(channel, &wire::open(open));
        if let Err(e) = tunnel.start(peer_fd) {
            let why = format!("a ready connection refused the flow's first byte: {e}");
            if let Some(p) = self.warm.to_hub(hub) {
                p.peer_lost(Instant::now(), &why);
            }
            self.deltas.peer_fallbacks += 1;
            return Err(Box::new(flow));
        }
        let sat_cc = self.tune_satellite_leg(peer_fd, &flow.sat, Some(&pooled_sat));
        // The peer connection is this flow's re-originated leg over the satellite: it carries
        // the marking too (the hub's connection to the server gets it from OPEN).
        if let Some(d) = flow.dscp {
            let _ = dscp::set(peer_fd, hub_v6, d);
        }
        let terr_cc = self.tune_terrestrial_leg(cfg, flow.client.as_raw_fd());
        let id = self.insert_session(flow, fd, false, false, [terr_cc, sat_cc], Path::Peer);
        if let Some(s) = self.flows.get_mut(&id) {
            s.tunnel = Some(Box::new(tunnel));
            s.peer_hub = Some(hub);
        }
        self.progress(id);
        Ok(())
    }

    /// An event on a pool connection (terminal) or the peer listener and its connections (hub).
    pub(super) fn on_peer_event(&mut self, token: u64, events: u32) {
        let now = Instant::now();
        if let Some(pool) = self.warm.owner_of(token) {
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

    /// Hub: a terminal's OPEN becomes a flow: a client's is re-originated to the server from the
    /// client's address exactly like an intercepted one; the resolver's goes to the hub's own.
    fn admit(&mut self, a: Admitted) {
        let Some(cfg) = self.cfg.clone() else {
            return;
        };
        let Admitted {
            fd,
            mut tunnel,
            open,
            from,
            terminal,
            fingerprint,
        } = a;
        let (client, server, mark, transparent) = match open {
            Open::Flow {
                client,
                server,
                dscp,
            } => (client, server, dscp, true),
            Open::Resolver => match hub_resolver(&cfg) {
                Some(r) => (from, r, None, false),
                None => {
                    tunnel.refuse(fd.as_raw_fd(), Status::Failed(libc::EHOSTUNREACH));
                    return;
                }
            },
            Open::Table => (from, TABLE_SERVICE, None, false),
        };
        // Behind a hub cluster the server's answers reach the gateway that holds the flow's
        // bucket: on any other one the connection could never complete. Refused before any
        // server is contacted, so the terminal's client sees a refused connection, not a hang.
        let foreign = transparent
            && self
                .cluster
                .as_deref()
                .is_some_and(|t| t.owner(client, server) != Owner::Me);
        if foreign {
            tunnel.refuse(fd.as_raw_fd(), Status::Refused(libc::EXDEV));
            if let Some(a) = self.admission.as_mut() {
                a.refused_flow(from, &terminal, "the flow's bucket is another gateway's");
            }
            return;
        }
        let class = transparent
            .then(|| self.classifier.classify(&cfg, &client, &server, mark))
            .flatten();
        let action = match class.map(|c| c.action) {
            Some(Action::Cache) if cfg.cache.enabled => Action::Cache,
            _ => Action::Accelerate,
        };
        let flow = NewFlow {
            client: fd,
            client_addr: client,
            server_addr: server,
            class: class.map(|c| c.name.to_string()),
            action,
            sat: SatLeg::of(&cfg, class),
            dscp: dscp::chosen(class.and_then(|c| c.set_dscp), mark),
        };
        let peer_fd = flow.client.as_raw_fd();
        // What the accepted connection has from its listener: congestion control and buffers.
        // Pacing is not a listener's to pass on: it is set here, as on a TPROXY-accepted leg.
        let inherited = SatLeg {
            pacing_bps: 0,
            ..SatLeg::of(&cfg, None)
        };
        let sat_cc = self.tune_satellite_leg(peer_fd, &flow.sat, Some(&inherited));
        let outbound = if transparent {
            self.connect_outbound(
                &cfg,
                (client, server),
                (&flow.sat, flow.dscp),
                peer_fd,
                true,
            )
        } else {
            self.connect_local(&cfg, server)
        };
        let (srv, connected, mut cc) = match outbound {
            Ok(x) => x,
            Err(e) => {
                self.deltas.failed_connect += 1;
                let errno = e.raw_os_error().unwrap_or(libc::EIO);
                tunnel.refuse(peer_fd, Status::Failed(errno));
                log::warn(
                    "peer flow: cannot open the server connection",
                    json!({"terminal": terminal, "client": client.to_string(),
                           "server": server.to_string(), "error": e.to_string()}),
                );
                return;
            }
        };
        cc[0] = sat_cc;
        if connected {
            tunnel.connected();
        }
        let id = self.insert_session(flow, srv, !connected, true, cc, Path::Peer);
        if let Some(s) = self.flows.get_mut(&id) {
            s.tunnel = Some(Box::new(tunnel));
            s.opened_by = Some((terminal, fingerprint.to_string()));
        }
        self.progress(id);
    }

    /// Hub: a plain connection from the hub's own address (the resolver's flows).
    fn connect_local(
        &mut self,
        cfg: &GatewayConfig,
        server: SocketAddr,
    ) -> std::io::Result<(OwnedFd, bool, [String; 2])> {
        let srv = sys::socket(server.is_ipv6())?;
        if cfg.splitter.nodelay {
            let _ = sys::set_nodelay(srv.as_raw_fd());
        }
        let terr_cc = self.tune_terrestrial_leg(cfg, srv.as_raw_fd());
        let connected = sys::connect(srv.as_raw_fd(), &server)?;
        Ok((srv, connected, [String::new(), terr_cc]))
    }

    /// Terminal: a flow whose peer connection failed before its end. The hub may have handed
    /// its bytes to the server already, so it is never replayed: the client gets a reset, as
    /// from any broken connection. The idle connections are suspect too when it happened
    /// before the hub's STATUS (the hub is likely gone).
    pub(super) fn peer_flow_failed(&mut self, id: u64, why: &str, before_status: bool) {
        self.deltas.peer_failed += 1;
        if before_status {
            let hub = self.flows.get(&id).and_then(|s| s.peer_hub);
            if let Some(p) = hub.and_then(|h| self.warm.to_hub(h)) {
                p.peer_lost(Instant::now(), why);
            }
        }
        let side = self.flows.get(&id).map_or(SERVER, |s| s.peer_side());
        let reason = if side == SERVER {
            "server_reset"
        } else {
            "client_reset"
        };
        self.finish(id, reason, Some(side), libc::ECONNRESET);
    }

    /// Once a second: expire and refill the pool, expire unidentified peer connections.
    pub(super) fn tick_peer(&mut self) {
        let now = Instant::now();
        self.warm.tick(&self.ep, now);
        if let Some(a) = self.admission.as_mut() {
            a.tick(now);
        }
    }

    pub(super) fn peer_report(&mut self) -> Option<PeerReport> {
        let identity = self.identity.as_ref().map(|i| i.fingerprint.to_string());
        if !self.warm.is_empty() {
            return Some(PeerReport {
                ready: self.warm.ready() as u64,
                full: self.warm.full() as u64,
                gateways: self.warm.iter().count() as u64,
                error: self.warm.last_error(),
                identity,
                ..Default::default()
            });
        }
        let a = self.admission.as_mut()?;
        let idle = a.idle_by_terminal();
        let mut live: HashMap<&str, u64> = HashMap::new();
        for s in self.flows.values() {
            if let Some((t, _)) = &s.opened_by {
                *live.entry(t.as_str()).or_default() += 1;
            }
        }
        let counters = std::mem::take(&mut a.counters);
        let terminals = a
            .config()
            .terminals
            .iter()
            .map(|t| {
                let c = counters.get(&t.name).cloned().unwrap_or_default();
                TerminalReport {
                    name: t.name.clone(),
                    idle_connections: idle.get(&t.name).copied().unwrap_or(0),
                    live_flows: live.get(t.name.as_str()).copied().unwrap_or(0),
                    refused_prefix: c.refused_prefix,
                    refused_other: c.refused_other,
                    last_seen: c.last_seen,
                }
            })
            .collect();
        Some(PeerReport {
            listening: true,
            terminals,
            refused_unknown: std::mem::take(&mut a.refused_unknown),
            identity,
            ..Default::default()
        })
    }
}
