//! The operator cwnd ceiling (params map `cwnd_max`): the header's helpers compiled natively
//! against the f64 model, plus the link formula the API derives the ceiling from.
use perigee_hybla::fixed::{self, Window, CWND_CEILING, RHO_ONE};
use perigee_hybla::model::{self, ModelWindow};

const RTT0_US: u32 = 25_000;

#[test]
fn effective_ceiling_is_the_lowest_bound() {
    let clamps = [0u32, 1, 2, 20, 700, 65_535, 65_536, 100_000, u32::MAX];
    let maxes = [0u32, 1, 2, 20, 700, 65_536, 70_000, u32::MAX];
    for clamp in clamps {
        for cwnd_max in maxes {
            let got = fixed::effective_ceiling(clamp, cwnd_max);
            assert_eq!(
                got,
                model::ceiling(clamp, cwnd_max),
                "clamp {clamp} cwnd_max {cwnd_max}"
            );
            assert!((1..=CWND_CEILING).contains(&got));
        }
    }
    assert_eq!(
        fixed::effective_ceiling(u32::MAX, 0),
        CWND_CEILING,
        "0 = built-in"
    );
    assert_eq!(fixed::effective_ceiling(u32::MAX, 1500), 1500);
    assert_eq!(
        fixed::effective_ceiling(800, 1500),
        800,
        "socket clamp wins"
    );
}

/// GEO slow start (rho ~ 24) with a small ceiling: the first ACK jumps to the ceiling, never
/// past it; the model agrees ACK by ACK, in slow start and in congestion avoidance.
#[test]
fn slow_start_and_ca_stay_under_the_ceiling() {
    for rtt_ms in [25u32, 100, 250, 400, 600, 900] {
        let q = fixed::rho_q16(rtt_ms * 1000, RTT0_US);
        let rho = fixed::rho_to_f64(q);
        for cwnd_max in [1u32, 5, 20, 100, 1000, 5239] {
            let ceiling = fixed::effective_ceiling(u32::MAX, cwnd_max);
            for ssthresh in [u32::MAX, 50, 2] {
                let start = fixed::initial_cwnd(10, q, ceiling);
                assert_eq!(
                    start,
                    model::initial_cwnd(10, rho, ceiling).min(ceiling),
                    "rtt {rtt_ms} ceiling {ceiling}"
                );
                assert!(start <= ceiling);
                let mut fx = Window {
                    cwnd: start,
                    frac: 0,
                };
                let mut m = ModelWindow {
                    cwnd: start,
                    frac: 0.0,
                };
                for i in 0..5000 {
                    let acked = 1 + i % 3;
                    fixed::on_ack(&mut fx, ssthresh, q, acked, ceiling);
                    m.on_ack(ssthresh, rho, acked, ceiling);
                    assert!(
                        fx.cwnd <= ceiling,
                        "rtt {rtt_ms} ceiling {ceiling} ssthresh {ssthresh} ack {i}: {}",
                        fx.cwnd
                    );
                    let (a, b) = (fx.segments(), m.segments());
                    assert!(
                        (a - b).abs() <= 1.0 + 1e-4 * b,
                        "rtt {rtt_ms} ceiling {ceiling} ack {i}: fixed {a} vs model {b}"
                    );
                }
                if ssthresh == u32::MAX {
                    assert_eq!(fx.cwnd, ceiling, "slow start ends up at the ceiling");
                }
            }
        }
    }
    // The motivating case: rho = 24, one ACK would add 2^24 - 1 segments.
    let mut w = Window { cwnd: 240, frac: 0 };
    fixed::on_ack(&mut w, u32::MAX, 24 * RHO_ONE, 1, 5239);
    assert_eq!(
        w,
        Window {
            cwnd: 5239,
            frac: 0
        }
    );
}

/// A ceiling lowered at run time cuts a larger window on the next ACK, and drops the
/// carried remainder (it belonged to the larger window).
#[test]
fn lowered_ceiling_cuts_the_window() {
    for (ssthresh, q) in [(u32::MAX, 24 * RHO_ONE), (100, 3 * RHO_ONE), (100, RHO_ONE)] {
        let mut fx = Window {
            cwnd: 60_000,
            frac: 1 << 31,
        };
        let mut m = ModelWindow {
            cwnd: 60_000,
            frac: 0.5,
        };
        fixed::on_ack(&mut fx, ssthresh, q, 1, 300);
        m.on_ack(ssthresh, fixed::rho_to_f64(q), 1, 300);
        assert_eq!(fx, Window { cwnd: 300, frac: 0 });
        assert_eq!((m.cwnd, m.frac), (300, 0.0));
    }
}

#[test]
fn undo_respects_the_ceiling() {
    for cwnd in [1u32, 10, 299, 300, 301, 5000] {
        for prior in [0u32, 1, 10, 300, 4000, 65_536] {
            for ceiling in [1u32, 20, 300, 65_536] {
                let got = fixed::undo(cwnd, prior, ceiling);
                assert_eq!(got, model::undo(cwnd, prior, ceiling));
                assert!(got <= ceiling);
            }
        }
    }
    assert_eq!(
        fixed::undo(50, 400, 65_536),
        400,
        "undo restores the prior window"
    );
    assert_eq!(fixed::undo(50, 400, 300), 300, "but not above the ceiling");
}

/// ceiling = ceil(2 x rate x (base RTT + allocation delay) / (8 x MSS)).
#[test]
fn link_formula() {
    // geo-hts: 50 Mbit/s, 600 ms, MSS 1448: BDP = 3.75 MB = 2589.8 segments, x2 -> 5180.
    assert_eq!(
        perigee_hybla::cwnd_ceiling_for_link(50_000_000, 600, 0, 1448),
        5180
    );
    // BoD: allocation delay adds to the RTT the window must cover.
    assert_eq!(
        perigee_hybla::cwnd_ceiling_for_link(10_000_000, 560, 250, 1448),
        (2.0f64 * 10e6 * 0.810 / (8.0 * 1448.0)).ceil() as u32
    );
    // Exact multiple: no rounding up.
    assert_eq!(
        perigee_hybla::cwnd_ceiling_for_link(8 * 1000 * 1000, 500, 0, 1000),
        1000
    );
    assert_eq!(perigee_hybla::cwnd_ceiling_for_link(0, 600, 0, 1448), 1);
    assert_eq!(perigee_hybla::cwnd_ceiling_for_link(1, 1, 0, 1448), 1);
    assert_eq!(
        perigee_hybla::cwnd_ceiling_for_link(u64::MAX, 60_000, 60_000, 0),
        CWND_CEILING,
        "capped at the built-in clamp, no overflow"
    );
}
