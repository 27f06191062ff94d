//! Squid's connections as flows (docs/cache.md, *Live connections*). Squid owns the sockets of
//! intercepted port-80 connections, so the kernel's socket table is read instead: every half
//! second the sockets of Squid's processes (by inode) are listed with sock_diag, their TCP_INFO
//! read, and what crossed the satellite counted like a split flow's; the final counters of a
//! closing socket come from the kernel's destroy messages. A client connection (client ↔ Squid)
//! and the origin connection Squid opened for it (Squid ↔ origin, from the client's address)
//! are one flow with two legs; the access log's records are joined to it by the client's
//! address and port as each request ends.
use super::classify::Classifier;
use super::config::{Action, Cidr, GatewayConfig, Role};
use super::ipc::Usage;
use super::meter::{Crossed, LegMeter, LinkBytes};
use super::sites::SiteMap;
use super::sockdiag::{DestroyWatch, DiagInfo, DiagSocket, SockDiag, ACTIVE_STATES};
use super::telemetry::{
    parse_tcp_info, CacheRequests, Flow, FlowPath, FlowState, LegSide, Legs, Relay, SatelliteLeg,
    TcpInfo,
};
use perigee_squid::{AccessRecord, CacheOutcome};
use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// Ids of cache flows: above any split flow's ((generation × 64 + worker) << 32), below 2^53
/// so that JavaScript reads them exactly.
pub const ID_BASE: u64 = 0xf_ffff << 32;
/// How long a closed client connection waits for the access-log lines of its last requests, and
/// how long a destroyed socket never listed waits for a log line that says it was Squid's.
const LOG_GRACE: Duration = Duration::from_secs(2);
/// Destroyed sockets waiting for such a line, at most (the rest of the namespace's closing
/// sockets pass through here too: the splitter's).
const MAX_ORPHANS: usize = 50_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Side {
    /// client ↔ Squid: Squid's socket is the client's peer (its local address is the server's).
    Client,
    /// Squid ↔ origin, opened by Squid (from the client's address when it spoofs it).
    Origin,
}

struct Tracked {
    id: u64,
    sock: DiagSocket,
    side: Side,
    info: TcpInfo,
    meter: LegMeter,
    started_at: f64,
    class: String,
    site: String,
    /// The socket of the other side of the same flow (by cookie).
    pair: Option<u64>,
    cache: Option<CacheRequests>,
}

/// What one step adds to the gateway's totals.
#[derive(Debug, Default)]
pub struct Step {
    pub link: LinkBytes,
    pub cache: Usage,
    pub by_class: BTreeMap<String, Usage>,
    pub by_site: BTreeMap<String, Usage>,
    /// Bytes served from the cache, by the site of the client they went to.
    pub saved_by_site: BTreeMap<String, u64>,
    /// Flows whose client connection ended (after their log grace).
    pub closed: Vec<Flow>,
}

/// What the tracker needs of the config in force.
pub struct View<'a> {
    pub cfg: &'a GatewayConfig,
    pub sites: SiteMap,
    served: Vec<Cidr>,
    /// The config's classes, built once per view (a view lives one step).
    classifier: Classifier,
}

