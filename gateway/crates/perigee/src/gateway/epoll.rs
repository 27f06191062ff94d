//! A level-triggered epoll set (one per worker) with u64 tokens.
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

pub struct Epoll(OwnedFd);

impl Epoll {
    pub fn new() -> io::Result<Epoll> {
        // SAFETY: plain syscall; the fd is owned right away.
        let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: fresh descriptor we own.
        Ok(Epoll(unsafe { OwnedFd::from_raw_fd(fd) }))
    }

    pub fn ctl(&self, op: libc::c_int, fd: RawFd, token: u64, events: u32) -> io::Result<()> {
        let mut ev = libc::epoll_event { events, u64: token };
        // SAFETY: ev is a valid epoll_event for the call.
        if unsafe { libc::epoll_ctl(self.0.as_raw_fd(), op, fd, &mut ev) } < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    pub fn wait(&self, evs: &mut [libc::epoll_event], timeout_ms: i32) -> usize {
        // SAFETY: evs is a valid buffer of its length.
        let n = unsafe {
            libc::epoll_wait(
                self.0.as_raw_fd(),
                evs.as_mut_ptr(),
                evs.len() as i32,
                timeout_ms,
            )
        };
        n.max(0) as usize
    }

    /// Watch `fd` for `events` under `token` (add, or change an existing registration).
    pub fn watch(&self, fd: RawFd, token: u64, events: u32) -> io::Result<()> {
        match self.ctl(libc::EPOLL_CTL_MOD, fd, token, events) {
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {
                self.ctl(libc::EPOLL_CTL_ADD, fd, token, events)
            }
            other => other,
        }
    }

    pub fn forget(&self, fd: RawFd) {
        let _ = self.ctl(libc::EPOLL_CTL_DEL, fd, 0, 0);
    }
}
