//! One direction of the emulated link as a pure, clock-injected state machine.
//!
//! Times are nanoseconds on any monotonic clock the caller chooses (the I/O shell uses
//! CLOCK_MONOTONIC, the tests a virtual clock). The caller:
//! 1. hands every received frame to [`Link::enqueue`],
//! 2. wakes at [`Link::next_deadline`], calls [`Link::advance`] and sends every frame
//!    [`Link::pop_due`] returns, then reports the outcome with [`Link::record_sent`].
//!
//! Frame path: drop-tail byte FIFO → one transmitter (bits / rate; bits = L2 frame
//! length × 8, i.e. Ethernet header + payload as seen by AF_PACKET, no preamble/FCS)
//! → loss (PER, BER, Gilbert–Elliott; a lost frame still used the capacity) →
//! propagation (delay + uniform jitter, never reordering) → out.

use crate::bod::{ms_to_ns, Bod};
use crate::histogram::Histogram;
use crate::params::LinkParams;
use crate::rng::Rng;
use serde_json::{json, Value};
use std::collections::VecDeque;

const NS_PER_S: u128 = 1_000_000_000;
/// Safety cap when `buffer_bytes` is 0 ("unlimited"), so a flood cannot exhaust memory.
pub const UNLIMITED_BUFFER_CAP: u64 = 1 << 30;

/// The transmitter's speed at some instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Rate {
    Unlimited,
    Bps(u64),
    /// BoD with no capacity at all: nothing moves until a grant arrives.
    Stalled,
}

/// The frame currently being serialized.
#[derive(Debug)]
struct InService {
    data: Vec<u8>,
    /// Start of the current constant-rate segment (the frame start or the last rate change).
    seg_start: u64,
    /// Work left at `seg_start`, in bit·nanoseconds-per-second units (bits × 1e9), so
    /// progress at `rate` bps over `dt` ns is exactly `dt × rate`.
    work_left: u128,
    rate: Rate,
    /// None while stalled.
    finish: Option<u64>,
}

impl InService {
    fn schedule(&mut self) {
        self.finish = match self.rate {
            Rate::Unlimited => Some(self.seg_start),
            Rate::Stalled => None,
            Rate::Bps(r) => Some(self.seg_start + self.work_left.div_ceil(r as u128) as u64),
        };
    }

