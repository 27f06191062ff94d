//! A worker process: owns its share of split flows. It listens on the TPROXY port (v4 and v6,
//! SO_REUSEPORT shared with the other workers), opens the spoofed outbound connection for each
//! accepted one, relays both directions in a level-triggered epoll loop, samples TCP_INFO and
//! reports to the master over its stdin/stdout socketpair (JSON lines). This module holds the
//! worker's state; its jobs are one module each: `event_loop` (epoll, accept, the tick, the
//! master's messages), `admit` (a new flow's destination, policy, DSCP, path and outbound
//! socket), `relay` (a flow's two legs until it closes, and its sampling) and `peer` (the peer
//! path's flows: a terminal's warm connections, a hub's peer listener).
mod admit;
mod event_loop;
mod local_tunnel;
mod peer;
mod relay;

use super::classify::Classifier;
use super::cluster::table::ClusterTable;
use super::config::GatewayConfig;
use super::epoll::Epoll;
use super::flow::Session;
use super::ipc::Usage;
use super::log;
use super::meter::{Crossed, LinkBytes};
use super::peer::admission::Admission;
use super::peer::identity::Identity;
use super::peer::pools::Pools;
use super::session::PipePool;
use super::sites::SiteMap;
use super::sys;
use super::telemetry::Flow;
use serde_json::json;
use std::collections::{HashMap, HashSet};
use std::io;
use std::os::fd::OwnedFd;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

const TOKEN_CONTROL: u64 = 0;
const TOKEN_LISTEN4: u64 = 1;
const TOKEN_LISTEN6: u64 = 2;
/// Terminal with the peer path on: the resolver's upstream (127.0.0.1:8853, DNS over TCP).
const TOKEN_RESOLVER: u64 = 3;
/// Terminal with the peer path on: the cluster table's long poll (127.0.0.1:8855).
const TOKEN_TABLE: u64 = 4;
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
    /// Split flows by their satellite leg's congestion control, and by why it runs it.
    by_cc: HashMap<String, Usage>,
    by_cc_reason: HashMap<&'static str, Usage>,
    link: LinkBytes,
    /// Flows started on the peer path, flows that took the direct path after all (their warm
    /// connection refused its first byte: provably nothing reached the hub), peer connections
    /// the hub refused, and peer flows reset because their connection to the hub failed.
    peer_flows: u64,
    peer_fallbacks: u64,
    peer_refused: u64,
    peer_failed: u64,
    /// Hub: direct splits the egress policy refused.
    egress_refused: u64,
}

impl Deltas {
    /// A new split flow, counted under its satellite leg's congestion control and reason.
    fn count_cc_flow(&mut self, s: &Session) {
        self.by_cc_usage(s).flows += 1;
        self.by_cc_reason
            .entry(s.sat_reason.as_str())
            .or_default()
            .flows += 1;
    }

    fn by_cc_usage(&mut self, s: &Session) -> &mut Usage {
        let cc = &s.cc[s.sat_side()];
        if !self.by_cc.contains_key(cc) {
            self.by_cc.insert(cc.clone(), Usage::default());
        }
        self.by_cc.get_mut(cc).expect("inserted above")
    }

    /// The relay's bytes not reported yet (on close; long flows also in the periodic sample).
    fn account_bytes(&mut self, s: &Session) {
        self.bytes_up += s.up.bytes - s.sampled_bytes.0.min(s.up.bytes);
        self.bytes_down += s.down.bytes - s.sampled_bytes.1.min(s.down.bytes);
    }

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
            segments: c.data_segs,
        };
        self.by_cc_usage(s).add(&usage);
        self.by_cc_reason
            .entry(s.sat_reason.as_str())
            .or_default()
            .add(&usage);
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
    warm: Pools,
    /// A hub cluster's bucket table (its controller pushes it through the master): at a hub,
    /// which flows are this gateway's; at a terminal, which gateway each flow must start on.
    cluster: Option<Arc<ClusterTable>>,
    /// Hub with the peer path on: the peer listener and its connections.
    admission: Option<Admission>,
    /// Hub: where the connections it opens for its terminals may go (with `cfg`).
    egress: super::egress::EgressPolicy,
    /// The identity this gateway presents on the peer path (the master names its file).
    identity: Option<Arc<Identity>>,
    /// Terminal with the peer path on: its loopback entries into the peer path (the resolver's
    /// upstream, the cluster table's long poll; `local_tunnel.rs`).
    local_tunnels: [Option<OwnedFd>; 2],
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
            warm: Pools::new(TOKEN_PEER_BASE),
            cluster: None,
            admission: None,
            egress: Default::default(),
            identity: None,
            local_tunnels: [None, None],
            closed: Vec::new(),
            deltas: Deltas::default(),
            ctl_in: Vec::new(),
            available_cc: sys::available_cc(),
            default_cc: sys::default_cc(),
            cc_warned: HashSet::new(),
            out: std::io::stdout(),
        })
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
