//! The peer path between a terminal and its hub (docs/splitter.md, *The peer path*): the wire
//! format, the terminal's warm pool and a flow's handover phase, the hub's admission.
pub mod admission;
pub mod frame;
pub mod handover;
pub mod pool;
pub mod wire;

/// The pool against the admission over loopback: the handshake, and what a wrong key or a
/// refused address does to each side.
#[cfg(test)]
mod tests {
    use super::admission::{Admission, AdmissionConfig};
    use super::pool::{Pool, PoolConfig};
    use crate::gateway::config::parse_cidr;
    use crate::gateway::epoll::Epoll;
    use crate::gateway::satleg::{Opening, SatLeg};
    use std::time::{Duration, Instant};

    const POOL_BASE: u64 = 1 << 40;
    const ADM_BASE: u64 = 1 << 50;
    const OPENING: Opening = Opening { initrwnd: 0 };

    fn free_port() -> u16 {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    }

    fn sat() -> SatLeg {
        SatLeg {
            cc: "reno".into(),
            sndbuf: 0,
            rcvbuf: 0,
            pacing_bps: 0,
        }
    }

    fn pair(hub_key: [u8; 32], pool_key: [u8; 32], allowed: &[&str]) -> (Epoll, Admission, Pool) {
        let ep = Epoll::new().unwrap();
        let port = free_port();
        let adm = Admission::new(
            AdmissionConfig {
                port,
                key: hub_key,
                allowed: allowed.iter().map(|c| parse_cidr(c).unwrap()).collect(),
                served: vec![parse_cidr("10.71.1.0/24").unwrap()],
                sat: sat(),
                opening: OPENING,
                nodelay: true,
            },
            &ep,
            ADM_BASE,
        )
        .unwrap();
        let pool = Pool::new(
            PoolConfig {
                hub: ([127, 0, 0, 1], port).into(),
                key: pool_key,
                size: 3,
                sat: sat(),
                opening: OPENING,
                nodelay: true,
                connect_timeout: Duration::from_secs(2),
            },
            POOL_BASE,
        );
        (ep, adm, pool)
    }

    /// Run the two sides' events until `done` or `limit`.
    fn drive(
        ep: &Epoll,
        adm: &mut Admission,
        pool: &mut Pool,
        limit: Duration,
        done: impl Fn(&Pool) -> bool,
    ) {
        let mut evs = vec![libc::epoll_event { events: 0, u64: 0 }; 64];
        pool.fill(ep, Instant::now());
        let end = Instant::now() + limit;
        while Instant::now() < end && !done(pool) {
            let n = ep.wait(&mut evs, 20);
            for ev in evs.iter().take(n).copied() {
                let (token, events) = (ev.u64, ev.events);
                if adm.owns(token) {
                    assert!(adm.on_event(ep, token, Instant::now()).is_none());
                } else {
                    pool.on_event(ep, token, events, Instant::now());
                }
            }
        }
    }

    #[test]
    fn the_same_key_makes_ready_connections() {
        let (ep, mut adm, mut pool) = pair([1; 32], [1; 32], &[]);
        drive(&ep, &mut adm, &mut pool, Duration::from_secs(5), |p| {
            p.ready() == 3
        });
        assert_eq!(pool.ready(), 3);
        assert_eq!((adm.refused, pool.last_error.as_deref()), (0, None));
        let warm = pool.take(&ep, Instant::now()).expect("a ready connection");
        assert_ne!(warm.nonce, [0; 32]);
        assert_eq!(pool.ready(), 2, "taken; a replacement is on its way");
    }

