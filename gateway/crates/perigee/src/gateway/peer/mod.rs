//! The peer path between a terminal and its hub (docs/splitter.md, *The peer path*): each
//! gateway's identity and the keys it pins, the TLS channel every byte between them crosses, the
//! frames inside it, the terminal's warm pool, the hub's admission, and one flow's relay.
pub mod admission;
pub mod channel;
pub mod identity;
mod pin;
#[cfg(feature = "peer-plaintext")]
pub mod plain;
pub mod pool;
pub mod pools;
pub mod tls;
pub mod tunnel;
pub mod wire;

/// What the peer path's tests over loopback share (here and in `pools.rs`).
#[cfg(test)]
pub(crate) mod testing {
    use crate::gateway::satleg::SatLeg;

    pub fn free_port() -> u16 {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    }

    /// A satellite leg that sets nothing but its congestion control.
    pub fn sat() -> SatLeg {
        SatLeg {
            cc: "reno".into(),
            sndbuf: 0,
            rcvbuf: 0,
            pacing_bps: 0,
        }
    }
}

/// The pool against the admission over loopback: the handshake, and what an unknown key, a
/// revocation or a rotation does to each side.
#[cfg(test)]
mod tests {
    use super::admission::{Admission, AdmissionConfig, Revoked, TerminalEntry};
    use super::identity::{Fingerprint, Identity};
    use super::pool::{Pool, PoolConfig};
    use super::testing::{free_port, sat};
    use super::tunnel::{Failure, Tunnel};
    use super::wire::{self, Open, Status};
    use crate::gateway::config::parse_cidr;
    use crate::gateway::egress::EgressPolicy;
    use crate::gateway::epoll::Epoll;
    use crate::gateway::render::DUP_MARK;
    use crate::gateway::satleg::{Opening, SatLeg};
    use crate::gateway::sys;
    use std::os::fd::AsRawFd;
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    const POOL_BASE: u64 = 1 << 40;
    const ADM_BASE: u64 = 1 << 50;
    const OPENING: Opening = Opening { initrwnd: 0 };

    fn site(name: &str, keys: &[&Identity]) -> TerminalEntry {
        TerminalEntry {
            name: name.into(),
            fingerprints: keys.iter().map(|k| k.fingerprint.clone()).collect(),
            prefixes: vec![parse_cidr("10.71.1.0/24").unwrap()],
        }
    }

    struct Lab {
        ep: Epoll,
        adm: Admission,
        pool: Pool,
        hub: Identity,
    }

    /// A hub that enrolls `enrolled` and a terminal presenting `terminal`, pinning `pins`.
    fn lab(
        enrolled: Vec<TerminalEntry>,
        terminal: Arc<Identity>,
        pins: Option<Vec<Fingerprint>>,
    ) -> Lab {
        let ep = Epoll::new().unwrap();
        let port = free_port();
        let hub = Identity::generate().unwrap();
        let adm = Admission::new(
            AdmissionConfig {
                listen: vec![[127, 0, 0, 1].into()],
                port,
                identity: hub.fingerprint.clone(),
                terminals: enrolled,
                egress: EgressPolicy::default(),
                sat: sat(),
                opening: OPENING,
                nodelay: true,
            },
            &hub,
            &ep,
            ADM_BASE,
        )
        .unwrap();
        let pool = Pool::new(
            PoolConfig {
                hub: ([127, 0, 0, 1], port).into(),
                hub_pins: pins.unwrap_or_else(|| vec![hub.fingerprint.clone()]),
                identity: terminal.fingerprint.clone(),
                size: 3,
                sat: sat(),
                opening: OPENING,
                nodelay: true,
                connect_timeout: Duration::from_secs(2),
            },
            terminal,
            POOL_BASE,
        )
        .unwrap();
        Lab { ep, adm, pool, hub }
    }

    /// A flow opened on a warm connection (`Lab::open_flow`).
    struct OpenedFlow {
        tun: Tunnel,
        fd: std::os::fd::OwnedFd,
        plain: std::os::unix::net::UnixStream,
        _app: std::os::unix::net::UnixStream,
        admitted: Vec<super::admission::Admitted>,
    }

    impl Lab {
        /// A flow from `client` to `server` on a warm connection, its OPEN sent; what the hub
        /// admitted within 500 ms.
        fn open_flow(&mut self, client: &str, server: &str) -> OpenedFlow {
            let warm = self.pool.take(&self.ep, Instant::now()).unwrap();
            let open = wire::open(&Open::Flow {
                client: client.parse().unwrap(),
                server: server.parse().unwrap(),
                dscp: None,
            });
            let mut tun = Tunnel::terminal(warm.channel, &open);
            let (_app, plain) = std::os::unix::net::UnixStream::pair().unwrap();
            plain.set_nonblocking(true).unwrap();
            tun.pump(plain.as_raw_fd(), warm.fd.as_raw_fd()).unwrap();
            let admitted = self.drive(Duration::from_millis(500), |_| false);
            OpenedFlow {
                tun,
                fd: warm.fd,
                plain,
                _app,
                admitted,
            }
        }

