//! Checked wrappers over the socket syscalls that take or give a `SocketAddr`, and the
//! `sockaddr_storage` <-> `SocketAddr` conversion they rest on (IPv4 and IPv6, non-blocking TCP);
//! `signals`: the SIGTERM/SIGINT wait that both of its users, long-running servers, stop on.
use std::io;
use std::mem::{size_of, zeroed};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::os::fd::{FromRawFd, OwnedFd, RawFd};

pub mod signals;

/// A syscall's -1 as the `io::Error` of its errno.
pub fn cvt(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
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

/// None for a family other than AF_INET/AF_INET6.
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

/// A non-blocking, close-on-exec TCP socket of the family `v6` names.
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

pub fn bind(fd: RawFd, a: &SocketAddr) -> io::Result<()> {
    let (ss, len) = to_sockaddr(a);
    // SAFETY: ss/len describe a valid sockaddr.
    cvt(unsafe { libc::bind(fd, &ss as *const _ as *const libc::sockaddr, len) }).map(|_| ())
}

pub fn listen(fd: RawFd, backlog: i32) -> io::Result<()> {
    // SAFETY: plain syscall on the caller's fd.
    cvt(unsafe { libc::listen(fd, backlog) }).map(|_| ())
}

/// Start a non-blocking connect; Ok(true) when already connected, Ok(false) while in progress.
pub fn connect(fd: RawFd, a: &SocketAddr) -> io::Result<bool> {
    let (ss, len) = to_sockaddr(a);
    // SAFETY: ss/len describe a valid sockaddr.
    match cvt(unsafe { libc::connect(fd, &ss as *const _ as *const libc::sockaddr, len) }) {
        Ok(_) => Ok(true),
        Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => Ok(false),
        Err(e) => Err(e),
    }
}

/// The errno a finished non-blocking connect left (SO_ERROR; 0 when it connected).
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

/// accept4(2) of a non-blocking, close-on-exec connection, with the peer's address.
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
    Ok((owned, known_family(&ss)?))
}

/// getsockname(2): the address the socket is bound to (for a TPROXY socket, the original
/// destination).
pub fn local_addr(fd: RawFd) -> io::Result<SocketAddr> {
    // SAFETY: as in accept.
    let mut ss: libc::sockaddr_storage = unsafe { zeroed() };
    let mut len = size_of::<libc::sockaddr_storage>() as libc::socklen_t;
    cvt(unsafe { libc::getsockname(fd, &mut ss as *mut _ as *mut libc::sockaddr, &mut len) })?;
    known_family(&ss)
}

fn known_family(ss: &libc::sockaddr_storage) -> io::Result<SocketAddr> {
    from_sockaddr(ss).ok_or_else(|| io::Error::other("unknown address family"))
}

#[cfg(test)]
mod tests;
