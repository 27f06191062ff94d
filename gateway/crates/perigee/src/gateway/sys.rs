//! Thin, checked wrappers over the socket, splice and pipe syscalls the relay needs; those on a
//! `SocketAddr` live in perigee-netsys (shared with the load generator) and are re-exported here.
use std::io;
use std::mem::zeroed;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use perigee_netsys::cvt;
pub use perigee_netsys::{
    accept, bind, connect, local_addr, set_int, setsockopt, so_error, socket,
};

fn cvt_size(r: libc::ssize_t) -> io::Result<usize> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r as usize)
    }
}

pub fn set_transparent(fd: RawFd, v6: bool) -> io::Result<()> {
    if v6 {
        set_int(fd, libc::SOL_IPV6, libc::IPV6_TRANSPARENT, 1)
    } else {
        set_int(fd, libc::SOL_IP, libc::IP_TRANSPARENT, 1)
    }
}

/// linux/tcp.h: keep each SYN's network and TCP headers (Linux 4.2+).
pub const TCP_SAVE_SYN: libc::c_int = 27;

/// A TPROXY listener: IP_TRANSPARENT, SO_REUSEPORT (shared by all workers), non-blocking.
pub fn tproxy_listener(port: u16, v6: bool, bufs: Option<(u64, u64)>) -> io::Result<OwnedFd> {
    let s = socket(v6)?;
    let fd = s.as_raw_fd();
    set_int(fd, libc::SOL_SOCKET, libc::SO_REUSEADDR, 1)?;
    set_int(fd, libc::SOL_SOCKET, libc::SO_REUSEPORT, 1)?;
    set_transparent(fd, v6)?;
    if v6 {
        set_int(fd, libc::IPPROTO_IPV6, libc::IPV6_V6ONLY, 1)?;
    }
    if let Some((snd, rcv)) = bufs {
        set_bufs(fd, snd, rcv);
    }
    // Keep each SYN's headers: the client's DSCP is read from them after accept (dscp.rs).
    let _ = set_int(fd, libc::IPPROTO_TCP, TCP_SAVE_SYN, 1);
    let addr: SocketAddr = if v6 {
        (Ipv6Addr::UNSPECIFIED, port).into()
    } else {
        (Ipv4Addr::UNSPECIFIED, port).into()
    };
    bind(fd, &addr)?;
    perigee_netsys::listen(fd, 4096)?;
    Ok(s)
}

/// Is `ip` one of this namespace's own addresses? A plain (not transparent) socket can bind only
/// to those (unless net.ipv4.ip_nonlocal_bind is set, when this answers yes for any address).
pub fn is_local_address(ip: std::net::IpAddr) -> bool {
    socket(ip.is_ipv6())
        .and_then(|s| bind(s.as_raw_fd(), &SocketAddr::new(ip, 0)))
        .is_ok()
}

/// Best effort: 0 means "leave the kernel's autotuning alone".
pub fn set_bufs(fd: RawFd, snd: u64, rcv: u64) {
    let clamp = |v: u64| v.min(i32::MAX as u64) as libc::c_int;
    if snd > 0 {
        let _ = set_int(fd, libc::SOL_SOCKET, libc::SO_SNDBUFFORCE, clamp(snd))
            .or_else(|_| set_int(fd, libc::SOL_SOCKET, libc::SO_SNDBUF, clamp(snd)));
    }
    if rcv > 0 {
        let _ = set_int(fd, libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, clamp(rcv))
            .or_else(|_| set_int(fd, libc::SOL_SOCKET, libc::SO_RCVBUF, clamp(rcv)));
    }
}

/// TCP_NODELAY: a small segment leaves at once instead of waiting for the ACK of the previous
/// one (Nagle), which on a satellite leg is a whole round trip.
pub fn set_nodelay(fd: RawFd) -> io::Result<()> {
    set_int(fd, libc::IPPROTO_TCP, libc::TCP_NODELAY, 1)
}

/// Only tests read it back.
#[cfg(test)]
pub fn get_nodelay(fd: RawFd) -> bool {
    let mut buf = [0u8; 4];
    getsockopt_bytes(fd, libc::IPPROTO_TCP, libc::TCP_NODELAY, &mut buf)
        .is_some_and(|_| i32::from_ne_bytes(buf) != 0)
}

/// SO_MARK: the packets this socket sends from now on (retransmissions included) carry `mark`.
pub fn set_mark(fd: RawFd, mark: u32) -> io::Result<()> {
    setsockopt(fd, libc::SOL_SOCKET, libc::SO_MARK, &mark)
}

/// Only tests read it back.
#[cfg(test)]
pub fn get_mark(fd: RawFd) -> Option<u32> {
    let mut buf = [0u8; 4];
    getsockopt_bytes(fd, libc::SOL_SOCKET, libc::SO_MARK, &mut buf).map(|_| u32::from_ne_bytes(buf))
}

