//! The `hybla` step: Hybla's parameters and the operator's cwnd ceiling, written into the
//! loaded Hybla (this namespace's own entry with Perigee's BPF Hybla, the host-wide ones with
//! the kernel's tcp_hybla), and what a clean stop puts back.
use super::super::config::{CongestionControl, GatewayConfig};
use super::super::log;
use super::{ApplyError, ApplyStep};
use perigee_hybla::{HyblaParams, HyblaStatus, Implementation};

/// The step, when the config uses Hybla (`plan`); without a plan it writes nothing.
pub struct HyblaStep<'a> {
    plan: Option<HyblaPlan>,
    ctl: &'a dyn HyblaControl,
}

impl<'a> HyblaStep<'a> {
    pub fn new(plan: Option<HyblaPlan>, ctl: &'a dyn HyblaControl) -> Self {
        HyblaStep { plan, ctl }
    }
}

impl ApplyStep for HyblaStep<'_> {
    fn name(&self) -> &'static str {
        "hybla"
    }

    fn apply(&mut self) -> Result<(), ApplyError> {
        match self.plan {
            Some(plan) => apply_hybla(self.ctl, plan),
            None => Ok(()),
        }
    }

    /// The last step: nothing after it can fail, so it is never rolled back.
    fn rollback(&mut self) {}

    /// `apply_hybla` leaves nothing written when it fails.
    fn has_rollback(&self) -> bool {
        false
    }
}

/// What the hybla step writes: Hybla's parameters and the operator cwnd ceiling
/// (`hybla.cwnd_max`). With Perigee's BPF Hybla they go into this namespace's own entry;
/// with the kernel's tcp_hybla (host-wide rtt0 only) into the global one. Either way only
/// when the config uses hybla.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HyblaPlan {
    pub params: HyblaParams,
    /// None: leave the ceiling as it is (callers that only know the parameters).
    pub cwnd_max: Option<u32>,
}

impl HyblaPlan {
    /// The plan for `cfg`, or None when no satellite leg uses hybla or hybla_ld (both read
    /// the same parameters).
    pub fn for_config(cfg: &GatewayConfig) -> Option<HyblaPlan> {
        let hybla = |cc: CongestionControl| {
            matches!(cc, CongestionControl::Hybla | CongestionControl::HyblaLd)
        };
        let uses = hybla(cfg.satellite.congestion_control)
            || cfg
                .classes
                .iter()
                .any(|c| c.satellite.congestion_control.is_some_and(hybla));
        uses.then_some(HyblaPlan {
            params: HyblaParams {
                rtt0_ms: cfg.hybla.rtt0_ms,
                base_rtt_ms: cfg.hybla.base_rtt_ms,
            },
            cwnd_max: Some(cfg.hybla.cwnd_max),
        })
    }
}

/// The Hybla implementation the hybla step talks to (the real one, or a test double).
pub trait HyblaControl {
    fn status(&self) -> HyblaStatus;
    /// Host-wide parameters (the kernel's tcp_hybla, or a BPF hybla that is not ours).
    fn set_params(&self, params: HyblaParams) -> Result<(), String>;
    fn set_cwnd_ceiling(&self, segments: u32) -> Result<(), String>;
    /// This network namespace's own entry (Perigee's BPF Hybla).
    fn set_netns_params(&self, params: HyblaParams, cwnd_max: u32) -> Result<(), String>;
    fn unset_netns_params(&self) -> Result<(), String>;
    /// Remove the entries of namespaces that no longer exist; the removed cookies.
    fn prune_stale_netns(&self) -> Result<Vec<u64>, String>;
}

/// perigee_hybla itself: the pinned BPF map, or the kernel module's parameter.
pub struct SystemHybla;

