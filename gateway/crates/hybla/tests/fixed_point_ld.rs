//! hybla_ld's fixed-point helpers (bpf/hybla_math.h, compiled natively: the code the BPF
//! program runs) against the f64 reference model in `model::ld`.
//!
//! Tolerances: integer results (thresholds, queue flags, in-flight counts, recovery windows)
//! exactly; the delivery rate within one Q24 step (2^-24 segments per microsecond); windows
//! derived from a rate within one segment; pacing rates within one byte per second.
use perigee_hybla::fixed::{self, LdRound, LdStreak, LD_RELEARN_ROUNDS, RHO_ONE};
use perigee_hybla::model::ld;

const Q24: f64 = (1u64 << 24) as f64;

fn bw_f64(q: u32) -> f64 {
    f64::from(q) / Q24
}

fn min_rtts_us() -> Vec<u32> {
    let mut v = vec![
        1, 50, 999, 4_999, 5_000, 25_000, 39_999, 40_000, 40_008, 100_000,
    ];
    v.extend([
        250_000, 550_000, 600_000, 600_123, 810_000, 1_946_000, 10_000_000,
    ]);
    v
}

/// Deterministic pseudo-random numbers (the test must not depend on a seed source).
struct Lcg(u64);
impl Lcg {
    fn next(&mut self) -> u32 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) as u32
    }
}

#[test]
fn queue_threshold_is_an_eighth_of_min_rtt_at_least_5ms() {
    for m in min_rtts_us() {
        assert_eq!(
            f64::from(fixed::ld_queue_thresh_us(m)),
            ld::queue_thresh_us(f64::from(m)).floor(),
            "min RTT {m}"
        );
    }
    assert_eq!(fixed::ld_queue_thresh_us(600_000), 75_000, "GEO: 75 ms");
    assert_eq!(
        fixed::ld_queue_thresh_us(20_000),
        5_000,
        "short paths: the 5 ms floor"
    );
    assert_eq!(fixed::ld_queue_thresh_us(u32::MAX), u32::MAX >> 3);
}

#[test]
fn rho_is_hyblas_with_a_floor() {
    for rtt0 in [1u32, 5, 25, 100] {
        for rtt in [0u32, 1, 20, 30, 44, 149, 150, 151, 600, 2_000, 100_000] {
            let got = fixed::rho_to_f64(fixed::ld_rho_q16(rtt * 1000, rtt0 * 1000));
            let want = if rtt == 0 {
                f64::from(fixed::LD_RHO_MIN)
            } else {
                ld::rho(f64::from(rtt), f64::from(rtt0))
            };
            assert!(
                (got - want).abs() <= 1.0 / 65536.0,
                "rtt {rtt} ms, rtt0 {rtt0} ms: {got} vs {want}"
            );
        }
    }
    // LEO (30 ms) takes the floor; GEO (600 ms) keeps Hybla's 24; an unmeasured RTT the floor.
    assert_eq!(fixed::ld_rho_q16(30_000, 0), fixed::LD_RHO_MIN << 16);
    assert_eq!(fixed::ld_rho_q16(600_000, 0), fixed::rho_q16(600_000, 0));
    assert_eq!(fixed::ld_rho_q16(0, 0), fixed::LD_RHO_MIN << 16);
}

#[test]
fn delivery_rate_matches_model() {
    let mut rng = Lcg(7);
    for _ in 0..20_000 {
        let delivered = rng.next() % 200_000;
        let elapsed = u64::from(1 + rng.next() % 5_000_000);
        if f64::from(delivered) / elapsed as f64 >= ld::BW_MAX {
            continue; // saturated, below
        }
        let got = bw_f64(fixed::ld_bw_q24(delivered, elapsed));
        let want = ld::bw(f64::from(delivered), elapsed as f64);
        assert!(
            want - got >= 0.0 && want - got < 1.0 / Q24,
            "{delivered} segs / {elapsed} us: {got} vs {want}"
        );
    }
    // geo-hts: 50 Mbit/s of 1514-byte frames = 4128.5 segments/s.
    let q = fixed::ld_bw_q24(2477, 600_000);
    assert!((fixed::bw_to_segs_per_s(q) - 4128.3).abs() < 0.5);
    assert_eq!(fixed::ld_bw_q24(100, 0), 0, "an empty interval has no rate");
    assert_eq!(fixed::ld_bw_q24(u32::MAX, 1), u32::MAX, "saturates");
}

