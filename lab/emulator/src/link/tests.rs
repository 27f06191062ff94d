//! Unit tests of the link core on a virtual clock (nanoseconds).
use super::*;
use crate::params::{BodParams, GilbertParams};

const MS: u64 = 1_000_000;

fn frame(seq: u32, len: usize) -> Vec<u8> {
    let mut v = vec![0u8; len.max(4)];
    v[..4].copy_from_slice(&seq.to_be_bytes());
    v
}

fn seq_of(f: &[u8]) -> u32 {
    u32::from_be_bytes([f[0], f[1], f[2], f[3]])
}

/// Plays the link's own deadlines up to `until`; returns (seq, arrival) of delivered frames.
fn run(link: &mut Link, until: u64) -> Vec<(u32, u64)> {
    let mut out = Vec::new();
    while let Some(t) = link.next_deadline() {
        if t > until {
            break;
        }
        link.advance(t);
        while let Some((d, at)) = link.pop_due(t) {
            assert!(at <= t);
            link.record_sent(d.len(), t - at);
            out.push((seq_of(&d), at));
        }
    }
    link.advance(until);
    out
}

/// Feeds `inputs` (time, frame) in time order, delivering at deadlines in between.
fn feed(link: &mut Link, inputs: Vec<(u64, Vec<u8>)>, until: u64) -> Vec<(u32, u64)> {
    let mut out = Vec::new();
    for (t, f) in inputs {
        out.extend(run(link, t));
        link.enqueue(t, f);
    }
    out.extend(run(link, until));
    out
}

fn params(delay_ms: f64, rate_bps: u64, buffer_bytes: u64) -> LinkParams {
    LinkParams {
        delay_ms,
        rate_bps,
        buffer_bytes,
        ..LinkParams::default()
    }
}

#[test]
fn serialization_and_queuing_timing_is_exact() {
    let mut l = Link::new(params(100.0, 1_200_000, 1 << 20), 1, 0);
    for i in 0..10 {
        assert_eq!(l.enqueue(0, frame(i, 1500)), Enqueued::Accepted);
    }
    assert_eq!(l.queue_bytes(), 15_000);
    assert_eq!(l.queue_frames(), 10);
    l.advance(25 * MS);
    assert_eq!(
        l.queue_bytes(),
        12_000,
        "two frames serialized, third in service"
    );
    let out = run(&mut l, 10_000 * MS);
    let want: Vec<(u32, u64)> = (0..10)
        .map(|k| (k, (k as u64 + 1) * 10 * MS + 100 * MS))
        .collect();
    assert_eq!(out, want);
    assert_eq!(l.counters().frames_out, 10);
    assert_eq!(l.counters().bytes_out, 15_000);
    assert_eq!(l.counters().max_queue_bytes, 15_000);
    assert_eq!(l.queue_bytes(), 0);
    assert_eq!(l.next_deadline(), None, "idle link has no wake-ups");
}

#[test]
fn unlimited_rate_only_delays() {
    let mut l = Link::new(params(20.0, 0, 0), 1, 0);
    let out = feed(
        &mut l,
        (0..5).map(|i| (i as u64 * MS, frame(i, 9000))).collect(),
        1000 * MS,
    );
    let want: Vec<(u32, u64)> = (0..5).map(|i| (i, i as u64 * MS + 20 * MS)).collect();
    assert_eq!(out, want);
}

#[test]
fn drop_tail_at_the_byte_limit() {
    let mut l = Link::new(params(0.0, 1_200_000, 4500), 1, 0);
    let got: Vec<Enqueued> = (0..5).map(|i| l.enqueue(0, frame(i, 1500))).collect();
    assert_eq!(
        got.iter().filter(|&&e| e == Enqueued::Accepted).count(),
        3,
        "exactly fits 3×1500"
    );
    assert_eq!(l.counters().drop_buffer, 2);
    assert_eq!(l.queue_bytes(), 4500);
    // One more byte than the room left is refused; the first frame leaves at 10 ms.
    assert_eq!(l.enqueue(9 * MS, frame(9, 1)), Enqueued::DroppedBuffer);
    assert_eq!(l.enqueue(10 * MS, frame(10, 1500)), Enqueued::Accepted);
    assert_eq!(l.counters().frames_in, 7);
    // A frame bigger than the whole buffer never fits.
    let mut l2 = Link::new(params(0.0, 1_200_000, 4500), 1, 0);
    assert_eq!(l2.enqueue(0, frame(0, 4501)), Enqueued::DroppedBuffer);
    // The frame in serialization counts toward the limit.
    let mut l3 = Link::new(params(0.0, 1_200_000, 1500), 1, 0);
    assert_eq!(l3.enqueue(0, frame(0, 1500)), Enqueued::Accepted);
    assert_eq!(l3.enqueue(MS, frame(1, 1500)), Enqueued::DroppedBuffer);
}

