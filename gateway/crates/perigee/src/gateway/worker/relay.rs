//! A flow's relay: both directions pumped (splice or copy) as their sockets get ready,
//! half-close and resets passed on, the flow closed and accounted, its epoll interest kept to
//! what it waits for, and the periodic sample of its TCP_INFO and bytes.
use super::{Worker, TOKEN_FLOW_BASE};
use crate::gateway::config::Role;
use crate::gateway::epoll::Epoll;
use crate::gateway::flow::{Session, CLIENT, SERVER};
use crate::gateway::peer::tunnel::{Failure, Phase};
use crate::gateway::peer::wire::Status;
use crate::gateway::satleg_auto;
use crate::gateway::session::Failed;
use crate::gateway::sys;
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

/// How much longer than its connect timeout a terminal waits for the hub's STATUS (the hub's
/// own connect has the timeout; its answer needs a satellite round trip and some queue).
const STATUS_GRACE: Duration = Duration::from_secs(5);

fn flow_token(id: u64, side: u64) -> u64 {
    TOKEN_FLOW_BASE + id * 2 + side
}

/// Bring a flow's epoll registrations to `want` [client side, server side].
pub(super) fn set_interest(ep: &Epoll, s: &mut Session, want: [u32; 2]) {
    for side in [CLIENT, SERVER] {
        let fd = s.fd(side);
        let reg = &mut s.regs[side as usize];
        let mask = want[side as usize];
        let token = flow_token(s.id, side);
        if mask == 0 && reg.hup {
            if reg.registered {
                let _ = ep.ctl(libc::EPOLL_CTL_DEL, fd, token, 0);
                reg.registered = false;
            }
        } else if !reg.registered {
            let _ = ep.ctl(libc::EPOLL_CTL_ADD, fd, token, mask);
            reg.registered = true;
            reg.mask = mask;
        } else if reg.mask != mask {
            let _ = ep.ctl(libc::EPOLL_CTL_MOD, fd, token, mask);
            reg.mask = mask;
        }
    }
}

impl Worker {
    /// Pump both directions of a flow and update its epoll interest; close it when done.
    pub(super) fn progress(&mut self, id: u64) {
        if self.flows.get(&id).is_some_and(|s| s.tunnel.is_some()) {
            self.progress_tunnel(id);
            return;
        }
        let buf_size = self
            .cfg
            .as_ref()
            .map(|c| c.splitter.relay_buffer_bytes as usize)
            .unwrap_or(65536);
        let Some(s) = self.flows.get_mut(&id) else {
            return;
        };
        if !s.connecting {
            let (c, v) = (s.client.as_raw_fd(), s.server.as_raw_fd());
            let up = s.up.pump(c, v, &mut self.pool, buf_size);
            let down = s.down.pump(v, c, &mut self.pool, buf_size);
            for (r, src_side) in [(up, CLIENT), (down, SERVER)] {
                match r {
                    Ok(n) if n > 0 => s.last_active = Instant::now(),
                    Ok(_) => {}
                    Err((failed, errno)) => {
                        let bad = if failed == Failed::Source {
                            src_side
                        } else {
                            1 - src_side
                        };
                        let reason = if bad == CLIENT {
                            "client_reset"
                        } else {
                            "server_reset"
                        };
                        self.finish(id, reason, Some(bad), errno);
                        return;
                    }
                }
            }
            if s.up.done() && s.down.done() {
                self.finish(id, "closed", None, 0);
                return;
            }
        }
        let want = [
            (if !s.connecting && s.up.wants_read() {
                libc::EPOLLIN
            } else {
                0
            }) | (if s.down.pending() { libc::EPOLLOUT } else { 0 }),
            (if !s.connecting && s.down.wants_read() {
                libc::EPOLLIN
            } else {
                0
            }) | (if s.connecting || s.up.pending() {
                libc::EPOLLOUT
            } else {
                0
            }),
        ];
        set_interest(&self.ep, s, [want[0] as u32, want[1] as u32]);
    }

