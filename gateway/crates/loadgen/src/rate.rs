//! `rate`: new connections per second. Each thread keeps `concurrency` connections in flight,
//! each one connect → send 1 byte → receive the echo → close; a connection counts only when its
//! echo came back (through a splitter: both legs existed). Threads start together at `t_start`,
//! stop opening at the end of the window, and finish the in-flight ones for up to `drain`.
use crate::stats::Counts;
use crate::sys::{self, Epoll};
use std::net::SocketAddr;
use std::os::fd::RawFd;
use std::time::{Duration, Instant};

pub const PAYLOAD: u8 = b'x';

#[derive(Clone, Copy)]
pub struct Plan {
    pub target: SocketAddr,
    pub concurrency: usize,
    pub t_start: Instant,
    pub window: Duration,
    pub drain: Duration,
    /// Cap on connections this thread opens (client ports: each closed one sits in TIME_WAIT).
    pub max_conns: u64,
}

struct Conn {
    started: Instant,
    echo_requested: bool,
}

struct Loop {
    plan: Plan,
    ep: Epoll,
    /// Indexed by fd: fds are small and reused, so this stays as large as the concurrency.
    live: Vec<Option<Conn>>,
    in_flight: usize,
    opened: u64,
    counts: Counts,
}

impl Loop {
    fn open_one(&mut self) {
        self.opened += 1;
        let fd = match sys::socket(self.plan.target.is_ipv6()) {
            Ok(fd) => fd,
            Err(e) => {
                self.counts
                    .error(sys::errno_name(e.raw_os_error().unwrap_or(libc::EIO)));
                return;
            }
        };
        let started = Instant::now();
        if let Err(e) = sys::connect(fd, &self.plan.target) {
            self.counts.error(sys::errno_name(e));
            sys::close(fd);
            return;
        }
        if self
            .ep
            .ctl(libc::EPOLL_CTL_ADD, fd, fd as u64, libc::EPOLLOUT as u32)
            .is_err()
        {
            self.counts.error("epoll".into());
            sys::close(fd);
            return;
        }
        let slot = fd as usize;
        if self.live.len() <= slot {
            self.live.resize_with(slot + 1, || None);
        }
        self.live[slot] = Some(Conn {
            started,
            echo_requested: false,
        });
        self.in_flight += 1;
    }

    /// Close a connection (close(2) also drops it from the epoll set) and start the next one.
    fn finish(&mut self, fd: RawFd, now: Instant) {
        self.live[fd as usize] = None;
        self.in_flight -= 1;
        sys::close(fd);
        if now < self.plan.t_start + self.plan.window {
            if self.opened < self.plan.max_conns {
                self.open_one();
            } else {
                // The cap, not the path, ended this thread's run: its rate is a lower bound.
                self.counts.capped = true;
            }
        }
    }

    fn on_event(&mut self, fd: RawFd) {
        let Some(conn) = self.live.get(fd as usize).and_then(|c| c.as_ref()) else {
            return;
        };
        let (started, requested) = (conn.started, conn.echo_requested);
        if !requested {
            // Writable: connected, or the connect failed (then send reports why).
            match sys::send(fd, &[PAYLOAD]) {
                Ok(1) => {}
                Ok(_) => {
                    self.counts.error("short_send".into());
                    return self.finish(fd, Instant::now());
                }
                Err(libc::EAGAIN) => return,
                Err(e) => {
                    // A failed connect surfaces here as its own errno (ECONNREFUSED, ...).
                    self.counts.error(sys::errno_name(e));
                    return self.finish(fd, Instant::now());
                }
            }
            if let Some(c) = self.live[fd as usize].as_mut() {
                c.echo_requested = true;
            }
            if self
                .ep
                .ctl(libc::EPOLL_CTL_MOD, fd, fd as u64, libc::EPOLLIN as u32)
                .is_err()
            {
                self.counts.error("epoll".into());
                self.finish(fd, Instant::now());
            }
            return;
        }
        let mut buf = [0u8; 16];
        let got = sys::recv(fd, &mut buf);
        let now = Instant::now();
        match got {
            Err(libc::EAGAIN) | Err(libc::EINTR) => return,
            Err(e) => self.counts.error(sys::errno_name(e)),
            Ok(0) => self.counts.error("eof".into()),
            Ok(1) if buf[0] == PAYLOAD => {
                self.counts.completed += 1;
                if now <= self.plan.t_start + self.plan.window {
                    self.counts.completed_in_window += 1;
                }
                let us = now.duration_since(started).as_micros();
                self.counts
                    .latencies_us
                    .push(us.min(u32::MAX as u128) as u32);
            }
            Ok(_) => self.counts.error("bad_echo".into()),
        }
        self.finish(fd, now);
    }
}

/// One thread's run; its counters once every connection finished or the drain time ran out.
pub fn run(plan: Plan) -> Counts {
    let ep = match Epoll::new() {
        Ok(ep) => ep,
        Err(_) => {
            let mut c = Counts::default();
            c.error("epoll".into());
            return c;
        }
    };
    let mut lp = Loop {
        plan,
        ep,
        live: Vec::new(),
        in_flight: 0,
        opened: 0,
        counts: Counts::default(),
    };
    if let Some(wait) = plan.t_start.checked_duration_since(Instant::now()) {
        std::thread::sleep(wait);
    }
    for _ in 0..plan.concurrency.min(plan.max_conns as usize) {
        lp.open_one();
    }
    let give_up = plan.t_start + plan.window + plan.drain;
    let mut evs = vec![libc::epoll_event { events: 0, u64: 0 }; 256];
    while lp.in_flight > 0 && Instant::now() < give_up {
        let n = lp.ep.wait(&mut evs, 50);
        for ev in evs.iter().take(n).copied() {
            lp.on_event(ev.u64 as RawFd);
        }
    }
    for fd in 0..lp.live.len() {
        if lp.live[fd].take().is_some() {
            sys::close(fd as RawFd);
        }
    }
    lp.counts.unfinished = lp.in_flight as u64;
    lp.counts
}