impl<'a> View<'a> {
    pub fn of(cfg: &'a GatewayConfig) -> View<'a> {
        View {
            cfg,
            sites: SiteMap::of(cfg),
            served: cfg.served(),
            classifier: Classifier::new(cfg),
        }
    }

    fn served(&self, ip: std::net::IpAddr) -> bool {
        self.served.iter().any(|c| c.contains(ip))
    }

    /// Squid's satellite-facing sockets: a terminal fetches from origins across the satellite;
    /// a hub serves clients across it.
    fn faces_satellite(&self, side: Side) -> bool {
        match self.cfg.role {
            Role::Terminal => side == Side::Origin,
            Role::Hub => side == Side::Client,
        }
    }

    /// The class Squid's connection came through: a `cache` class that matches it, else
    /// "default" (port 80 from the served subnets goes to Squid without one).
    fn class_of(&self, client: &SocketAddr, server: &SocketAddr) -> String {
        self.classifier
            .classify(self.cfg, client, server, None)
            .filter(|c| c.action == Action::Cache)
            .map_or_else(|| "default".to_string(), |c| c.name.to_string())
    }
}

#[derive(Default)]
pub struct CacheFlows {
    diag: Option<SockDiag>,
    watch: Option<DestroyWatch>,
    socks: HashMap<u64, Tracked>,
    pending: Vec<(Instant, Flow)>,
    /// Destroyed sockets shaped like Squid's that no listing saw (a connection shorter than the
    /// sampling period): Squid's when a log line names them (`adopt`).
    orphans: VecDeque<(Instant, DiagSocket, DiagInfo)>,
    /// Log lines of the last LOG_GRACE, for orphans that are destroyed after their line is read.
    recent: VecDeque<(Instant, AccessRecord)>,
    seq: u64,
    last_sample: Option<Instant>,
    /// Why the cache's connections cannot be read (None while they can).
    pub problem: Option<String>,
}

impl CacheFlows {
    /// One round: `squid_pgid` is the running Squid's process group (None: not running, every
    /// tracked connection ends), `records` the access-log lines since the last round.
    pub fn step(
        &mut self,
        view: &View,
        squid_pgid: Option<i32>,
        records: Vec<AccessRecord>,
    ) -> Step {
        let mut out = Step::default();
        let now = Instant::now();
        let dt = self
            .last_sample
            .map_or(0.0, |t| now.duration_since(t).as_secs_f64());
        self.last_sample = Some(now);
        if let Some(pgid) = squid_pgid {
            if let Err(e) = self.sample(view, pgid, dt, &mut out) {
                self.problem = Some(format!("cannot read the cache's connections: {e}"));
            } else {
                self.problem = None;
            }
        } else {
            // Stop paying for destroy messages while there is no Squid.
            self.watch = None;
            let gone: Vec<u64> = self.socks.keys().copied().collect();
            for c in gone {
                self.close(view, c, None, &mut out);
            }
        }
        self.join(view, records, &mut out);
        self.adopt(view, &mut out);
        let (ready, waiting): (Vec<_>, Vec<_>) = std::mem::take(&mut self.pending)
            .into_iter()
            .partition(|(at, _)| now.duration_since(*at) >= LOG_GRACE || squid_pgid.is_none());
        self.pending = waiting;
        out.closed.extend(ready.into_iter().map(|(_, f)| f));
        out
    }

    fn sample(&mut self, view: &View, pgid: i32, dt: f64, out: &mut Step) -> std::io::Result<()> {
        if self.diag.is_none() {
            self.diag = Some(SockDiag::open()?);
        }
        if self.watch.is_none() {
            // Without it the last half second of a closing connection is not counted.
            self.watch = DestroyWatch::open().ok();
        }
        // Final counters of what closed since the last round.
        let destroyed = self.watch.as_mut().map(|w| w.drain()).unwrap_or_default();
        let now = Instant::now();
        for (s, info) in destroyed {
            if self.socks.contains_key(&s.cookie) {
                self.close(view, s.cookie, info, out);
            } else if let Some(info) = info {
                let shaped = view.served(s.remote.ip()) || view.served(s.local.ip());
                if shaped && self.orphans.len() < MAX_ORPHANS {
                    self.orphans.push_back((now, s, info));
                }
            }
        }
        let inodes = socket_inodes_of_group(pgid);
        let mut diag = self.diag.take().expect("opened above");
        let result = self.read_table(view, &mut diag, &inodes, dt, out);
        self.diag = Some(diag);
        result
    }

