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
    use crate::gateway::satleg::SatLeg;
    use std::time::{Duration, Instant};

    const POOL_BASE: u64 = 1 << 40;
    const ADM_BASE: u64 = 1 << 50;

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
}
