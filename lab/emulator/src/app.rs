//! The I/O shell: one thread, epoll over two AF_PACKET sockets, a timerfd, a signalfd and
//! the control socket. All link behaviour lives in the pure core (`crate::link`).

use crate::control::{After, Emulator};
use crate::link::Link;
use crate::params::LinkParams;
use crate::server::{self, Client};
use crate::sys::{self, Epoll, PacketSocket, Recv, SignalFd, Timer, READABLE, WRITABLE};
use std::collections::HashMap;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixListener;
use std::path::PathBuf;

pub struct Options {
    pub iface_a: String,
    pub iface_b: String,
    pub control: PathBuf,
    pub pidfile: Option<PathBuf>,
    pub seed: u64,
    pub a_to_b: LinkParams,
    pub b_to_a: LinkParams,
}

const TOKEN_A: u64 = 0;
const TOKEN_B: u64 = 1;
const TOKEN_TIMER: u64 = 2;
const TOKEN_SIGNAL: u64 = 3;
const TOKEN_LISTENER: u64 = 4;
const FIRST_CLIENT: u64 = 16;
/// Frames read from one socket per wake-up, so timers are never starved by a flood.
const RECV_BATCH: usize = 64;
/// Receive buffer: larger than any GSO/GRO super-frame (64 KiB + headers).
const RECV_BUF: usize = 256 * 1024;

/// Removes the control socket and pidfile however `run` ends.
struct Cleanup {
    paths: Vec<PathBuf>,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        for p in &self.paths {
            let _ = std::fs::remove_file(p);
        }
    }
}

struct Shell {
    emu: Emulator,
    sock_a: PacketSocket,
    sock_b: PacketSocket,
    timer: Timer,
    epoll: Epoll,
    listener: UnixListener,
    clients: HashMap<u64, Client>,
    next_token: u64,
    buf: Vec<u8>,
}

pub fn run(opts: Options) -> io::Result<()> {
    if let Err(e) = sys::set_min_timer_slack() {
        eprintln!("satlab-link: warning: PR_SET_TIMERSLACK failed: {e}");
    }
    let signals = SignalFd::termination()?;
    let sock_a = PacketSocket::open(&opts.iface_a)
        .map_err(|e| io::Error::new(e.kind(), format!("interface A '{}': {e}", opts.iface_a)))?;
    let sock_b = PacketSocket::open(&opts.iface_b)
        .map_err(|e| io::Error::new(e.kind(), format!("interface B '{}': {e}", opts.iface_b)))?;
    let epoll = Epoll::new()?;
    let timer = Timer::new()?;
    // The control socket appears last: its existence means the emulator is forwarding.
    let listener = server::bind(&opts.control).map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("control socket {}: {e}", opts.control.display()),
        )
    })?;
    let mut cleanup = Cleanup {
        paths: vec![opts.control.clone()],
    };
    if let Some(p) = &opts.pidfile {
        std::fs::write(p, format!("{}\n", std::process::id()))?;
        cleanup.paths.push(p.clone());
    }
    epoll.add(sock_a.as_raw_fd(), READABLE, TOKEN_A)?;
    epoll.add(sock_b.as_raw_fd(), READABLE, TOKEN_B)?;
    epoll.add(timer.as_raw_fd(), READABLE, TOKEN_TIMER)?;
    epoll.add(signals.as_raw_fd(), READABLE, TOKEN_SIGNAL)?;
    epoll.add(listener.as_raw_fd(), READABLE, TOKEN_LISTENER)?;
    eprintln!(
        "satlab-link: forwarding {} <-> {}, control {}, seed {}",
        opts.iface_a,
        opts.iface_b,
        opts.control.display(),
        opts.seed
    );
    let mut shell = Shell {
        emu: Emulator::new(opts.a_to_b, opts.b_to_a, opts.seed, sys::now_ns()),
        sock_a,
        sock_b,
        timer,
        epoll,
        listener,
        clients: HashMap::new(),
        next_token: FIRST_CLIENT,
        buf: vec![0u8; RECV_BUF],
    };
    let mut events = Vec::with_capacity(64);
    loop {
        shell.emu.run_schedule(sys::now_ns());
        shell.transmit_due();
        let deadline = [
            shell.emu.a_to_b.next_deadline(),
            shell.emu.b_to_a.next_deadline(),
            shell.emu.next_schedule_step(),
        ]
        .into_iter()
        .flatten()
        .min();
        shell.timer.set(deadline)?;
        shell.epoll.wait(&mut events)?;
        for &(token, ev) in &events {
            match token {
                TOKEN_A => shell.receive(true)?,
                TOKEN_B => shell.receive(false)?,
                TOKEN_TIMER => shell.timer.acknowledge(),
                TOKEN_SIGNAL => {
                    if let Some(sig) = signals.read() {
                        eprintln!("satlab-link: signal {sig}, exiting");
                        return Ok(());
                    }
                }
                TOKEN_LISTENER => shell.accept(),
                t => {
                    if shell.client_event(t, ev) == After::Shutdown {
                        eprintln!("satlab-link: shutdown requested, exiting");
                        return Ok(());
                    }
                }
            }
        }
    }
}

