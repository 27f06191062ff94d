//! The few raw socket and epoll calls the load generator needs (non-blocking IPv4/IPv6 TCP), on
//! raw fds with errno results; those on a `SocketAddr` are perigee-netsys's, as in the daemon.
use std::io;
use std::mem::zeroed;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, IntoRawFd, RawFd};

use perigee_netsys::{cvt, set_int};

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

pub fn socket(v6: bool) -> io::Result<RawFd> {
    perigee_netsys::socket(v6).map(IntoRawFd::into_raw_fd)
}

pub fn close(fd: RawFd) {
    // SAFETY: the caller owns fd and forgets it afterwards.
    unsafe { libc::close(fd) };
}

/// Start a non-blocking connect: Ok(()) when connected or in progress.
pub fn connect(fd: RawFd, a: &SocketAddr) -> Result<(), i32> {
    perigee_netsys::connect(fd, a)
        .map(|_| ())
        .map_err(|e| e.raw_os_error().unwrap_or(libc::EIO))
}

/// A non-blocking SO_REUSEPORT listener (one per echo thread, the kernel spreads connections).
pub fn listener(a: &SocketAddr, backlog: i32) -> io::Result<RawFd> {
    let s = perigee_netsys::socket(a.is_ipv6())?;
    let fd = s.as_raw_fd();
    set_int(fd, libc::SOL_SOCKET, libc::SO_REUSEADDR, 1)?;
    set_int(fd, libc::SOL_SOCKET, libc::SO_REUSEPORT, 1)?;
    perigee_netsys::bind(fd, a)?;
    perigee_netsys::listen(fd, backlog)?;
    // Owned until set up (closed on any error above); then served until the process exits.
    Ok(s.into_raw_fd())
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
