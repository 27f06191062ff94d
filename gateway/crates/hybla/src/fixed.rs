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
/// hybla_ld's delivery rate: Q24 segments per microsecond (mirrors HYBLA_LD_BW_SHIFT).
pub const LD_BW_SHIFT: u32 = 24;
/// hybla_ld's rho floor (mirrors HYBLA_LD_RHO_MIN): a short path grows as a GEO one does in time.
pub const LD_RHO_MIN: u32 = 6;
/// hybla_ld's queue threshold floor, microseconds (mirrors HYBLA_LD_QUEUE_MIN_US).
pub const LD_QUEUE_MIN_US: u32 = 5000;

/// Mirror of `struct hybla_ld_round` in bpf/hybla_math.h: hybla_ld's round tracking.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LdRound {
    pub start_us: u64,
    pub hold_until_us: u64,
    /// tp->delivered + tp->lost at the round's start.
    pub carried: u32,
    pub min_rtt_us: u32,
    pub last_min_rtt_us: u32,
    pub bw_q24: u32,
    pub bw_prev_q24: u32,
    pub queue: u32,
}

/// Mirror of `struct hybla_ld_streak` in bpf/hybla_math.h: a standing queue's rounds.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LdStreak {
    pub rounds: u16,
    pub clamped: u16,
    pub cwnd_before: u32,
}

/// Rounds a standing queue may outlast its cuts' effect before the min RTT is learned again
/// (mirrors HYBLA_LD_RELEARN_ROUNDS).
pub const LD_RELEARN_ROUNDS: u16 = 2;

impl LdStreak {
    /// A round's end: the window to give back when the streak outlived its cuts (re-learn the
    /// min RTT), else 0.
    pub fn end(&mut self, queue: bool, cwnd: u32, settled: bool) -> u32 {
        unsafe {
            ffi::perigee_hybla_ld_streak_end(self, i32::from(queue), cwnd, i32::from(settled))
        }
    }

    /// A queue cut of the streak (whether it stopped at the halving floor).
    pub fn cut(&mut self, cwnd: u32, bw_q24: u32, min_rtt_us: u32) {
        unsafe { ffi::perigee_hybla_ld_streak_cut(self, cwnd, bw_q24, min_rtt_us) }
    }
}