impl HyblaControl for SystemHybla {
    fn status(&self) -> HyblaStatus {
        perigee_hybla::status()
    }
    fn set_params(&self, params: HyblaParams) -> Result<(), String> {
        perigee_hybla::set_params(params).map_err(|e| e.to_string())
    }
    fn set_cwnd_ceiling(&self, segments: u32) -> Result<(), String> {
        perigee_hybla::set_cwnd_ceiling(segments).map_err(|e| e.to_string())
    }
    fn set_netns_params(&self, params: HyblaParams, cwnd_max: u32) -> Result<(), String> {
        perigee_hybla::set_netns_params(params, cwnd_max)
            .map(|_| ())
            .map_err(|e| e.to_string())
    }
    fn unset_netns_params(&self) -> Result<(), String> {
        perigee_hybla::unset_netns_params(None)
            .map(|_| ())
            .map_err(|e| e.to_string())
    }
    fn prune_stale_netns(&self) -> Result<Vec<u64>, String> {
        perigee_hybla::prune_stale_netns()
            .map(|r| r.removed)
            .map_err(|e| e.to_string())
    }
}

/// Write `plan` into a loaded Hybla. On failure nothing it wrote stays (the previous
/// parameters are put back) and the error names the field when it is the ceiling.
pub fn apply_hybla(ctl: &dyn HyblaControl, plan: HyblaPlan) -> Result<(), ApplyError> {
    let st = ctl.status();
    if !st.loaded {
        // Nothing to configure; routes/sockets asking for hybla report that themselves.
        return Ok(());
    }
    let hybla_err = |message: String, field: Option<&str>| {
        ApplyError::new("hybla", message, field.map(String::from))
    };
    if st.owned {
        return apply_hybla_netns(ctl, &st, plan).map_err(|e| hybla_err(e, None));
    }
    let p = plan.params;
    let params_changed = st.rtt0_ms != p.rtt0_ms || st.base_rtt_ms != p.base_rtt_ms;
    if let Err(e) = ctl.set_params(p) {
        // A Hybla we do not own may refuse new parameters; that is only an error when the
        // ones it runs with are not what was asked for.
        if params_changed {
            let field = (st.implementation == Implementation::Kernel && p.base_rtt_ms != 0)
                .then_some("hybla.base_rtt_ms");
            return Err(hybla_err(e, field));
        }
    }
    let Some(cwnd_max) = plan.cwnd_max else {
        return Ok(());
    };
    if cwnd_max == st.cwnd_max {
        return Ok(());
    }
    if let Err(e) = ctl.set_cwnd_ceiling(cwnd_max) {
        if params_changed {
            let _ = ctl.set_params(HyblaParams {
                rtt0_ms: st.rtt0_ms,
                base_rtt_ms: st.base_rtt_ms,
            });
        }
        let message = match st.implementation {
            Implementation::Kernel => format!(
                "hybla.cwnd_max = {cwnd_max} cannot be applied: the kernel's tcp_hybla is the \
                 registered hybla and has no cwnd ceiling (set hybla.cwnd_max to 0, or unload \
                 tcp_hybla and `perigee hybla load` Perigee's BPF Hybla): {e}"
            ),
            _ => format!("hybla.cwnd_max = {cwnd_max} cannot be applied: {e}"),
        };
        return Err(hybla_err(message, Some("hybla.cwnd_max")));
    }
    Ok(())
}

/// Perigee's BPF Hybla: the plan becomes this namespace's own entry, in one map write (so
/// nothing to roll back), and gateways in other namespaces (other labs, other containers on
/// the host) keep theirs. Without a ceiling in the plan the one in force stays.
fn apply_hybla_netns(
    ctl: &dyn HyblaControl,
    st: &HyblaStatus,
    plan: HyblaPlan,
) -> Result<(), String> {
    let current = st.own_netns().copied();
    let cwnd_max = plan
        .cwnd_max
        .or(current.map(|e| e.cwnd_max))
        .unwrap_or(st.cwnd_max);
    if current.is_some_and(|e| e.params() == plan.params && e.cwnd_max == cwnd_max) {
        return Ok(());
    }
    prune_stale_netns(ctl);
    ctl.set_netns_params(plan.params, cwnd_max)
}

