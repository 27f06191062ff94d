//! One split flow's record: its two sockets, the relay state of each direction, its class and
//! path, and what its telemetry reports.
use super::config::Action;
use super::meter::{Crossed, LegMeter};
use super::peer::tunnel::{Phase, Tunnel};
use super::session::Direction;
use super::sys;
pub use super::telemetry::FlowPath as Path;
use super::telemetry::{
    parse_tcp_info, CcReason, Flow, FlowState, LegSide, Legs, Relay, SatelliteLeg, TcpInfo,
};
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
    /// Why the satellite leg runs cc[its side].
    pub sat_reason: CcReason,
    /// What the satellite leg carried for this flow so far (every sample's Crossed added up).
    pub sat_crossed: Crossed,
    /// The satellite leg's retransmissions when the flow was admitted (a warm peer connection's
    /// handshake may have had some): the flow's own are those above it.
    pub sat_retrans_at_admit: u32,
    pub info: [TcpInfo; 2],
    /// Relay bytes already reported to the master.
    pub sampled_bytes: (u64, u64),
    pub sampled_at: Instant,
    /// What each socket had delivered at the last sample (docs/splitter.md, *Rates*).
    pub meters: [LegMeter; 2],
    /// Each socket's family (a peer connection's may differ from the flow's).
    pub leg_v6: [bool; 2],
    pub regs: [Reg; 2],
    /// The remote site of the client (`sites`).
    pub site: String,
    /// The DSCP the re-originated leg carries (None: unknown, left at the default).
    pub dscp: Option<u8>,
    /// Which way the flow crossed the satellite.
    pub path: Path,
    /// A flow on the peer path: its relay through the peer connection (the server side at a
    /// terminal, the client side at a hub), which carries the frames and encrypts.
    pub tunnel: Option<Box<Tunnel>>,
    /// Hub: the terminal that opened it (name, key), so revoking the terminal ends it.
    pub opened_by: Option<(String, String)>,
    /// Terminal: the hub gateway whose peer connection carries it (its pool is told when the
    /// connection fails).
    pub peer_hub: Option<std::net::SocketAddr>,
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
        let tunnel_ended = self.tunnel.as_ref().map(|t| t.ended());
        if self.connecting
            || self
                .tunnel
                .as_ref()
                .is_some_and(|t| t.phase != Phase::Relay)
        {
            FlowState::Connecting
        } else if self.up.eof || self.down.eof || tunnel_ended.is_some_and(|(a, b)| a || b) {
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
            rate_up_bps: self.sat_up_down(self.info_rates()).0,
            rate_down_bps: self.sat_up_down(self.info_rates()).1,
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
            relay: Relay::Splitter,
            site: self.site.clone(),
            dscp: self.dscp,
            cache: None,
            satellite: Some(self.satellite_leg()),
        }
    }

    fn satellite_leg(&self) -> SatelliteLeg {
        let c = &self.sat_crossed;
        SatelliteLeg {
            cc: self.cc[self.sat_side()].clone(),
            cc_reason: self.sat_reason,
            segments_sent: c.data_segs,
            segments_retransmitted: c.retrans_segs,
            retransmit_pct: if c.data_segs > 0 {
                100.0 * c.retrans_segs as f64 / c.data_segs as f64
            } else {
                0.0
            },
        }
    }

    /// Why the leg runs `ran`: the reason it was asked for, or a fallback when it is not that one.
    pub fn cc_reason(asked: &str, asked_reason: CcReason, ran: &str) -> CcReason {
        if asked == ran {
            asked_reason
        } else {
            CcReason::Fallback
        }
    }

    /// The index of the satellite-facing socket in `info`, `cc` and `meters`.
    pub fn sat_side(&self) -> usize {
        if self.sat_is_client {
            CLIENT as usize
        } else {
            SERVER as usize
        }
    }

    /// The satellite socket's (sent, received) figure as (toward the server, toward the
    /// client): the client-facing socket sends toward the client, the server-facing one toward
    /// the server.
    pub fn sat_up_down<T>(&self, (tx, rx): (T, T)) -> (T, T) {
        if self.sat_is_client {
            (rx, tx)
        } else {
            (tx, rx)
        }
    }

    fn info_rates(&self) -> (f64, f64) {
        let i = &self.info[self.sat_side()];
        (i.tx_bps, i.rx_bps)
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

    /// Reads both sockets' TCP_INFO; returns what crossed the satellite-facing socket since the
    /// last sample. Only the kernel's delivered and received bytes count, never the relay's.
    pub fn sample(&mut self) -> Crossed {
        let dt = self.sampled_at.elapsed().as_secs_f64();
        let mut sat = Crossed::default();
        for side in [CLIENT as usize, SERVER as usize] {
            if let Some(raw) = sys::tcp_info_raw(self.fd(side as u64)) {
                self.info[side] = parse_tcp_info(&raw, &self.cc[side]);
                let c = self.meters[side].sample(&mut self.info[side], self.leg_v6[side], dt);
                if side == self.sat_side() {
                    sat = c;
                }
            }
        }
        self.sampled_at = Instant::now();
        self.sat_crossed.add(&sat);
        sat
    }

    /// The peer socket's side (the satellite's) of a flow on the peer path.
    pub fn peer_side(&self) -> u64 {
        self.sat_side() as u64
    }

    /// A tunnel's byte counts into the flow's (toward the server, toward the client).
    pub fn count_tunnel(&mut self) {
        let Some(t) = &self.tunnel else { return };
        let (to_plain, from_plain) = (t.to_plain, t.from_plain);
        if self.sat_is_client {
            // Hub: the plain socket is the server's.
            (self.up.bytes, self.down.bytes) = (to_plain, from_plain);
        } else {
            (self.up.bytes, self.down.bytes) = (from_plain, to_plain);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_leg_that_runs_what_it_asked_for_keeps_the_reason_else_falls_back() {
        for asked in [CcReason::Default, CcReason::Class] {
            assert_eq!(Session::cc_reason("hybla_ld", asked, "hybla_ld"), asked);
            assert_eq!(
                Session::cc_reason("hybla_ld", asked, "hybla"),
                CcReason::Fallback
            );
        }
        assert_eq!(CcReason::Fallback.as_str(), "fallback");
    }
}