#[test]
fn oversize_frames_cost_their_real_bits() {
    let mut l = Link::new(params(0.0, 8_000_000, 0), 1, 0);
    l.enqueue(0, frame(0, 65_000));
    let out = run(&mut l, 1000 * MS);
    assert_eq!(out, vec![(0, 65 * MS)]);
}

#[test]
fn delay_and_jitter_never_reorder() {
    let mut p = params(50.0, 0, 0);
    p.jitter_ms = 40.0;
    let mut l = Link::new(p, 42, 0);
    let n = 2000u32;
    let out = feed(
        &mut l,
        (0..n).map(|i| (i as u64 * MS, frame(i, 100))).collect(),
        10_000 * MS,
    );
    assert_eq!(out.len(), n as usize);
    let mut jittered = 0;
    let mut prev = 0;
    for (k, &(seq, at)) in out.iter().enumerate() {
        assert_eq!(seq, k as u32, "order kept");
        let sent = k as u64 * MS;
        assert!(at >= sent + 50 * MS && at >= prev);
        assert!(at <= (sent + 90 * MS).max(prev));
        if at > sent + 51 * MS {
            jittered += 1;
        }
        prev = at;
    }
    assert!(jittered > n / 2, "jitter visible: {jittered}");
}

/// Fraction of `n` back-to-back frames of `len` bytes that the loss model drops.
fn losses(p: LinkParams, n: u32, len: usize, seed: u64) -> Counters {
    let mut l = Link::new(
        LinkParams {
            rate_bps: 0,
            buffer_bytes: 0,
            delay_ms: 0.0,
            ..p
        },
        seed,
        0,
    );
    for i in 0..n {
        l.enqueue(i as u64, frame(i, len));
        while l.pop_due(i as u64).is_some() {}
    }
    *l.counters()
}

/// |k − np| within the two-sided 99 % normal bound, variance inflated by `factor`.
fn assert_binomial(k: u64, n: u32, p: f64, factor: f64) {
    let n = n as f64;
    let sd = (n * p * (1.0 - p) * factor).sqrt();
    let dev = (k as f64 - n * p).abs();
    assert!(
        dev <= 2.576 * sd,
        "k={k} expected {:.1} ± {:.1}",
        n * p,
        2.576 * sd
    );
}

#[test]
fn per_loss_rate_within_binomial_bound() {
    let c = losses(
        LinkParams {
            per: 0.1,
            ..LinkParams::default()
        },
        100_000,
        200,
        7,
    );
    assert_binomial(c.drop_per, 100_000, 0.1, 1.0);
    assert_eq!(c.drop_ber + c.drop_gilbert + c.drop_buffer, 0);
}

#[test]
fn ber_loss_depends_on_frame_bits() {
    let ber = 1e-5;
    for (len, seed) in [(1000usize, 3u64), (100, 4)] {
        let c = losses(
            LinkParams {
                ber,
                ..LinkParams::default()
            },
            100_000,
            len,
            seed,
        );
        let p = 1.0 - (1.0 - ber).powf(len as f64 * 8.0);
        assert_binomial(c.drop_ber, 100_000, p, 1.0);
        assert_eq!(c.drop_per, 0);
    }
}

