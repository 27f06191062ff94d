//! A terminal's loopback entries into the peer path: what the gateway itself sends to its hub
//! crosses inside the same authenticated TLS connections as the clients' flows. Each listener
//! is bound by every worker (SO_REUSEPORT) while the peer path is on at a terminal, and each
//! connection it accepts becomes one peer flow of its kind:
//! - 127.0.0.1:8853, the resolver's upstream (DNS over TCP, to the hub's resolver);
//! - 127.0.0.1:8855, behind a hub cluster (`peer.hub_cluster`), the cluster table's long poll
//!   (to the hub's table service, docs/cluster.md, *The peer path through the cluster*).
//!
//! With no ready connection a connection is reset: nothing of it ever crosses in clear.
use super::admit::NewFlow;
use super::peer::RESOLVER_TUNNEL;
use super::{Worker, TOKEN_RESOLVER, TOKEN_TABLE};
use crate::gateway::cluster_service::TABLE_TUNNEL;
use crate::gateway::config::{Action, GatewayConfig, Role};
use crate::gateway::log;
use crate::gateway::peer::pools::Aim;
use crate::gateway::peer::wire::Open;
use crate::gateway::satleg::SatLeg;
use crate::gateway::sys;
use serde_json::json;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, OwnedFd};
use std::time::Instant;

/// Which loopback entry: its address, its event token, the OPEN it becomes, and the port the
/// flow table shows at the hub's end.
#[derive(Clone, Copy)]
pub(super) enum LocalTunnel {
    Resolver,
    Table,
}

impl LocalTunnel {
    const ALL: [LocalTunnel; 2] = [LocalTunnel::Resolver, LocalTunnel::Table];

    fn addr(self) -> SocketAddr {
        match self {
            LocalTunnel::Resolver => RESOLVER_TUNNEL,
            LocalTunnel::Table => TABLE_TUNNEL,
        }
    }

    fn token(self) -> u64 {
        match self {
            LocalTunnel::Resolver => TOKEN_RESOLVER,
            LocalTunnel::Table => TOKEN_TABLE,
        }
    }

    fn open(self) -> Open {
        match self {
            LocalTunnel::Resolver => Open::Resolver,
            LocalTunnel::Table => Open::Table,
        }
    }

    fn hub_port(self) -> u16 {
        match self {
            LocalTunnel::Resolver => 53,
            LocalTunnel::Table => crate::gateway::cluster_service::TABLE_SERVICE.port(),
        }
    }

    fn slot(self) -> usize {
        self as usize
    }
}

fn bind(which: LocalTunnel, ep: &crate::gateway::epoll::Epoll) -> std::io::Result<OwnedFd> {
    let s = sys::socket(false)?;
    let fd = s.as_raw_fd();
    sys::set_int(fd, libc::SOL_SOCKET, libc::SO_REUSEADDR, 1)?;
    sys::set_int(fd, libc::SOL_SOCKET, libc::SO_REUSEPORT, 1)?;
    sys::bind(fd, &which.addr())?;
    perigee_netsys::listen(fd, 128)?;
    ep.watch(fd, which.token(), libc::EPOLLIN as u32)?;
    Ok(s)
}

impl Worker {
    /// Terminal with the peer path on: its loopback entries bound (the table's behind a hub
    /// cluster only); off otherwise.
    pub(super) fn configure_local_tunnels(&mut self, cfg: &GatewayConfig) {
        let terminal = cfg.role == Role::Terminal && cfg.peer.enabled;
        for which in LocalTunnel::ALL {
            let slot = which.slot();
            let want = terminal && (matches!(which, LocalTunnel::Resolver) || cfg.peer.hub_cluster);
            if !want {
                if let Some(l) = self.local_tunnels[slot].take() {
                    self.ep.forget(l.as_raw_fd());
                }
                continue;
            }
            if self.local_tunnels[slot].is_some() {
                continue;
            }
            match bind(which, &self.ep) {
                Ok(l) => self.local_tunnels[slot] = Some(l),
                Err(e) => log::error(
                    "peer path loopback listener failed: what the gateway sends through it fails",
                    json!({"listen": which.addr().to_string(), "error": e.to_string()}),
                ),
            }
        }
    }

    /// Terminal: each accepted connection becomes a peer flow of its kind on a ready connection
    /// to any hub gateway; with none ready it is reset.
    pub(super) fn accept_local(&mut self, which: LocalTunnel) {
        let Some(lfd) = self.local_tunnels[which.slot()]
            .as_ref()
            .map(|l| l.as_raw_fd())
        else {
            return;
        };
        let Some(cfg) = self.cfg.clone() else { return };
        for _ in 0..64 {
            let Ok((fd, from)) = sys::accept(lfd) else {
                return;
            };
            let Some(warm) = self.warm.take(Aim::Any, &self.ep, Instant::now()) else {
                sys::set_linger0(fd.as_raw_fd());
                continue;
            };
            let flow = NewFlow {
                client: fd,
                client_addr: from,
                // What the flow table shows: the service at the hub.
                server_addr: SocketAddr::new(warm.0.ip(), which.hub_port()),
                class: None,
                action: Action::Accelerate,
                sat: SatLeg::of(&cfg, None),
                dscp: None,
            };
            if let Err(flow) = self.start_peer_flow(&cfg, flow, warm, &which.open()) {
                sys::set_linger0(flow.client.as_raw_fd());
            }
        }
    }
}
