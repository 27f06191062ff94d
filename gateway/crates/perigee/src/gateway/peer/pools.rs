//! A terminal's warm pools: one to its hub, or, behind a hub cluster, one to each of the
//! cluster's gateways (docs/cluster.md, *The peer path through the cluster*). A flow must start
//! on a connection to the gateway that receives its server's answers, so the pools are kept
//! per gateway, each with its own backoff: one gateway failing leaves the others' connections
//! in service.
use super::identity::Identity;
use super::pool::{Pool, PoolConfig, Warm, TOKEN_SPAN};
use crate::gateway::epoll::Epoll;
use crate::gateway::log;
use serde_json::json;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

/// Which pool a flow must take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Aim {
    /// Any gateway will do (no cluster; the resolver's flows).
    Any,
    /// The gateway whose peer listener this is: no other one can carry the flow.
    At(SocketAddr),
}

/// The pools, each in a slot that fixes its event tokens for its life.
pub struct Pools {
    slots: Vec<Option<Pool>>,
    token_base: u64,
}

impl Pools {
    pub fn new(token_base: u64) -> Pools {
        Pools {
            slots: Vec::new(),
            token_base,
        }
    }

    pub fn iter(&self) -> impl Iterator<Item = &Pool> {
        self.slots.iter().flatten()
    }

    fn iter_mut(&mut self) -> impl Iterator<Item = &mut Pool> {
        self.slots.iter_mut().flatten()
    }

    pub fn is_empty(&self) -> bool {
        self.iter().next().is_none()
    }

    /// Keep, retune, open or close pools so that there is one per config in `want` (one per
    /// gateway). A pool whose gateway stays keeps its connections when only its socket
    /// settings change (`Pool::retune`); one whose gateway left closes with its connections.
    pub fn configure(
        &mut self,
        want: Vec<PoolConfig>,
        identity: &Arc<Identity>,
        ep: &Epoll,
        now: Instant,
    ) {
        for slot in self.slots.iter_mut() {
            let keep = slot.as_mut().is_some_and(|p| {
                want.iter()
                    .find(|w| w.hub == p.config().hub)
                    .is_some_and(|w| p.config() == w || p.retune(w, ep, now))
            });
            if !keep {
                *slot = None;
            }
        }
        for w in want {
            if self.iter().any(|p| p.config().hub == w.hub) {
                continue;
            }
            let free = match self.slots.iter().position(Option::is_none) {
                Some(i) => i,
                None => {
                    self.slots.push(None);
                    self.slots.len() - 1
                }
            };
            let base = self.token_base + free as u64 * TOKEN_SPAN;
            let hub = w.hub;
            match Pool::new(w, identity.clone(), base) {
                Ok(mut p) => {
                    p.fill(ep, now);
                    self.slots[free] = Some(p);
                }
                Err(e) => log::error(
                    "peer pool failed",
                    json!({"hub": hub.to_string(), "error": e}),
                ),
            }
        }
        while matches!(self.slots.last(), Some(None)) {
            self.slots.pop();
        }
    }

    pub fn clear(&mut self) {
        self.slots.clear();
    }

    /// The pool to this gateway's peer listener.
    pub fn to_hub(&mut self, hub: SocketAddr) -> Option<&mut Pool> {
        self.iter_mut().find(|p| p.config().hub == hub)
    }

    /// The pool an event token belongs to.
    pub fn owner_of(&mut self, token: u64) -> Option<&mut Pool> {
        self.iter_mut().find(|p| p.owns(token))
    }

    pub fn owns(&self, token: u64) -> bool {
        self.iter().any(|p| p.owns(token))
    }

    /// A ready connection for a flow aimed as `aim`, with the pool's gateway. `Any` takes the
    /// pool with the most ready connections.
    pub fn take(&mut self, aim: Aim, ep: &Epoll, now: Instant) -> Option<(SocketAddr, Warm)> {
        let pool = match aim {
            Aim::At(hub) => self.to_hub(hub)?,
            Aim::Any => self.iter_mut().max_by_key(|p| p.ready())?,
        };
        let hub = pool.config().hub;
        pool.take(ep, now).map(|w| (hub, w))
    }

    pub fn tick(&mut self, ep: &Epoll, now: Instant) {
        for p in self.iter_mut() {
            p.tick(ep, now);
        }
    }

    pub fn ready(&self) -> usize {
        self.iter().map(Pool::ready).sum()
    }

    /// The first pool's last error (a gateway that cannot be reached), if any; behind a
    /// cluster it names the gateway.
    pub fn last_error(&self) -> Option<String> {
        let several = self.iter().nth(1).is_some();
        self.iter().find_map(|p| {
            let e = p.last_error.as_ref()?;
            Some(match several {
                true => format!("{}: {e}", p.config().hub),
                false => e.clone(),
            })
        })
    }

    pub fn take_cc_fallback(&mut self) -> u64 {
        self.iter_mut()
            .map(|p| std::mem::take(&mut p.cc_fallback))
            .sum()
    }
}