#[test]
fn gilbert_loss_rate_and_burstiness() {
    let g = GilbertParams {
        p_gb: 0.01,
        p_bg: 0.1,
        loss_good: 0.001,
        loss_bad: 0.5,
    };
    let n = 400_000;
    let c = losses(
        LinkParams {
            gilbert: Some(g),
            ..LinkParams::default()
        },
        n,
        100,
        11,
    );
    let pi_b = g.p_gb / (g.p_gb + g.p_bg);
    let p = pi_b * g.loss_bad + (1.0 - pi_b) * g.loss_good;
    // Markov-correlated losses: Var = n p(1−p) [1 + 2 Var(ℓ(S)) ρ/(1−ρ) / (p(1−p))].
    let rho = 1.0 - g.p_gb - g.p_bg;
    let var_l = pi_b * (1.0 - pi_b) * (g.loss_bad - g.loss_good).powi(2);
    let factor = 1.0 + 2.0 * var_l * rho / (1.0 - rho) / (p * (1.0 - p));
    assert_binomial(c.drop_gilbert, n, p, factor);
    assert_eq!(c.drop_per + c.drop_ber, 0);

    // With loss only in Bad, losses come in bursts of mean length 1/p_bg.
    let g2 = GilbertParams {
        loss_good: 0.0,
        loss_bad: 1.0,
        ..g
    };
    let mut l = Link::new(
        LinkParams {
            gilbert: Some(g2),
            rate_bps: 0,
            delay_ms: 0.0,
            buffer_bytes: 0,
            ..LinkParams::default()
        },
        5,
        0,
    );
    let (mut bursts, mut lost, mut prev_lost) = (0u64, 0u64, false);
    for i in 0..200_000u32 {
        let before = l.counters().drop_gilbert;
        l.enqueue(i as u64, frame(i, 100));
        while l.pop_due(i as u64).is_some() {}
        let now_lost = l.counters().drop_gilbert > before;
        if now_lost {
            lost += 1;
            if !prev_lost {
                bursts += 1;
            }
        }
        prev_lost = now_lost;
    }
    let mean_burst = lost as f64 / bursts as f64;
    assert!((mean_burst - 10.0).abs() < 1.0, "mean burst {mean_burst}");
}

#[test]
fn each_loss_cause_counted_separately() {
    let p = LinkParams {
        per: 0.05,
        ber: 1e-5,
        gilbert: Some(GilbertParams::default()),
        ..LinkParams::default()
    };
    let c = losses(p, 50_000, 500, 9);
    assert!(
        c.drop_per > 0 && c.drop_ber > 0 && c.drop_gilbert > 0,
        "{c:?}"
    );
    assert_eq!(c.frames_in, 50_000);
}

#[test]
fn lost_frames_still_use_capacity() {
    let mut l = Link::new(
        LinkParams {
            per: 1.0,
            ..params(0.0, 1_200_000, 0)
        },
        1,
        0,
    );
    l.enqueue(0, frame(0, 1500));
    l.enqueue(0, frame(1, 1500));
    assert!(run(&mut l, 15 * MS).is_empty());
    assert_eq!(
        l.queue_frames(),
        1,
        "second frame still serializing at 15 ms"
    );
    l.set_params(15 * MS, params(0.0, 1_200_000, 0));
    // Loss is drawn when serialization ends: frame 1 (started at 10 ms behind the lost
    // frame 0) now survives and arrives at 20 ms.
    assert_eq!(run(&mut l, 30 * MS), vec![(1, 20 * MS)]);
}

// ---- Bandwidth on Demand --------------------------------------------------------------------

fn bod_link(bod: BodParams, rate_bps: u64) -> Link {
    Link::new(
        LinkParams {
            bod: Some(bod),
            ..params(0.0, rate_bps, 0)
        },
        1,
        0,
    )
}

/// The defaults without the backlog term: requests follow the input rate only.
fn rate_only() -> BodParams {
    BodParams {
        backlog_horizon_ms: 0.0,
        ..BodParams::default()
    }
}

/// Constant-rate source: one `len`-byte frame every `every` ns starting at `first`.
fn source(first: u64, every: u64, len: usize, until: u64) -> Vec<(u64, Vec<u8>)> {
    (0..)
        .map(|k| first + k * every)
        .take_while(|&t| t < until)
        .map(|t| (t, frame(0, len)))
        .collect()
}

