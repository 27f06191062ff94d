//! Thin, checked wrappers over the socket, splice and pipe syscalls the relay needs.
use std::io;
use std::mem::{size_of, zeroed};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

fn cvt(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

fn cvt_size(r: libc::ssize_t) -> io::Result<usize> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r as usize)
    }
}

pub fn to_sockaddr(a: &SocketAddr) -> (libc::sockaddr_storage, libc::socklen_t) {
    // SAFETY: sockaddr_storage is plain old data; zero is a valid bit pattern.
    let mut ss: libc::sockaddr_storage = unsafe { zeroed() };
    let len = match a {
        SocketAddr::V4(v4) => {
            let sin = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: v4.port().to_be(),
                sin_addr: libc::in_addr {
                    s_addr: u32::from_ne_bytes(v4.ip().octets()),
                },
                sin_zero: [0; 8],
            };
            // SAFETY: sockaddr_storage is larger than and aligned for sockaddr_in.
            unsafe { std::ptr::write(&mut ss as *mut _ as *mut libc::sockaddr_in, sin) };
            size_of::<libc::sockaddr_in>()
        }
        SocketAddr::V6(v6) => {
            let sin6 = libc::sockaddr_in6 {
                sin6_family: libc::AF_INET6 as libc::sa_family_t,
                sin6_port: v6.port().to_be(),
                sin6_flowinfo: v6.flowinfo(),
                sin6_addr: libc::in6_addr {
                    s6_addr: v6.ip().octets(),
                },
                sin6_scope_id: v6.scope_id(),
            };
            // SAFETY: as above, for sockaddr_in6.
            unsafe { std::ptr::write(&mut ss as *mut _ as *mut libc::sockaddr_in6, sin6) };
            size_of::<libc::sockaddr_in6>()
        }
    };
    (ss, len as libc::socklen_t)
}

pub fn from_sockaddr(ss: &libc::sockaddr_storage) -> Option<SocketAddr> {
    match ss.ss_family as libc::c_int {
        libc::AF_INET => {
            // SAFETY: family says this storage holds a sockaddr_in.
            let sin = unsafe { &*(ss as *const _ as *const libc::sockaddr_in) };
            let ip = Ipv4Addr::from(sin.sin_addr.s_addr.to_ne_bytes());
            Some(SocketAddr::V4(SocketAddrV4::new(
                ip,
                u16::from_be(sin.sin_port),
            )))
        }
        libc::AF_INET6 => {
            // SAFETY: family says this storage holds a sockaddr_in6.
            let sin6 = unsafe { &*(ss as *const _ as *const libc::sockaddr_in6) };
            let ip = Ipv6Addr::from(sin6.sin6_addr.s6_addr);
            // A v4-mapped peer on a v6 socket is reported as plain v4.
            if let Some(v4) = ip.to_ipv4_mapped() {
                return Some(SocketAddr::new(
                    IpAddr::V4(v4),
                    u16::from_be(sin6.sin6_port),
                ));
            }
            Some(SocketAddr::V6(SocketAddrV6::new(
                ip,
                u16::from_be(sin6.sin6_port),
                sin6.sin6_flowinfo,
                sin6.sin6_scope_id,
            )))
        }
        _ => None,
    }
}

pub fn setsockopt<T>(fd: RawFd, level: libc::c_int, name: libc::c_int, val: &T) -> io::Result<()> {
    // SAFETY: val points to a T of the given size for the duration of the call.
    cvt(unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            val as *const T as *const libc::c_void,
            size_of::<T>() as libc::socklen_t,
        )
    })
    .map(|_| ())
}

pub fn set_int(fd: RawFd, level: libc::c_int, name: libc::c_int, v: libc::c_int) -> io::Result<()> {
    setsockopt(fd, level, name, &v)
}

