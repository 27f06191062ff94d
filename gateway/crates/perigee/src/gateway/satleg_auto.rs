//! The satellite leg's congestion control chosen by the path it measures: Hybla exists for long
//! round trips (its rho = RTT / 25 ms scales growth by the RTT), and on a short one, a LEO path of
//! 20-50 ms, plain hybla is Reno with a loss burst at every path change. A leg on plain hybla as
//! the config's default switches to BBR as soon as its satellite socket has measured a minimum RTT
//! below SHORT_PATH_RTT_US. hybla_ld, the default, stays: its rho has a floor (bpf/hybla_math.h,
//! HYBLA_LD_RHO_MIN), so it regrows in a fraction of a second, keeps its window through random
//! loss, has no ProbeRTT, and on a LEO pass beat BBR on the leg and end-to-end cubic
//! (docs/hybla.md, *The default*, with the measurements). A class that names a congestion
//! control is never switched.
//!
//! On a long path, a leg on the default hybla_ld that has retransmitted nothing since the flow
//! began switches to plain hybla once its smoothed RTT has stood more than one min RTT (plus
//! DAMA_MARGIN_US) above the min RTT: more delay than a GEO link's buffer of one BDP can add,
//! which is what a DAMA/BoD link's allocation delay adds while a grant is pending. hybla_ld
//! reads that delay as a standing queue and cuts the window to what the grant carries now,
//! which lowers the next request (docs/hybla.md, *hybla_ld*, Why it is safe, and *The default*).
use super::config::{SHORT_PATH_CC, SHORT_PATH_RTT_US};
use super::flow::Session;
use super::telemetry::{parse_tcp_info, CcReason};
use std::time::Duration;

/// What a leg on the default runs once its RTT shows a capacity allocation delay (DAMA/BoD).
pub const DAMA_CC: &str = "hybla";
/// How far above twice the min RTT the smoothed RTT must be: a GEO link whose buffer holds one
/// BDP (geo-hts) adds at most one min RTT of queue, so its RTT stays under 2 x min RTT.
pub const DAMA_MARGIN_US: u32 = 100_000;

/// Whether a leg's RTT shows more delay than a buffer of one BDP can hold on a long (GEO) path:
/// srtt > 2 x min RTT + DAMA_MARGIN_US, with min RTT >= SHORT_PATH_RTT_US.
pub fn allocation_delay(min_rtt_us: u32, srtt_us: u32) -> bool {
    min_rtt_us >= SHORT_PATH_RTT_US
        && u64::from(srtt_us) > 2 * u64::from(min_rtt_us) + u64::from(DAMA_MARGIN_US)
}

/// The congestion control a flow's satellite leg should switch to now, if any: only a leg that
/// runs the config's default (a hybla), and only to a congestion control the kernel has. Plain
/// hybla on a short measured path gets BBR; hybla_ld on a long one whose RTT shows an allocation
/// delay gets hybla.
pub fn switch_to(
    reason: CcReason,
    running: &str,
    min_rtt_us: u32,
    srtt_us: u32,
    retransmitted: bool,
    available: &[String],
) -> Option<&'static str> {
    if reason != CcReason::Default {
        return None;
    }
    let has = |cc: &str| available.iter().any(|a| a == cc);
    let short = min_rtt_us > 0 && min_rtt_us < SHORT_PATH_RTT_US;
    if short && running == "hybla" && has(SHORT_PATH_CC) {
        return Some(SHORT_PATH_CC);
    }
    // Only a leg that has not retransmitted since the flow began: a rain fade's rate cut with bit
    // errors also stands a queue over a min RTT (a one-BDP buffer at 40% of the rate holds 2.5
    // min RTTs), and there hybla would halve the window at every bit error (measured: the
    // `rain-fade` download 1.19x its limit against 1.05x on hybla_ld).
    (running == "hybla_ld"
        && !retransmitted
        && allocation_delay(min_rtt_us, srtt_us)
        && has(DAMA_CC))
    .then_some(DAMA_CC)
}

