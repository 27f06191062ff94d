//! Reference model of Hybla's formulas in plain f64 arithmetic (Caini & Firrincieli 2004).
//! The fixed-point code in `bpf/hybla_math.h` is tested against it; the kernel keeps cwnd in
//! whole segments, so the model does too and carries the fractional remainder exactly.

/// rho = max(RTT / RTT0, 1), capped like the fixed-point code.
pub fn rho(rtt_ms: f64, rtt0_ms: f64) -> f64 {
    (rtt_ms / rtt0_ms).clamp(1.0, f64::from(crate::fixed::RHO_MAX_INT))
}

/// Slow start: segments added per ACKed segment.
pub fn ss_increment(rho: f64) -> f64 {
    rho.exp2() - 1.0
}

/// Congestion avoidance: segments added per ACKed segment at window `cwnd`.
pub fn ca_increment(rho: f64, cwnd: u32) -> f64 {
    rho * rho / f64::from(cwnd.max(1))
}

/// Initial window: the stack's initial window scaled by rho.
pub fn initial_cwnd(iw: u32, rho: f64, ceiling: u32) -> u32 {
    // Floor at IW first, then the ceiling wins (a ceiling below IW caps IW too).
    ((f64::from(iw) * rho).floor() as u32).max(iw).min(ceiling)
}

/// The cwnd ceiling: the built-in clamp, the socket's clamp and the operator's cwnd_max
/// (0 = none), whichever is lowest, at least 1 segment.
pub fn ceiling(snd_cwnd_clamp: u32, cwnd_max: u32) -> u32 {
    let operator = if cwnd_max == 0 { u32::MAX } else { cwnd_max };
    crate::fixed::CWND_CEILING
        .min(snd_cwnd_clamp)
        .min(operator)
        .max(1)
}

/// undo_cwnd: back to the larger window, never above the ceiling.
pub fn undo(cwnd: u32, prior_cwnd: u32, ceiling: u32) -> u32 {
    cwnd.max(prior_cwnd).min(ceiling)
}

/// Window state of the model: whole segments plus the exact carried fraction.
#[derive(Debug, Clone, Copy)]
pub struct ModelWindow {
    pub cwnd: u32,
    pub frac: f64,
}

impl ModelWindow {
    pub fn segments(&self) -> f64 {
        f64::from(self.cwnd) + self.frac
    }

    /// One ACK crediting `acked` segments; same slow-start exit (at ssthresh) and ceiling
    /// rules as the fixed-point code.
    pub fn on_ack(&mut self, ssthresh: u32, rho: f64, acked: u32, ceiling: u32) {
        let ceiling = ceiling.clamp(1, crate::fixed::CWND_CEILING);
        let acked = f64::from(acked.min(crate::fixed::ACKED_MAX));
        let cwnd = f64::from(self.cwnd.max(1));
        let (mut next, mut frac);
        if self.cwnd < ssthresh {
            let total = self.frac + ss_increment(rho) * acked;
            next = cwnd + total.floor();
            frac = total.fract();
            if next >= f64::from(ssthresh) {
                next = f64::from(ssthresh);
                frac = 0.0;
            }
        } else {
            let total = self.frac + ca_increment(rho, self.cwnd) * acked;
            next = cwnd + total.floor();
            frac = total.fract();
        }
        if next >= f64::from(ceiling) {
            next = f64::from(ceiling);
            frac = 0.0;
        }
        self.cwnd = next as u32;
        self.frac = frac;
    }
}

/// hybla_ld's loss differentiation in plain f64 (times in microseconds, rates in segments per
/// microsecond), the reference `bpf/hybla_math.h`'s hybla_ld_* functions are tested against.
pub mod ld {
    /// hybla_ld's rho: Hybla's, at least `fixed::LD_RHO_MIN`.
    pub fn rho(rtt_ms: f64, rtt0_ms: f64) -> f64 {
        super::rho(rtt_ms, rtt0_ms).max(f64::from(crate::fixed::LD_RHO_MIN))
    }

    /// Queueing delay above which a round shows a standing queue: max(min RTT / 8, 5 ms).
    pub fn queue_thresh_us(min_rtt_us: f64) -> f64 {
        (min_rtt_us / 8.0).max(5000.0)
    }

    /// The largest delivery rate the Q24 format holds: ~256 segments per microsecond (about
    /// 3 Tbit/s at MSS 1448, beyond any link); faster rounds saturate there.
    pub const BW_MAX: f64 = (u32::MAX as f64) / (1u64 << 24) as f64;