#[test]
fn window_of_a_rate_matches_model() {
    let mut rng = Lcg(11);
    for _ in 0..20_000 {
        let bw = rng.next() % (1 << 28);
        let t = rng.next() % 3_000_000;
        let got = f64::from(fixed::ld_window(bw, t));
        let want = (bw_f64(bw) * f64::from(t)).floor();
        assert!((got - want).abs() <= 1.0, "bw {bw} t {t}: {got} vs {want}");
    }
    assert_eq!(fixed::ld_window(u32::MAX, u32::MAX), u32::MAX, "saturates");
    // One geo-hts BDP: 4128.5 segments/s x 600 ms = 2477 segments.
    let bw = fixed::ld_bw_q24(4_128_500, 1_000_000_000);
    assert!(fixed::ld_window(bw, 600_000).abs_diff(2477) <= 1);
}

#[test]
fn standing_queue_matches_model() {
    for m in min_rtts_us() {
        let thr = fixed::ld_queue_thresh_us(m);
        for round_min in [
            0,
            1,
            m / 2,
            m,
            m + thr - 1,
            m + thr,
            m + thr + 1,
            m * 2,
            u32::MAX,
        ] {
            assert_eq!(
                fixed::ld_standing_queue(round_min, m),
                ld::standing_queue(f64::from(round_min), f64::from(m)),
                "round min {round_min} min {m}"
            );
        }
        assert!(
            !fixed::ld_standing_queue(m + thr, m),
            "at the threshold: no queue"
        );
        assert!(fixed::ld_standing_queue(m + thr + 1, m));
    }
    assert!(
        !fixed::ld_standing_queue(700_000, 0),
        "no minimum yet: no queue"
    );
}

/// The round tracker fed the same ACK streams (rate, RTT with and without a queue, jitter,
/// ACKs without an RTT sample) completes the same rounds with the same rate and queue flag.
#[test]
fn rounds_match_model() {
    for (min_rtt, queue_us, segs_per_ms) in [
        (600_000u32, 0u32, 4.1f64),
        (600_000, 60_000, 4.1),
        (600_000, 80_000, 4.1),
        (600_000, 500_000, 0.86),
        (20_000, 6_000, 80.0),
        (40_000, 0, 1.0),
    ] {
        let mut rng = Lcg(u64::from(min_rtt) + u64::from(queue_us));
        let (mut now, mut delivered, mut owed) = (1_000_000u64, 0u32, 0.0f64);
        let mut fx = LdRound::started(now, delivered);
        let mut m = ld::Rounds::started(now as f64, 0.0);
        let mut rounds = 0;
        for _ in 0..30_000 {
            let gap = 100 + u64::from(rng.next() % 400);
            now += gap;
            owed += gap as f64 * segs_per_ms / 1000.0;
            delivered += owed.floor() as u32;
            owed = owed.fract();
            let rtt = match rng.next() % 10 {
                0 => -1, // an ACK that only SACKs a retransmission: no sample
                _ => (min_rtt + queue_us + rng.next() % 3_000) as i32,
            };
            let a = fx.update(now, delivered, rtt, min_rtt);
            let b = m.on_ack(
                now as f64,
                f64::from(delivered),
                f64::from(rtt),
                f64::from(min_rtt),
            );
            assert_eq!(a, b, "round end at {now}");
            assert_eq!(fx.queue, u32::from(m.queue));
            assert!((bw_f64(fx.bw_q24) - m.bw).abs() < 1.0 / Q24);
            assert_eq!(fx.queue_now(min_rtt), m.queue_now(f64::from(min_rtt)));
            assert_eq!(fx.last_min_rtt_us, m.last_min_rtt_us as u32);
            if a {
                assert_eq!(fx.may_cut(now), m.may_cut(now as f64), "cut hold at {now}");
            }
            rounds += u32::from(a);
        }
        assert!(rounds >= 3, "min RTT {min_rtt}: {rounds} rounds");
        let thr = fixed::ld_queue_thresh_us(min_rtt);
        assert_eq!(
            fx.queue != 0,
            queue_us > thr,
            "queue {queue_us} vs threshold {thr}"
        );
        let want = segs_per_ms / 1000.0;
        assert!(
            (bw_f64(fx.bw_q24) - want).abs() < 0.02 * want,
            "rate {} vs {want}",
            bw_f64(fx.bw_q24)
        );
    }
}

