//! Thin, safe wrappers over the Linux primitives the I/O shell needs: AF_PACKET sockets,
//! an absolute CLOCK_MONOTONIC timerfd, signalfd, epoll.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

fn check(ret: libc::c_int) -> io::Result<libc::c_int> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

fn setsockopt<T>(fd: RawFd, level: libc::c_int, name: libc::c_int, val: &T) -> io::Result<()> {
    // SAFETY: `val` points to a live T of the size we pass.
    let r = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            (val as *const T).cast(),
            std::mem::size_of::<T>() as libc::socklen_t,
        )
    };
    check(r).map(|_| ())
}

/// Nanoseconds on CLOCK_MONOTONIC.
pub fn now_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid out-pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Minimal timer slack so timerfd wake-ups are not coalesced (default slack is 50 µs).
pub fn set_min_timer_slack() -> io::Result<()> {
    // SAFETY: prctl with integer arguments.
    check(unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0) }).map(|_| ())
}

const ETH_P_ALL_BE: u16 = (libc::ETH_P_ALL as u16).to_be();
const PACKET_IGNORE_OUTGOING: libc::c_int = 23;

/// A raw AF_PACKET socket bound to one interface, seeing every frame it receives.
pub struct PacketSocket {
    fd: OwnedFd,
    pub ifname: String,
}

pub enum Recv {
    /// A frame of `len` bytes (the first `min(len, buf.len())` are in the buffer).
    Frame {
        len: usize,
    },
    /// A frame we sent ourselves (not reported when PACKET_IGNORE_OUTGOING works).
    Outgoing,
    WouldBlock,
}

impl PacketSocket {
    pub fn open(ifname: &str) -> io::Result<Self> {
        let cname = CString::new(ifname).map_err(|_| io::Error::other("bad interface name"))?;
        // SAFETY: plain FFI calls with valid arguments; fd ownership moves into OwnedFd.
        let ifindex = unsafe { libc::if_nametoindex(cname.as_ptr()) };
        if ifindex == 0 {
            return Err(io::Error::other(format!("no such interface '{ifname}'")));
        }
        // Protocol 0 at creation so nothing is captured before bind() picks the interface.
        let raw = check(unsafe {
            libc::socket(
                libc::AF_PACKET,
                libc::SOCK_RAW | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                0,
            )
        })?;
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_protocol = ETH_P_ALL_BE;
        sll.sll_ifindex = ifindex as i32;
        check(unsafe {
            libc::bind(
                raw,
                (&sll as *const libc::sockaddr_ll).cast(),
                std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        })?;
        // Never re-capture what we transmit (we also filter on PACKET_OUTGOING below).
        let _ = setsockopt(raw, libc::SOL_PACKET, PACKET_IGNORE_OUTGOING, &1i32);
        // Promiscuous: frames for any MAC must cross the emulated link.
        let mut mreq: libc::packet_mreq = unsafe { std::mem::zeroed() };
        mreq.mr_ifindex = ifindex as i32;
        mreq.mr_type = libc::PACKET_MR_PROMISC as u16;
        setsockopt(raw, libc::SOL_PACKET, libc::PACKET_ADD_MEMBERSHIP, &mreq)?;
        // Big socket buffers absorb bursts between two loop iterations (root may exceed rmem_max).
        let big: libc::c_int = 8 << 20;
        if setsockopt(raw, libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, &big).is_err() {
            let _ = setsockopt(raw, libc::SOL_SOCKET, libc::SO_RCVBUF, &big);
        }
        if setsockopt(raw, libc::SOL_SOCKET, libc::SO_SNDBUFFORCE, &big).is_err() {
            let _ = setsockopt(raw, libc::SOL_SOCKET, libc::SO_SNDBUF, &big);
        }
        Ok(PacketSocket {
            fd,
            ifname: ifname.to_string(),
        })
    }

    pub fn recv(&self, buf: &mut [u8]) -> io::Result<Recv> {
        let mut from: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        let mut from_len = std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t;
        // MSG_TRUNC: the return value is the real frame length even if it did not fit.
        // SAFETY: buffer and address pointers are valid for the given lengths.
        let n = unsafe {
            libc::recvfrom(
                self.fd.as_raw_fd(),
                buf.as_mut_ptr().cast(),
                buf.len(),
                libc::MSG_TRUNC | libc::MSG_DONTWAIT,
                (&mut from as *mut libc::sockaddr_ll).cast(),
                &mut from_len,
            )
        };
        if n < 0 {
            let e = io::Error::last_os_error();
            return match e.kind() {
                io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => Ok(Recv::WouldBlock),
                _ => Err(e),
            };
        }
        if from.sll_pkttype == libc::PACKET_OUTGOING {
            return Ok(Recv::Outgoing);
        }
        Ok(Recv::Frame { len: n as usize })
    }

    pub fn send(&self, frame: &[u8]) -> io::Result<()> {
        // SAFETY: frame is a valid buffer; the socket is bound, so no address is needed.
        let n = unsafe {
            libc::send(
                self.fd.as_raw_fd(),
                frame.as_ptr().cast(),
                frame.len(),
                libc::MSG_DONTWAIT,
            )
        };
        if n < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(())
        }
    }
}

impl AsRawFd for PacketSocket {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

/// A CLOCK_MONOTONIC timerfd armed with absolute deadlines.
pub struct Timer {
    fd: OwnedFd,
    armed: Option<u64>,
}

impl Timer {
    pub fn new() -> io::Result<Self> {
        // SAFETY: FFI; fd ownership moves into OwnedFd.
        let raw = check(unsafe {
            libc::timerfd_create(
                libc::CLOCK_MONOTONIC,
                libc::TFD_NONBLOCK | libc::TFD_CLOEXEC,
            )
        })?;
        Ok(Timer {
            fd: unsafe { OwnedFd::from_raw_fd(raw) },
            armed: None,
        })
    }

