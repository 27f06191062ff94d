//! Safe wrappers over the natively compiled `bpf/hybla_math.h`: the same fixed-point code the
//! BPF congestion control runs, exposed so tests (and diagnostics) can exercise it.

/// rho in Q16: 1 << 16 == 1.0.
pub const RHO_SHIFT: u32 = 16;
pub const RHO_ONE: u32 = 1 << RHO_SHIFT;
/// rho is capped at this many RTT0s (mirrors HYBLA_RHO_MAX_INT).
pub const RHO_MAX_INT: u32 = 256;
/// Carried cwnd remainder: Q32 fraction of a segment.
pub const FRAC_SHIFT: u32 = 32;
/// Explicit cwnd ceiling in segments (mirrors HYBLA_CWND_CEILING).
pub const CWND_CEILING: u32 = 65536;
/// Segments credited per ACK at most (mirrors HYBLA_ACKED_MAX).
pub const ACKED_MAX: u32 = 16384;
pub const RTT0_DEFAULT_US: u32 = 25_000;

mod ffi {
    extern "C" {
        pub fn perigee_hybla_rho_q16(rtt_us: u32, rtt0_us: u32) -> u32;
        pub fn perigee_hybla_ss_inc_q32(rho_q16: u32) -> u64;
        pub fn perigee_hybla_ca_inc_q32(rho_q16: u32, cwnd: u32) -> u64;
        pub fn perigee_hybla_initial_cwnd(iw: u32, rho_q16: u32, ceiling: u32) -> u32;
        pub fn perigee_hybla_on_ack(
            cwnd: *mut u32,
            frac: *mut u32,
            ssthresh: u32,
            rho_q16: u32,
            acked: u32,
            ceiling: u32,
        );
        pub fn perigee_hybla_ssthresh(cwnd: u32) -> u32;
        pub fn perigee_hybla_effective_ceiling(snd_cwnd_clamp: u32, cwnd_max: u32) -> u32;
        pub fn perigee_hybla_undo(cwnd: u32, prior_cwnd: u32, ceiling: u32) -> u32;
    }
}

/// Congestion window as the BPF CC keeps it: whole segments plus a Q32 carried remainder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    pub cwnd: u32,
    pub frac: u32,
}

impl Window {
    pub fn segments(&self) -> f64 {
        f64::from(self.cwnd) + f64::from(self.frac) / 2f64.powi(FRAC_SHIFT as i32)
    }
}

// The C functions are pure arithmetic on their arguments (no globals, no pointers kept).
pub fn rho_q16(rtt_us: u32, rtt0_us: u32) -> u32 {
    unsafe { ffi::perigee_hybla_rho_q16(rtt_us, rtt0_us) }
}

/// 2^rho - 1 in Q32, or 0 meaning "saturates the cwnd ceiling".
pub fn ss_inc_q32(rho_q16: u32) -> u64 {
    unsafe { ffi::perigee_hybla_ss_inc_q32(rho_q16) }
}

pub fn ca_inc_q32(rho_q16: u32, cwnd: u32) -> u64 {
    unsafe { ffi::perigee_hybla_ca_inc_q32(rho_q16, cwnd) }
}

pub fn initial_cwnd(iw: u32, rho_q16: u32, ceiling: u32) -> u32 {
    unsafe { ffi::perigee_hybla_initial_cwnd(iw, rho_q16, ceiling) }
}

pub fn on_ack(w: &mut Window, ssthresh: u32, rho_q16: u32, acked: u32, ceiling: u32) {
    unsafe {
        ffi::perigee_hybla_on_ack(&mut w.cwnd, &mut w.frac, ssthresh, rho_q16, acked, ceiling)
    }
}

pub fn ssthresh(cwnd: u32) -> u32 {
    unsafe { ffi::perigee_hybla_ssthresh(cwnd) }
}

/// The ceiling the BPF CC applies: min(65536, snd_cwnd_clamp, cwnd_max if nonzero), >= 1.
pub fn effective_ceiling(snd_cwnd_clamp: u32, cwnd_max: u32) -> u32 {
    unsafe { ffi::perigee_hybla_effective_ceiling(snd_cwnd_clamp, cwnd_max) }
}

/// undo_cwnd: max(cwnd, prior_cwnd) within the ceiling.
pub fn undo(cwnd: u32, prior_cwnd: u32, ceiling: u32) -> u32 {
    unsafe { ffi::perigee_hybla_undo(cwnd, prior_cwnd, ceiling) }
}

pub fn rho_to_f64(rho_q16: u32) -> f64 {
    f64::from(rho_q16) / f64::from(RHO_ONE)
}

pub fn q32_to_f64(v: u64) -> f64 {
    v as f64 / 2f64.powi(FRAC_SHIFT as i32)
}