    /// Rate of `delivered` segments over `elapsed_us` (0 for an empty interval).
    pub fn bw(delivered: f64, elapsed_us: f64) -> f64 {
        if elapsed_us <= 0.0 {
            0.0
        } else {
            (delivered / elapsed_us).min(BW_MAX)
        }
    }

    /// Whether a round whose smallest RTT was `round_min_rtt_us` shows a standing queue
    /// (0 = no sample / no minimum yet: no).
    pub fn standing_queue(round_min_rtt_us: f64, min_rtt_us: f64) -> bool {
        round_min_rtt_us > 0.0
            && min_rtt_us > 0.0
            && round_min_rtt_us > min_rtt_us + queue_thresh_us(min_rtt_us).floor()
    }

    fn half(cwnd: f64) -> f64 {
        (cwnd / 2.0).floor().max(2.0)
    }

    /// ssthresh on a loss: halve on congestion (or before any rate is measured); for a bit
    /// error bw x (min RTT + threshold), at most one RTT of Hybla growth (rho^2) above cwnd and
    /// the ceiling, at least half.
    pub fn ssthresh(
        cwnd: f64,
        queue: bool,
        bw: f64,
        min_rtt_us: f64,
        rho: f64,
        ceiling: f64,
    ) -> f64 {
        if queue || bw <= 0.0 || min_rtt_us <= 0.0 {
            return half(cwnd);
        }
        let room = (bw * (min_rtt_us + queue_thresh_us(min_rtt_us).floor())).floor();
        let grown = cwnd + (rho * rho).floor();
        room.min(grown).min(ceiling).max(half(cwnd))
    }

    /// A standing queue without loss: bw x (min RTT + threshold / 2), within [half, cwnd].
    pub fn queue_cut(cwnd: f64, bw: f64, min_rtt_us: f64) -> f64 {
        let thr_half = (queue_thresh_us(min_rtt_us).floor() / 2.0).floor();
        (bw * (min_rtt_us + thr_half))
            .floor()
            .max(half(cwnd))
            .min(cwnd)
    }

    /// The rounds' period: the min RTT rounded up to a multiple of the largest power of two
    /// that is at most min RTT / 8 (1 us at least), so flows whose minima differ by a little
    /// share it.
    pub fn round_len(min_rtt_us: f64) -> f64 {
        let eighth = (min_rtt_us / 8.0).floor();
        let q = if eighth < 1.0 {
            1.0
        } else {
            2f64.powi(eighth.log2().floor() as i32)
        };
        (min_rtt_us / q).ceil() * q
    }

    /// The end of a round that started at `start_us`: the next multiple of the rounds' period
    /// on the clock, or the one after when that is under half a period away (rounds of all
    /// flows on one path cover the same intervals).
    pub fn round_end(start_us: f64, min_rtt_us: f64) -> f64 {
        let len = round_len(min_rtt_us);
        let end = ((start_us / len).floor() + 1.0) * len;
        if end - start_us < (len / 2.0).floor() {
            end + len
        } else {
            end
        }
    }

    /// Rounds of about one minimum RTT of ACK arrivals, aligned to the clock; their rate counts
    /// the segments the path carried, delivered or lost.
    #[derive(Debug, Clone, Copy, Default)]
    pub struct Rounds {
        pub start_us: f64,
        pub hold_until_us: f64,
        pub carried: f64,
        /// Smallest RTT sample of the round so far, 0 = none.
        pub min_rtt_us: f64,
        /// Smallest RTT sample of the last completed round.
        pub last_min_rtt_us: f64,
        pub bw: f64,
        pub bw_prev: f64,
        pub queue: bool,
    }

    impl Rounds {
        pub fn started(now_us: f64, carried: f64) -> Rounds {
            Rounds {
                start_us: now_us,
                carried,
                ..Rounds::default()
            }
        }