pub fn set_pacing(fd: RawFd, bps: u64) -> io::Result<()> {
    let bytes_per_s: u64 = bps / 8;
    setsockopt(fd, libc::SOL_SOCKET, libc::SO_MAX_PACING_RATE, &bytes_per_s)
}

pub fn set_cc(fd: RawFd, name: &str) -> io::Result<()> {
    // SAFETY: name bytes are valid for their length.
    cvt(unsafe {
        libc::setsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_CONGESTION,
            name.as_ptr() as *const libc::c_void,
            name.len() as libc::socklen_t,
        )
    })
    .map(|_| ())
}

/// Only tests read it back: the worker knows what it set (see `default_cc`).
#[cfg(test)]
pub fn get_cc(fd: RawFd) -> String {
    let mut buf = [0u8; 16];
    let Some(len) = getsockopt_bytes(fd, libc::IPPROTO_TCP, libc::TCP_CONGESTION, &mut buf) else {
        return String::new();
    };
    let n = buf[..len].iter().position(|b| *b == 0).unwrap_or(len);
    String::from_utf8_lossy(&buf[..n]).into_owned()
}

pub fn tcp_info_raw(fd: RawFd) -> Option<Vec<u8>> {
    let mut buf = vec![0u8; 256];
    let len = getsockopt_bytes(fd, libc::IPPROTO_TCP, libc::TCP_INFO, &mut buf)?;
    buf.truncate(len);
    Some(buf)
}

/// Segments sent and not yet acknowledged (tcp_info.tcpi_unacked).
pub fn tcp_unacked(fd: RawFd) -> Option<u32> {
    let raw = tcp_info_raw(fd)?;
    Some(u32::from_ne_bytes(raw.get(24..28)?.try_into().ok()?))
}

/// The smoothed RTT (tcp_info.tcpi_rtt, microseconds).
pub fn tcp_srtt_us(fd: RawFd) -> Option<u32> {
    let raw = tcp_info_raw(fd)?;
    Some(u32::from_ne_bytes(raw.get(68..72)?.try_into().ok()?))
}

/// TCP keepalive: probe after `idle_s` of silence, every `interval_s`, give up after `count`.
pub fn set_keepalive(fd: RawFd, idle_s: i32, interval_s: i32, count: i32) {
    let _ = set_int(fd, libc::SOL_SOCKET, libc::SO_KEEPALIVE, 1);
    let _ = set_int(fd, libc::IPPROTO_TCP, libc::TCP_KEEPIDLE, idle_s);
    let _ = set_int(fd, libc::IPPROTO_TCP, libc::TCP_KEEPINTVL, interval_s);
    let _ = set_int(fd, libc::IPPROTO_TCP, libc::TCP_KEEPCNT, count);
}

/// getsockopt(2) of a variable-length option into `buf`: how many bytes the kernel wrote.
pub fn getsockopt_bytes(
    fd: RawFd,
    level: libc::c_int,
    name: libc::c_int,
    buf: &mut [u8],
) -> Option<usize> {
    let mut len = buf.len() as libc::socklen_t;
    // SAFETY: buf/len are valid out-parameters.
    let r = unsafe {
        libc::getsockopt(
            fd,
            level,
            name,
            buf.as_mut_ptr() as *mut libc::c_void,
            &mut len,
        )
    };
    (r >= 0).then_some(len as usize)
}

/// Make the next close send a RST instead of a FIN.
pub fn set_linger0(fd: RawFd) {
    let l = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    let _ = setsockopt(fd, libc::SOL_SOCKET, libc::SO_LINGER, &l);
}

pub fn shutdown_wr(fd: RawFd) {
    // SAFETY: plain syscall.
    unsafe { libc::shutdown(fd, libc::SHUT_WR) };
}

/// A pipe used as the in-kernel buffer between two sockets for splice(2).
pub struct Pipe {
    pub r: OwnedFd,
    pub w: OwnedFd,
    pub cap: usize,
}

impl Pipe {
    pub fn new(want: usize) -> io::Result<Pipe> {
        let mut fds = [0 as libc::c_int; 2];
        // SAFETY: fds is a valid out array of two ints.
        cvt(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_NONBLOCK | libc::O_CLOEXEC) })?;
        // SAFETY: pipe2 returned two new descriptors we own.
        let (r, w) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        // SAFETY: fcntl on our own fd; failure leaves the size the pipe was created with.
        let mut cap =
            unsafe { libc::fcntl(w.as_raw_fd(), libc::F_SETPIPE_SZ, want as libc::c_int) };
        if cap <= 0 {
            // Refused (EPERM past fs.pipe-user-pages-soft for a user without CAP_SYS_ADMIN or
            // CAP_SYS_RESOURCE, where new pipes may even start at two pages): use what we got.
            // SAFETY: as above.
            cap = unsafe { libc::fcntl(w.as_raw_fd(), libc::F_GETPIPE_SZ) };
        }
        let cap = if cap > 0 { cap as usize } else { 4096 };
        Ok(Pipe { r, w, cap })
    }
}

