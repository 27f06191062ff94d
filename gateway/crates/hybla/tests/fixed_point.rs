//! The BPF CC's fixed-point helpers (bpf/hybla_math.h, compiled natively) against the f64
//! reference model of Hybla's formulas.
//!
//! Tolerances: rho within 1 Q16 ulp (1.5e-5); 2^rho - 1 within 1e-5 relative; per-ACK CA
//! increment within 1 Q32 ulp; windows after long ACK sequences within 1e-4 relative + 1
//! segment of the model (the model carries the fraction exactly, fixed point truncates at 2^-32
//! per ACK).
use perigee_hybla::fixed::{self, Window, CWND_CEILING, RHO_ONE};
use perigee_hybla::model::{self, ModelWindow};

const RTT0_US: u32 = 25_000;

fn rtts_ms() -> Vec<u32> {
    let mut v: Vec<u32> = (10..=100).step_by(5).collect();
    v.extend((120..=1000).step_by(20));
    v.extend([13, 27, 37, 251, 599, 611, 777]);
    v
}

#[test]
fn rho_matches_model() {
    for rtt in rtts_ms() {
        for rtt0 in [10u32, 25, 50, 100] {
            let q = fixed::rho_q16(rtt * 1000, rtt0 * 1000);
            let want = model::rho(f64::from(rtt), f64::from(rtt0));
            let got = fixed::rho_to_f64(q);
            assert!(
                (got - want).abs() <= 1.0 / f64::from(RHO_ONE),
                "rtt {rtt} rtt0 {rtt0}: {got} vs {want}"
            );
        }
    }
    assert_eq!(
        fixed::rho_q16(5_000, RTT0_US),
        RHO_ONE,
        "short RTTs behave like RTT0"
    );
    assert_eq!(
        fixed::rho_q16(600_000, 0),
        24 * RHO_ONE,
        "rtt0 0 means the 25 ms default"
    );
    assert_eq!(
        fixed::rho_q16(u32::MAX, 1000),
        256 * RHO_ONE,
        "rho is capped"
    );
}

#[test]
fn slow_start_increment_is_2_pow_rho_minus_1() {
    for rtt in rtts_ms() {
        let q = fixed::rho_q16(rtt * 1000, RTT0_US);
        let got = fixed::ss_inc_q32(q);
        if q >> 16 >= 16 {
            assert_eq!(got, 0, "rho {rtt}/25 saturates");
            continue;
        }
        let want = model::ss_increment(fixed::rho_to_f64(q));
        let got = fixed::q32_to_f64(got);
        assert!(
            (got - want).abs() <= 1e-5 * want.max(1.0),
            "rtt {rtt}: {got} vs {want}"
        );
    }
    // Every fractional step of rho in [1, 2), the polynomial's whole domain.
    for f in (0..RHO_ONE).step_by(97) {
        let q = RHO_ONE + f;
        let want = model::ss_increment(fixed::rho_to_f64(q));
        let got = fixed::q32_to_f64(fixed::ss_inc_q32(q));
        assert!(
            (got - want).abs() <= 1e-5 * want,
            "rho {q:#x}: {got} vs {want}"
        );
    }
    assert_eq!(
        fixed::ss_inc_q32(RHO_ONE),
        1 << 32,
        "rho = 1 is Reno's +1 per ACK exactly"
    );
}

#[test]
fn ca_increment_is_rho_squared_over_cwnd() {
    for rtt in rtts_ms() {
        let q = fixed::rho_q16(rtt * 1000, RTT0_US);
        for cwnd in [1u32, 2, 10, 100, 1000, 10_000, 65_536] {
            let got = fixed::q32_to_f64(fixed::ca_inc_q32(q, cwnd));
            let want = model::ca_increment(fixed::rho_to_f64(q), cwnd);
            assert!(
                (got - want).abs() <= 2f64.powi(-32) + 1e-12 * want,
                "rtt {rtt} cwnd {cwnd}"
            );
            assert!(got >= want - 1e-12 * want, "rounded up, never down");
        }
    }
}

#[test]
fn initial_window_scales_by_rho() {
    for rtt in rtts_ms() {
        let q = fixed::rho_q16(rtt * 1000, RTT0_US);
        for iw in [1u32, 4, 10] {
            let got = fixed::initial_cwnd(iw, q, CWND_CEILING);
            let want = model::initial_cwnd(iw, fixed::rho_to_f64(q), CWND_CEILING);
            assert!(
                got.abs_diff(want) <= 1,
                "rtt {rtt} iw {iw}: {got} vs {want}"
            );
        }
    }
    assert_eq!(fixed::initial_cwnd(10, 24 * RHO_ONE, CWND_CEILING), 240);
    assert_eq!(
        fixed::initial_cwnd(10, 24 * RHO_ONE, 100),
        100,
        "ceiling applies"
    );
}

fn assert_close(fx: &Window, m: &ModelWindow, ctx: &str) {
    let (a, b) = (fx.segments(), m.segments());
    assert!(
        (a - b).abs() <= 1.0 + 1e-4 * b,
        "{ctx}: fixed {a} vs model {b}"
    );
}

