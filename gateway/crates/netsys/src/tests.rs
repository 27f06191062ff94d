use super::*;
use std::os::fd::AsRawFd;

fn round_trip(a: SocketAddr) -> (SocketAddr, libc::socklen_t, libc::c_int) {
    let (ss, len) = to_sockaddr(&a);
    let back = from_sockaddr(&ss).expect("known family");
    (back, len, ss.ss_family as libc::c_int)
}

#[test]
fn v4_round_trips_in_network_byte_order() {
    let a: SocketAddr = "192.0.2.7:8080".parse().unwrap();
    let (back, len, family) = round_trip(a);
    assert_eq!(back, a);
    assert_eq!(family, libc::AF_INET);
    assert_eq!(len as usize, size_of::<libc::sockaddr_in>());

    let (ss, _) = to_sockaddr(&a);
    // SAFETY: family checked above; the storage holds a sockaddr_in.
    let sin = unsafe { &*(&ss as *const _ as *const libc::sockaddr_in) };
    assert_eq!(sin.sin_port.to_ne_bytes(), 8080u16.to_be_bytes());
    assert_eq!(sin.sin_addr.s_addr.to_ne_bytes(), [192, 0, 2, 7]);
}

#[test]
fn v6_round_trips_with_flowinfo_and_scope() {
    let a = SocketAddr::V6(SocketAddrV6::new(
        "2001:db8::1".parse().unwrap(),
        443,
        0x12345,
        3,
    ));
    let (back, len, family) = round_trip(a);
    assert_eq!(back, a);
    assert_eq!(family, libc::AF_INET6);
    assert_eq!(len as usize, size_of::<libc::sockaddr_in6>());
}

#[test]
fn v4_mapped_v6_comes_back_as_v4() {
    let mapped: SocketAddr = "[::ffff:198.51.100.9]:53".parse().unwrap();
    let (back, _, _) = round_trip(mapped);
    assert_eq!(back, "198.51.100.9:53".parse::<SocketAddr>().unwrap());
}

#[test]
fn unknown_family_is_none() {
    // SAFETY: zero is a valid sockaddr_storage (AF_UNSPEC).
    let mut ss: libc::sockaddr_storage = unsafe { zeroed() };
    assert_eq!(from_sockaddr(&ss), None);
    ss.ss_family = libc::AF_UNIX as libc::sa_family_t;
    assert_eq!(from_sockaddr(&ss), None);
}

/// Wait until fd has one of events (at most 5 s).
fn ready(fd: RawFd, events: libc::c_short) -> bool {
    let mut p = libc::pollfd {
        fd,
        events,
        revents: 0,
    };
    // SAFETY: p is one valid pollfd.
    unsafe { libc::poll(&mut p, 1, 5000) == 1 }
}

/// bind, listen, connect and accept through the conversion, on the given loopback.
fn connect_over(lo: &str) {
    let lo: SocketAddr = lo.parse().unwrap();
    let l = socket(lo.is_ipv6()).unwrap();
    set_int(l.as_raw_fd(), libc::SOL_SOCKET, libc::SO_REUSEADDR, 1).unwrap();
    bind(l.as_raw_fd(), &lo).unwrap();
    listen(l.as_raw_fd(), 8).unwrap();
    let bound = local_addr(l.as_raw_fd()).unwrap();
    assert_eq!(bound.ip(), lo.ip());
    assert_ne!(bound.port(), 0);

    let c = socket(lo.is_ipv6()).unwrap();
    connect(c.as_raw_fd(), &bound).unwrap();
    assert!(ready(l.as_raw_fd(), libc::POLLIN));
    let (s, peer) = accept(l.as_raw_fd()).unwrap();
    assert_eq!(peer, local_addr(c.as_raw_fd()).unwrap());
    assert_eq!(local_addr(s.as_raw_fd()).unwrap(), bound);
}

#[test]
fn loopback_v4_connection_reports_both_ends() {
    connect_over("127.0.0.1:0");
}

#[test]
fn loopback_v6_connection_reports_both_ends() {
    connect_over("[::1]:0");
}

#[test]
fn connect_to_a_port_nobody_listens_on_is_refused() {
    // Bound but not listening (held so no one else takes the port): the kernel answers RST.
    let held = socket(false).unwrap();
    bind(held.as_raw_fd(), &"127.0.0.1:0".parse().unwrap()).unwrap();
    let closed = local_addr(held.as_raw_fd()).unwrap();
    let c = socket(false).unwrap();
    let errno = match connect(c.as_raw_fd(), &closed) {
        Err(e) => e.raw_os_error().unwrap(),
        Ok(true) => panic!("connected to {closed} where nothing listens"),
        Ok(false) => {
            assert!(ready(c.as_raw_fd(), libc::POLLOUT));
            so_error(c.as_raw_fd())
        }
    };
    assert_eq!(errno, libc::ECONNREFUSED);
}

#[test]
fn setsockopt_sets_what_getsockopt_reads() {
    let s = socket(false).unwrap();
    set_int(s.as_raw_fd(), libc::IPPROTO_TCP, libc::TCP_NODELAY, 1).unwrap();
    let mut v: libc::c_int = 0;
    let mut len = size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: v/len are valid out-parameters.
    let r = unsafe {
        libc::getsockopt(
            s.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_NODELAY,
            &mut v as *mut _ as *mut libc::c_void,
            &mut len,
        )
    };
    assert_eq!(r, 0);
    assert_ne!(v, 0);
    assert_eq!(
        set_int(-1, libc::SOL_SOCKET, libc::SO_REUSEADDR, 1)
            .unwrap_err()
            .raw_os_error(),
        Some(libc::EBADF)
    );
}
