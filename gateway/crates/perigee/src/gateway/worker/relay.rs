//! A flow's relay: both directions pumped (splice or copy) as their sockets get ready,
//! half-close and resets passed on, the flow closed and accounted, its epoll interest kept to
//! what it waits for, and the periodic sample of its TCP_INFO and bytes.
use super::{peer, Worker, TOKEN_FLOW_BASE};
use crate::gateway::config::Role;
use crate::gateway::epoll::Epoll;
use crate::gateway::flow::{Session, CLIENT, SERVER};
use crate::gateway::satleg_auto;
use crate::gateway::session::Failed;
use crate::gateway::sys;
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

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
        if self.handovers.contains(&id) && !self.progress_handover(id) {
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
        if s.handover.is_some() {
            // Errors show up in the handover's own reads and writes (a lost peer connection
            // falls back to the direct path rather than resetting the client).
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
                    if s.status_owed {
                        peer::owe_status_connected(s);
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
            if s.handover.is_some() {
                // Its own deadlines (peer::check_handovers).
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
        let owed = self.flows.get(&id).is_some_and(|s| s.status_owed);
        if owed {
            if let Some(s) = self.flows.get(&id) {
                peer::send_status_failed(s, errno);
            }
            self.finish(id, reason, None, errno);
        } else {
            self.finish(id, reason, Some(SERVER), errno);
        }
    }
}