    /// Arms for `deadline` (ns, CLOCK_MONOTONIC) or disarms with None; no syscall if unchanged.
    pub fn set(&mut self, deadline: Option<u64>) -> io::Result<()> {
        if deadline == self.armed {
            return Ok(());
        }
        // A zero it_value disarms; an absolute time in the past fires at once, so use ≥ 1 ns.
        let ns = deadline.map_or(0, |d| d.max(1));
        let spec = libc::itimerspec {
            it_interval: libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            it_value: libc::timespec {
                tv_sec: (ns / 1_000_000_000) as libc::time_t,
                tv_nsec: (ns % 1_000_000_000) as libc::c_long,
            },
        };
        // SAFETY: valid itimerspec pointer; old value not requested.
        check(unsafe {
            libc::timerfd_settime(
                self.fd.as_raw_fd(),
                libc::TFD_TIMER_ABSTIME,
                &spec,
                std::ptr::null_mut(),
            )
        })?;
        self.armed = deadline;
        Ok(())
    }

    /// Consumes the expiry count after it fired; the timer is then disarmed.
    pub fn acknowledge(&mut self) {
        let mut n = 0u64;
        // SAFETY: reading 8 bytes into a u64. EAGAIN (spurious wake) is harmless.
        unsafe { libc::read(self.fd.as_raw_fd(), (&mut n as *mut u64).cast(), 8) };
        if self.armed.is_some_and(|d| d <= now_ns()) {
            self.armed = None;
        }
    }
}

impl AsRawFd for Timer {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

/// SIGTERM/SIGINT/SIGHUP delivered as a readable fd (the signals are blocked).
pub struct SignalFd {
    fd: OwnedFd,
}

impl SignalFd {
    pub fn termination() -> io::Result<Self> {
        // SAFETY: sigset manipulation on a local set, then FFI.
        unsafe {
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            for s in [libc::SIGTERM, libc::SIGINT, libc::SIGHUP] {
                libc::sigaddset(&mut set, s);
            }
            check(libc::pthread_sigmask(
                libc::SIG_BLOCK,
                &set,
                std::ptr::null_mut(),
            ))?;
            libc::signal(libc::SIGPIPE, libc::SIG_IGN);
            let raw = check(libc::signalfd(
                -1,
                &set,
                libc::SFD_NONBLOCK | libc::SFD_CLOEXEC,
            ))?;
            Ok(SignalFd {
                fd: OwnedFd::from_raw_fd(raw),
            })
        }
    }

    /// The pending signal number, if any.
    pub fn read(&self) -> Option<u32> {
        let mut info: libc::signalfd_siginfo = unsafe { std::mem::zeroed() };
        let size = std::mem::size_of::<libc::signalfd_siginfo>();
        // SAFETY: reading one siginfo struct into a valid buffer.
        let n = unsafe {
            libc::read(
                self.fd.as_raw_fd(),
                (&mut info as *mut libc::signalfd_siginfo).cast(),
                size,
            )
        };
        (n as usize == size).then_some(info.ssi_signo)
    }
}

impl AsRawFd for SignalFd {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

pub struct Epoll {
    fd: OwnedFd,
}

pub const READABLE: u32 = libc::EPOLLIN as u32;
pub const WRITABLE: u32 = libc::EPOLLOUT as u32;

impl Epoll {
    pub fn new() -> io::Result<Self> {
        // SAFETY: FFI; fd ownership moves into OwnedFd.
        let raw = check(unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) })?;
        Ok(Epoll {
            fd: unsafe { OwnedFd::from_raw_fd(raw) },
        })
    }

    fn ctl(&self, op: libc::c_int, fd: RawFd, events: u32, token: u64) -> io::Result<()> {
        let mut ev = libc::epoll_event { events, u64: token };
        // SAFETY: valid epoll_event pointer.
        check(unsafe { libc::epoll_ctl(self.fd.as_raw_fd(), op, fd, &mut ev) }).map(|_| ())
    }

    pub fn add(&self, fd: RawFd, events: u32, token: u64) -> io::Result<()> {
        self.ctl(libc::EPOLL_CTL_ADD, fd, events, token)
    }

    pub fn modify(&self, fd: RawFd, events: u32, token: u64) -> io::Result<()> {
        self.ctl(libc::EPOLL_CTL_MOD, fd, events, token)
    }

    pub fn delete(&self, fd: RawFd) {
        let _ = self.ctl(libc::EPOLL_CTL_DEL, fd, 0, 0);
    }

    /// Blocks until something is ready; returns (token, events) pairs.
    pub fn wait(&self, out: &mut Vec<(u64, u32)>) -> io::Result<()> {
        let mut evs = [libc::epoll_event { events: 0, u64: 0 }; 64];
        // SAFETY: buffer of 64 events.
        let n = unsafe { libc::epoll_wait(self.fd.as_raw_fd(), evs.as_mut_ptr(), 64, -1) };
        out.clear();
        if n < 0 {
            let e = io::Error::last_os_error();
            return if e.kind() == io::ErrorKind::Interrupted {
                Ok(())
            } else {
                Err(e)
            };
        }
        out.extend(evs[..n as usize].iter().map(|e| (e.u64, e.events)));
        Ok(())
    }
}