    /// Close a flow. `reset_from`: the side that failed; the other side gets a RST.
    pub(super) fn finish(&mut self, id: u64, reason: &str, reset_from: Option<u64>, errno: i32) {
        let Some(mut s) = self.flows.remove(&id) else {
            return;
        };
        self.deltas.account_bytes(&s);
        let crossed = s.sample();
        let hub = self.is_hub();
        self.deltas.account_crossed(hub, &s, &crossed);
        if let Some(bad) = reset_from {
            sys::set_linger0(s.fd(1 - bad));
            // A local error on the failing socket itself (not a RST from its peer): reset it too.
            if errno != libc::ECONNRESET && errno != libc::EPIPE {
                sys::set_linger0(s.fd(bad));
            }
        }
        // No EPOLL_CTL_DEL: the sockets are closed when `s` drops at the end of this function,
        // and closing the only descriptor of a socket removes it from the epoll set.
        s.up.release(&mut self.pool);
        s.down.release(&mut self.pool);
        let flow = s.to_flow(Some((reason, sys::now_f64())));
        if self.closed.len() < 50_000 {
            self.closed.push(flow);
        }
    }

    pub(super) fn is_hub(&self) -> bool {
        self.cfg.as_ref().is_some_and(|cfg| cfg.role == Role::Hub)
    }

    pub(super) fn on_flow_event(&mut self, token: u64, events: u32) {
        let id = (token - TOKEN_FLOW_BASE) / 2;
        let side = (token - TOKEN_FLOW_BASE) % 2;
        let Some(s) = self.flows.get_mut(&id) else {
            return;
        };
        if events & libc::EPOLLHUP as u32 != 0 {
            s.regs[side as usize].hup = true;
        }
        if s.tunnel.is_some() && !s.connecting {
            // Errors show up in the tunnel's own reads and writes.
            self.progress(id);
            return;
        }
        if s.connecting {
            if side == SERVER {
                // A failed connect always raises EPOLLERR: a plain EPOLLOUT means connected, and
                // needs no getsockopt(SO_ERROR).
                let failed = events & (libc::EPOLLERR | libc::EPOLLHUP) as u32 != 0;
                let e = if failed {
                    sys::so_error(s.server.as_raw_fd())
                } else {
                    0
                };
                if e != 0 {
                    self.connect_failed(id, "connect_failed", e);
                    return;
                }
                if events & libc::EPOLLOUT as u32 != 0 {
                    s.connecting = false;
                    if let Some(t) = s.tunnel.as_mut() {
                        // Hub: STATUS(connected) goes ahead of the server's first byte.
                        t.connected();
                    }
                }
            } else if events & (libc::EPOLLERR | libc::EPOLLHUP) as u32 != 0 {
                self.finish(id, "client_reset", Some(CLIENT), libc::ECONNRESET);
                return;
            }
        } else if events & libc::EPOLLERR as u32 != 0 {
            let e = sys::so_error(s.fd(side));
            if e != 0 {
                let reason = if side == CLIENT {
                    "client_reset"
                } else {
                    "server_reset"
                };
                self.finish(id, reason, Some(side), e);
                return;
            }
        }
        self.progress(id);
    }

    /// Young legs on the default hybla_ld looked at between samples (satleg_auto::watch).
    pub(super) fn watch_legs(&mut self) {
        for s in self.flows.values_mut() {
            if satleg_auto::watch(s, &self.available_cc).is_some() {
                self.deltas.count_cc_flow(s);
            }
        }
    }

    /// The once-a-second sample of every flow (TCP_INFO, bytes since the last one, into the
    /// deltas), and the flows whose connect or idle time ran out closed.
    pub(super) fn sample_flows(&mut self) {
        let Some(cfg) = self.cfg.as_ref() else { return };
        let connect_to = Duration::from_millis(cfg.splitter.connect_timeout_ms);
        let idle_to = Duration::from_secs(cfg.splitter.idle_timeout_s);
        let mut expired = Vec::new();
        let hub = cfg.role == Role::Hub;
        for s in self.flows.values_mut() {
            let c = s.sample();
            if satleg_auto::apply(s, &self.available_cc).is_some() {
                self.deltas.count_cc_flow(s);
            }
            self.deltas.account_crossed(hub, s, &c);
            self.deltas.account_bytes(s);
            s.sampled_bytes = (s.up.bytes, s.down.bytes);
            if s.tunnel
                .as_ref()
                .is_some_and(|t| t.phase == Phase::AwaitStatus)
            {
                // Terminal: the hub's own connect has this long, its STATUS a little longer.
                if s.started.elapsed() > connect_to + STATUS_GRACE {
                    expired.push((s.id, "connect_timeout"));
                }
            } else if s.connecting && s.started.elapsed() > connect_to {
                expired.push((s.id, "connect_timeout"));
            } else if !s.connecting && s.last_active.elapsed() > idle_to {
                expired.push((s.id, "idle_timeout"));
            }
        }
        for (id, why) in expired {
            if why == "connect_timeout" {
                self.connect_failed(id, why, libc::ETIMEDOUT);
            } else {
                if let Some(s) = self.flows.get(&id) {
                    sys::set_linger0(s.fd(CLIENT));
                }
                self.finish(id, why, Some(SERVER), libc::ETIMEDOUT);
            }
        }
    }