/// The rounds' period: the min RTT rounded up to a multiple of the largest power of two at most
/// min RTT / 8, the same as the model's; never below the min RTT nor an eighth above it.
#[test]
fn round_period_matches_model_and_is_shared() {
    let mut rng = Lcg(11);
    let mut ms = min_rtts_us();
    ms.extend([2, 7, 8, 9, 15, 16, 17, u32::MAX, u32::MAX - 1, 1 << 31]);
    ms.extend((0..50_000).map(|_| 1 + rng.next() % 4_000_000));
    for m in ms {
        let len = fixed::ld_round_len(m);
        assert_eq!(len as f64, ld::round_len(f64::from(m)), "min RTT {m}");
        assert!(len >= u64::from(m), "min RTT {m}: period {len}");
        assert!(
            len - u64::from(m) <= u64::from(m / 8),
            "min RTT {m}: period {len} more than an eighth above"
        );
    }
    // A GEO path: two flows whose minima differ by a few ms (601 and 602 ms measured on one
    // carrier; a flow that starts into the other's queue learns a larger one) share the period.
    for m in [589_825u32, 600_000, 601_000, 602_000, 637_000, 655_360] {
        assert_eq!(fixed::ld_round_len(m), 655_360, "min RTT {m}");
    }
    assert_eq!(fixed::ld_round_len(589_824), 589_824, "the step below");
    assert_eq!(fixed::ld_round_len(655_361), 720_896, "the step above");
    assert_eq!(fixed::ld_round_len(1), 1);
    assert_eq!(fixed::ld_round_len(u32::MAX), 1 << 32, "no overflow");
}

#[test]
fn rounds_end_on_the_clock() {
    // The period of a 600 ms path is 655.36 ms. Started at 700 ms: ends at the next boundary,
    // 1,310.72 ms.
    let mut r = LdRound::started(700_000, 10);
    assert!(
        !r.update(500_000, 100, 600_000, 0),
        "no minimum RTT: no round"
    );
    assert!(!r.update(1_310_719, 100, 600_000, 600_000));
    assert!(r.update(1_310_770, 610, 600_000, 600_000));
    assert_eq!(r.carried, 610, "the next round starts at this ACK");
    assert_eq!(r.start_us, 1_310_770);
    assert_eq!(r.min_rtt_us, 0);
    assert!(
        !r.update(100, 700, 600_000, 600_000),
        "a clock going back ends nothing"
    );
    // The next one ends at 1,966.08 ms: every flow whose min RTT rounds to this period ends
    // its rounds there.
    assert!(!r.update(1_966_079, 700, 600_000, 600_000));
    assert!(r.update(1_966_080, 700, 602_000, 602_000));
    // A start less than half a period before a boundary runs on to the one after.
    let mut r = LdRound::started(1_000_000, 0);
    assert!(!r.update(1_310_720, 5, 600_000, 600_000));
    assert!(r.update(1_966_080, 5, 600_000, 600_000));
    for (start, m) in [
        (0u64, 1u32),
        (1_234_567, 600_000),
        (599_999, 600_000),
        (7, 40_000),
    ] {
        let e = ld::round_end(start as f64, f64::from(m));
        let mut r = LdRound::started(start, 0);
        assert!(!r.update(e as u64 - 1, 0, 1, m), "{start} {m}");
        assert!(r.update(e as u64, 0, 1, m), "{start} {m}: {e}");
    }
}

/// Two flows on one path with minima 1 ms apart, fed interleaved ACKs from an uptime of about
/// ten hours (where multiples of 601 and 602 ms fall at unrelated instants): after the first
/// round of each they end every round within one ACK of each other.
#[test]
fn two_flows_of_one_path_end_their_rounds_together() {
    let mut now = 36_000_000_000u64 + 123_457;
    let (mut a, mut b) = (LdRound::started(now, 0), LdRound::started(now + 250_000, 0));
    let (mut ends_a, mut ends_b) = (Vec::new(), Vec::new());
    let mut rng = Lcg(5);
    for i in 0..20_000u32 {
        now += 500 + u64::from(rng.next() % 1_000);
        let flow_b = i % 2 == 1;
        let (r, m, ends) = if flow_b {
            (&mut b, 602_000, &mut ends_b)
        } else {
            (&mut a, 601_000, &mut ends_a)
        };
        if r.update(now, i, m as i32, m) {
            ends.push(now);
        }
    }
    assert!(ends_a.len() > 10, "{} rounds", ends_a.len());
    let n = ends_a.len().min(ends_b.len());
    for (x, y) in ends_a[1..n].iter().zip(&ends_b[1..n]) {
        assert!(x.abs_diff(*y) < 3_000, "round ends {x} and {y}");
    }
}

