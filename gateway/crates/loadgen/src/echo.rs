//! `echo`: a server that sends back whatever it receives, one SO_REUSEPORT listener and epoll
//! loop per thread. Runs until the process is signalled.
use crate::sys::{self, Epoll};
use std::io;
use std::net::SocketAddr;
use std::os::fd::RawFd;

const LISTENER: u64 = u64::MAX;
const BACKLOG: i32 = 4096;

pub fn bind(addr: &SocketAddr) -> io::Result<RawFd> {
    sys::listener(addr, BACKLOG)
}

/// Serve one listener forever.
pub fn serve(lfd: RawFd) -> io::Result<()> {
    let ep = Epoll::new()?;
    ep.ctl(libc::EPOLL_CTL_ADD, lfd, LISTENER, libc::EPOLLIN as u32)?;
    let mut evs = vec![libc::epoll_event { events: 0, u64: 0 }; 256];
    let mut buf = vec![0u8; 16384];
    loop {
        let n = ep.wait(&mut evs, -1);
        for ev in evs.iter().take(n).copied() {
            if ev.u64 == LISTENER {
                accept_all(&ep, lfd);
                continue;
            }
            let fd = ev.u64 as RawFd;
            match sys::recv(fd, &mut buf) {
                Ok(0) => sys::close(fd),
                // A 1-byte echo always fits an empty send buffer; a short send drops the rest.
                Ok(n) => {
                    if let Err(e) = sys::send(fd, &buf[..n]) {
                        if e != libc::EAGAIN {
                            sys::close(fd);
                        }
                    }
                }
                Err(libc::EAGAIN) | Err(libc::EINTR) => {}
                Err(_) => sys::close(fd),
            }
        }
    }
}

fn accept_all(ep: &Epoll, lfd: RawFd) {
    loop {
        match sys::accept(lfd) {
            Ok(fd) => {
                if ep
                    .ctl(libc::EPOLL_CTL_ADD, fd, fd as u64, libc::EPOLLIN as u32)
                    .is_err()
                {
                    sys::close(fd);
                }
            }
            Err(libc::EMFILE) | Err(libc::ENFILE) => {
                // Out of fds: let the backlog wait rather than spin on the ready listener.
                std::thread::sleep(std::time::Duration::from_millis(1));
                return;
            }
            Err(_) => return,
        }
    }
}