pub fn socket(v6: bool) -> io::Result<OwnedFd> {
    let fam = if v6 { libc::AF_INET6 } else { libc::AF_INET };
    // SAFETY: plain syscall; the fd is owned right away.
    let fd = cvt(unsafe {
        libc::socket(
            fam,
            libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            0,
        )
    })?;
    // SAFETY: fd is a fresh descriptor we own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

pub fn set_transparent(fd: RawFd, v6: bool) -> io::Result<()> {
    if v6 {
        set_int(fd, libc::SOL_IPV6, libc::IPV6_TRANSPARENT, 1)
    } else {
        set_int(fd, libc::SOL_IP, libc::IP_TRANSPARENT, 1)
    }
}

pub fn bind(fd: RawFd, a: &SocketAddr) -> io::Result<()> {
    let (ss, len) = to_sockaddr(a);
    // SAFETY: ss/len describe a valid sockaddr.
    cvt(unsafe { libc::bind(fd, &ss as *const _ as *const libc::sockaddr, len) }).map(|_| ())
}

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
    let addr: SocketAddr = if v6 {
        (Ipv6Addr::UNSPECIFIED, port).into()
    } else {
        (Ipv4Addr::UNSPECIFIED, port).into()
    };
    bind(fd, &addr)?;
    // SAFETY: plain syscall on our fd.
    cvt(unsafe { libc::listen(fd, 4096) })?;
    Ok(s)
}

pub fn accept(fd: RawFd) -> io::Result<(OwnedFd, SocketAddr)> {
    // SAFETY: storage is large enough for any address; accept4 fills at most len bytes.
    let mut ss: libc::sockaddr_storage = unsafe { zeroed() };
    let mut len = size_of::<libc::sockaddr_storage>() as libc::socklen_t;
    let c = cvt(unsafe {
        libc::accept4(
            fd,
            &mut ss as *mut _ as *mut libc::sockaddr,
            &mut len,
            libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
        )
    })?;
    // SAFETY: accept4 returned a new descriptor we own.
    let owned = unsafe { OwnedFd::from_raw_fd(c) };
    let peer = from_sockaddr(&ss).ok_or_else(|| io::Error::other("unknown address family"))?;
    Ok((owned, peer))
}

pub fn local_addr(fd: RawFd) -> io::Result<SocketAddr> {
    // SAFETY: as in accept.
    let mut ss: libc::sockaddr_storage = unsafe { zeroed() };
    let mut len = size_of::<libc::sockaddr_storage>() as libc::socklen_t;
    cvt(unsafe { libc::getsockname(fd, &mut ss as *mut _ as *mut libc::sockaddr, &mut len) })?;
    from_sockaddr(&ss).ok_or_else(|| io::Error::other("unknown address family"))
}

/// Start a non-blocking connect; Ok(true) when already connected.
pub fn connect(fd: RawFd, a: &SocketAddr) -> io::Result<bool> {
    let (ss, len) = to_sockaddr(a);
    // SAFETY: ss/len describe a valid sockaddr.
    match cvt(unsafe { libc::connect(fd, &ss as *const _ as *const libc::sockaddr, len) }) {
        Ok(_) => Ok(true),
        Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => Ok(false),
        Err(e) => Err(e),
    }
}

pub fn so_error(fd: RawFd) -> i32 {
    let mut v: libc::c_int = 0;
    let mut len = size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: v/len are valid out-parameters.
    let r = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_ERROR,
            &mut v as *mut _ as *mut libc::c_void,
            &mut len,
        )
    };
    if r < 0 {
        io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EIO)
    } else {
        v
    }
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
    let mut len = buf.len() as libc::socklen_t;
    // SAFETY: buf/len are valid out-parameters.
    let r = unsafe {
        libc::getsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_CONGESTION,
            buf.as_mut_ptr() as *mut libc::c_void,
            &mut len,
        )
    };
    if r < 0 {
        return String::new();
    }
    let n = buf[..len as usize]
        .iter()
        .position(|b| *b == 0)
        .unwrap_or(len as usize);
    String::from_utf8_lossy(&buf[..n]).into_owned()
}

pub fn tcp_info_raw(fd: RawFd) -> Option<Vec<u8>> {
    let mut buf = vec![0u8; 256];
    let mut len = buf.len() as libc::socklen_t;
    // SAFETY: buf/len are valid out-parameters.
    let r = unsafe {
        libc::getsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            buf.as_mut_ptr() as *mut libc::c_void,
            &mut len,
        )
    };
    if r < 0 {
        return None;
    }
    buf.truncate(len as usize);
    Some(buf)
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

/// Raise the soft fd limit to the hard one (the hard cap is 20,000 here).
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

#[cfg(test)]
mod tests {
    use super::*;

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