    /// The connect to the server failed: the client gets a RST (today's behaviour), or, for a
    /// flow a terminal opened on the peer path, the terminal gets STATUS(failed) and resets its
    /// client itself.
    fn connect_failed(&mut self, id: u64, reason: &str, errno: i32) {
        self.deltas.failed_connect += 1;
        let Some(s) = self.flows.get_mut(&id) else {
            return;
        };
        let peer_fd = s.fd(CLIENT);
        match s.tunnel.as_mut() {
            Some(t) if t.phase == Phase::Hold => {
                t.refuse(peer_fd, Status::Failed(errno));
                self.finish(id, reason, None, errno);
            }
            _ => self.finish(id, reason, Some(SERVER), errno),
        }
    }

    /// A flow on the peer path: its tunnel pumped, its interest set, its end handled.
    fn progress_tunnel(&mut self, id: u64) {
        let Some(s) = self.flows.get_mut(&id) else {
            return;
        };
        let peer_side = s.peer_side();
        let (plain, peer) = (s.fd(1 - peer_side), s.fd(peer_side));
        let Some(t) = s.tunnel.as_mut() else { return };
        let before = t.phase;
        // Hub, connect under way (Hold): the terminal's bytes are read (bounded) and held; the
        // server's socket is not touched.
        let pumped = t.pump(plain, peer);
        let phase = t.phase;
        let done = t.done();
        let (plain_want, peer_want) = t.interest();
        s.count_tunnel();
        match pumped {
            Ok(moved) => {
                if moved {
                    s.last_active = Instant::now();
                }
            }
            Err(Failure::Plain(errno)) => {
                let (bad, reason) = if peer_side == SERVER {
                    (CLIENT, "client_reset")
                } else {
                    (SERVER, "server_reset")
                };
                self.finish(id, reason, Some(bad), errno);
                return;
            }
            Err(Failure::Status(status)) => {
                let errno = match status {
                    Status::Failed(e) | Status::Refused(e) => e,
                    Status::Connected => libc::EIO,
                };
                self.deltas.failed_connect += 1;
                let reason = if matches!(status, Status::Refused(_)) {
                    "refused"
                } else if errno == libc::ETIMEDOUT {
                    "connect_timeout"
                } else {
                    "connect_failed"
                };
                self.finish(id, reason, Some(SERVER), errno);
                return;
            }
            Err(Failure::Peer(why)) => {
                self.peer_flow_failed(id, &why, before == Phase::AwaitStatus);
                return;
            }
        }
        if done {
            self.finish(id, "closed", None, 0);
            return;
        }
        if phase == Phase::Relay && before != Phase::Relay {
            #[cfg(feature = "peer-plaintext")]
            if self.splice_from_now(id) {
                return;
            }
        }
        let Some(s) = self.flows.get_mut(&id) else {
            return;
        };
        let mut want = [0u32; 2];
        want[peer_side as usize] = peer_want;
        want[(1 - peer_side) as usize] = if s.connecting {
            libc::EPOLLOUT as u32
        } else {
            plain_want
        };
        set_interest(&self.ep, s, want);
    }
}

/// Benchmark build only: after the frames, a flow is spliced as the direct path's are, which is
/// what the peer path was before it was encrypted (the plaintext rows of `peer-path`).
#[cfg(feature = "peer-plaintext")]
impl Worker {
    fn splice_from_now(&mut self, id: u64) -> bool {
        let Some(s) = self.flows.get_mut(&id) else {
            return false;
        };
        let Some(t) = s.tunnel.take() else {
            return false;
        };
        let (to_plain_n, from_plain_n) = (t.to_plain, t.from_plain);
        let Some((to_plain, to_peer, plain_eof, peer_eof)) = t.into_splice() else {
            return false;
        };
        let peer_side = s.peer_side();
        let (from_peer, from_plain) = if peer_side == SERVER {
            (&mut s.down, &mut s.up)
        } else {
            (&mut s.up, &mut s.down)
        };
        from_peer.bytes = to_plain_n;
        from_peer.preload(to_plain);
        from_peer.eof |= peer_eof;
        from_plain.bytes = from_plain_n.saturating_sub(to_peer.len() as u64);
        from_plain.preload(to_peer);
        from_plain.eof |= plain_eof;
        self.progress(id);
        true
    }
}