/// A cut waits one RTT with the queue (the last round's smallest RTT) before the next.
#[test]
fn queue_cuts_are_one_rtt_apart() {
    let mut r = LdRound::started(0, 0);
    // A round of 655 ms (a 600 ms path's period) of ACKs whose RTTs all carry 1 s of queue.
    assert!(!r.update(300_000, 10, 1_600_000, 600_000));
    assert!(r.update(655_360, 20, 1_600_000, 600_000));
    assert!(r.queue != 0 && r.last_min_rtt_us == 1_600_000);
    assert!(r.may_cut(655_360), "the first cut");
    assert_eq!(r.hold_until_us, 2_255_360);
    assert!(
        !r.may_cut(1_310_720),
        "the next round's queue is the one just cut"
    );
    assert!(!r.may_cut(2_255_359));
    assert!(r.may_cut(2_255_360), "one RTT later the cut has shown");
}

#[test]
fn ssthresh_matches_model() {
    let mut rng = Lcg(3);
    for _ in 0..50_000 {
        let cwnd = 1 + rng.next() % 70_000;
        let queue = rng.next().is_multiple_of(3);
        let bw = rng.next() % (1 << 27);
        let min_rtt = [0, 20_000, 600_000, 1_946_000][(rng.next() % 4) as usize];
        let rho = RHO_ONE + rng.next() % (40 * RHO_ONE);
        let ceiling = 1 + rng.next() % 65_536;
        let got = fixed::ld_ssthresh(cwnd, queue, bw, min_rtt, rho, ceiling);
        let want = ld::ssthresh(
            f64::from(cwnd),
            queue,
            bw_f64(bw),
            f64::from(min_rtt),
            fixed::rho_to_f64(rho),
            f64::from(ceiling),
        );
        assert!(
            (f64::from(got) - want).abs() <= 1.0,
            "cwnd {cwnd} queue {queue} bw {bw} min {min_rtt} rho {rho} ceil {ceiling}: {got} vs {want}"
        );
        assert!(got >= fixed::ssthresh(cwnd), "never below Reno's halving");
        if queue {
            assert_eq!(got, fixed::ssthresh(cwnd), "congestion: Reno's halving");
        }
    }
}

/// The cases the mode exists for, on geo-hts numbers (rho 24, BDP 2477 segments).
#[test]
fn bit_errors_keep_the_window_congestion_halves_it() {
    let rho = 24 * RHO_ONE;
    let full_pipe = fixed::ld_bw_q24(2477, 600_000);
    // A bit error with the pipe full and no queue: the window stays (and may grow a little).
    let s = fixed::ld_ssthresh(2600, false, full_pipe, 600_000, rho, 5180);
    assert!((2600..=2600 + 576).contains(&s), "{s}");
    // 1.2% of the round's segments lost: what was delivered still keeps the window.
    let lossy = fixed::ld_bw_q24(2477 * 988 / 1000, 600_000);
    assert!(fixed::ld_ssthresh(2477, false, lossy, 600_000, rho, 5180) >= 2477);
    // A window far below the pipe grows by one round of Hybla growth, not to the pipe at once.
    assert_eq!(
        fixed::ld_ssthresh(1000, false, full_pipe, 600_000, rho, 5180),
        1576
    );
    // The same loss with a standing queue, or before any round measured the path: halving.
    assert_eq!(
        fixed::ld_ssthresh(2600, true, full_pipe, 600_000, rho, 5180),
        1300
    );
    assert_eq!(fixed::ld_ssthresh(2600, false, 0, 600_000, rho, 5180), 1300);
    // A window twice the path's (a buffer the RTT does not show): back to what it carries.
    let s = fixed::ld_ssthresh(5000, false, full_pipe, 600_000, rho, 5180);
    assert!((2477..=2477 * 9 / 8 + 1).contains(&s), "{s}");
    // The ceiling holds.
    assert_eq!(
        fixed::ld_ssthresh(2600, false, full_pipe, 600_000, rho, 2000),
        2000
    );
}