/// Many ACKs in congestion avoidance, fractional remainders carried across ACKs.
#[test]
fn congestion_avoidance_over_many_acks() {
    for rtt in rtts_ms() {
        let q = fixed::rho_q16(rtt * 1000, RTT0_US);
        let rho = fixed::rho_to_f64(q);
        for (start, acked) in [(10u32, 1u32), (50, 2), (400, 1), (3000, 3)] {
            let mut fx = Window {
                cwnd: start,
                frac: 0,
            };
            let mut m = ModelWindow {
                cwnd: start,
                frac: 0.0,
            };
            for i in 0..20_000 {
                fixed::on_ack(&mut fx, start, q, acked, CWND_CEILING);
                m.on_ack(start, rho, acked, CWND_CEILING);
                if i % 997 == 0 {
                    assert_close(&fx, &m, &format!("rtt {rtt} start {start} ack {i}"));
                }
            }
            assert_close(&fx, &m, &format!("rtt {rtt} start {start} end"));
            assert!(fx.cwnd > start, "CA must grow the window");
        }
    }
}

/// Reno (rho = 1): +1 segment per window of ACKs, exactly, thanks to the carried remainder.
#[test]
fn rho_one_is_reno() {
    let mut w = Window { cwnd: 100, frac: 0 };
    for _ in 0..100 {
        fixed::on_ack(&mut w, 50, RHO_ONE, 1, CWND_CEILING);
    }
    assert_eq!(w.cwnd, 101);
    let mut w = Window { cwnd: 10, frac: 0 };
    fixed::on_ack(&mut w, 1000, RHO_ONE, 3, CWND_CEILING);
    assert_eq!(
        w,
        Window { cwnd: 13, frac: 0 },
        "slow start: +1 per ACKed segment"
    );
}

/// Slow start: 2^rho - 1 per ACKed segment, exits exactly at ssthresh, never above the ceiling.
#[test]
fn slow_start_sequences() {
    for rtt in [10u32, 25, 30, 40, 50, 75, 100, 150, 200, 300, 375, 399] {
        let q = fixed::rho_q16(rtt * 1000, RTT0_US);
        let rho = fixed::rho_to_f64(q);
        let ssthresh = 2000;
        let mut fx = Window { cwnd: 10, frac: 0 };
        let mut m = ModelWindow {
            cwnd: 10,
            frac: 0.0,
        };
        for i in 0..3000 {
            fixed::on_ack(&mut fx, ssthresh, q, 1, CWND_CEILING);
            m.on_ack(ssthresh, rho, 1, CWND_CEILING);
            assert_close(&fx, &m, &format!("rtt {rtt} ack {i}"));
            assert!(fx.cwnd <= CWND_CEILING);
        }
        assert!(
            fx.cwnd >= ssthresh,
            "rtt {rtt}: left slow start ({})",
            fx.cwnd
        );
    }
    // rho >= 16: one ACK hits the ceiling (or ssthresh, whichever is lower).
    let mut w = Window { cwnd: 10, frac: 0 };
    fixed::on_ack(&mut w, u32::MAX, 24 * RHO_ONE, 1, 30_000);
    assert_eq!(w.cwnd, 30_000);
    let mut w = Window { cwnd: 10, frac: 0 };
    fixed::on_ack(&mut w, 700, 24 * RHO_ONE, 1, 30_000);
    assert_eq!(w.cwnd, 700);
}

/// Window growth per RTT: a whole window of ACKs in CA adds rho^2 segments (the paper's
/// rho^2 / RTT_H growth rate), within the model tolerance.
#[test]
fn ca_growth_per_rtt_is_rho_squared() {
    for rtt in [25u32, 50, 100, 250, 600] {
        let q = fixed::rho_q16(rtt * 1000, RTT0_US);
        let rho = fixed::rho_to_f64(q);
        let start = 60_000u32.min(1000 * (rho * rho) as u32).max(100);
        let mut w = Window {
            cwnd: start,
            frac: 0,
        };
        for _ in 0..start {
            fixed::on_ack(&mut w, 1, q, 1, CWND_CEILING);
        }
        let grown = w.segments() - f64::from(start);
        assert!(
            (grown - rho * rho).abs() <= 0.05 * rho * rho + 1.0,
            "rtt {rtt}: {grown} vs {}",
            rho * rho
        );
    }
}

#[test]
fn stretch_acks_and_extremes_do_not_overflow() {
    for q in [
        RHO_ONE,
        8 * RHO_ONE,
        15 * RHO_ONE + 0xffff,
        16 * RHO_ONE,
        256 * RHO_ONE,
    ] {
        for cwnd in [0u32, 1, 2, 65_535, 65_536] {
            for acked in [0u32, 1, 64, 16_384, u32::MAX] {
                for ssthresh in [0u32, 2, 100, u32::MAX] {
                    let mut w = Window {
                        cwnd,
                        frac: u32::MAX,
                    };
                    fixed::on_ack(&mut w, ssthresh, q, acked, CWND_CEILING);
                    assert!(
                        w.cwnd <= CWND_CEILING && w.cwnd >= 1,
                        "q {q} cwnd {cwnd} acked {acked}"
                    );
                }
            }
        }
    }
}

#[test]
fn reno_loss_response() {
    assert_eq!(fixed::ssthresh(100), 50);
    assert_eq!(fixed::ssthresh(3), 2);
    assert_eq!(fixed::ssthresh(0), 2);
    assert_eq!(fixed::ssthresh(65_536), 32_768);
}