/// Switches a flow's satellite leg when `switch_to` says so, from its last sample; returns the
/// new congestion control.
pub fn apply(s: &mut Session, available: &[String]) -> Option<&'static str> {
    let info = &s.info[s.sat_side()];
    let (min_rtt_us, srtt_us, retrans) = (info.min_rtt_us, info.srtt_us, info.retrans_total);
    switch_leg(s, min_rtt_us, srtt_us, retrans, available)
}

/// How often a young leg on the default hybla_ld is looked at between the once-a-second samples:
/// on a DAMA link every round hybla_ld runs before the switch cuts the window it requests with
/// (measured on geo-skyplex: from 155 to 38 segments while the smoothed RTT rose).
pub const WATCH_PERIOD: Duration = Duration::from_millis(100);
/// For how long after its admission a leg is watched that closely: the allocation delay of a
/// flow's first grant shows in its first seconds; later the once-a-second sample is enough.
pub const WATCH_FOR: Duration = Duration::from_secs(10);

/// Whether a leg is young, on the default hybla_ld and on a long path as its last sample measured
/// it (a warm peer connection's at admission, else the first once-a-second one), so `watch` may
/// switch it. Short paths are left out: no RTT there counts as an allocation delay, and a lab's or
/// a LAN's thousands of short flows a second would cost a TCP_INFO each every WATCH_PERIOD.
pub fn watched(s: &Session) -> bool {
    let side = s.sat_side();
    s.sat_reason == CcReason::Default
        && s.cc[side] == "hybla_ld"
        && !s.connecting
        && s.info[side].min_rtt_us >= SHORT_PATH_RTT_US
        && s.started.elapsed() < WATCH_FOR
}

/// Reads a watched leg's TCP_INFO (its satellite socket's only, and nothing of it is kept: the
/// once-a-second sample owns the flow's figures) and switches it as `apply` would.
pub fn watch(s: &mut Session, available: &[String]) -> Option<&'static str> {
    if !watched(s) {
        return None;
    }
    let side = s.sat_side();
    let raw = super::sys::tcp_info_raw(s.fd(side as u64))?;
    let info = parse_tcp_info(&raw, &s.cc[side]);
    switch_leg(
        s,
        info.min_rtt_us,
        info.srtt_us,
        info.retrans_total,
        available,
    )
}

fn switch_leg(
    s: &mut Session,
    min_rtt_us: u32,
    srtt_us: u32,
    retrans_total: u32,
    available: &[String],
) -> Option<&'static str> {
    let side = s.sat_side();
    let to = switch_to(
        s.sat_reason,
        &s.cc[side],
        min_rtt_us,
        srtt_us,
        retrans_total > s.sat_retrans_at_admit,
        available,
    )?;
    super::sys::set_cc(s.fd(side as u64), to).ok()?;
    s.cc[side] = to.to_string();
    s.sat_reason = CcReason::Automatic;
    Some(to)
}

#[cfg(test)]
mod tests {
    use super::*;
    use CcReason::{Automatic, Class, Default};

    fn avail(names: &[&str]) -> Vec<String> {
        names.iter().map(|n| n.to_string()).collect()
    }

    const ALL: &[&str] = &["reno", "cubic", "bbr", "hybla", "hybla_ld"];