/// Entries of namespaces that are gone (gateways killed without a clean stop, their
/// namespaces deleted) would fill the map until new gateways fall back to the host-wide
/// values; removing them whenever a gateway writes its own makes a restarted lab heal itself.
/// Best effort: the gateway's own write does not depend on it.
fn prune_stale_netns(ctl: &dyn HyblaControl) {
    match ctl.prune_stale_netns() {
        Ok(removed) if removed.is_empty() => {}
        Ok(removed) => log::info(
            "removed the Hybla entries of namespaces that no longer exist",
            serde_json::json!({"cookies": removed}),
        ),
        Err(e) => log::warn(
            "stale per-namespace Hybla entries not pruned",
            serde_json::json!({"error": e}),
        ),
    }
}

/// What a clean stop does about Hybla's parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HyblaRestore {
    /// Perigee's BPF Hybla: remove this namespace's own entry; whatever else runs hybla in
    /// the namespace goes back to the host-wide entry, which the daemon never wrote.
    RemoveNetnsEntry,
    /// Any other hybla (the kernel's tcp_hybla): its host-wide settings as they were before
    /// the daemon first wrote them, so a sender that is not ours (an end-to-end hybla flow)
    /// does not keep the gateway's values after the gateway is gone.
    Global(HyblaPlan),
}

/// Taken at start, before the first apply.
pub fn hybla_snapshot(ctl: &dyn HyblaControl) -> Option<HyblaRestore> {
    let st = ctl.status();
    if st.owned {
        return Some(HyblaRestore::RemoveNetnsEntry);
    }
    (st.loaded && st.problem.is_none()).then_some(HyblaRestore::Global(HyblaPlan {
        params: HyblaParams {
            rtt0_ms: st.rtt0_ms,
            base_rtt_ms: st.base_rtt_ms,
        },
        cwnd_max: (st.implementation == Implementation::Bpf).then_some(st.cwnd_max),
    }))
}