        /// Run the two sides' events until `done` or `limit`; flows the hub admits are returned.
        fn drive(
            &mut self,
            limit: Duration,
            done: impl Fn(&Pool) -> bool,
        ) -> Vec<super::admission::Admitted> {
            let mut evs = vec![libc::epoll_event { events: 0, u64: 0 }; 64];
            let mut admitted = Vec::new();
            self.pool.fill(&self.ep, Instant::now());
            let end = Instant::now() + limit;
            while Instant::now() < end && !done(&self.pool) {
                let n = self.ep.wait(&mut evs, 20);
                for ev in evs.iter().take(n).copied() {
                    let (token, events) = (ev.u64, ev.events);
                    if self.adm.owns(token) {
                        admitted.extend(self.adm.on_event(&self.ep, token, Instant::now()));
                    } else {
                        self.pool.on_event(&self.ep, token, events, Instant::now());
                    }
                }
            }
            admitted
        }
    }

    #[test]
    fn a_hub_worker_holds_two_fifths_of_its_descriptors_idle() {
        use super::admission::{max_idle, MAX_IDLE, MIN_IDLE};
        assert_eq!(max_idle(20_000), 8_000);
        // The packaged unit's LimitNOFILE: 1,000 packaged terminals (2 workers x pool_size 8 to
        // every gateway) are 16,000 at each gateway, under a third of what 2 workers hold.
        assert_eq!(max_idle(65_536), 26_214);
        assert!(1000 * 2 * 8 * 3 <= 2 * max_idle(65_536));
        assert_eq!(max_idle(1_048_576), MAX_IDLE);
        assert_eq!(max_idle(500), MIN_IDLE);
        assert_eq!(max_idle(4_096), 1_638);
        assert_eq!(max_idle(u64::MAX), MAX_IDLE);
    }

    #[test]
    fn an_enrolled_terminal_gets_ready_connections() {
        let t = Arc::new(Identity::generate().unwrap());
        let mut l = lab(vec![site("site-1", &[&t])], t, None);
        l.drive(Duration::from_secs(5), |p| p.ready() == 3);
        assert_eq!(l.pool.ready(), 3);
        assert_eq!((l.adm.refused, l.pool.last_error.as_deref()), (0, None));
        assert_eq!(l.adm.idle_by_terminal().get("site-1"), Some(&3));
        assert!(l.adm.counters["site-1"].last_seen.is_some());
        let warm = l
            .pool
            .take(&l.ep, Instant::now())
            .expect("a ready connection");
        assert!(!warm.channel.is_handshaking());
        assert_eq!(l.pool.ready(), 2, "taken; a replacement is on its way");
    }

    #[test]
    fn a_connection_is_marked_for_redundancy_once_it_carries_a_flow_on_both_sides() {
        let t = Arc::new(Identity::generate().unwrap());
        let mut l = lab(vec![site("site-1", &[&t])], t, None);
        l.drive(Duration::from_secs(5), |p| p.ready() == 3);
        let f = l.open_flow("10.71.1.10:40000", "192.0.2.10:80");
        assert_eq!(f.admitted.len(), 1, "the flow is admitted");
        // SO_MARK needs CAP_NET_ADMIN, which the gateway (and this suite, as root) has.
        assert_eq!(sys::get_mark(f.fd.as_raw_fd()), Some(DUP_MARK));
        assert_eq!(sys::get_mark(f.admitted[0].fd.as_raw_fd()), Some(DUP_MARK));
    }

    #[test]
    fn an_unknown_terminal_or_an_unpinned_hub_makes_none_and_backs_off() {
        // The hub does not know this terminal's key.
        let t = Arc::new(Identity::generate().unwrap());
        let other = Identity::generate().unwrap();
        let mut l = lab(vec![site("site-1", &[&other])], t.clone(), None);
        l.drive(Duration::from_secs(3), |p| p.last_error.is_some());
        assert_eq!(l.pool.ready(), 0);
        let why = l.pool.last_error.clone().unwrap_or_default();
        assert!(why.contains("identity"), "{why}");
        let refused = l.adm.refused_unknown;
        assert!(refused >= 1);
        // Backing off: no new attempt before its time.
        l.drive(Duration::from_millis(300), |_| false);
        assert_eq!(
            l.adm.refused_unknown, refused,
            "a retry came before the backoff"
        );

        // The terminal does not accept the hub's key.
        let mut l = lab(
            vec![site("site-1", &[&t])],
            t,
            Some(vec![other.fingerprint.clone()]),
        );
        l.drive(Duration::from_secs(3), |p| p.last_error.is_some());
        assert_eq!(l.pool.ready(), 0);
        let why = l.pool.last_error.clone().unwrap_or_default();
        assert!(why.contains("peer.hub_fingerprints"), "{why}");
    }

