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