    /// Switches to `rate` at time `t`, keeping the work already done.
    fn rerate(&mut self, t: u64, rate: Rate) {
        if let Rate::Bps(r) = self.rate {
            let done = (t.saturating_sub(self.seg_start)) as u128 * r as u128;
            self.work_left = self.work_left.saturating_sub(done);
        }
        self.seg_start = t;
        self.rate = rate;
        self.schedule();
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    pub frames_in: u64,
    pub bytes_in: u64,
    pub frames_out: u64,
    pub bytes_out: u64,
    pub drop_buffer: u64,
    pub drop_per: u64,
    pub drop_ber: u64,
    pub drop_gilbert: u64,
    pub send_errors: u64,
    pub max_queue_bytes: u64,
    /// Time the transmitter had a frame (serializing, or stalled waiting for a BoD grant),
    /// up to the last event processed.
    pub busy_ns: u64,
    /// When the first frame was offered and the last one delivered (its scheduled arrival),
    /// on the caller's clock: a transfer's span on the link's own clock.
    pub first_in_ns: Option<u64>,
    pub last_out_ns: Option<u64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Enqueued {
    Accepted,
    DroppedBuffer,
}

#[derive(Debug)]
pub struct Link {
    params: LinkParams,
    rng: Rng,
    /// Frames waiting for the transmitter (not including the one in service).
    waiting: VecDeque<Vec<u8>>,
    /// Bytes waiting + in service: what `buffer_bytes` limits.
    queue_bytes: u64,
    in_service: Option<InService>,
    /// (arrival time, frame) in arrival order.
    in_flight: VecDeque<(u64, Vec<u8>)>,
    last_arrival: u64,
    gilbert_bad: bool,
    bod: Option<Bod>,
    /// Since when the transmitter has been busy (None: idle).
    busy_since: Option<u64>,
    /// The latest instant `advance` reached.
    clock: u64,
    counters: Counters,
    lateness: Histogram,
}

impl Link {
    pub fn new(params: LinkParams, seed: u64, now: u64) -> Self {
        let bod = params.bod.map(|b| Bod::new(b, now));
        Link {
            params,
            rng: Rng::new(seed),
            waiting: VecDeque::new(),
            queue_bytes: 0,
            in_service: None,
            in_flight: VecDeque::new(),
            last_arrival: 0,
            gilbert_bad: false,
            bod,
            busy_since: None,
            clock: now,
            counters: Counters::default(),
            lateness: Histogram::new(),
        }
    }

    pub fn params(&self) -> &LinkParams {
        &self.params
    }

    pub fn counters(&self) -> &Counters {
        &self.counters
    }

    fn current_rate(&self) -> Rate {
        let cap = (self.params.rate_bps > 0).then_some(self.params.rate_bps);
        match (&self.bod, cap) {
            (None, None) => Rate::Unlimited,
            (None, Some(r)) => Rate::Bps(r),
            (Some(b), cap) => match b.capacity_bps() {
                0 => Rate::Stalled,
                c => Rate::Bps(cap.map_or(c, |r| r.min(c))),
            },
        }
    }

    /// Current transmitter rate in bit/s for reporting (0 = unlimited or stalled).
    pub fn rate_bps(&self) -> u64 {
        match self.current_rate() {
            Rate::Bps(r) => r,
            _ => 0,
        }
    }

    pub fn requested_bps(&self) -> u64 {
        self.bod.as_ref().map_or(0, |b| b.requested_bps())
    }

    pub fn granted_bps(&self) -> u64 {
        self.bod.as_ref().map_or(0, |b| b.granted_bps())
    }

    pub fn queue_bytes(&self) -> u64 {
        self.queue_bytes
    }

    pub fn queue_frames(&self) -> usize {
        self.waiting.len() + usize::from(self.in_service.is_some())
    }

    /// Offers a frame received at `now`.
    pub fn enqueue(&mut self, now: u64, data: Vec<u8>) -> Enqueued {
        self.advance(now);
        let len = data.len() as u64;
        self.counters.frames_in += 1;
        self.counters.bytes_in += len;
        self.counters.first_in_ns.get_or_insert(now);
        if let Some(b) = self.bod.as_mut() {
            b.on_arrival(len * 8);
        }
        let limit = match self.params.buffer_bytes {
            0 => UNLIMITED_BUFFER_CAP,
            b => b,
        };
        if self.queue_bytes + len > limit {
            self.counters.drop_buffer += 1;
            return Enqueued::DroppedBuffer;
        }
        self.queue_bytes += len;
        self.counters.max_queue_bytes = self.counters.max_queue_bytes.max(self.queue_bytes);
        self.waiting.push_back(data);
        self.start_next(now);
        self.advance(now);
        Enqueued::Accepted
    }

    /// Runs every serialization completion and superframe boundary up to `now`, in time order.
    pub fn advance(&mut self, now: u64) {
        self.clock = self.clock.max(now);
        loop {
            let tx = self.in_service.as_ref().and_then(|s| s.finish);
            let sf = self.bod.as_ref().map(|b| b.next_boundary());
            match (tx, sf) {
                (Some(t), sf) if t <= now && sf.is_none_or(|b| t <= b) => self.complete(t),
                (_, Some(b)) if b <= now => self.superframe_tick(b),
                _ => break,
            }
        }
    }

    /// Earliest instant at which something happens (a frame finishes, arrives, or a superframe ends).
    pub fn next_deadline(&self) -> Option<u64> {
        let tx = self.in_service.as_ref().and_then(|s| s.finish);
        let out = self.in_flight.front().map(|f| f.0);
        let sf = self.bod.as_ref().map(|b| b.next_boundary());
        [tx, out, sf].into_iter().flatten().min()
    }

    /// Next frame whose arrival time is ≤ `now`, with that scheduled arrival time.
    /// Call [`Link::advance`] first.
    pub fn pop_due(&mut self, now: u64) -> Option<(Vec<u8>, u64)> {
        if self.in_flight.front().is_some_and(|f| f.0 <= now) {
            let (t, d) = self.in_flight.pop_front()?;
            self.counters.last_out_ns = Some(t);
            Some((d, t))
        } else {
            None
        }
    }

    /// Reports that a popped frame of `len` bytes was sent `lateness_ns` after its schedule.
    pub fn record_sent(&mut self, len: usize, lateness_ns: u64) {
        self.counters.frames_out += 1;
        self.counters.bytes_out += len as u64;
        self.lateness.record(lateness_ns);
    }

    pub fn record_send_error(&mut self) {
        self.counters.send_errors += 1;
    }

    /// Replaces the parameters at `now`. Queued frames are kept (a smaller buffer only
    /// refuses new frames); the frame in service continues at the new rate; frames already
    /// propagating keep their arrival time; the Gilbert state resets when it is switched off.
    pub fn set_params(&mut self, now: u64, params: LinkParams) {
        self.advance(now);
        self.bod = match (self.bod.take(), params.bod) {
            (_, None) => None,
            (None, Some(p)) => Some(Bod::new(p, now)),
            (Some(mut b), Some(p)) => {
                b.update(p, now);
                Some(b)
            }
        };
        if params.gilbert.is_none() {
            self.gilbert_bad = false;
        }
        self.params = params;
        self.apply_rate(now);
        self.start_next(now);
        self.advance(now);
    }

    pub fn reset_counters(&mut self) {
        self.counters = Counters {
            max_queue_bytes: self.queue_bytes,
            ..Counters::default()
        };
        // A frame in service from before the reset counts from now on.
        if let Some(since) = self.busy_since.as_mut() {
            *since = (*since).max(self.clock);
        }
        self.lateness.clear();
    }

    fn apply_rate(&mut self, t: u64) {
        let rate = self.current_rate();
        if let Some(s) = self.in_service.as_mut() {
            if s.rate != rate {
                s.rerate(t, rate);
            }
        }
    }

    fn superframe_tick(&mut self, t: u64) {
        if let Some(b) = self.bod.as_mut() {
            b.tick(self.queue_bytes * 8);
        }
        self.apply_rate(t);
    }

    fn start_next(&mut self, t: u64) {
        if self.in_service.is_some() {
            return;
        }
        let Some(data) = self.waiting.pop_front() else {
            return;
        };
        let bits = data.len() as u128 * 8;
        self.busy_since.get_or_insert(t);
        let mut s = InService {
            data,
            seg_start: t,
            work_left: bits * NS_PER_S,
            rate: self.current_rate(),
            finish: None,
        };
        s.schedule();
        self.in_service = Some(s);
    }

    /// Busy time so far, the current busy spell counted up to the link's clock.
    pub fn busy_ns(&self) -> u64 {
        self.counters.busy_ns + self.busy_since.map_or(0, |b| self.clock.saturating_sub(b))
    }

    /// The frame in service finished serializing at `t`.
    fn complete(&mut self, t: u64) {
        let Some(s) = self.in_service.take() else {
            return;
        };
        self.queue_bytes -= s.data.len() as u64;
        let survived = self.survives(s.data.len());
        if survived {
            self.propagate(t, s.data);
        }
        self.start_next(t);
        if self.in_service.is_none() {
            if let Some(b) = self.busy_since.take() {
                self.counters.busy_ns += t.saturating_sub(b);
            }
        }
    }

    /// A frame that left the transmitter at `t` and survived: on its way, arriving after the delay.
    fn propagate(&mut self, t: u64, data: Vec<u8>) {
        let mut arrival = t + ms_to_ns(self.params.delay_ms);
        if self.params.jitter_ms > 0.0 {
            arrival += (ms_to_ns(self.params.jitter_ms) as f64 * self.rng.next_f64()) as u64;
        }
        arrival = arrival.max(self.last_arrival);
        self.last_arrival = arrival;
        self.in_flight.push_back((arrival, data));
    }

    /// Draws the loss processes for one frame; counts the first cause that hits.
    fn survives(&mut self, len: usize) -> bool {
        let mut gilbert_loss = false;
        if let Some(g) = self.params.gilbert {
            let p_loss = if self.gilbert_bad {
                g.loss_bad
            } else {
                g.loss_good
            };
            gilbert_loss = self.rng.chance(p_loss);
            let p_switch = if self.gilbert_bad { g.p_bg } else { g.p_gb };
            if self.rng.chance(p_switch) {
                self.gilbert_bad = !self.gilbert_bad;
            }
        }
        if self.rng.chance(self.params.per) {
            self.counters.drop_per += 1;
            return false;
        }
        if self.params.ber > 0.0 {
            let bits = len as f64 * 8.0;
            // 1 − (1 − ber)^bits, computed stably for tiny ber.
            let p = -(bits * (-self.params.ber).ln_1p()).exp_m1();
            if self.rng.chance(p) {
                self.counters.drop_ber += 1;
                return false;
            }
        }
        if gilbert_loss {
            self.counters.drop_gilbert += 1;
            return false;
        }
        true
    }

    pub fn stats_json(&self) -> Value {
        let c = &self.counters;
        let us = |ns: u64| ns as f64 / 1000.0;
        json!({
            "frames_in": c.frames_in,
            "bytes_in": c.bytes_in,
            "frames_out": c.frames_out,
            "bytes_out": c.bytes_out,
            "drops": {
                "buffer": c.drop_buffer,
                "per": c.drop_per,
                "ber": c.drop_ber,
                "gilbert": c.drop_gilbert,
            },
            "send_errors": c.send_errors,
            "queue_bytes": self.queue_bytes,
            "queue_frames": self.queue_frames(),
            "max_queue_bytes": c.max_queue_bytes,
            "busy_s": self.busy_ns() as f64 / 1e9,
            "first_in_ns": c.first_in_ns,
            "last_out_ns": c.last_out_ns,
            "rate_bps": self.rate_bps(),
            "requested_bps": self.requested_bps(),
            "granted_bps": self.granted_bps(),
            "lateness_us": {
                "p50": us(self.lateness.quantile(0.5)),
                "p99": us(self.lateness.quantile(0.99)),
                "max": us(self.lateness.max()),
                "count": self.lateness.count(),
            },
        })
    }
}

#[cfg(test)]
mod tests;