#[test]
fn queue_cut_matches_model_and_stays_within_half_and_cwnd() {
    let mut rng = Lcg(5);
    for _ in 0..50_000 {
        let cwnd = rng.next() % 70_000;
        let bw = rng.next() % (1 << 27);
        let min_rtt = [1, 20_000, 600_000, 1_946_000][(rng.next() % 4) as usize];
        let got = fixed::ld_queue_cut(cwnd, bw, min_rtt);
        let want = ld::queue_cut(f64::from(cwnd), bw_f64(bw), f64::from(min_rtt));
        assert!(
            (f64::from(got) - want).abs() <= 1.0,
            "cwnd {cwnd} bw {bw} min {min_rtt}: {got} vs {want}"
        );
        assert!(got <= cwnd.max(1) || cwnd < 2, "never grows");
        assert!(got >= fixed::ssthresh(cwnd).min(cwnd), "never below half");
    }
    // geo-hts, window 2 BDP with 1 BDP queued: drained to the pipe plus ~37 ms of queue.
    let full_pipe = fixed::ld_bw_q24(2477, 600_000);
    let cut = fixed::ld_queue_cut(4954, full_pipe, 600_000);
    assert!(cut.abs_diff(2477 + 2477 * 37 / 600) <= 2, "{cut}");
}

#[test]
fn in_flight_matches_kernel_rule() {
    let mut rng = Lcg(9);
    for _ in 0..20_000 {
        let v: Vec<u32> = (0..4).map(|_| rng.next() % 10_000).collect();
        let got = fixed::ld_in_flight(v[0], v[1], v[2], v[3]);
        let want = ld::in_flight(
            f64::from(v[0]),
            f64::from(v[1]),
            f64::from(v[2]),
            f64::from(v[3]),
        );
        assert_eq!(f64::from(got), want, "{v:?}");
    }
    assert_eq!(
        fixed::ld_in_flight(u32::MAX, 0, 0, u32::MAX),
        u32::MAX,
        "saturates"
    );
}

#[test]
fn recovery_window_matches_model() {
    let mut rng = Lcg(13);
    for _ in 0..50_000 {
        let in_flight = rng.next() % 8_000;
        let target = rng.next() % 8_000;
        let prior = rng.next() % 8_000;
        let prr_delivered = rng.next() % 8_000;
        let prr_out = rng.next() % 8_000;
        let got = fixed::ld_recovery_cwnd(in_flight, target, prior, prr_delivered, prr_out);
        let want = ld::recovery_cwnd(
            f64::from(in_flight),
            f64::from(target),
            f64::from(prior),
            f64::from(prr_delivered),
            f64::from(prr_out),
        );
        assert_eq!(
            f64::from(got),
            want,
            "{in_flight} {target} {prior} {prr_delivered} {prr_out}"
        );
    }
    // A bit error: target = window, so the flight is refilled at once (the pacer spreads it).
    assert_eq!(fixed::ld_recovery_cwnd(2590, 2600, 2600, 1, 0), 2600);
    // Congestion, halving from 2000: the first retransmission leaves at once, then one segment
    // per two delivered until the flight is down to the target.
    assert_eq!(fixed::ld_recovery_cwnd(2000, 1000, 2000, 0, 0), 2001);
    assert_eq!(fixed::ld_recovery_cwnd(1900, 1000, 2000, 200, 1), 1999);
    assert_eq!(fixed::ld_recovery_cwnd(1000, 1000, 2000, 1000, 500), 1000);
}