    fn read_table(
        &mut self,
        view: &View,
        diag: &mut SockDiag,
        inodes: &HashSet<u32>,
        dt: f64,
        out: &mut Step,
    ) -> std::io::Result<()> {
        let listed: Vec<DiagSocket> = diag
            .list(ACTIVE_STATES)?
            .into_iter()
            .filter(|s| {
                inodes.contains(&s.inode)
                    && !s.local.ip().is_loopback()
                    && !s.remote.ip().is_loopback()
            })
            .collect();
        let present: HashSet<u64> = listed.iter().map(|s| s.cookie).collect();
        // Gone without a destroy message (none subscribed, or missed): nothing more to count.
        let vanished: Vec<u64> = self
            .socks
            .keys()
            .filter(|c| !present.contains(c))
            .copied()
            .collect();
        for c in vanished {
            self.close(view, c, None, out);
        }
        for s in &listed {
            if !self.socks.contains_key(&s.cookie) {
                self.track(view, s.clone(), out);
            }
        }
        let refs: Vec<&DiagSocket> = listed.iter().collect();
        let infos = diag.infos(&refs)?;
        for (cookie, info) in infos {
            self.update(view, cookie, &info, dt, out);
        }
        self.pair();
        Ok(())
    }

    fn track(&mut self, view: &View, sock: DiagSocket, out: &mut Step) {
        let side = if view.served(sock.remote.ip()) {
            Side::Client
        } else {
            Side::Origin
        };
        let (client, server) = match side {
            Side::Client => (sock.remote, sock.local),
            Side::Origin => (sock.local, sock.remote),
        };
        let class = view.class_of(&client, &server);
        let site = view.sites.site_of(client.ip()).to_string();
        self.seq += 1;
        if side == Side::Client {
            // Every intercepted client connection is a flow.
            let one = Usage {
                flows: 1,
                ..Usage::default()
            };
            out.cache.add(&one);
            out.by_class.entry(class.clone()).or_default().add(&one);
            out.by_site.entry(site.clone()).or_default().add(&one);
        }
        self.socks.insert(
            sock.cookie,
            Tracked {
                id: ID_BASE + self.seq,
                sock,
                side,
                info: TcpInfo::default(),
                meter: LegMeter::default(),
                started_at: super::sys::now_f64(),
                class,
                site,
                pair: None,
                cache: (side == Side::Client).then(CacheRequests::default),
            },
        );
    }

    /// A new TCP_INFO of a tracked socket: its rates, and what crossed if it faces the satellite.
    fn update(&mut self, view: &View, cookie: u64, info: &DiagInfo, dt: f64, out: &mut Step) {
        let Some(t) = self.socks.get_mut(&cookie) else {
            return;
        };
        t.info = parse_tcp_info(&info.tcp_info, &info.cc);
        let c = t.meter.sample(&mut t.info, t.sock.local.is_ipv6(), dt);
        account(view, t, &c, out);
    }

    /// A tracked socket closed: its last counters (from the destroy message) are counted and,
    /// for a client connection or an origin connection no client used, its flow is closed.
    fn close(&mut self, view: &View, cookie: u64, last: Option<DiagInfo>, out: &mut Step) {
        let Some(mut t) = self.socks.remove(&cookie) else {
            return;
        };
        if let Some(info) = last {
            let cc = t.info.cc.clone();
            t.info = parse_tcp_info(&info.tcp_info, &cc);
            let c = t.meter.sample(&mut t.info, t.sock.local.is_ipv6(), 0.0);
            account(view, &t, &c, out);
        }
        let other = t.pair.and_then(|p| self.socks.get_mut(&p));
        let other_info = other.as_ref().map(|o| o.info.clone());
        if let Some(o) = other {
            o.pair = None;
        }
        if t.side == Side::Origin && t.pair.is_some() {
            return; // its client connection's flow goes on (and shows this leg no more)
        }
        let ended = super::sys::now_f64();
        let flow = to_flow(view, &t, other_info.as_ref(), Some(ended));
        self.pending.push((Instant::now(), flow));
    }

    /// Client connections without an origin leg take the origin connection Squid opened from
    /// the client's address to the server the client asked for.
    fn pair(&mut self) {
        let clients: Vec<u64> = self
            .socks
            .values()
            .filter(|t| t.side == Side::Client && t.pair.is_none())
            .map(|t| t.sock.cookie)
            .collect();
        for c in clients {
            let (client_ip, server) = {
                let t = &self.socks[&c];
                (t.sock.remote.ip(), t.sock.local)
            };
            let origin = self
                .socks
                .values()
                .filter(|o| o.side == Side::Origin && o.pair.is_none())
                .filter(|o| o.sock.local.ip() == client_ip && o.sock.remote == server)
                .map(|o| o.sock.cookie)
                .min();
            if let Some(o) = origin {
                if let Some(t) = self.socks.get_mut(&o) {
                    t.pair = Some(c);
                }
                if let Some(t) = self.socks.get_mut(&c) {
                    t.pair = Some(o);
                }
            }
        }
    }