#[test]
fn bod_constant_source_granted_after_allocation_delay() {
    let mut l = bod_link(rate_only(), 0);
    assert_eq!(l.rate_bps(), 44_000, "CRA only at start");
    // 200 kbit/s: 4000-bit frames every 20 ms (41 per 820 ms superframe).
    let src = source(10 * MS, 20 * MS, 500, 20_000 * MS);
    let mut inputs = src.into_iter().peekable();
    let mut step = |l: &mut Link, until: u64| {
        while let Some((t, _)) = inputs.peek() {
            if *t > until {
                break;
            }
            let (t, f) = inputs.next().unwrap();
            run(l, t);
            l.enqueue(t, f);
        }
        run(l, until);
    };
    step(&mut l, 819 * MS);
    assert_eq!(l.requested_bps(), 0);
    step(&mut l, 820 * MS);
    // 200 000 − 44 000 = 156 000, rounded up to 44 000 multiples.
    assert_eq!(l.requested_bps(), 176_000);
    assert_eq!(l.granted_bps(), 0);
    // Request at 820 ms + AD 1346 ms = 2166 ms → next boundary 2460 ms (within one superframe).
    step(&mut l, 2460 * MS - 1);
    assert_eq!(l.granted_bps(), 0);
    assert_eq!(l.rate_bps(), 44_000);
    step(&mut l, 2460 * MS);
    assert_eq!(l.granted_bps(), 176_000);
    assert_eq!(
        l.rate_bps(),
        220_000,
        "CRA + RBDC covers the 200 kbit/s source"
    );
    step(&mut l, 20_000 * MS);
    assert_eq!(l.granted_bps(), 176_000, "steady source keeps its grant");
}

#[test]
fn bod_granularity_rounding_and_max_clamp() {
    // 100 kbit/s: 2000-bit frames every 20 ms → 56 000 needed → 88 000 requested.
    let mut l = bod_link(rate_only(), 0);
    feed(&mut l, source(10 * MS, 20 * MS, 250, 820 * MS), 820 * MS);
    assert_eq!(l.requested_bps(), 88_000);
    // Far above the maximum: clamped to rbdc_max_bps.
    let mut l = bod_link(BodParams::default(), 0);
    feed(&mut l, source(MS, MS, 1500, 820 * MS), 820 * MS);
    assert_eq!(l.requested_bps(), 1_100_000);
    feed(&mut l, vec![], 2460 * MS);
    assert_eq!(l.rate_bps(), 1_144_000);
}

#[test]
fn bod_cra_only_serves_at_cra() {
    // A source below CRA requests nothing.
    let mut l = bod_link(rate_only(), 0);
    let out = feed(&mut l, source(10 * MS, 100 * MS, 500, 5000 * MS), 6000 * MS);
    assert_eq!(l.requested_bps(), 0);
    assert_eq!(l.granted_bps(), 0);
    assert_eq!(out.len(), 50);
    // No RBDC allowed: a backlog drains at exactly CRA (4000-bit frames, 90.909 ms each), even
    // with the backlog term on (the default): it is bounded by the same maximum.
    let mut l = bod_link(
        BodParams {
            rbdc_max_bps: 0,
            ..BodParams::default()
        },
        0,
    );
    for i in 0..200 {
        l.enqueue(0, frame(i, 500));
    }
    let out = run(&mut l, 10_000 * MS);
    assert!((109..=110).contains(&out.len()), "{}", out.len());
    assert_eq!(l.rate_bps(), 44_000);
}

/// 1 Mbit/s into a link that can give at most CRA 44 k + RBDC 400 k, stopped at 4100 ms (a
/// superframe boundary): ~3.2 Mbit are queued when the sender stops. Samples every 10 ms until
/// `until`: (t, rate_bps, granted_bps, requested_bps, queue bits).
fn sender_stops(bod: BodParams, until: u64) -> Vec<(u64, u64, u64, u64, u64)> {
    let mut l = bod_link(bod, 0);
    let mut inputs = source(10 * MS, 10 * MS, 1250, 4100 * MS)
        .into_iter()
        .peekable();
    let mut samples = Vec::new();
    for t in (0..=until).step_by(10 * MS as usize) {
        while let Some((at, _)) = inputs.peek() {
            if *at > t {
                break;
            }
            let (at, f) = inputs.next().unwrap();
            run(&mut l, at);
            l.enqueue(at, f);
        }
        run(&mut l, t);
        samples.push((
            t,
            l.rate_bps(),
            l.granted_bps(),
            l.requested_bps(),
            l.queue_bytes() * 8,
        ));
    }
    samples
}