impl Shell {
    /// Sends every frame whose scheduled arrival has come, in both directions.
    fn transmit_due(&mut self) {
        let now = sys::now_ns();
        send_due(&mut self.emu.a_to_b, &self.sock_b, now);
        send_due(&mut self.emu.b_to_a, &self.sock_a, now);
    }

    fn receive(&mut self, from_a: bool) -> io::Result<()> {
        let (sock, link) = if from_a {
            (&self.sock_a, &mut self.emu.a_to_b)
        } else {
            (&self.sock_b, &mut self.emu.b_to_a)
        };
        for _ in 0..RECV_BATCH {
            match sock.recv(&mut self.buf) {
                Ok(Recv::Frame { len }) => {
                    // A truncated frame (bigger than our buffer) still costs its real bits.
                    let mut data = self.buf[..len.min(self.buf.len())].to_vec();
                    data.resize(len, 0);
                    link.enqueue(sys::now_ns(), data);
                }
                Ok(Recv::Outgoing) => {}
                Ok(Recv::WouldBlock) => break,
                Err(e) if e.raw_os_error() == Some(libc::ENETDOWN) => break,
                Err(e) => {
                    return Err(io::Error::new(
                        e.kind(),
                        format!("recv on {}: {e}", sock.ifname),
                    ))
                }
            }
        }
        Ok(())
    }

    fn accept(&mut self) {
        while let Ok((stream, _)) = self.listener.accept() {
            let Ok(client) = Client::new(stream) else {
                continue;
            };
            let token = self.next_token;
            self.next_token += 1;
            if self
                .epoll
                .add(client.stream.as_raw_fd(), READABLE, token)
                .is_ok()
            {
                self.clients.insert(token, client);
            }
        }
    }

    fn client_event(&mut self, token: u64, events: u32) -> After {
        let Some(client) = self.clients.get_mut(&token) else {
            return After::Continue;
        };
        let mut after = After::Continue;
        if events & (READABLE | libc::EPOLLHUP as u32 | libc::EPOLLERR as u32) != 0 {
            for line in client.read_lines() {
                let (reply, a) = self.emu.handle_line(sys::now_ns(), &line);
                client.queue_reply(&reply);
                if a == After::Shutdown {
                    after = After::Shutdown;
                    break;
                }
            }
        }
        let pending = client.flush();
        if after == After::Shutdown {
            return after;
        }
        let fd = client.stream.as_raw_fd();
        if client.finished() {
            self.epoll.delete(fd);
            self.clients.remove(&token);
        } else {
            let interest = if pending {
                READABLE | WRITABLE
            } else {
                READABLE
            };
            let _ = self.epoll.modify(fd, interest, token);
        }
        after
    }
}

fn send_due(link: &mut Link, out: &PacketSocket, now: u64) {
    link.advance(now);
    while let Some((frame, scheduled)) = link.pop_due(now) {
        let sent_at = sys::now_ns();
        match out.send(&frame) {
            Ok(()) => link.record_sent(frame.len(), sent_at.saturating_sub(scheduled)),
            Err(_) => link.record_send_error(),
        }
    }
}