    #[test]
    fn a_flow_for_a_client_outside_the_terminals_prefixes_is_refused_and_counted() {
        let t = Arc::new(Identity::generate().unwrap());
        let mut l = lab(vec![site("site-1", &[&t])], t, None);
        l.drive(Duration::from_secs(5), |p| p.ready() == 3);
        let mut f = l.open_flow("10.72.1.10:40000", "10.71.3.10:80");
        assert!(f.admitted.is_empty(), "no flow for a foreign client");
        assert_eq!(l.adm.counters["site-1"].refused_prefix, 1);
        std::thread::sleep(Duration::from_millis(50));
        let end = Instant::now() + Duration::from_secs(2);
        let answer = loop {
            match f.tun.pump(f.plain.as_raw_fd(), f.fd.as_raw_fd()) {
                Err(f) => break f,
                Ok(_) if Instant::now() > end => panic!("no answer"),
                Ok(_) => std::thread::sleep(Duration::from_millis(10)),
            }
        };
        assert!(
            matches!(answer, Failure::Status(Status::Refused(e)) if e == libc::EACCES),
            "{answer:?}"
        );
    }

    #[test]
    fn revoking_closes_idle_connections_and_names_the_terminal_rotation_keeps_it() {
        let old = Arc::new(Identity::generate().unwrap());
        let new = Identity::generate().unwrap();
        let mut l = lab(vec![site("site-1", &[&old, &new])], old.clone(), None);
        l.drive(Duration::from_secs(5), |p| p.ready() == 3);
        // Rotation: the old key goes, the new one stays: its idle connections close, the
        // terminal is not revoked (its live flows stay).
        let mut cfg = l.adm.config().clone();
        cfg.terminals = vec![site("site-1", &[&new])];
        assert_eq!(l.adm.set_policy(&cfg, &l.hub).unwrap(), Revoked::default());
        assert_eq!(l.adm.idle_by_terminal().get("site-1"), None);
        // The terminal sees them closed.
        l.drive(Duration::from_millis(300), |p| p.ready() < 3);
        assert!(l.pool.ready() < 3);
        // Full revocation: the terminal is named.
        let mut cfg = l.adm.config().clone();
        cfg.terminals = vec![];
        assert_eq!(
            l.adm.set_policy(&cfg, &l.hub).unwrap(),
            Revoked {
                terminals: vec!["site-1".into()]
            }
        );
    }

    fn int_opt(fd: i32, level: i32, name: i32) -> i32 {
        let mut v: libc::c_int = 0;
        let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        // SAFETY: v and len are valid for getsockopt's int option.
        let r = unsafe {
            libc::getsockopt(
                fd,
                level,
                name,
                &mut v as *mut libc::c_int as *mut libc::c_void,
                &mut len,
            )
        };
        assert_eq!(r, 0);
        v
    }