    /// Access-log records: the bytes a hit saved count for the client's site, and each record
    /// joins the flow of its client connection (live, or closed and waiting for it).
    fn join(&mut self, view: &View, records: Vec<AccessRecord>, out: &mut Step) {
        if records.is_empty() {
            return;
        }
        let by_client: HashMap<String, u64> = self
            .socks
            .values()
            .filter(|t| t.side == Side::Client)
            .map(|t| (t.sock.remote.to_string(), t.sock.cookie))
            .collect();
        let now = Instant::now();
        for r in records {
            self.recent.push_back((now, r.clone()));
            let client: Option<SocketAddr> = r.client.parse().ok();
            if r.outcome == CacheOutcome::Hit {
                let site = client.map_or(super::config::OTHER_SITE, |c| view.sites.site_of(c.ip()));
                *out.saved_by_site.entry(site.to_string()).or_default() += r.bytes;
            }
            let live = by_client
                .get(&r.client)
                .and_then(|c| self.socks.get_mut(c))
                .and_then(|t| t.cache.as_mut());
            let target = match live {
                Some(c) => Some(c),
                None => self
                    .pending
                    .iter_mut()
                    .rev()
                    .find(|(_, f)| f.client == r.client)
                    .and_then(|(_, f)| f.cache.as_mut()),
            };
            if let Some(c) = target {
                add_record(c, &r);
            }
        }
    }

    /// Destroyed sockets no listing saw that a log line names are Squid's: a client connection
    /// (its peer is the line's client) or an origin connection (from the line's client address
    /// to its server). Counted from their final TCP_INFO and closed at once; the others expire.
    fn adopt(&mut self, view: &View, out: &mut Step) {
        let now = Instant::now();
        while self
            .recent
            .front()
            .is_some_and(|(at, _)| now.duration_since(*at) > LOG_GRACE)
        {
            self.recent.pop_front();
        }
        if self.orphans.is_empty() || self.recent.is_empty() {
            self.orphans
                .retain(|(at, _, _)| now.duration_since(*at) <= LOG_GRACE);
            return;
        }
        let mut keep = VecDeque::new();
        for (at, sock, info) in std::mem::take(&mut self.orphans) {
            let records: Vec<AccessRecord> = self
                .recent
                .iter()
                .map(|(_, r)| r)
                .filter(|r| names_socket(r, &sock))
                .cloned()
                .collect();
            if records.is_empty() {
                if now.duration_since(at) <= LOG_GRACE {
                    keep.push_back((at, sock, info));
                }
                continue;
            }
            let cookie = sock.cookie;
            self.track(view, sock, out);
            if let Some(t) = self.socks.get_mut(&cookie) {
                if let Some(c) = t.cache.as_mut() {
                    for r in records
                        .iter()
                        .filter(|r| r.client == t.sock.remote.to_string())
                    {
                        add_record(c, r);
                    }
                }
            }
            self.close(view, cookie, Some(info), out);
        }
        self.orphans = keep;
    }