#[test]
fn bod_backlog_left_by_a_stopped_sender_drains_at_the_granted_rate() {
    const STOP: u64 = 4100 * MS;
    // The last request that still sees arrivals is made at 4100 ms; the one at 4920 ms sees
    // none, and is granted one allocation delay later: 4920 + 1346 → boundary 6560 ms.
    const AFTER_AD: u64 = 6560 * MS;
    let max = 400_000;
    let with = |horizon: f64| BodParams {
        rbdc_max_bps: max,
        backlog_horizon_ms: horizon,
        ..BodParams::default()
    };
    let full = 44_000 + max;
    let backlog = sender_stops(with(820.0), 30_000 * MS);
    for &(t, rate, granted, requested, _) in &backlog {
        assert!(
            granted <= max && requested <= max,
            "over the maximum at {t}"
        );
        assert!(rate <= full, "capacity over CRA + max at {t}");
    }
    let queued_at_stop = backlog.iter().find(|s| s.0 == STOP).unwrap().4;
    assert!(queued_at_stop > 3_000_000, "{queued_at_stop}");
    // From the stop until the queue is empty, every sample is served at CRA + the full grant
    // (the backlog request keeps the grant up), so the drain takes queue / (CRA + max).
    let empty_at = backlog
        .iter()
        .find(|s| s.0 > STOP && s.4 == 0)
        .expect("backlog never drained")
        .0;
    for &(t, rate, ..) in backlog.iter().filter(|s| s.0 >= STOP && s.0 < empty_at) {
        assert_eq!(rate, full, "drain slowed at {t} ns");
    }
    let drain_ns = queued_at_stop as u128 * 1_000_000_000 / full as u128;
    let expected = STOP + drain_ns as u64;
    assert!(
        empty_at.abs_diff(expected) <= 20 * MS,
        "drained at {} ms, expected {} ms",
        empty_at / MS,
        expected / MS
    );
    // The grant past one allocation delay after the last arrival-carrying request is the
    // backlog's request, made at 4920 ms.
    let request_4920 = backlog.iter().find(|s| s.0 == 4920 * MS).unwrap().3;
    assert_eq!(request_4920, max);
    let at = |s: &[(u64, u64, u64, u64, u64)], t: u64| *s.iter().find(|x| x.0 == t).unwrap();
    assert_eq!(at(&backlog, AFTER_AD).2, request_4920);
    // Rate-only requests (the old model): the same backlog falls back to CRA one allocation
    // delay after the sender stops, and most of it is still queued.
    let rate_only = sender_stops(with(0.0), 8_000 * MS);
    assert_eq!(at(&rate_only, AFTER_AD - 10 * MS).1, full);
    assert_eq!(at(&rate_only, AFTER_AD).1, 44_000);
    assert!(at(&rate_only, 8_000 * MS).4 > queued_at_stop / 2);
}

#[test]
fn bod_rate_capped_by_rate_bps_and_stalls_without_capacity() {
    let mut l = bod_link(
        BodParams {
            cra_bps: 0,
            ..BodParams::default()
        },
        100_000,
    );
    l.enqueue(0, frame(0, 500));
    assert_eq!(l.rate_bps(), 0, "stalled: no CRA, no grant");
    assert!(run(&mut l, 2459 * MS).is_empty());
    // Request at 820 ms (4000 bits / 0.82 s = 4878 bit/s → 44 000), granted at 2460 ms;
    // the 4000-bit frame then serializes at min(100 000, 44 000) = 44 000 bit/s.
    let out = run(&mut l, 3000 * MS);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].1, 2460 * MS + 4000 * 1_000_000_000 / 44_000 + 1);
    let mut l = bod_link(
        BodParams {
            cra_bps: 500_000,
            ..BodParams::default()
        },
        100_000,
    );
    assert_eq!(l.rate_bps(), 100_000);
    l.set_params(
        0,
        LinkParams {
            rate_bps: 0,
            ..l.params().clone()
        },
    );
    assert_eq!(l.rate_bps(), 500_000);
}

#[test]
fn bod_ticks_are_the_only_idle_wakeups() {
    let mut l = bod_link(BodParams::default(), 0);
    assert_eq!(l.next_deadline(), Some(820 * MS));
    run(&mut l, 900 * MS);
    assert_eq!(l.next_deadline(), Some(1640 * MS));
    l.set_params(900 * MS, params(0.0, 0, 0));
    assert_eq!(l.next_deadline(), None);
}