    /// A config apply that retunes the satellite leg (the BoD tuning's buffers and pacing) keeps
    /// the warm connections on both sides and puts the new settings on them. Ones whose SYNs
    /// carried a smaller window scale than the new buffer needs stay in service, marked stale,
    /// and are replaced one at a time: the pool never empties, and at most one replacement
    /// handshake is on the way at once.
    #[test]
    fn retuning_the_satellite_leg_keeps_the_warm_connections() {
        let t = Arc::new(Identity::generate().unwrap());
        let mut l = lab(vec![site("site-1", &[&t])], t.clone(), None);
        let tuned = |buf: u64| SatLeg {
            cc: "reno".into(),
            sndbuf: buf,
            rcvbuf: buf,
            pacing_bps: 1_144_000,
        };
        l.drive(Duration::from_secs(5), |p| p.ready() == 3);
        assert_eq!(l.pool.ready(), 3);
        let mut cfg = l.pool.config().clone();
        cfg.sat = tuned(1 << 20);
        let mut adm_cfg = l.adm.config().clone();
        adm_cfg.sat = cfg.sat.clone();
        assert!(l.adm.same_listener(&adm_cfg), "the listener stays");
        l.adm.retune(adm_cfg.sat.clone(), OPENING, true);
        assert!(
            l.pool.retune(&cfg, &l.ep, Instant::now()),
            "autotuned SYNs: no fixed scale, but the connections stay"
        );
        assert_eq!((l.pool.ready(), l.pool.stale()), (3, 3));
        assert_eq!(l.pool.opening(), 1, "one replacement at a time");
        let end = Instant::now() + Duration::from_secs(10);
        while l.pool.stale() > 0 && Instant::now() < end {
            l.drive(Duration::from_millis(20), |_| false);
            assert!(l.pool.ready() >= 3, "the pool never empties");
            assert!(l.pool.opening() <= 1, "one replacement at a time");
        }
        assert_eq!((l.pool.ready(), l.pool.stale()), (3, 0), "all replaced");
        assert_eq!((l.adm.refused, l.pool.last_error.as_deref()), (0, None));

        let mut bod = l.pool.config().clone();
        bod.sat = tuned(1_109_680);
        adm_cfg.sat = bod.sat.clone();
        assert!(l.adm.same_listener(&adm_cfg));
        l.adm.retune(adm_cfg.sat.clone(), OPENING, true);
        assert!(l.pool.retune(&bod, &l.ep, Instant::now()));
        l.drive(Duration::from_millis(300), |_| false);
        assert_eq!(l.pool.ready(), 3, "the warm connections stay");
        assert_eq!((l.adm.refused, l.pool.last_error.as_deref()), (0, None));
        let warm = l
            .pool
            .take(&l.ep, Instant::now())
            .expect("a ready connection");
        // The kernel doubles SO_SNDBUF for its bookkeeping.
        let fd = warm.fd.as_raw_fd();
        assert_eq!(
            int_opt(fd, libc::SOL_SOCKET, libc::SO_SNDBUF),
            2 * 1_109_680
        );
        assert_eq!(int_opt(fd, libc::IPPROTO_TCP, libc::TCP_NODELAY), 1);

        // nodelay off reaches the kept connections too (Nagle back on).
        let mut nagle = l.pool.config().clone();
        nagle.nodelay = false;
        assert!(l.pool.retune(&nagle, &l.ep, Instant::now()));
        l.drive(Duration::from_secs(2), |p| p.ready() == 3);
        let warm = l
            .pool
            .take(&l.ep, Instant::now())
            .expect("a ready connection");
        assert_eq!(
            int_opt(warm.fd.as_raw_fd(), libc::IPPROTO_TCP, libc::TCP_NODELAY),
            0
        );

        // A route initrwnd now, where they opened with the whole receive space: still covered;
        // the reverse is not (their receive window opened small): they stay, marked stale.
        let mut tuned_rwnd = l.pool.config().clone();
        tuned_rwnd.opening.initrwnd = 384;
        adm_cfg.opening = tuned_rwnd.opening;
        assert!(l.adm.same_listener(&adm_cfg));
        assert!(l.pool.retune(&tuned_rwnd, &l.ep, Instant::now()));
        l.adm.retune(adm_cfg.sat.clone(), adm_cfg.opening, true);
        let mut wider = l.pool.config().clone();
        wider.opening.initrwnd = 0;
        adm_cfg.opening = wider.opening;
        assert!(l.adm.same_listener(&adm_cfg));
        assert_eq!(l.pool.stale(), 0);
        let before = (l.pool.ready(), l.pool.opening());
        assert!(l.pool.retune(&wider, &l.ep, Instant::now()));
        assert_eq!(l.pool.stale(), before.0 + before.1);
        assert_eq!(
            (l.pool.ready(), l.pool.opening()),
            (before.0, before.1 + 3),
            "a smaller opening window: all replaced at once, the stale ones served meanwhile"
        );
        l.drive(Duration::from_secs(5), |p| p.stale() == 0);
        assert_eq!((l.pool.ready(), l.pool.stale()), (3, 0));
        adm_cfg.opening = wider.opening;

        let mut bigger = l.pool.config().clone();
        bigger.sat = tuned(8 << 20);
        adm_cfg.sat = bigger.sat.clone();
        assert!(l.adm.same_listener(&adm_cfg));
        assert!(l.pool.retune(&bigger, &l.ep, Instant::now()));
        assert_eq!(
            (l.pool.stale(), l.pool.opening()),
            (3, 1),
            "a larger window scale: replaced in turn"
        );

        // Another hub: a new pool, and the old one refuses the retune unchanged.
        let mut elsewhere = l.pool.config().clone();
        elsewhere.hub = "127.0.0.1:9".parse().unwrap();
        assert!(!l.pool.retune(&elsewhere, &l.ep, Instant::now()));
        assert_eq!(
            l.pool.config().sat.rcvbuf,
            8 << 20,
            "a refused retune changes nothing"
        );
    }
}