        /// One ACK with `carried` = delivered + lost so far; true when it ends a round (then bw,
        /// bw_prev and queue describe it).
        pub fn on_ack(&mut self, now_us: f64, carried: f64, rtt_us: f64, min_rtt_us: f64) -> bool {
            if rtt_us > 0.0 && (self.min_rtt_us == 0.0 || rtt_us < self.min_rtt_us) {
                self.min_rtt_us = rtt_us;
            }
            if min_rtt_us <= 0.0 || now_us < round_end(self.start_us, min_rtt_us) {
                return false;
            }
            let elapsed = now_us - self.start_us;
            self.bw_prev = self.bw;
            self.bw = bw(carried - self.carried, elapsed);
            self.queue = standing_queue(self.min_rtt_us, min_rtt_us);
            self.last_min_rtt_us = self.min_rtt_us;
            *self = Rounds {
                start_us: now_us,
                carried,
                min_rtt_us: 0.0,
                ..*self
            };
            true
        }

        /// A queue cut at `now_us`: not before the last one's effect is back (one RTT with the
        /// queue, the last round's smallest RTT, after it).
        pub fn may_cut(&mut self, now_us: f64) -> bool {
            if now_us < self.hold_until_us {
                return false;
            }
            self.hold_until_us = now_us + self.last_min_rtt_us;
            true
        }

        /// A queue now: the last round showed one, or this one's samples already do.
        pub fn queue_now(&self, min_rtt_us: f64) -> bool {
            self.queue || standing_queue(self.min_rtt_us, min_rtt_us)
        }
    }

    /// A standing queue's rounds: when it still stands `relearn_rounds` rounds after its cuts'
    /// effect is back (cuts that reached their target, not the halving floor), the path's delay
    /// rose; the caller re-learns the min RTT and gives back the window the streak began with.
    #[derive(Debug, Clone, Copy, Default)]
    pub struct Streak {
        pub rounds: u32,
        pub clamped: bool,
        /// 0 = no streak.
        pub cwnd_before: f64,
    }

    impl Streak {
        /// The window to give back (re-learn), or 0.
        pub fn end(&mut self, queue: bool, cwnd: f64, settled: bool, relearn_rounds: u32) -> f64 {
            if !queue {
                *self = Streak::default();
                return 0.0;
            }
            if self.cwnd_before == 0.0 {
                self.cwnd_before = cwnd.max(1.0);
                return 0.0;
            }
            if !settled || self.clamped {
                return 0.0;
            }
            self.rounds += 1;
            if self.rounds < relearn_rounds {
                return 0.0;
            }
            let back = self.cwnd_before;
            *self = Streak::default();
            back
        }

        /// A cut whose target, bw x (min RTT + thr / 2), is below half the window stops at the
        /// floor: the queue after it is still the flow's own.
        pub fn cut(&mut self, cwnd: f64, bw: f64, min_rtt_us: f64) {
            let target = (bw * (min_rtt_us + (queue_thresh_us(min_rtt_us) / 2.0).floor())).floor();
            self.clamped = target < (cwnd / 2.0).floor().max(2.0);
        }
    }

    /// tcp_packets_in_flight: sent, not SACKed or lost, plus retransmissions out.
    pub fn in_flight(packets_out: f64, sacked_out: f64, lost_out: f64, retrans_out: f64) -> f64 {
        (packets_out - sacked_out - lost_out).max(0.0) + retrans_out
    }

    /// The window in Recovery/CWR: the target at or above the flight; above it PRR's
    /// proportional share, target x delivered / prior window, minus what was sent (the first
    /// retransmission leaves at once).
    pub fn recovery_cwnd(
        in_flight: f64,
        target: f64,
        prior_cwnd: f64,
        prr_delivered: f64,
        prr_out: f64,
    ) -> f64 {
        let target = target.max(1.0);
        if in_flight <= target {
            return target;
        }
        let allowed = (target * prr_delivered / prior_cwnd.max(1.0)).ceil();
        let mut sndcnt = (allowed - prr_out).max(0.0);
        if sndcnt == 0.0 && prr_out == 0.0 {
            sndcnt = 1.0;
        }
        in_flight + sndcnt
    }

    /// Pacing rate, bytes per second: 200% (below half ssthresh) or 120% of mss x
    /// max(cwnd, packets out) per smoothed RTT, at most `max_rate`.
    pub fn pacing_rate(
        mss: f64,
        cwnd: f64,
        packets_out: f64,
        ssthresh: f64,
        srtt_us: f64,
        max_rate: f64,
    ) -> f64 {
        if srtt_us <= 0.0 {
            return max_rate;
        }
        let ratio = if cwnd < (ssthresh / 2.0).floor() {
            2.0
        } else {
            1.2
        };
        (ratio * mss * cwnd.max(packets_out) * 1e6 / srtt_us).min(max_rate)
    }
}