    /// (why, running, min RTT, srtt, retransmitted, what the kernel has, expected switch)
    type Case = (
        CcReason,
        &'static str,
        u32,
        u32,
        bool,
        &'static [&'static str],
        Option<&'static str>,
    );

    fn check(cases: &[Case]) {
        for &(reason, running, min_rtt, srtt, retrans, has, want) in cases {
            assert_eq!(
                switch_to(reason, running, min_rtt, srtt, retrans, &avail(has)),
                want,
                "{reason:?} {running} min {min_rtt} srtt {srtt} retransmitted {retrans} {has:?}"
            );
        }
    }

    #[test]
    fn only_plain_hybla_as_the_default_on_a_short_path_switches() {
        let no_bbr: &[&str] = &["reno", "cubic", "hybla_ld"];
        check(&[
            // LEO (30 ms): plain hybla switches; hybla_ld, whose rho has a floor, stays.
            (Default, "hybla", 30_000, 31_000, false, ALL, Some("bbr")),
            (Default, "hybla", 44_000, 200_000, false, ALL, Some("bbr")),
            (Default, "hybla_ld", 30_000, 31_000, false, ALL, None),
            (Default, "hybla_ld", 30_000, 31_000, true, ALL, None),
            // GEO (600 ms), no sample yet, a class's choice, one already switched: unchanged.
            (Default, "hybla_ld", 600_000, 650_000, false, ALL, None),
            (Default, "hybla", 0, 0, false, ALL, None),
            (Class, "hybla", 30_000, 31_000, false, ALL, None),
            (Automatic, "bbr", 30_000, 31_000, false, ALL, None),
            (Default, "cubic", 30_000, 31_000, false, ALL, None),
            // No BBR in this kernel: nothing to switch to.
            (Default, "hybla", 30_000, 31_000, false, no_bbr, None),
            (
                Default,
                "hybla",
                SHORT_PATH_RTT_US,
                SHORT_PATH_RTT_US,
                false,
                ALL,
                None,
            ),
        ]);
    }

    #[test]
    fn a_long_path_whose_rtt_shows_an_allocation_delay_runs_hybla() {
        let no_hybla: &[&str] = &["reno", "cubic", "bbr", "hybla_ld"];
        check(&[
            // geo-skyplex, measured on the hub's leg (ss): min RTT 665 ms, srtt 1.53 s then 2.82 s
            // while a grant was pending, no loss.
            (
                Default,
                "hybla_ld",
                665_000,
                1_530_000,
                false,
                ALL,
                Some("hybla"),
            ),
            (
                Default,
                "hybla_ld",
                665_000,
                2_823_000,
                false,
                ALL,
                Some("hybla"),
            ),
            // geo-hts, a one-BDP buffer full: the RTT at most doubles, with a margin for jitter.
            (Default, "hybla_ld", 600_000, 1_200_000, false, ALL, None),
            (Default, "hybla_ld", 600_000, 1_300_000, false, ALL, None),
            // Steady GEO, an RTT not measured yet: nothing.
            (Default, "hybla_ld", 600_000, 640_000, false, ALL, None),
            (Default, "hybla_ld", 0, 2_000_000, false, ALL, None),
            // Only the default hybla_ld: a class's choice, plain hybla, one already switched.
            (Class, "hybla_ld", 665_000, 2_823_000, false, ALL, None),
            (Default, "hybla", 665_000, 2_823_000, false, ALL, None),
            (Automatic, "hybla", 665_000, 2_823_000, false, ALL, None),
            (Default, "cubic", 665_000, 2_823_000, false, ALL, None),
            // A short path whose RTT swings is no allocation delay: hybla_ld stays; no hybla
            // registered: nothing.
            (Default, "hybla_ld", 150_000, 900_000, false, ALL, None),
            (
                Default, "hybla_ld", 665_000, 2_823_000, false, no_hybla, None,
            ),
            // The same RTT on a leg that retransmitted since the flow began (bit errors: a rain
            // fade's queue with its losses): hybla_ld stays.
            (Default, "hybla_ld", 665_000, 2_823_000, true, ALL, None),
        ]);
        assert!(!allocation_delay(600_000, 1_300_000));
        assert!(allocation_delay(600_000, 1_300_001));
        // Saturating arithmetic: a min RTT near u32::MAX does not wrap.
        assert!(!allocation_delay(u32::MAX, u32::MAX));
    }
}