    /// The flows open now, in the control protocol's record.
    pub fn live(&self, view: &View) -> Vec<Flow> {
        let mut flows: Vec<Flow> = self
            .socks
            .values()
            .filter(|t| t.side == Side::Client || t.pair.is_none())
            .map(|t| {
                let other = t.pair.and_then(|p| self.socks.get(&p)).map(|o| &o.info);
                to_flow(view, t, other, None)
            })
            .collect();
        flows.sort_by_key(|f| f.id);
        flows
    }
}

/// Whether a log line was about this socket: Squid's side of the line's client connection, or
/// its connection from the line's client address to the line's server.
fn names_socket(r: &AccessRecord, sock: &DiagSocket) -> bool {
    let client: Option<SocketAddr> = r.client.parse().ok();
    if client == Some(sock.remote) {
        return true;
    }
    let server: Option<std::net::IpAddr> = r.server.as_deref().and_then(|a| a.parse().ok());
    client.map(|c| c.ip()) == Some(sock.local.ip()) && server == Some(sock.remote.ip())
}

fn add_record(c: &mut CacheRequests, r: &AccessRecord) {
    c.requests += 1;
    match r.outcome {
        CacheOutcome::Hit => {
            c.hits += 1;
            c.bytes_from_cache += r.bytes;
        }
        CacheOutcome::Miss => c.misses += 1,
        _ => {}
    }
    c.host = r.host.clone();
    c.result = r.result.clone();
    c.bytes_to_client += r.bytes;
    c.bytes_from_origin += r.upstream_bytes;
}

/// Counts what crossed a satellite-facing Squid socket: the link, and the cache's, the class's
/// and the site's share (toward the server = `up`).
fn account(view: &View, t: &Tracked, c: &Crossed, out: &mut Step) {
    if *c == Crossed::default() || !view.faces_satellite(t.side) {
        return;
    }
    out.link.add(c, view.cfg.role == Role::Hub);
    let (up, down) = match t.side {
        Side::Client => (c.rx_payload, c.tx_payload),
        Side::Origin => (c.tx_payload, c.rx_payload),
    };
    let u = Usage {
        bytes_up: up,
        bytes_down: down,
        flows: 0,
        retrans_segments: c.retrans_segs,
        segments: c.data_segs,
    };
    out.cache.add(&u);
    out.by_class.entry(t.class.clone()).or_default().add(&u);
    out.by_site.entry(t.site.clone()).or_default().add(&u);
}

/// A cache flow's record: `t` is its client connection (or an origin connection no client
/// uses), `other` the other leg's TCP_INFO when paired.
fn to_flow(view: &View, t: &Tracked, other: Option<&TcpInfo>, ended: Option<f64>) -> Flow {
    let (client, server, legs) = match t.side {
        Side::Client => (
            t.sock.remote,
            t.sock.local,
            Legs {
                client: t.info.clone(),
                server: other.cloned().unwrap_or_default(),
                satellite: LegSide::default(),
            },
        ),
        Side::Origin => (
            t.sock.local,
            t.sock.remote,
            Legs {
                client: TcpInfo::default(),
                server: t.info.clone(),
                satellite: LegSide::default(),
            },
        ),
    };
    let sat_is_client = view.cfg.role == Role::Hub;
    let sat = if sat_is_client {
        &legs.client
    } else {
        &legs.server
    };
    let sat_cc = sat.cc.clone();
    // Toward the server / toward the client, as for split flows.
    let (rate_up, rate_down) = if sat_is_client {
        (sat.rx_bps, sat.tx_bps)
    } else {
        (sat.tx_bps, sat.rx_bps)
    };
    // Bytes: what the client sent and got (client leg), or what went to and came from the
    // origin (an origin connection on its own).
    let (bytes_up, bytes_down) = match t.side {
        Side::Client => (t.info.bytes_received, t.info.bytes_acked),
        Side::Origin => (t.info.bytes_acked, t.info.bytes_received),
    };
    Flow {
        id: t.id,
        state: if ended.is_some() {
            FlowState::Closed
        } else {
            match t.info.state.as_str() {
                "established" => FlowState::Established,
                "syn_sent" | "syn_recv" => FlowState::Connecting,
                _ => FlowState::HalfClosed,
            }
        },
        class: t.class.clone(),
        action: Action::Cache,
        client: client.to_string(),
        server: server.to_string(),
        family: if client.is_ipv4() { 4 } else { 6 },
        started_at: t.started_at,
        ended_at: ended,
        end_reason: ended.map(|_| "closed".to_string()),
        bytes_up,
        bytes_down,
        rate_up_bps: rate_up,
        rate_down_bps: rate_down,
        legs: Legs {
            satellite: if sat_is_client {
                LegSide::Client
            } else {
                LegSide::Server
            },
            ..legs
        },
        path: FlowPath::Direct,
        relay: Relay::Squid,
        site: t.site.clone(),
        dscp: None,
        cache: t.cache.clone(),
        // Squid's socket takes the satellite route's congestion control: the config's default.
        satellite: Some(SatelliteLeg {
            cc: sat_cc,
            ..Default::default()
        }),
    }
}

/// Inodes of the sockets held by any process of a process group (Squid's master, its kids and
/// helpers), from /proc.
pub fn socket_inodes_of_group(pgid: i32) -> HashSet<u32> {
    let mut out = HashSet::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return out;
    };
    for e in dir.flatten() {
        let name = e.file_name();
        let Some(pid) = name.to_str().and_then(|n| n.parse::<i32>().ok()) else {
            continue;
        };
        if process_group(pid) != Some(pgid) {
            continue;
        }
        let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
            continue;
        };
        for fd in fds.flatten() {
            if let Ok(link) = std::fs::read_link(fd.path()) {
                let l = link.to_string_lossy();
                if let Some(n) = l.strip_prefix("socket:[").and_then(|r| r.strip_suffix(']')) {
                    if let Ok(i) = n.parse() {
                        out.insert(i);
                    }
                }
            }
        }
    }
    out
}

