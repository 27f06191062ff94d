//! The satellite leg's congestion control chosen by the path it measures: Hybla exists for long
//! round trips (its rho = RTT / 25 ms scales growth by the RTT), and on a short one, a LEO path of
//! 20-50 ms, it is Reno with a loss burst at every path change. A flow whose leg runs the config's
//! default switches to BBR as soon as its satellite socket has measured a minimum RTT below
//! SHORT_PATH_RTT_US (docs/hybla.md, *The default*, with the measurements). A class that names a
//! congestion control is never switched.
use super::config::{SHORT_PATH_CC, SHORT_PATH_RTT_US};
use super::flow::Session;
use super::telemetry::CcReason;

/// The congestion control a flow's satellite leg should switch to now, if any: only a leg that
/// runs the config's default (a hybla), once it has measured a short path, and only to a
/// congestion control the kernel has.
pub fn switch_to(
    reason: CcReason,
    running: &str,
    min_rtt_us: u32,
    available: &[String],
) -> Option<&'static str> {
    let short = min_rtt_us > 0 && min_rtt_us < SHORT_PATH_RTT_US;
    let hybla = running == "hybla_ld" || running == "hybla";
    (reason == CcReason::Default && short && hybla && available.iter().any(|a| a == SHORT_PATH_CC))
        .then_some(SHORT_PATH_CC)
}

/// Switches a flow's satellite leg when `switch_to` says so; returns the new congestion control.
pub fn apply(s: &mut Session, available: &[String]) -> Option<&'static str> {
    let side = usize::from(!s.sat_is_client);
    let to = switch_to(
        s.sat_reason,
        &s.cc[side],
        s.info[side].min_rtt_us,
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

    fn avail() -> Vec<String> {
        ["reno", "cubic", "bbr", "hybla", "hybla_ld"]
            .map(String::from)
            .to_vec()
    }

    #[test]
    fn only_the_default_on_a_short_measured_path_switches() {
        let a = avail();
        // LEO (30 ms): the default switches.
        assert_eq!(
            switch_to(CcReason::Default, "hybla_ld", 30_000, &a),
            Some("bbr")
        );
        assert_eq!(
            switch_to(CcReason::Default, "hybla", 44_000, &a),
            Some("bbr")
        );
        // GEO (600 ms), no sample yet, a class's choice, one already switched: unchanged.
        assert_eq!(switch_to(CcReason::Default, "hybla_ld", 600_000, &a), None);
        assert_eq!(switch_to(CcReason::Default, "hybla_ld", 0, &a), None);
        assert_eq!(switch_to(CcReason::Class, "hybla_ld", 30_000, &a), None);
        assert_eq!(switch_to(CcReason::Automatic, "bbr", 30_000, &a), None);
        assert_eq!(switch_to(CcReason::Default, "cubic", 30_000, &a), None);
        // No BBR in this kernel: nothing to switch to.
        let no_bbr = ["reno", "cubic", "hybla_ld"].map(String::from).to_vec();
        assert_eq!(
            switch_to(CcReason::Default, "hybla_ld", 30_000, &no_bbr),
            None
        );
        assert_eq!(
            switch_to(CcReason::Default, "hybla_ld", SHORT_PATH_RTT_US, &a),
            None
        );
    }
}