    #[test]
    fn a_wrong_key_or_a_refused_address_makes_none_and_backs_off() {
        for (hub_key, allowed) in [([2; 32], &[][..]), ([1; 32], &["10.0.0.0/8"][..])] {
            let (ep, mut adm, mut pool) = pair(hub_key, [1; 32], allowed);
            drive(&ep, &mut adm, &mut pool, Duration::from_secs(1), |p| {
                p.last_error.is_some()
            });
            assert_eq!(pool.ready(), 0);
            assert!(adm.refused >= 1);
            let why = pool.last_error.clone().unwrap_or_default();
            // A wrong key shows after our proof; a refused address already at the connect.
            let expect = if hub_key == [2; 32] {
                "wrong key"
            } else {
                "reset"
            };
            assert!(why.contains(expect), "{why}");
            // Backing off: no new attempt before its time.
            let attempts = adm.refused;
            drive(&ep, &mut adm, &mut pool, Duration::from_millis(300), |_| {
                false
            });
            assert_eq!(adm.refused, attempts, "a retry came before the backoff");
        }
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
    /// the warm connections on both sides and puts the new settings on them; one whose receive
    /// buffer needs a larger window scale than their SYNs carried does not.
    #[test]
    fn retuning_the_satellite_leg_keeps_the_warm_connections() {
        use std::os::fd::AsRawFd;
        let (ep, mut adm, mut pool) = pair([1; 32], [1; 32], &[]);
        let tuned = |buf: u64| crate::gateway::satleg::SatLeg {
            cc: "reno".into(),
            sndbuf: buf,
            rcvbuf: buf,
            pacing_bps: 1_144_000,
        };
        let mut cfg = pool.config().clone();
        cfg.sat = tuned(1 << 20);
        assert!(
            !pool.retune(&cfg, &ep, Instant::now()),
            "autotuned SYNs: no fixed scale to keep"
        );
        let mut pool = Pool::new(cfg, POOL_BASE);
        let mut adm_cfg = adm.config().clone();
        adm_cfg.sat = tuned(1 << 20);
        adm.retune(adm_cfg.sat.clone(), OPENING, true);
        drive(&ep, &mut adm, &mut pool, Duration::from_secs(5), |p| {
            p.ready() == 3
        });
        assert_eq!(pool.ready(), 3);

        let mut bod = pool.config().clone();
        bod.sat = tuned(1_109_680);
        adm_cfg.sat = bod.sat.clone();
        assert!(adm.same_listener(&adm_cfg));
        adm.retune(adm_cfg.sat.clone(), OPENING, true);
        assert!(pool.retune(&bod, &ep, Instant::now()));
        drive(&ep, &mut adm, &mut pool, Duration::from_millis(300), |_| {
            false
        });
        assert_eq!(pool.ready(), 3, "the warm connections stay");
        assert_eq!((adm.refused, pool.last_error.as_deref()), (0, None));
        let warm = pool.take(&ep, Instant::now()).expect("a ready connection");
        // The kernel doubles SO_SNDBUF for its bookkeeping.
        let fd = warm.fd.as_raw_fd();
        assert_eq!(
            int_opt(fd, libc::SOL_SOCKET, libc::SO_SNDBUF),
            2 * 1_109_680
        );
        assert_eq!(int_opt(fd, libc::IPPROTO_TCP, libc::TCP_NODELAY), 1);

        // nodelay off reaches the kept connections too (Nagle back on).
        let mut nagle = pool.config().clone();
        nagle.nodelay = false;
        assert!(pool.retune(&nagle, &ep, Instant::now()));
        drive(&ep, &mut adm, &mut pool, Duration::from_secs(2), |p| {
            p.ready() == 3
        });
        let warm = pool.take(&ep, Instant::now()).expect("a ready connection");
        assert_eq!(
            int_opt(warm.fd.as_raw_fd(), libc::IPPROTO_TCP, libc::TCP_NODELAY),
            0
        );

        // A route initrwnd now, where they opened with the whole receive space: still covered;
        // the reverse is not (their receive window opened small).
        let mut tuned_rwnd = pool.config().clone();
        tuned_rwnd.opening.initrwnd = 384;
        adm_cfg.opening = tuned_rwnd.opening;
        assert!(adm.same_listener(&adm_cfg));
        assert!(pool.retune(&tuned_rwnd, &ep, Instant::now()));
        adm.retune(adm_cfg.sat.clone(), adm_cfg.opening, true);
        let mut wider = pool.config().clone();
        wider.opening.initrwnd = 0;
        adm_cfg.opening = wider.opening;
        assert!(!adm.same_listener(&adm_cfg));
        assert!(!pool.retune(&wider, &ep, Instant::now()));
        adm_cfg.opening = tuned_rwnd.opening;

        let mut bigger = pool.config().clone();
        bigger.sat = tuned(8 << 20);
        adm_cfg.sat = bigger.sat.clone();
        assert!(!adm.same_listener(&adm_cfg));
        assert!(!pool.retune(&bigger, &ep, Instant::now()));
        assert_eq!(
            pool.config().sat.rcvbuf,
            1_109_680,
            "a refused retune changes nothing"
        );
    }
}