// ---- run-time parameter changes --------------------------------------------------------------

#[test]
fn rate_change_mid_frame_keeps_work_done() {
    let mut l = Link::new(params(0.0, 1_200_000, 0), 1, 0);
    l.enqueue(0, frame(0, 1500)); // 10 ms at 1.2 Mbit/s
    run(&mut l, 5 * MS);
    l.set_params(5 * MS, params(0.0, 2_400_000, 0)); // 6000 bits left → 2.5 ms
    assert_eq!(run(&mut l, 100 * MS), vec![(0, 7_500_000)]);
}

#[test]
fn delay_change_applies_to_frames_not_yet_propagating() {
    let mut l = Link::new(params(100.0, 1_200_000, 0), 1, 0);
    l.enqueue(0, frame(0, 1500));
    l.enqueue(0, frame(1, 1500));
    run(&mut l, 15 * MS); // frame 0 propagating (arrives 110 ms), frame 1 serializing
    l.set_params(15 * MS, params(10.0, 1_200_000, 0));
    // Frame 1 finishes at 20 ms: 20 + 10 = 30 ms, but it may not overtake frame 0.
    assert_eq!(run(&mut l, 1000 * MS), vec![(0, 110 * MS), (1, 110 * MS)]);
    l.enqueue(1000 * MS, frame(2, 1500));
    assert_eq!(run(&mut l, 2000 * MS), vec![(2, 1020 * MS)]);
}

#[test]
fn shrinking_the_buffer_keeps_queued_frames() {
    let mut l = Link::new(params(0.0, 1_200_000, 0), 1, 0);
    for i in 0..4 {
        l.enqueue(0, frame(i, 1500));
    }
    l.set_params(0, params(0.0, 1_200_000, 1500));
    assert_eq!(l.enqueue(0, frame(9, 100)), Enqueued::DroppedBuffer);
    assert_eq!(run(&mut l, 1000 * MS).len(), 4);
}

#[test]
fn reset_counters_clears_and_stats_shape() {
    let mut l = Link::new(params(1.0, 0, 0), 1, 0);
    l.enqueue(0, frame(0, 100));
    run(&mut l, 10 * MS);
    let s = l.stats_json();
    assert_eq!(s["frames_out"], 1);
    assert_eq!(s["lateness_us"]["count"], 1);
    for k in ["buffer", "per", "ber", "gilbert"] {
        assert_eq!(s["drops"][k], 0);
    }
    l.reset_counters();
    let s = l.stats_json();
    assert_eq!(s["frames_in"], 0);
    assert_eq!(s["lateness_us"]["count"], 0);
}

#[test]
fn busy_time_and_the_span_follow_the_transmitter() {
    // 1500 B at 1.2 Mbit/s = 10 ms each; two back to back at 0, one at 100 ms.
    let mut l = Link::new(params(50.0, 1_200_000, 1 << 20), 1, 0);
    let inputs = vec![
        (0, frame(0, 1500)),
        (0, frame(1, 1500)),
        (100 * MS, frame(2, 1500)),
    ];
    let out = feed(&mut l, inputs, 105 * MS);
    assert_eq!(out.len(), 2);
    assert_eq!(
        l.busy_ns(),
        25 * MS,
        "20 ms for two frames, 5 ms of the third so far"
    );
    run(&mut l, 200 * MS);
    assert_eq!(l.busy_ns(), 30 * MS);
    assert_eq!(l.counters().first_in_ns, Some(0));
    assert_eq!(l.counters().last_out_ns, Some(160 * MS));
    l.reset_counters();
    assert_eq!((l.busy_ns(), l.counters().first_in_ns), (0, None));
    // Lost frames used the transmitter all the same.
    l.set_params(
        200 * MS,
        LinkParams {
            per: 1.0,
            ..params(50.0, 1_200_000, 1 << 20)
        },
    );
    feed(&mut l, vec![(300 * MS, frame(3, 1500))], 400 * MS);
    assert_eq!(l.busy_ns(), 10 * MS);
    assert_eq!(l.counters().last_out_ns, None);
}
