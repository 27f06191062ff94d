//! One split flow's record: its two sockets, the relay state of each direction, its class and
//! path, and what its telemetry reports.
use super::config::Action;
use super::peer::handover::Handover;
use super::session::Direction;
use super::sys;
pub use super::telemetry::FlowPath as Path;
use super::telemetry::{parse_tcp_info, Flow, FlowState, LegSide, Legs, TcpInfo};
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::time::Instant;

pub const CLIENT: u64 = 0;
pub const SERVER: u64 = 1;

/// Per-socket epoll registration state.
#[derive(Default)]
pub struct Reg {
    pub registered: bool,
    pub mask: u32,
    /// The kernel reported HUP: with an empty mask the socket would wake us forever.
    pub hup: bool,
}

pub struct Session {
    pub id: u64,
    pub client: OwnedFd,
    pub server: OwnedFd,
    pub client_addr: SocketAddr,
    pub server_addr: SocketAddr,
    pub connecting: bool,
    pub started: Instant,
    pub started_at: f64,
    pub last_active: Instant,
    pub up: Direction,
    pub down: Direction,
    pub class: String,
    pub action: Action,
    pub sat_is_client: bool,
    pub cc: [String; 2],
    pub info: [TcpInfo; 2],
    pub sampled_bytes: (u64, u64),
    pub sampled_at: Instant,
    pub rates: (f64, f64),
    pub regs: [Reg; 2],
    /// Which way the flow crossed the satellite.
    pub path: Path,
    /// Terminal, peer path: until the hub's status (and the replay buffer for a fallback).
    pub handover: Option<Box<Handover>>,
    /// Hub, a flow that came on the peer listener: the terminal is owed a status once the
    /// connect to the server has finished.
    pub status_owed: bool,
}

impl Session {
    pub fn fd(&self, side: u64) -> RawFd {
        if side == CLIENT {
            self.client.as_raw_fd()
        } else {
            self.server.as_raw_fd()
        }
    }

    pub fn state(&self) -> FlowState {
        if self.connecting || self.handover.is_some() {
            FlowState::Connecting
        } else if self.up.eof || self.down.eof {
            FlowState::HalfClosed
        } else {
            FlowState::Established
        }
    }

    pub fn to_flow(&self, ended: Option<(&str, f64)>) -> Flow {
        Flow {
            id: self.id,
            state: if ended.is_some() {
                FlowState::Closed
            } else {
                self.state()
            },
            class: self.class.clone(),
            action: self.action,
            client: self.client_addr.to_string(),
            server: self.server_addr.to_string(),
            family: if self.client_addr.is_ipv4() { 4 } else { 6 },
            started_at: self.started_at,
            ended_at: ended.map(|e| e.1),
            end_reason: ended.map(|e| e.0.to_string()),
            bytes_up: self.up.bytes,
            bytes_down: self.down.bytes,
            rate_up_bps: self.rates.0,
            rate_down_bps: self.rates.1,
            legs: Legs {
                client: self.info[0].clone(),
                server: self.info[1].clone(),
                satellite: if self.sat_is_client {
                    LegSide::Client
                } else {
                    LegSide::Server
                },
            },
            path: self.path,
        }
    }

    /// Both legs' TCP_INFO now: a new flow shows its congestion control and RTT at once, not
    /// only from its first periodic sample (a short flow may be listed before that).
    pub fn read_info(&mut self) {
        for side in [CLIENT, SERVER] {
            if let Some(raw) = sys::tcp_info_raw(self.fd(side)) {
                self.info[side as usize] = parse_tcp_info(&raw, &self.cc[side as usize]);
            }
        }
    }

    pub fn sample(&mut self) {
        self.read_info();
        let dt = self.sampled_at.elapsed().as_secs_f64();
        if dt > 0.0 {
            self.rates = (
                (self.up.bytes - self.sampled_bytes.0) as f64 * 8.0 / dt,
                (self.down.bytes - self.sampled_bytes.1) as f64 * 8.0 / dt,
            );
        }
        self.sampled_bytes = (self.up.bytes, self.down.bytes);
        self.sampled_at = Instant::now();
    }
}
