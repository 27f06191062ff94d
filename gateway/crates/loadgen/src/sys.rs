//! The few raw socket and epoll calls the load generator needs (non-blocking IPv4/IPv6 TCP).
use std::io;
use std::mem::{size_of, zeroed};
use std::net::SocketAddr;
use std::os::fd::RawFd;

fn cvt(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

pub fn errno() -> i32 {
    io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO)
}

/// A short stable name for an errno, used as the error-kind key in the JSON result.
pub fn errno_name(e: i32) -> String {
    let name = match e {
        libc::ECONNREFUSED => "ECONNREFUSED",
        libc::ECONNRESET => "ECONNRESET",
        libc::ECONNABORTED => "ECONNABORTED",
        libc::ETIMEDOUT => "ETIMEDOUT",
        libc::EADDRNOTAVAIL => "EADDRNOTAVAIL",
        libc::EADDRINUSE => "EADDRINUSE",
        libc::EHOSTUNREACH => "EHOSTUNREACH",
        libc::ENETUNREACH => "ENETUNREACH",
        libc::EPIPE => "EPIPE",
        libc::EMFILE => "EMFILE",
        libc::ENFILE => "ENFILE",
        libc::ENOBUFS => "ENOBUFS",
        _ => return format!("errno_{e}"),
    };
    name.to_string()
}

fn sockaddr(a: &SocketAddr) -> (libc::sockaddr_storage, libc::socklen_t) {
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
                sin6_flowinfo: 0,
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

pub fn socket(v6: bool) -> io::Result<RawFd> {
    let fam = if v6 { libc::AF_INET6 } else { libc::AF_INET };
    // SAFETY: plain syscall.
    cvt(unsafe {
        libc::socket(
            fam,
            libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            0,
        )
    })
}

pub fn close(fd: RawFd) {
    // SAFETY: the caller owns fd and forgets it afterwards.
    unsafe { libc::close(fd) };
}

/// Start a non-blocking connect: Ok(()) when connected or in progress.
pub fn connect(fd: RawFd, a: &SocketAddr) -> Result<(), i32> {
    let (ss, len) = sockaddr(a);
    // SAFETY: ss/len describe a valid sockaddr.
    let r = unsafe { libc::connect(fd, &ss as *const _ as *const libc::sockaddr, len) };
    if r == 0 {
        return Ok(());
    }
    match errno() {
        libc::EINPROGRESS => Ok(()),
        e => Err(e),
    }
}

pub fn set_int(fd: RawFd, level: libc::c_int, name: libc::c_int, v: libc::c_int) -> io::Result<()> {
    // SAFETY: v lives for the call and has the size we pass.
    cvt(unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            &v as *const libc::c_int as *const libc::c_void,
            size_of::<libc::c_int>() as libc::socklen_t,
        )
    })
    .map(|_| ())
}

/// A non-blocking SO_REUSEPORT listener (one per echo thread, the kernel spreads connections).
pub fn listener(a: &SocketAddr, backlog: i32) -> io::Result<RawFd> {
    let fd = socket(a.is_ipv6())?;
    let setup = || -> io::Result<()> {
        set_int(fd, libc::SOL_SOCKET, libc::SO_REUSEADDR, 1)?;
        set_int(fd, libc::SOL_SOCKET, libc::SO_REUSEPORT, 1)?;
        let (ss, len) = sockaddr(a);
        // SAFETY: ss/len describe a valid sockaddr.
        cvt(unsafe { libc::bind(fd, &ss as *const _ as *const libc::sockaddr, len) })?;
        // SAFETY: plain syscall on our fd.
        cvt(unsafe { libc::listen(fd, backlog) })?;
        Ok(())
    };
    setup().inspect_err(|_| close(fd))?;
    Ok(fd)
}

pub fn accept(fd: RawFd) -> Result<RawFd, i32> {
    // SAFETY: null address pointers are allowed; flags make the new socket non-blocking.
    let r = unsafe {
        libc::accept4(
            fd,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
        )
    };
    if r < 0 {
        Err(errno())
    } else {
        Ok(r)
    }
}

/// send(2) without SIGPIPE; Err(errno) on failure.
pub fn send(fd: RawFd, buf: &[u8]) -> Result<usize, i32> {
    // SAFETY: buf is valid for reads of its length.
    let r = unsafe {
        libc::send(
            fd,
            buf.as_ptr() as *const libc::c_void,
            buf.len(),
            libc::MSG_NOSIGNAL,
        )
    };
    if r < 0 {
        Err(errno())
    } else {
        Ok(r as usize)
    }
}

pub fn recv(fd: RawFd, buf: &mut [u8]) -> Result<usize, i32> {
    // SAFETY: buf is valid for writes of its length.
    let r = unsafe { libc::recv(fd, buf.as_mut_ptr() as *mut libc::c_void, buf.len(), 0) };
    if r < 0 {
        Err(errno())
    } else {
        Ok(r as usize)
    }
}

/// Raise the soft fd limit to the hard one: many connections are in flight or in TIME_WAIT close.
pub fn raise_nofile() {
    // SAFETY: rlimit is a plain struct filled by the kernel.
    unsafe {
        let mut rl: libc::rlimit = zeroed();
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut rl) == 0 {
            rl.rlim_cur = rl.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &rl);
        }
    }
}

pub struct Epoll(RawFd);

impl Epoll {
    pub fn new() -> io::Result<Epoll> {
        // SAFETY: plain syscall.
        Ok(Epoll(cvt(unsafe {
            libc::epoll_create1(libc::EPOLL_CLOEXEC)
        })?))
    }

    pub fn ctl(&self, op: libc::c_int, fd: RawFd, token: u64, events: u32) -> io::Result<()> {
        let mut ev = libc::epoll_event { events, u64: token };
        // SAFETY: ev is a valid epoll_event for the call.
        cvt(unsafe { libc::epoll_ctl(self.0, op, fd, &mut ev) }).map(|_| ())
    }

    pub fn wait(&self, evs: &mut [libc::epoll_event], timeout_ms: i32) -> usize {
        // SAFETY: evs is a valid buffer of its length.
        let n = unsafe { libc::epoll_wait(self.0, evs.as_mut_ptr(), evs.len() as i32, timeout_ms) };
        n.max(0) as usize
    }
}

impl Drop for Epoll {
    fn drop(&mut self) {
        close(self.0);
    }
}
