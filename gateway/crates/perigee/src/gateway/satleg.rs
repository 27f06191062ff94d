//! The satellite leg's socket settings for one flow: the configured defaults with a class's
//! overrides. Used for the splitter's satellite-facing sockets and the peer path's connections.
use super::config::{Class, GatewayConfig};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SatLeg {
    pub cc: String,
    /// 0 = leave the kernel's autotuning.
    pub sndbuf: u64,
    pub rcvbuf: u64,
    /// bit/s; 0 = no cap.
    pub pacing_bps: u64,
}

impl SatLeg {
    pub fn of(cfg: &GatewayConfig, class: Option<&Class>) -> SatLeg {
        let s = &cfg.satellite;
        let mut sat = SatLeg {
            cc: s.congestion_control.to_string(),
            sndbuf: s.sndbuf_bytes,
            rcvbuf: s.rcvbuf_bytes,
            pacing_bps: s.pacing_rate_bps,
        };
        if let Some(c) = class {
            if let Some(cc) = c.satellite.congestion_control {
                sat.cc = cc.to_string();
            }
            if c.satellite.buffer_bytes > 0 {
                sat.sndbuf = c.satellite.buffer_bytes;
                sat.rcvbuf = c.satellite.buffer_bytes;
            }
            if c.satellite.pacing_rate_bps > 0 {
                sat.pacing_bps = c.satellite.pacing_rate_bps;
            }
        }
        sat
    }
}
