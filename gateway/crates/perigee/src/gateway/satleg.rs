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

impl SatLeg {
    /// Whether an open connection made with `self` can take `new` in place: congestion control,
    /// send buffer and pacing change on a live socket, but the receive window's scale was fixed
    /// by the SYN from the buffer of the time, so a receive buffer that needs a larger scale
    /// needs a new connection (0, the kernel's autotuning, is only compatible with itself).
    pub fn retunable_to(&self, new: &SatLeg) -> bool {
        match (self.rcvbuf, new.rcvbuf) {
            (0, 0) => true,
            (0, _) | (_, 0) => false,
            (old, new) => window_scale(new) <= window_scale(old),
        }
    }

    /// Put these settings on an open socket (best effort, like at its creation).
    pub fn apply_live(&self, fd: std::os::fd::RawFd, nodelay: bool) {
        let _ = super::sys::set_cc(fd, &self.cc);
        super::sys::set_bufs(fd, self.sndbuf, self.rcvbuf);
        // No cap: the largest rate, which the kernel treats as unpaced.
        let _ = super::sys::set_pacing(
            fd,
            if self.pacing_bps > 0 {
                self.pacing_bps
            } else {
                u64::MAX
            },
        );
        // Both ways: turning nodelay off must give the open connection Nagle back.
        let _ = super::sys::set_int(fd, libc::IPPROTO_TCP, libc::TCP_NODELAY, i32::from(nodelay));
    }
}

/// What a connection takes from its route only when it opens and cannot change later: the
/// satellite routes' initial receive window (0 = no route value).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Opening {
    pub initrwnd: u32,
}

impl Opening {
    pub fn of(cfg: &GatewayConfig) -> Opening {
        Opening {
            initrwnd: cfg.satellite.initrwnd,
        }
    }

    /// Whether connections opened under `self` receive as `new` asks: the same initrwnd, or none
    /// (no route value opens the whole receive space, which a route value can only lower). A
    /// warm connection opened with a small initrwnd grows its window only as data arrives, so
    /// it needs replacing (measured on geo-skyplex, bod-tuning: kept connections opened under
    /// initrwnd 10, tuned t90 7.2 s; new ones 4.1 s). A new initcwnd does not: each kept
    /// connection is replaced with the new settings as a flow takes it, and Hybla's first flight
    /// is initcwnd x rho, above the pipe on a GEO link either way (caini-bod: kept connections
    /// opened under initcwnd 10 where the tuning asks 49, t90 4.0-4.3 s; new ones 5.4-6.0 s).
    pub fn covers(&self, new: &Opening) -> bool {
        self.initrwnd == new.initrwnd || self.initrwnd == 0
    }
}

/// The smallest shift that lets a 16-bit window cover `rcvbuf` bytes, at most 14, as the kernel's
/// tcp_select_initial_window picks it. The kernel starts from the doubled SO_RCVBUF, which moves
/// an old and a new buffer alike: what counts is comparing two of these.
pub fn window_scale(rcvbuf: u64) -> u8 {
    let mut space = rcvbuf;
    let mut scale = 0u8;
    while space > 65535 && scale < 14 {
        space >>= 1;
        scale += 1;
    }
    scale
}

#[cfg(test)]
mod tests {
    use super::*;

    fn leg(rcvbuf: u64) -> SatLeg {
        SatLeg {
            cc: "hybla".into(),
            sndbuf: rcvbuf,
            rcvbuf,
            pacing_bps: 0,
        }
    }

    #[test]
    fn the_receive_window_is_covered_only_as_it_opened() {
        let o = |initrwnd| Opening { initrwnd };
        // satlab's start (no initrwnd) to the API's BoD tuning (initrwnd 384): kept.
        assert!(o(0).covers(&o(384)));
        assert!(o(384).covers(&o(384)));
        // The daemon's defaults (initrwnd 10) to the tuning: new connections.
        assert!(!o(10).covers(&o(384)));
        assert!(!o(384).covers(&o(0)));
    }

    #[test]
    fn window_scale_follows_the_kernel() {
        assert_eq!(window_scale(65535), 0);
        assert_eq!(window_scale(65536), 1);
        assert_eq!(window_scale(1 << 20), 5);
        assert_eq!(window_scale(1_109_680), 5);
        assert_eq!(window_scale(4 << 20), 7);
        assert_eq!(window_scale(u64::MAX), 14);
    }

    #[test]
    fn bod_tuning_is_retunable_but_a_larger_window_scale_is_not() {
        // satlab's link-derived buffers to the API's BoD derivation on geo-skyplex: same scale.
        assert!(leg(1 << 20).retunable_to(&leg(1_109_680)));
        assert!(
            leg(4 << 20).retunable_to(&leg(1 << 20)),
            "a smaller buffer fits the old scale"
        );
        assert!(
            !leg(1 << 20).retunable_to(&leg(4 << 20)),
            "the SYN's scale cannot cover 4 MB"
        );
        assert!(!leg(0).retunable_to(&leg(1 << 20)));
        assert!(!leg(1 << 20).retunable_to(&leg(0)));
        assert!(leg(0).retunable_to(&leg(0)));
    }
}