#[test]
fn pacing_rate_matches_kernel_formula() {
    let mut rng = Lcg(17);
    for _ in 0..20_000 {
        let mss = 500 + rng.next() % 9000;
        let cwnd = rng.next() % 70_000;
        let packets_out = rng.next() % 70_000;
        let ssthresh = rng.next() % 140_000;
        let srtt8 = 8 * (1 + rng.next() % 2_000_000);
        let got = fixed::ld_pacing_rate(mss, cwnd, packets_out, ssthresh, srtt8, u64::MAX);
        let want = ld::pacing_rate(
            f64::from(mss),
            f64::from(cwnd),
            f64::from(packets_out),
            f64::from(ssthresh),
            f64::from(srtt8) / 8.0,
            f64::MAX,
        );
        assert!(
            (got as f64 - want).abs() <= 1.0 + 1e-12 * want,
            "{got} vs {want}"
        );
    }
    // geo-hts: 2590 segments of 1448 B over 600 ms at 120% = 7.5 MB/s; capped by the socket.
    let r = fixed::ld_pacing_rate(1448, 2590, 2590, 2000, 8 * 600_000, u64::MAX);
    assert_eq!(r, 1448 * 2590 * 12 / 6);
    assert_eq!(
        fixed::ld_pacing_rate(1448, 2590, 0, 2000, 8 * 600_000, 6_000_000),
        6_000_000
    );
    assert_eq!(
        fixed::ld_pacing_rate(1448, 10, 0, 100, 0, 42),
        42,
        "no RTT yet: the cap"
    );
    assert!(
        fixed::ld_pacing_rate(65_535, u32::MAX, u32::MAX, 0, 8, u64::MAX) > 0,
        "no overflow"
    );
}

#[test]
fn a_queue_that_outlives_its_cuts_relearns_the_min_rtt_as_the_model_does() {
    const GEO: u32 = 600_000;
    // 50 Mbit/s in Q24 segments per microsecond (4,317 segments/s of 1448 B).
    let bw = (4317.0 / 1e6 * (1u64 << 24) as f64) as u32;
    // A delay step on a LEO path: the first queued round starts the streak (and cuts, to a
    // target above half the window), RELEARN rounds after that cut's effect is back still show
    // the queue: re-learn, giving back the window the streak began with, not the cut one.
    let mut s = LdStreak::default();
    assert_eq!(s.end(false, 300, true), 0);
    assert_eq!(
        s.end(true, 3000, true),
        0,
        "first queued round: a cut, no verdict"
    );
    s.cut(3000, bw, GEO); // target 2,752 segments: not clamped
    assert_eq!(s.clamped, 0);
    assert_eq!(
        s.end(true, 2752, false),
        0,
        "the cut's effect is not back yet"
    );
    assert_eq!(s.end(true, 2752, true), 0);
    assert_eq!(
        s.end(true, 2000, true),
        3000,
        "outlived its cut: the streak's first window back"
    );
    assert_eq!(s, LdStreak::default(), "the streak starts over");
    // A slow-start overshoot far above the pipe: its cuts stop at half, the queue after them is
    // the flow's own, and no number of rounds re-learns; a round without the queue ends it.
    assert_eq!(s.end(true, 40_000, true), 0);
    s.cut(40_000, bw, GEO);
    assert_eq!(s.clamped, 1);
    for _ in 0..100 {
        assert_eq!(s.end(true, 20_000, true), 0);
    }
    assert_eq!(s.end(false, 2700, true), 0);
    assert_eq!(s, LdStreak::default());
    // Random streams agree with the model round for round.
    let mut rng = Lcg(7);
    let mut model = ld::Streak::default();
    let mut native = LdStreak::default();
    for i in 0..50_000 {
        let queue = !rng.next().is_multiple_of(3);
        let settled = !rng.next().is_multiple_of(4);
        let cwnd = 2 + rng.next() % 5000;
        let clamped = rng.next().is_multiple_of(5);
        let m = model.end(
            queue,
            f64::from(cwnd),
            settled,
            u32::from(LD_RELEARN_ROUNDS),
        );
        assert_eq!(f64::from(native.end(queue, cwnd, settled)), m, "round {i}");
        assert_eq!(u32::from(native.rounds), model.rounds, "round {i}");
        assert_eq!(
            f64::from(native.cwnd_before),
            model.cwnd_before,
            "round {i}"
        );
        if queue {
            native.clamped = u16::from(clamped);
            model.clamped = clamped;
        }
    }
    // The clamp flag agrees with the model's target on whole-segment numbers.
    for (cwnd, min_rtt) in [
        (3000u32, GEO),
        (6000, GEO),
        (5504, GEO),
        (400, 24_000),
        (10_000, 24_000),
    ] {
        let mut n = LdStreak::default();
        n.cut(cwnd, bw, min_rtt);
        let mut m = ld::Streak::default();
        m.cut(
            f64::from(cwnd),
            f64::from(bw) / (1u64 << 24) as f64,
            f64::from(min_rtt),
        );
        assert_eq!(n.clamped == 1, m.clamped, "cwnd {cwnd} min RTT {min_rtt}");
    }
}