/// Field 5 of /proc/PID/stat (after the parenthesised command name, which may hold spaces).
fn process_group(pid: i32) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(2)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gateway::config::{example_json, from_value};

    fn record(client: &str, result: &str, bytes: u64, upstream: u64) -> AccessRecord {
        AccessRecord {
            ts: 1.0,
            duration_ms: 1,
            client: client.into(),
            method: "GET".into(),
            host: "198.51.100.10".into(),
            url: "http://198.51.100.10/x".into(),
            status: 200,
            result: result.into(),
            outcome: perigee_squid::access_log::classify(result),
            hierarchy: "-".into(),
            bytes,
            upstream_bytes: upstream,
            server: None,
        }
    }

    fn sock(cookie: u64, local: &str, remote: &str) -> DiagSocket {
        DiagSocket {
            inet6: false,
            state: 1,
            local: local.parse().unwrap(),
            remote: remote.parse().unwrap(),
            cookie,
            inode: 1,
        }
    }

    #[test]
    fn pairs_client_and_origin_and_joins_the_log() {
        let mut j = example_json();
        j["sites"] = serde_json::json!([{"name": "ship", "prefixes": ["192.0.2.0/24"]}]);
        let cfg = from_value(j).unwrap();
        let view = View::of(&cfg);
        let mut t = CacheFlows::default();
        let mut out = Step::default();
        // Squid's side of the client connection (local = the server the client asked for),
        // and its origin connection from the client's address.
        t.track(
            &view,
            sock(1, "198.51.100.10:80", "192.0.2.10:40000"),
            &mut out,
        );
        t.track(
            &view,
            sock(2, "192.0.2.10:51000", "198.51.100.10:80"),
            &mut out,
        );
        // An unrelated origin connection (another client) stays on its own.
        t.track(
            &view,
            sock(3, "192.0.2.11:52000", "198.51.100.10:80"),
            &mut out,
        );
        t.pair();
        assert_eq!((out.cache.flows, out.by_site["ship"].flows), (1, 1));
        let live = t.live(&view);
        assert_eq!(live.len(), 2);
        let f = live
            .iter()
            .find(|f| f.client == "192.0.2.10:40000")
            .unwrap();
        assert_eq!(
            (f.relay, f.action.as_str(), f.site.as_str()),
            (Relay::Squid, "cache", "ship")
        );
        assert_eq!(f.legs.satellite, LegSide::Server); // a terminal fetches across the satellite
        t.join(
            &view,
            vec![
                record("192.0.2.10:40000", "TCP_MISS", 1000, 900),
                record("192.0.2.10:40000", "TCP_MEM_HIT", 500, 0),
                record("192.0.2.99:1", "TCP_HIT", 70, 0),
            ],
            &mut out,
        );
        let c = t.socks[&1].cache.clone().unwrap();
        assert_eq!(
            (c.requests, c.hits, c.misses, c.bytes_from_origin),
            (2, 1, 1, 900)
        );
        assert_eq!(c.result, "TCP_MEM_HIT");
        assert_eq!(out.saved_by_site["ship"], 570);
        // The client connection closes: its flow waits for late log lines, then is closed.
        t.close(&view, 1, None, &mut out);
        assert!(t.socks[&2].pair.is_none());
        t.join(
            &view,
            vec![record("192.0.2.10:40000", "TCP_HIT", 10, 0)],
            &mut out,
        );
        assert_eq!(t.pending.len(), 1);
        assert_eq!(t.pending[0].1.cache.as_ref().unwrap().requests, 3);
        assert_eq!(t.pending[0].1.state, FlowState::Closed);
    }

    #[test]
    fn a_connection_no_listing_saw_is_adopted_by_its_log_line() {
        let cfg = from_value(example_json()).unwrap();
        let view = View::of(&cfg);
        let mut t = CacheFlows::default();
        let mut out = Step::default();
        let info = |acked: u64, received: u64| {
            let mut raw = vec![0u8; 232];
            raw[0] = 7;
            raw[120..128].copy_from_slice(&acked.to_ne_bytes());
            raw[128..136].copy_from_slice(&received.to_ne_bytes());
            DiagInfo {
                tcp_info: raw,
                cc: "cubic".into(),
            }
        };
        let now = Instant::now();
        // A short hit (client side), a short miss's origin connection, and a splitter socket.
        t.orphans.push_back((
            now,
            sock(7, "198.51.100.10:80", "192.0.2.10:40100"),
            info(5000, 100),
        ));
        t.orphans.push_back((
            now,
            sock(8, "192.0.2.10:51100", "198.51.100.10:80"),
            info(120, 9000),
        ));
        t.orphans.push_back((
            now,
            sock(9, "198.51.100.10:5001", "192.0.2.10:40200"),
            info(1, 1),
        ));
        let mut miss = record("192.0.2.10:40100", "TCP_MISS", 5000, 9000);
        miss.server = Some("198.51.100.10".into());
        t.join(&view, vec![miss], &mut out);
        t.adopt(&view, &mut out);
        assert_eq!(
            t.orphans.len(),
            1,
            "the splitter's socket waits, then expires"
        );
        assert_eq!(t.pending.len(), 2);
        let client = t
            .pending
            .iter()
            .find(|(_, f)| f.client == "192.0.2.10:40100")
            .unwrap();
        assert_eq!(client.1.cache.as_ref().unwrap().misses, 1);
        assert_eq!(client.1.bytes_down, 5000);
        // The origin connection crossed the satellite (a terminal): counted from its final info.
        assert_eq!(
            (out.link.return_payload, out.link.forward_payload),
            (120, 9000)
        );
        assert_eq!(out.cache.flows, 1);
        assert!(t.socks.is_empty());
    }

    #[test]
    fn only_satellite_facing_sockets_count_on_the_link() {
        let cfg = from_value(example_json()).unwrap(); // a terminal
        let view = View::of(&cfg);
        let mut t = CacheFlows::default();
        let mut out = Step::default();
        t.track(
            &view,
            sock(1, "198.51.100.10:80", "192.0.2.10:40000"),
            &mut out,
        );
        t.track(
            &view,
            sock(2, "192.0.2.10:51000", "198.51.100.10:80"),
            &mut out,
        );
        let c = Crossed {
            tx_payload: 100,
            rx_payload: 5000,
            tx_wire: 166,
            rx_wire: 5330,
            retrans_segs: 1,
            data_segs: 4,
        };
        account(&view, &t.socks[&1], &c, &mut out);
        assert_eq!(out.link, LinkBytes::default());
        account(&view, &t.socks[&2], &c, &mut out);
        assert_eq!((out.link.return_wire, out.link.forward_wire), (166, 5330));
        assert_eq!(
            (
                out.cache.bytes_up,
                out.cache.bytes_down,
                out.cache.retrans_segments
            ),
            (100, 5000, 1)
        );
    }

    #[test]
    fn process_group_of_this_process() {
        let me = std::process::id() as i32;
        // SAFETY: getpgrp has no preconditions.
        let pg = unsafe { libc::getpgrp() };
        assert_eq!(process_group(me), Some(pg));
        assert!(socket_inodes_of_group(-12345).is_empty());
    }
}
