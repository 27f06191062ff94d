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

/// Ready connections of a pool of `size` that clients' flows leave to the gateway's own flows:
/// a burst of a page's connections taking every one made its name lookups (the resolver's
/// upstream connections, which come after) wait for a reset and unbound's retry, a round trip
/// more on the page's critical path. A quarter of the pool; none in a pool under 4.
pub fn own_reserve(size: usize) -> usize {
    size / 4
}

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
    /// Clients' flows that found no ready connection for them and went direct, since the
    /// last `take_pool_empty`.
    empty: u64,
}

impl Pools {
    pub fn new(token_base: u64) -> Pools {
        Pools {
            slots: Vec::new(),
            token_base,
            empty: 0,
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

    /// A ready connection for one of the gateway's own flows (the resolver's queries, the
    /// cluster table's poll) aimed as `aim`, with the pool's gateway. `Any` takes the pool with
    /// the most ready connections.
    pub fn take(&mut self, aim: Aim, ep: &Epoll, now: Instant) -> Option<(SocketAddr, Warm)> {
        let pool = self.pick(aim)?;
        let hub = pool.config().hub;
        pool.take(ep, now).map(|w| (hub, w))
    }

    /// The same for a client's flow, which leaves the reserve (`own_reserve`) to the gateway's
    /// own flows: None when only the reserve is ready (the flow goes direct). Those flows take
    /// any gateway's pool, so behind a cluster the reserve is kept across the pools: a burst aimed
    /// at one gateway may empty its pool while the others hold the reserve.
    pub fn take_for_client(
        &mut self,
        aim: Aim,
        ep: &Epoll,
        now: Instant,
    ) -> Option<(SocketAddr, Warm)> {
        let got = if self.ready() > own_reserve(self.full()) {
            self.take(aim, ep, now)
        } else {
            None
        };
        // A burst beyond the pool (or a hub out of reach): the operator's cue for peer.pool_size.
        self.empty += u64::from(got.is_none());
        got
    }

    /// Clients' flows that found the pools empty since the last call.
    pub fn take_pool_empty(&mut self) -> u64 {
        std::mem::take(&mut self.empty)
    }

    fn pick(&mut self, aim: Aim) -> Option<&mut Pool> {
        match aim {
            Aim::At(hub) => self.to_hub(hub),
            Aim::Any => self.iter_mut().max_by_key(|p| p.ready()),
        }
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
    /// How many are ready when every pool is full.
    pub fn full(&self) -> usize {
        self.iter().map(|p| p.config().size).sum()
    }

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

/// Two hub gateways on loopback, a terminal with a pool to each.
#[cfg(test)]
mod tests {
    use super::*;
    use crate::gateway::config::parse_cidr;
    use crate::gateway::egress::EgressPolicy;
    use crate::gateway::peer::admission::{Admission, AdmissionConfig, TerminalEntry};
    use crate::gateway::peer::testing::{free_port, sat};
    use crate::gateway::satleg::Opening;
    use std::time::Duration;

    // Below the gateways' tokens: an admission owns every token from its base up.
    const POOLS_BASE: u64 = 1 << 40;

    fn gateway(ep: &Epoll, terminal: &Identity, base: u64) -> (Admission, SocketAddr, Identity) {
        let port = free_port();
        let key = Identity::generate().unwrap();
        let adm = Admission::new(
            AdmissionConfig {
                listen: vec![[127, 0, 0, 1].into()],
                port,
                identity: key.fingerprint.clone(),
                terminals: vec![TerminalEntry {
                    name: "site-1".into(),
                    fingerprints: vec![terminal.fingerprint.clone()],
                    prefixes: vec![parse_cidr("10.71.1.0/24").unwrap()],
                }],
                egress: EgressPolicy::default(),
                sat: sat(),
                opening: Opening { initrwnd: 0 },
                nodelay: true,
            },
            &key,
            ep,
            base,
        )
        .unwrap();
        (adm, ([127, 0, 0, 1], port).into(), key)
    }

    fn config(hub: SocketAddr, pins: &[&Identity], terminal: &Identity, size: usize) -> PoolConfig {
        PoolConfig {
            hub,
            hub_pins: pins.iter().map(|k| k.fingerprint.clone()).collect(),
            identity: terminal.fingerprint.clone(),
            size,
            sat: sat(),
            opening: Opening { initrwnd: 0 },
            nodelay: true,
            connect_timeout: Duration::from_secs(2),
        }
    }

    fn drive(
        ep: &Epoll,
        gws: &mut [&mut Admission],
        pools: &mut Pools,
        done: impl Fn(&Pools) -> bool,
    ) {
        let mut evs = vec![libc::epoll_event { events: 0, u64: 0 }; 64];
        let end = Instant::now() + Duration::from_secs(5);
        while Instant::now() < end && !done(pools) {
            let n = ep.wait(&mut evs, 20);
            for ev in evs.iter().take(n).copied() {
                if let Some(a) = gws.iter_mut().find(|a| a.owns(ev.u64)) {
                    let _ = a.on_event(ep, ev.u64, Instant::now());
                } else if let Some(p) = pools.owner_of(ev.u64) {
                    p.on_event(ep, ev.u64, ev.events, Instant::now());
                }
            }
        }
    }

    /// Two gateways and a terminal's pools to them (`sizes`), filled.
    struct TwoGateways {
        a1: Admission,
        a2: Admission,
        hub1: SocketAddr,
        hub2: SocketAddr,
        want: Vec<PoolConfig>,
        pools: Pools,
    }

    fn two_gateways(ep: &Epoll, t: &Arc<Identity>, sizes: (usize, usize)) -> TwoGateways {
        let (mut a1, hub1, k1) = gateway(ep, t, 1 << 52);
        let (mut a2, hub2, k2) = gateway(ep, t, 1 << 50);
        let pins = [&k1, &k2];
        let want = vec![
            config(hub1, &pins, t, sizes.0),
            config(hub2, &pins, t, sizes.1),
        ];
        let mut pools = Pools::new(POOLS_BASE);
        pools.configure(want.clone(), t, ep, Instant::now());
        let full = sizes.0 + sizes.1;
        drive(ep, &mut [&mut a1, &mut a2], &mut pools, |p| {
            p.ready() == full
        });
        assert_eq!(pools.ready(), full);
        TwoGateways {
            a1,
            a2,
            hub1,
            hub2,
            want,
            pools,
        }
    }

    #[test]
    fn a_flow_takes_a_connection_to_its_own_gateway_and_each_gateway_has_its_own_pool() {
        let ep = Epoll::new().unwrap();
        let t = Arc::new(Identity::generate().unwrap());
        let TwoGateways {
            mut a1,
            mut a2,
            hub1,
            hub2,
            want,
            mut pools,
        } = two_gateways(&ep, &t, (2, 3));
        assert_eq!(a1.idle_by_terminal().get("site-1"), Some(&2));
        assert_eq!(a2.idle_by_terminal().get("site-1"), Some(&3));
        // Aimed: only that gateway's connections; Any: the pool with the most ready.
        let (hub, _) = pools.take(Aim::At(hub1), &ep, Instant::now()).unwrap();
        assert_eq!(hub, hub1);
        let (hub, _) = pools.take(Aim::Any, &ep, Instant::now()).unwrap();
        assert_eq!(hub, hub2);
        let unknown: SocketAddr = "127.0.0.1:9".parse().unwrap();
        assert!(pools.take(Aim::At(unknown), &ep, Instant::now()).is_none());
        // The same configs again keep every connection; dropping a gateway closes only its pool.
        drive(&ep, &mut [&mut a1, &mut a2], &mut pools, |p| p.ready() == 5);
        pools.configure(want.clone(), &t, &ep, Instant::now());
        assert_eq!(pools.ready(), 5);
        pools.configure(vec![want[0].clone()], &t, &ep, Instant::now());
        assert_eq!(pools.ready(), 2);
        assert!(pools.to_hub(hub2).is_none());
        // A pool that comes back gets tokens that no other pool claims.
        pools.configure(want, &t, &ep, Instant::now());
        drive(&ep, &mut [&mut a1, &mut a2], &mut pools, |p| p.ready() == 5);
        assert_eq!(pools.ready(), 5);
        for slot in 0..2 {
            let token = POOLS_BASE + slot * TOKEN_SPAN + 1;
            assert_eq!(
                pools.iter().filter(|p| p.owns(token)).count(),
                1,
                "slot {slot}"
            );
        }
    }

    #[test]
    fn clients_flows_leave_the_reserve_to_the_gateways_own_flows() {
        let ep = Epoll::new().unwrap();
        let t = Arc::new(Identity::generate().unwrap());
        let (mut a1, hub1, k1) = gateway(&ep, &t, 1 << 52);
        let mut pools = Pools::new(POOLS_BASE);
        pools.configure(vec![config(hub1, &[&k1], &t, 8)], &t, &ep, Instant::now());
        drive(&ep, &mut [&mut a1], &mut pools, |p| p.ready() == 8);
        assert_eq!(pools.ready(), 8);
        assert_eq!(own_reserve(8), 2);
        let mut clients = 0;
        while pools
            .take_for_client(Aim::Any, &ep, Instant::now())
            .is_some()
        {
            clients += 1;
        }
        assert_eq!(clients, 6, "clients take all but the reserve");
        assert_eq!(pools.ready(), 2);
        assert_eq!(
            pools.take_pool_empty(),
            1,
            "the client's flow that found none"
        );
        assert_eq!(pools.take_pool_empty(), 0);
        // The gateway's own flows take what is left.
        assert!(pools.take(Aim::At(hub1), &ep, Instant::now()).is_some());
        assert!(pools.take(Aim::Any, &ep, Instant::now()).is_some());
        assert!(pools.take(Aim::Any, &ep, Instant::now()).is_none());
        // A small pool keeps no reserve.
        assert_eq!((own_reserve(1), own_reserve(3), own_reserve(4)), (0, 0, 1));
    }

    #[test]
    fn behind_a_cluster_the_reserve_is_kept_across_the_pools() {
        let ep = Epoll::new().unwrap();
        let t = Arc::new(Identity::generate().unwrap());
        // The gateways stay up (bound) while the pools are taken from.
        let TwoGateways {
            a1: _a1,
            a2: _a2,
            hub1,
            hub2,
            mut pools,
            ..
        } = two_gateways(&ep, &t, (6, 6));
        assert_eq!((pools.full(), own_reserve(12)), (12, 3));
        // A burst aimed at one gateway empties its pool: the other holds the reserve.
        let now = Instant::now();
        let mut at_first = 0;
        while pools.take_for_client(Aim::At(hub1), &ep, now).is_some() {
            at_first += 1;
        }
        assert_eq!(at_first, 6);
        let mut at_second = 0;
        while pools.take_for_client(Aim::At(hub2), &ep, now).is_some() {
            at_second += 1;
        }
        assert_eq!(at_second, 3, "the last 3 stay for the gateway's own flows");
        assert!(pools.take(Aim::Any, &ep, now).is_some());
    }

    #[test]
    fn one_gateway_failing_leaves_the_others_connections_in_service() {
        let ep = Epoll::new().unwrap();
        let t = Arc::new(Identity::generate().unwrap());
        let TwoGateways {
            mut a1,
            a2,
            hub1,
            hub2,
            mut pools,
            ..
        } = two_gateways(&ep, &t, (2, 2));
        // The second gateway dies: its connections close; the first's stay ready.
        drop(a2);
        drive(&ep, &mut [&mut a1], &mut pools, |p| {
            p.iter()
                .find(|q| q.config().hub == hub2)
                .is_some_and(|q| q.ready() == 0)
        });
        assert_eq!(pools.to_hub(hub2).map(|p| p.ready()), Some(0));
        assert_eq!(pools.to_hub(hub1).map(|p| p.ready()), Some(2));
        assert!(pools
            .last_error()
            .is_some_and(|e| e.contains(&hub2.to_string())));
        assert!(pools.take(Aim::At(hub2), &ep, Instant::now()).is_none());
        assert!(pools.take(Aim::At(hub1), &ep, Instant::now()).is_some());
    }
}
