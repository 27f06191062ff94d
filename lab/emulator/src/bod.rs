//! Bandwidth on Demand (DVB-RCS DAMA with CRA + RBDC + a backlog/volume term), as a pure
//! state machine.
//!
//! Model:
//! - Time is cut into superframes of `superframe_ms`, the first starting when BoD is
//!   switched on (or its superframe length changes).
//! - The terminal always owns the Constant Rate Assignment (`cra_bps`).
//! - At every superframe boundary the terminal measures its input rate: the bits of all
//!   frames that arrived at its queue during the superframe just ended (dropped ones
//!   included: it is offered load), divided by the superframe duration, and its backlog:
//!   the bits queued at that instant (waiting + in service). It requests
//!   input rate + backlog / `backlog_horizon_ms` − CRA (the capacity that serves new
//!   arrivals and drains what is queued within the horizon; no backlog term when the
//!   horizon is 0), rounded UP to a multiple of `granularity_bps` and clamped to
//!   [0, `rbdc_max_bps`]: one total, so rate + backlog never exceed the maximum. Each request
//!   replaces the previous one (absolute, like AVBDC: a backlog still queued at the next
//!   boundary is asked for again, which can over-allocate for up to one allocation delay).
//! - A request made at boundary t becomes the granted RBDC at the first boundary at or
//!   after t + `allocation_delay_ms` (so between AD and AD + one superframe after the request).
//! - The link transmits at CRA + granted RBDC (further capped by `rate_bps` when nonzero);
//!   when that is 0 the transmitter stalls until capacity is granted.
//!
//! Consequently a constant-rate source that starts at a boundary s is measured in full at
//! s + SF and fully served from the boundary at or after s + SF + AD (with the backlog term,
//! the queue it built at CRA meanwhile is requested on top, so that grant exceeds its rate).

use crate::params::BodParams;
use std::collections::VecDeque;

pub(crate) fn ms_to_ns(ms: f64) -> u64 {
    (ms * 1e6).round() as u64
}

#[derive(Debug, Clone)]
pub struct Bod {
    params: BodParams,
    sf_ns: u64,
    next_boundary: u64,
    bits_this_sf: u64,
    requested_bps: u64,
    granted_bps: u64,
    /// (effective boundary, RBDC value), in request order.
    pending: VecDeque<(u64, u64)>,
}

impl Bod {
    pub fn new(params: BodParams, now: u64) -> Self {
        let sf_ns = ms_to_ns(params.superframe_ms).max(1);
        Bod {
            params,
            sf_ns,
            next_boundary: now + sf_ns,
            bits_this_sf: 0,
            requested_bps: 0,
            granted_bps: 0,
            pending: VecDeque::new(),
        }
    }

    /// Applies new parameters at `now`: grants and outstanding requests are kept (clamped to
    /// the new maximum); a new superframe length restarts the superframe grid at `now`.
    pub fn update(&mut self, params: BodParams, now: u64) {
        let sf_ns = ms_to_ns(params.superframe_ms).max(1);
        if sf_ns != self.sf_ns {
            self.sf_ns = sf_ns;
            self.next_boundary = now + sf_ns;
            self.bits_this_sf = 0;
        }
        self.params = params;
        self.granted_bps = self.granted_bps.min(params.rbdc_max_bps);
        self.requested_bps = self.requested_bps.min(params.rbdc_max_bps);
        for p in self.pending.iter_mut() {
            p.1 = p.1.min(params.rbdc_max_bps);
        }
    }

    pub fn on_arrival(&mut self, bits: u64) {
        self.bits_this_sf = self.bits_this_sf.saturating_add(bits);
    }

    pub fn next_boundary(&self) -> u64 {
        self.next_boundary
    }