pub fn splice(from: RawFd, to: RawFd, len: usize) -> io::Result<usize> {
    // SAFETY: plain syscall on descriptors we own; null offsets for pipes and sockets.
    cvt_size(unsafe {
        libc::splice(
            from,
            std::ptr::null_mut(),
            to,
            std::ptr::null_mut(),
            len,
            libc::SPLICE_F_MOVE | libc::SPLICE_F_NONBLOCK,
        )
    })
}

pub fn read(fd: RawFd, buf: &mut [u8]) -> io::Result<usize> {
    // SAFETY: buf is valid for writes of its length.
    cvt_size(unsafe { libc::read(fd, buf.as_mut_ptr() as *mut libc::c_void, buf.len()) })
}

pub fn recv_nowait(fd: RawFd, buf: &mut [u8]) -> io::Result<usize> {
    // SAFETY: buf is valid for writes of its length.
    cvt_size(unsafe {
        libc::recv(
            fd,
            buf.as_mut_ptr() as *mut libc::c_void,
            buf.len(),
            libc::MSG_DONTWAIT,
        )
    })
}

pub fn send(fd: RawFd, buf: &[u8]) -> io::Result<usize> {
    // SAFETY: buf is valid for reads of its length; MSG_NOSIGNAL avoids SIGPIPE.
    cvt_size(unsafe {
        libc::send(
            fd,
            buf.as_ptr() as *const libc::c_void,
            buf.len(),
            libc::MSG_NOSIGNAL,
        )
    })
}

/// The soft fd limit: what open(2) and accept(2) are refused beyond.
pub fn nofile() -> u64 {
    // SAFETY: rlimit is a plain struct filled by the kernel.
    let mut rl: libc::rlimit = unsafe { zeroed() };
    unsafe {
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut rl);
    }
    rl.rlim_cur
}

/// Raise the soft fd limit to the hard one (which some hosts cap as low as 20,000).
pub fn raise_nofile() -> u64 {
    // SAFETY: rlimit is a plain struct filled by the kernel.
    let mut rl: libc::rlimit = unsafe { zeroed() };
    unsafe {
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut rl);
        rl.rlim_cur = rl.rlim_max;
        libc::setrlimit(libc::RLIMIT_NOFILE, &rl);
    }
    rl.rlim_cur
}

pub fn available_cc() -> Vec<String> {
    std::fs::read_to_string("/proc/sys/net/ipv4/tcp_available_congestion_control")
        .map(|s| s.split_whitespace().map(String::from).collect())
        .unwrap_or_default()
}

/// The namespace's default congestion control (what a new socket starts with).
pub fn default_cc() -> String {
    std::fs::read_to_string("/proc/sys/net/ipv4/tcp_congestion_control")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

pub fn now_f64() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

/// How far the wall clock is from its next multiple of `period` (every process samples on the
/// same boundaries, so one reading of the counters a little after a boundary sees one round of
/// every sampler: docs/splitter.md, *Rates*).
pub fn until_next_boundary(period: std::time::Duration) -> std::time::Duration {
    let p = period.as_nanos().max(1);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    std::time::Duration::from_nanos((p - now % p) as u64)
}

#[cfg(test)]
mod boundary_tests {
    use super::until_next_boundary;
    use std::time::Duration;

    #[test]
    fn next_boundary_is_within_one_period() {
        let d = until_next_boundary(Duration::from_millis(500));
        assert!(d > Duration::ZERO && d <= Duration::from_millis(500));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nodelay_is_set() {
        let s = socket(false).unwrap();
        assert!(!get_nodelay(s.as_raw_fd()), "Nagle is the kernel's default");
        set_nodelay(s.as_raw_fd()).unwrap();
        assert!(get_nodelay(s.as_raw_fd()));
    }

    #[test]
    fn default_cc_is_what_new_sockets_get() {
        // The worker reports this name for legs it does not tune instead of asking each socket.
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (a, _) = l.accept().unwrap();
        let want = default_cc();
        assert!(!want.is_empty());
        assert_eq!(get_cc(c.as_raw_fd()), want);
        assert_eq!(get_cc(a.as_raw_fd()), want);
        let s = socket(false).unwrap();
        assert_eq!(get_cc(s.as_raw_fd()), want);
    }
}
