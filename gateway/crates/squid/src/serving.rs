//! Whether Squid serves, judged from a run of probes (`admin::probe`), and what the daemon
//! should do about it. A running Squid can stop answering: a worker that died on a fatal error
//! (a full disk under its logs) while its master and coordinator live on, or a hung process.
//! Pure state: the caller probes, records each result and acts on the returned step.

use std::time::{Duration, Instant};

/// How the verdict is reached. The defaults keep a slow but healthy Squid in service: it must
/// miss `failures_to_withdraw` probes in a row, each with seconds to answer a request it
/// handles by itself.
#[derive(Debug, Clone, Copy)]
pub struct ServingPolicy {
    /// Consecutive unanswered probes before port 80 is withdrawn and Squid restarted.
    pub failures_to_withdraw: u32,
    /// Wait after a restart before the next one while Squid still does not answer; doubled
    /// after each further restart up to `max_restart_every` (a disk that stays full).
    pub restart_every: Duration,
    pub max_restart_every: Duration,
}

impl Default for ServingPolicy {
    fn default() -> Self {
        ServingPolicy {
            failures_to_withdraw: 3,
            restart_every: Duration::from_secs(10),
            max_restart_every: Duration::from_secs(120),
        }
    }
}

/// What to do after a probe.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServingStep {
    /// Nothing changes.
    Keep,
    /// Squid stopped serving: take port 80 away from it, then restart it.
    WithdrawAndRestart,
    /// Still not serving since the last restart, which was long enough ago: restart again.
    Restart,
    /// Serving again: port 80 may go back to Squid.
    Restore,
}

#[derive(Debug)]
pub struct ServingWatch {
    policy: ServingPolicy,
    failures: u32,
    withdrawn: bool,
    last_restart: Option<Instant>,
    restart_every: Duration,
}

impl ServingWatch {
    pub fn new(policy: ServingPolicy) -> Self {
        ServingWatch {
            policy,
            failures: 0,
            withdrawn: false,
            last_restart: None,
            restart_every: policy.restart_every,
        }
    }

    /// Whether port 80 is withdrawn because Squid does not answer.
    pub fn withdrawn(&self) -> bool {
        self.withdrawn
    }

    /// Unanswered probes in a row.
    pub fn failures(&self) -> u32 {
        self.failures
    }

    /// Records one probe's result.
    pub fn record(&mut self, answered: bool, now: Instant) -> ServingStep {
        if answered {
            self.failures = 0;
            if self.withdrawn {
                self.withdrawn = false;
                self.last_restart = None;
                self.restart_every = self.policy.restart_every;
                return ServingStep::Restore;
            }
            return ServingStep::Keep;
        }
        self.failures = self.failures.saturating_add(1);
        if !self.withdrawn {
            if self.failures < self.policy.failures_to_withdraw {
                return ServingStep::Keep;
            }
            self.withdrawn = true;
            self.last_restart = Some(now);
            return ServingStep::WithdrawAndRestart;
        }
        let due = self
            .last_restart
            .is_none_or(|t| now.duration_since(t) >= self.restart_every);
        if !due {
            return ServingStep::Keep;
        }
        self.last_restart = Some(now);
        self.restart_every = (self.restart_every * 2).min(self.policy.max_restart_every);
        ServingStep::Restart
    }

    /// Squid is not running (stopped, disabled, or dead and left to the restart-if-dead
    /// path): its probes say nothing. The failure run starts over; a withdrawal stands until
    /// a probe is answered.
    pub fn pause(&mut self) {
        self.failures = 0;
    }

    /// The cache is off: forget everything.
    pub fn reset(&mut self) {
        *self = ServingWatch::new(self.policy);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> ServingPolicy {
        ServingPolicy {
            failures_to_withdraw: 3,
            restart_every: Duration::from_secs(10),
            max_restart_every: Duration::from_secs(40),
        }
    }

    #[test]
    fn only_consecutive_failures_withdraw() {
        let mut w = ServingWatch::new(policy());
        let t = Instant::now();
        for _ in 0..10 {
            assert_eq!(w.record(false, t), ServingStep::Keep);
            assert_eq!(w.record(false, t), ServingStep::Keep);
            assert_eq!(w.record(true, t), ServingStep::Keep);
        }
        assert!(!w.withdrawn());
        assert_eq!(w.record(false, t), ServingStep::Keep);
        assert_eq!(w.record(false, t), ServingStep::Keep);
        assert_eq!(w.record(false, t), ServingStep::WithdrawAndRestart);
        assert!(w.withdrawn());
    }

    #[test]
    fn restarts_back_off_while_squid_stays_silent_and_one_answer_restores() {
        let mut w = ServingWatch::new(policy());
        let t = Instant::now();
        let s = Duration::from_secs;
        for _ in 0..3 {
            w.record(false, t);
        }
        assert_eq!(w.record(false, t + s(9)), ServingStep::Keep);
        assert_eq!(w.record(false, t + s(10)), ServingStep::Restart);
        // Next one 20 s later, then 40 s (the cap), then 40 s again.
        assert_eq!(w.record(false, t + s(29)), ServingStep::Keep);
        assert_eq!(w.record(false, t + s(30)), ServingStep::Restart);
        assert_eq!(w.record(false, t + s(69)), ServingStep::Keep);
        assert_eq!(w.record(false, t + s(70)), ServingStep::Restart);
        assert_eq!(w.record(false, t + s(110)), ServingStep::Restart);
        assert_eq!(w.record(true, t + s(111)), ServingStep::Restore);
        assert!(!w.withdrawn());
        assert_eq!(w.record(true, t + s(112)), ServingStep::Keep);
        // A new outage starts with the short wait again.
        for _ in 0..3 {
            w.record(false, t + s(200));
        }
        assert_eq!(w.record(false, t + s(210)), ServingStep::Restart);
    }

    #[test]
    fn a_pause_restarts_the_count_but_keeps_a_withdrawal() {
        let mut w = ServingWatch::new(policy());
        let t = Instant::now();
        w.record(false, t);
        w.record(false, t);
        w.pause();
        assert_eq!(w.record(false, t), ServingStep::Keep);
        assert_eq!(w.failures(), 1);
        w.record(false, t);
        assert_eq!(w.record(false, t), ServingStep::WithdrawAndRestart);
        w.pause();
        assert!(w.withdrawn());
        assert_eq!(w.record(true, t), ServingStep::Restore);
        w.record(false, t);
        w.reset();
        assert_eq!(w.failures(), 0);
        assert!(!w.withdrawn());
    }
}