    /// Processes the boundary at `next_boundary()` with `queued_bits` in the queue: issues a
    /// request, then applies the grants due at this boundary.
    pub fn tick(&mut self, queued_bits: u64) {
        let t = self.next_boundary;
        let input_bps = (self.bits_this_sf as u128 * 1_000_000_000 / self.sf_ns as u128) as u64;
        self.bits_this_sf = 0;
        self.requested_bps = self.request_for(input_bps, queued_bits);
        let ad_ns = ms_to_ns(self.params.allocation_delay_ms);
        let superframes = ad_ns.div_ceil(self.sf_ns);
        self.pending
            .push_back((t + superframes * self.sf_ns, self.requested_bps));
        while let Some(&(at, value)) = self.pending.front() {
            if at > t {
                break;
            }
            self.granted_bps = value;
            self.pending.pop_front();
        }
        self.next_boundary = t + self.sf_ns;
    }

    /// Rate that drains `queued_bits` within the backlog horizon (0 when the term is off).
    pub fn backlog_bps(&self, queued_bits: u64) -> u64 {
        let horizon_ns = ms_to_ns(self.params.backlog_horizon_ms);
        if horizon_ns == 0 {
            return 0;
        }
        (queued_bits as u128 * 1_000_000_000).div_ceil(horizon_ns as u128) as u64
    }

    /// Request for a measured input rate and backlog.
    pub fn request_for(&self, input_bps: u64, queued_bits: u64) -> u64 {
        let need = input_bps
            .saturating_add(self.backlog_bps(queued_bits))
            .saturating_sub(self.params.cra_bps);
        let g = self.params.granularity_bps.max(1);
        need.div_ceil(g)
            .saturating_mul(g)
            .min(self.params.rbdc_max_bps)
    }

    /// Capacity the terminal may use now: CRA + granted RBDC.
    pub fn capacity_bps(&self) -> u64 {
        self.params.cra_bps + self.granted_bps
    }

    pub fn requested_bps(&self) -> u64 {
        self.requested_bps
    }

    pub fn granted_bps(&self) -> u64 {
        self.granted_bps
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_rounding_and_clamp() {
        let b = Bod::new(BodParams::default(), 0);
        assert_eq!(b.request_for(0, 0), 0);
        assert_eq!(b.request_for(44_000, 0), 0);
        assert_eq!(b.request_for(44_001, 0), 44_000);
        assert_eq!(b.request_for(88_000, 0), 44_000);
        assert_eq!(b.request_for(88_001, 0), 88_000);
        assert_eq!(b.request_for(100_000_000, 0), 1_100_000);
    }

    #[test]
    fn backlog_term_adds_the_drain_rate_within_the_maximum() {
        // Default horizon 820 ms: 82 000 queued bits over 0.82 s = 100 000 bit/s;
        // − CRA 44 000 = 56 000 → 88 000.
        let b = Bod::new(BodParams::default(), 0);
        assert_eq!(b.backlog_bps(82_000), 100_000);
        assert_eq!(b.request_for(0, 82_000), 88_000);
        // Both terms add up: 50 000 + 100 000 − 44 000 = 106 000 → 132 000.
        assert_eq!(b.request_for(50_000, 82_000), 132_000);
        // Rate and backlog each below the maximum, their sum above: one clamp on the total.
        assert_eq!(b.request_for(1_000_000, 820_000), 1_100_000);
        assert_eq!(b.request_for(u64::MAX, u64::MAX / 2), 1_100_000);
        let off = Bod::new(
            BodParams {
                backlog_horizon_ms: 0.0,
                ..BodParams::default()
            },
            0,
        );
        assert_eq!(off.backlog_bps(82_000), 0);
        assert_eq!(off.request_for(0, 82_000), 0);
    }

    #[test]
    fn zero_allocation_delay_grants_at_the_request_boundary() {
        let p = BodParams {
            allocation_delay_ms: 0.0,
            superframe_ms: 100.0,
            ..BodParams::default()
        };
        let mut b = Bod::new(p, 0);
        b.on_arrival(100_000); // 1 Mbit/s over 100 ms
        b.tick(0);
        assert_eq!(b.requested_bps(), 968_000);
        assert_eq!(b.granted_bps(), 968_000);
    }
}