mod ffi {
    extern "C" {
        pub fn perigee_hybla_rho_q16(rtt_us: u32, rtt0_us: u32) -> u32;
        pub fn perigee_hybla_ld_rho_q16(rtt_us: u32, rtt0_us: u32) -> u32;
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
        pub fn perigee_hybla_ld_queue_thresh_us(min_rtt_us: u32) -> u32;
        pub fn perigee_hybla_ld_bw_q24(delivered: u32, elapsed_us: u64) -> u32;
        pub fn perigee_hybla_ld_window(bw_q24: u32, t_us: u32) -> u32;
        pub fn perigee_hybla_ld_round_len(min_rtt_us: u32) -> u64;
        pub fn perigee_hybla_ld_standing_queue(round_min_rtt_us: u32, min_rtt_us: u32) -> i32;
        pub fn perigee_hybla_ld_round_start(r: *mut super::LdRound, now_us: u64, carried: u32);
        pub fn perigee_hybla_ld_round_update(
            r: *mut super::LdRound,
            now_us: u64,
            carried: u32,
            rtt_us: i32,
            min_rtt_us: u32,
        ) -> i32;
        pub fn perigee_hybla_ld_queue_now(r: *const super::LdRound, min_rtt_us: u32) -> i32;
        pub fn perigee_hybla_ld_may_cut(r: *mut super::LdRound, now_us: u64) -> i32;
        pub fn perigee_hybla_ld_streak_end(
            s: *mut super::LdStreak,
            queue: i32,
            cwnd: u32,
            settled: i32,
        ) -> u32;
        pub fn perigee_hybla_ld_streak_cut(
            s: *mut super::LdStreak,
            cwnd: u32,
            bw_q24: u32,
            min_rtt_us: u32,
        );
        pub fn perigee_hybla_ld_ssthresh(
            cwnd: u32,
            queue: i32,
            bw_q24: u32,
            min_rtt_us: u32,
            rho_q16: u32,
            ceiling: u32,
        ) -> u32;
        pub fn perigee_hybla_ld_queue_cut(cwnd: u32, bw_q24: u32, min_rtt_us: u32) -> u32;
        pub fn perigee_hybla_ld_in_flight(
            packets_out: u32,
            sacked_out: u32,
            lost_out: u32,
            retrans_out: u32,
        ) -> u32;
        pub fn perigee_hybla_ld_recovery_cwnd(
            in_flight: u32,
            target: u32,
            prior_cwnd: u32,
            prr_delivered: u32,
            prr_out: u32,
        ) -> u32;
        pub fn perigee_hybla_ld_pacing_rate(
            mss: u32,
            cwnd: u32,
            packets_out: u32,
            ssthresh: u32,
            srtt_us8: u32,
            max_rate: u64,
        ) -> u64;
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

pub fn ld_rho_q16(rtt_us: u32, rtt0_us: u32) -> u32 {
    unsafe { ffi::perigee_hybla_ld_rho_q16(rtt_us, rtt0_us) }
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

// hybla_ld (loss differentiation): the same C, see bpf/hybla_math.h for the formulas.

/// The queueing delay (us) above which a round's RTTs show a standing queue.
pub fn ld_queue_thresh_us(min_rtt_us: u32) -> u32 {
    unsafe { ffi::perigee_hybla_ld_queue_thresh_us(min_rtt_us) }
}

/// Rate, Q24 segments per microsecond.
pub fn ld_bw_q24(delivered: u32, elapsed_us: u64) -> u32 {
    unsafe { ffi::perigee_hybla_ld_bw_q24(delivered, elapsed_us) }
}

/// Segments in flight at `bw_q24` over `t_us`, rounded down.
pub fn ld_window(bw_q24: u32, t_us: u32) -> u32 {
    unsafe { ffi::perigee_hybla_ld_window(bw_q24, t_us) }
}

/// The rounds' period (us): the min RTT rounded up to the grid every flow of a path shares.
pub fn ld_round_len(min_rtt_us: u32) -> u64 {
    unsafe { ffi::perigee_hybla_ld_round_len(min_rtt_us) }
}

pub fn ld_standing_queue(round_min_rtt_us: u32, min_rtt_us: u32) -> bool {
    unsafe { ffi::perigee_hybla_ld_standing_queue(round_min_rtt_us, min_rtt_us) != 0 }
}

impl LdRound {
    /// A round starting at `now_us` with the connection's carried count (delivered + lost).
    pub fn started(now_us: u64, carried: u32) -> LdRound {
        let mut r = LdRound::default();
        unsafe { ffi::perigee_hybla_ld_round_start(&mut r, now_us, carried) };
        r
    }

    /// One ACK; true when it completed a round.
    pub fn update(&mut self, now_us: u64, carried: u32, rtt_us: i32, min_rtt_us: u32) -> bool {
        unsafe {
            ffi::perigee_hybla_ld_round_update(self, now_us, carried, rtt_us, min_rtt_us) != 0
        }
    }

    pub fn queue_now(&self, min_rtt_us: u32) -> bool {
        unsafe { ffi::perigee_hybla_ld_queue_now(self, min_rtt_us) != 0 }
    }

    /// Whether a queue cut may happen at `now_us` (and if so, the hold that follows it).
    pub fn may_cut(&mut self, now_us: u64) -> bool {
        unsafe { ffi::perigee_hybla_ld_may_cut(self, now_us) != 0 }
    }
}

pub fn ld_ssthresh(
    cwnd: u32,
    queue: bool,
    bw_q24: u32,
    min_rtt_us: u32,
    rho_q16: u32,
    ceiling: u32,
) -> u32 {
    unsafe {
        ffi::perigee_hybla_ld_ssthresh(cwnd, i32::from(queue), bw_q24, min_rtt_us, rho_q16, ceiling)
    }
}

pub fn ld_queue_cut(cwnd: u32, bw_q24: u32, min_rtt_us: u32) -> u32 {
    unsafe { ffi::perigee_hybla_ld_queue_cut(cwnd, bw_q24, min_rtt_us) }
}

pub fn ld_in_flight(packets_out: u32, sacked_out: u32, lost_out: u32, retrans_out: u32) -> u32 {
    unsafe { ffi::perigee_hybla_ld_in_flight(packets_out, sacked_out, lost_out, retrans_out) }
}

pub fn ld_recovery_cwnd(
    in_flight: u32,
    target: u32,
    prior_cwnd: u32,
    prr_delivered: u32,
    prr_out: u32,
) -> u32 {
    unsafe {
        ffi::perigee_hybla_ld_recovery_cwnd(in_flight, target, prior_cwnd, prr_delivered, prr_out)
    }
}

/// Bytes per second; `srtt_us8` is the smoothed RTT in microseconds << 3 (tp->srtt_us).
pub fn ld_pacing_rate(
    mss: u32,
    cwnd: u32,
    packets_out: u32,
    ssthresh: u32,
    srtt_us8: u32,
    max_rate: u64,
) -> u64 {
    unsafe {
        ffi::perigee_hybla_ld_pacing_rate(mss, cwnd, packets_out, ssthresh, srtt_us8, max_rate)
    }
}

/// Q24 segments per microsecond to segments per second.
pub fn bw_to_segs_per_s(bw_q24: u32) -> f64 {
    f64::from(bw_q24) / f64::from(1u32 << LD_BW_SHIFT) * 1e6
}