/// Put a snapshot back (on a clean stop); best effort, like the rest of teardown.
pub fn restore_hybla(ctl: &dyn HyblaControl, before: HyblaRestore) {
    match before {
        HyblaRestore::RemoveNetnsEntry => {
            let _ = ctl.unset_netns_params();
        }
        HyblaRestore::Global(plan) => {
            let _ = apply_hybla(ctl, plan);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;

    /// The double's idea of the daemon's namespace cookie.
    const OWN_COOKIE: u64 = 4242;

    /// A Hybla double recording what the step wrote.
    struct FakeHybla {
        st: RefCell<HyblaStatus>,
        refuse_ceiling: bool,
        writes: RefCell<Vec<String>>,
        /// Cookies of entries whose namespaces are gone (what a prune removes).
        gone: RefCell<Vec<u64>>,
        prunes: RefCell<u32>,
        prune_fails: bool,
    }

    impl FakeHybla {
        fn new(implementation: Implementation, refuse_ceiling: bool) -> FakeHybla {
            FakeHybla {
                st: RefCell::new(HyblaStatus {
                    implementation,
                    loaded: implementation != Implementation::None,
                    rtt0_ms: 25,
                    base_rtt_ms: 0,
                    cwnd_max: 0,
                    available: vec!["hybla".into()],
                    problem: None,
                    owned: implementation == Implementation::Bpf,
                    pin_dir: String::new(),
                    netns_cookie: Some(OWN_COOKIE),
                    netns: Vec::new(),
                    ld: Default::default(),
                }),
                refuse_ceiling,
                writes: RefCell::new(Vec::new()),
                gone: RefCell::new(Vec::new()),
                prunes: RefCell::new(0),
                prune_fails: false,
            }
        }
    }

    impl HyblaControl for FakeHybla {
        fn status(&self) -> HyblaStatus {
            self.st.borrow().clone()
        }
        fn set_params(&self, p: HyblaParams) -> Result<(), String> {
            let mut st = self.st.borrow_mut();
            st.rtt0_ms = p.rtt0_ms;
            st.base_rtt_ms = p.base_rtt_ms;
            self.writes
                .borrow_mut()
                .push(format!("params {} {}", p.rtt0_ms, p.base_rtt_ms));
            Ok(())
        }
        fn set_cwnd_ceiling(&self, n: u32) -> Result<(), String> {
            if self.refuse_ceiling && n != 0 {
                return Err("the kernel's tcp_hybla has no cwnd ceiling".into());
            }
            self.st.borrow_mut().cwnd_max = n;
            self.writes.borrow_mut().push(format!("cwnd_max {n}"));
            Ok(())
        }
        fn set_netns_params(&self, p: HyblaParams, cwnd_max: u32) -> Result<(), String> {
            let mut st = self.st.borrow_mut();
            st.netns.retain(|e| e.cookie != OWN_COOKIE);
            st.netns.push(perigee_hybla::NetnsParams {
                cookie: OWN_COOKIE,
                rtt0_ms: p.rtt0_ms,
                base_rtt_ms: p.base_rtt_ms,
                cwnd_max,
            });
            self.writes
                .borrow_mut()
                .push(format!("netns {} {} {cwnd_max}", p.rtt0_ms, p.base_rtt_ms));
            Ok(())
        }
        fn unset_netns_params(&self) -> Result<(), String> {
            self.st
                .borrow_mut()
                .netns
                .retain(|e| e.cookie != OWN_COOKIE);
            self.writes.borrow_mut().push("unset netns".into());
            Ok(())
        }
        fn prune_stale_netns(&self) -> Result<Vec<u64>, String> {
            *self.prunes.borrow_mut() += 1;
            if self.prune_fails {
                return Err("cannot tell which entries are stale".into());
            }
            let gone = self.gone.borrow();
            let mut st = self.st.borrow_mut();
            let removed = st
                .netns
                .iter()
                .map(|e| e.cookie)
                .filter(|c| gone.contains(c))
                .collect();
            st.netns.retain(|e| !gone.contains(&e.cookie));
            Ok(removed)
        }
    }

    fn other_entry(cookie: u64) -> perigee_hybla::NetnsParams {
        perigee_hybla::NetnsParams {
            cookie,
            rtt0_ms: 25,
            base_rtt_ms: 600,
            cwnd_max: 9,
        }
    }

    #[test]
    fn writing_the_own_entry_prunes_entries_of_gone_namespaces() {
        let h = FakeHybla::new(Implementation::Bpf, false);
        // A killed gateway's entry (namespace deleted) and a running one's.
        h.st.borrow_mut().netns = vec![other_entry(7), other_entry(8)];
        h.gone.borrow_mut().push(7);
        let plan = plan_for(serde_json::json!({"rtt0_ms": 25, "base_rtt_ms": 0, "cwnd_max": 0}));
        apply_hybla(&h, plan.unwrap()).unwrap();
        let cookies: Vec<u64> = h.status().netns.iter().map(|e| e.cookie).collect();
        assert_eq!(cookies, vec![8, OWN_COOKIE]);
        assert_eq!(*h.prunes.borrow(), 1);
        // An unchanged entry is not rewritten, so nothing is pruned either.
        apply_hybla(&h, plan.unwrap()).unwrap();
        assert_eq!(*h.prunes.borrow(), 1);
    }

    #[test]
    fn a_failed_prune_does_not_fail_the_apply() {
        let mut h = FakeHybla::new(Implementation::Bpf, false);
        h.prune_fails = true;
        let plan = plan_for(serde_json::json!({"rtt0_ms": 30, "base_rtt_ms": 0, "cwnd_max": 0}));
        apply_hybla(&h, plan.unwrap()).unwrap();
        assert_eq!(global_and_own(&h).1, Some((30, 0, 0)));
        assert_eq!(*h.prunes.borrow(), 1);
    }

    /// (rtt0_ms, base_rtt_ms, cwnd_max) of an entry.
    type Entry = (u32, u32, u32);

    /// The host-wide entry and the daemon's own.
    fn global_and_own(h: &FakeHybla) -> (Entry, Option<Entry>) {
        let st = h.status();
        let own = st
            .own_netns()
            .map(|e| (e.rtt0_ms, e.base_rtt_ms, e.cwnd_max));
        ((st.rtt0_ms, st.base_rtt_ms, st.cwnd_max), own)
    }

    fn plan_for(hybla: serde_json::Value) -> Option<HyblaPlan> {
        let mut j = crate::gateway::config::example_json();
        j["hybla"] = hybla;
        HyblaPlan::for_config(&crate::gateway::config::from_value(j).unwrap())
    }

    #[test]
    fn plan_carries_the_ceiling_from_the_config() {
        let plan =
            plan_for(serde_json::json!({"rtt0_ms": 25, "base_rtt_ms": 560, "cwnd_max": 5180}));
        assert_eq!(
            plan,
            Some(HyblaPlan {
                params: HyblaParams {
                    rtt0_ms: 25,
                    base_rtt_ms: 560
                },
                cwnd_max: Some(5180)
            })
        );
        let mut j = crate::gateway::config::example_json();
        j["satellite"]["congestion_control"] = "cubic".into();
        j["classes"][0]["satellite"]["congestion_control"] = "bbr".into();
        let cfg = crate::gateway::config::from_value(j).unwrap();
        assert_eq!(
            HyblaPlan::for_config(&cfg),
            None,
            "no hybla: global state untouched"
        );
        // hybla_ld reads the same parameters: a class asking for it gets the plan written.
        let mut j = crate::gateway::config::example_json();
        j["satellite"]["congestion_control"] = "cubic".into();
        j["classes"][0]["satellite"]["congestion_control"] = "hybla_ld".into();
        let cfg = crate::gateway::config::from_value(j).unwrap();
        assert_eq!(HyblaPlan::for_config(&cfg).unwrap().cwnd_max, Some(0));
    }

    #[test]
    fn bpf_hybla_gets_params_and_ceiling_in_the_namespace_entry() {
        let h = FakeHybla::new(Implementation::Bpf, false);
        h.st.borrow_mut().cwnd_max = 700; // host-wide, someone else's
        let plan =
            plan_for(serde_json::json!({"rtt0_ms": 30, "base_rtt_ms": 560, "cwnd_max": 5180}));
        apply_hybla(&h, plan.unwrap()).unwrap();
        assert_eq!(
            global_and_own(&h),
            ((25, 0, 700), Some((30, 560, 5180))),
            "the host-wide entry is not written"
        );
        // Back to no ceiling.
        let plan = plan_for(serde_json::json!({"rtt0_ms": 30, "base_rtt_ms": 560, "cwnd_max": 0}));
        apply_hybla(&h, plan.unwrap()).unwrap();
        assert_eq!(global_and_own(&h).1, Some((30, 560, 0)));
        // A plan without a ceiling keeps the entry's.
        let p = HyblaPlan {
            params: HyblaParams {
                rtt0_ms: 20,
                base_rtt_ms: 0,
            },
            cwnd_max: None,
        };
        apply_hybla(&h, p).unwrap();
        assert_eq!(global_and_own(&h).1, Some((20, 0, 0)));
        assert_eq!(h.writes.borrow().len(), 3, "{:?}", h.writes.borrow());
    }

    #[test]
    fn kernel_hybla_refuses_a_ceiling_and_keeps_its_params() {
        let h = FakeHybla::new(Implementation::Kernel, true);
        let plan = plan_for(serde_json::json!({"rtt0_ms": 40, "base_rtt_ms": 0, "cwnd_max": 5180}));
        let e = apply_hybla(&h, plan.unwrap()).unwrap_err();
        assert_eq!(e.step, "hybla");
        assert_eq!(e.field.as_deref(), Some("hybla.cwnd_max"));
        assert!(e.message.contains("kernel's tcp_hybla"), "{}", e.message);
        assert!(e.message.contains("5180"), "{}", e.message);
        let st = h.status();
        assert_eq!((st.rtt0_ms, st.cwnd_max), (25, 0), "rolled back");
        // 0 = no ceiling is fine with the kernel's hybla.
        let plan = plan_for(serde_json::json!({"rtt0_ms": 40, "base_rtt_ms": 0, "cwnd_max": 0}));
        apply_hybla(&h, plan.unwrap()).unwrap();
        assert_eq!(h.status().rtt0_ms, 40);
    }

    #[test]
    fn nothing_is_written_when_hybla_is_not_loaded_or_unchanged() {
        let h = FakeHybla::new(Implementation::None, false);
        let plan = plan_for(serde_json::json!({"rtt0_ms": 40, "base_rtt_ms": 0, "cwnd_max": 100}));
        apply_hybla(&h, plan.unwrap()).unwrap();
        assert!(h.writes.borrow().is_empty());
        let h = FakeHybla::new(Implementation::Bpf, false);
        let plan = plan_for(serde_json::json!({"rtt0_ms": 25, "base_rtt_ms": 0, "cwnd_max": 0}));
        apply_hybla(&h, plan.unwrap()).unwrap();
        assert_eq!(
            h.writes.borrow().len(),
            1,
            "the first apply writes the entry"
        );
        apply_hybla(&h, plan.unwrap()).unwrap();
        assert_eq!(
            h.writes.borrow().len(),
            1,
            "an unchanged entry is not rewritten"
        );
        let h = FakeHybla::new(Implementation::Kernel, true);
        apply_hybla(&h, plan.unwrap()).unwrap();
        assert!(
            !h.writes.borrow().iter().any(|w| w.starts_with("cwnd_max")),
            "an unchanged ceiling is not rewritten"
        );
    }

    #[test]
    fn a_clean_stop_removes_the_namespace_entry_and_leaves_the_host_wide_one() {
        let h = FakeHybla::new(Implementation::Bpf, false);
        h.st.borrow_mut().cwnd_max = 700; // someone else's ceiling, there before the daemon
        let before = hybla_snapshot(&h).expect("a loaded BPF hybla is snapshotted");
        assert_eq!(before, HyblaRestore::RemoveNetnsEntry);
        let plan = plan_for(serde_json::json!({"rtt0_ms": 40, "base_rtt_ms": 560, "cwnd_max": 0}));
        apply_hybla(&h, plan.unwrap()).unwrap();
        restore_hybla(&h, before);
        assert_eq!(global_and_own(&h), ((25, 0, 700), None));
    }

    #[test]
    fn a_clean_stop_puts_the_kernel_hybla_rtt0_back() {
        let h = FakeHybla::new(Implementation::Kernel, true);
        let before = hybla_snapshot(&h).unwrap();
        let plan = plan_for(serde_json::json!({"rtt0_ms": 40, "base_rtt_ms": 0, "cwnd_max": 0}));
        apply_hybla(&h, plan.unwrap()).unwrap();
        assert_eq!(h.status().rtt0_ms, 40);
        restore_hybla(&h, before);
        assert_eq!(h.status().rtt0_ms, 25);
        assert!(!h.writes.borrow().iter().any(|w| w.contains("netns")));
    }

    #[test]
    fn snapshot_leaves_what_it_cannot_restore() {
        assert_eq!(
            hybla_snapshot(&FakeHybla::new(Implementation::None, false)),
            None
        );
        // The kernel module has no ceiling: restoring must not try to write one.
        let k = hybla_snapshot(&FakeHybla::new(Implementation::Kernel, true)).unwrap();
        assert!(matches!(k, HyblaRestore::Global(p) if p.cwnd_max.is_none()));
        // A BPF hybla that is not ours and cannot be read.
        let broken = FakeHybla::new(Implementation::Bpf, false);
        broken.st.borrow_mut().owned = false;
        broken.st.borrow_mut().problem = Some("not loaded by perigee".into());
        assert_eq!(
            hybla_snapshot(&broken),
            None,
            "unknown values are not restored"
        );
    }
}
