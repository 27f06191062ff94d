//! Atomic apply with rollback. The steps, in order: nft (one `nft -f -` transaction on stdin),
//! routes, sysctls, shaping (the satellite interface's root qdisc), the child services in the
//! order given (the resolver, then Squid, which resolves through it), hybla (params and cwnd
//! ceiling). Each step is one `ApplyStep` in its own module; this one runs them. On a failure
//! every step already done is undone in reverse, so the previous state stays. Subprocesses get
//! argument vectors only, never shell strings (`command`).
mod command;
mod hybla;
mod nft;
mod nft_counters;
mod nft_sets;
mod routes;
mod services;
mod shaper;
mod sysctl;

use super::render::Rendered;
use std::collections::BTreeMap;

pub use hybla::{
    hybla_snapshot, restore_hybla, HyblaControl, HyblaPlan, HyblaRestore, SystemHybla,
};
pub use nft::delete_table;
pub use nft_counters::{read_counter, read_counters, DUP_KEY};
pub use nft_sets::{set_cache_up, set_dns_up, set_overflow};
pub use services::{DnsStep, SquidStep};
pub use sysctl::read_sysctl;

/// Test-only fault injection for the soak (bench/scenarios/soak.py): with the cargo feature
/// `fault-injection`, an apply fails right after the step named in the file
/// `$PERIGEE_FAULT_APPLY_STEP_FILE` (when that file exists), so that step's own rollback runs
/// too. Without the feature (every packaged and `make build` binary) `injected` is a no-op the
/// compiler removes: no environment variable or file can turn it on.
mod fault {
    #[cfg(feature = "fault-injection")]
    pub fn injected(step: &'static str) -> Result<(), String> {
        let Some(path) = std::env::var_os("PERIGEE_FAULT_APPLY_STEP_FILE") else {
            return Ok(());
        };
        match std::fs::read_to_string(path) {
            Ok(wanted) if wanted.trim() == step => Err(format!("injected fault at step {step}")),
            _ => Ok(()),
        }
    }

    #[cfg(not(feature = "fault-injection"))]
    #[inline(always)]
    pub fn injected(_step: &'static str) -> Result<(), String> {
        Ok(())
    }
}

#[derive(Debug, Clone)]
pub struct ApplyError {
    pub step: &'static str,
    pub message: String,
    /// The config field at fault, when the step can name one (shaping, squid and dns do).
    pub field: Option<String>,
}

impl ApplyError {
    /// An error of `step`, naming the config field at fault when there is one.
    pub fn new(step: &'static str, message: String, field: Option<String>) -> ApplyError {
        ApplyError {
            step,
            message,
            field,
        }
    }

    /// An error of `step` that names no config field.
    pub fn at(step: &'static str, message: String) -> ApplyError {
        ApplyError::new(step, message, None)
    }
}

impl std::fmt::Display for ApplyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} failed: {}", self.step, self.message)
    }
}

/// One step of an apply. A step is built with what it installs and what was there before, so
/// it can go either way.
pub trait ApplyStep {
    /// The step's name in an `ApplyError` and in the fault-injection file ("nft", "routes",
    /// "sysctl", "shaping", "dns", "squid", "hybla").
    fn name(&self) -> &'static str;
    /// Installs the new state. On an error, whatever the step changed part way is undone
    /// before it returns (the steps before it are the caller's to undo).
    fn apply(&mut self) -> Result<(), ApplyError>;
    /// Puts the previous state back after a successful `apply`, because a later step failed.
    fn rollback(&mut self);
    /// False for a step that cannot be rolled back once applied (it leaves nothing written
    /// when it fails): its injected fault comes before it, so a failed apply still leaves the
    /// previous state.
    fn has_rollback(&self) -> bool {
        true
    }
}

/// What an apply changed, so the next apply (or its rollback) knows what to undo.
#[derive(Debug, Clone, Default)]
pub struct AppliedState {
    pub rendered: Option<Rendered>,
    /// Values the sysctls had before we first wrote them.
    pub sysctl_originals: BTreeMap<String, String>,
    /// Satellite routes as they were before we first replaced them (None: there was none).
    pub route_originals: routes::RouteOriginals,
}

/// Apply `new` on top of `prev`, the child services in the order given. On error the system
/// is back at `prev`.
pub fn apply(
    new: &Rendered,
    prev: &AppliedState,
    hybla: Option<HyblaPlan>,
    services: &mut [&mut dyn ApplyStep],
) -> Result<AppliedState, ApplyError> {
    let before = prev.rendered.as_ref();
    let mut nft = nft::NftStep::new(&new.nft, before.map(|r| r.nft.as_str()));
    let mut routes = routes::RoutesStep::new(
        &new.routes,
        before.map(|r| r.routes.as_slice()).unwrap_or_default(),
        prev.route_originals.clone(),
    );
    let mut sysctls = sysctl::SysctlStep::new(
        &new.sysctls,
        before.map(|r| &r.sysctls),
        prev.sysctl_originals.clone(),
    );
    let mut shaping =
        shaper::ShaperStep::new(new.shaper.as_ref(), before.and_then(|r| r.shaper.as_ref()));
    let mut hybla = hybla::HyblaStep::new(hybla, &SystemHybla);

    let mut steps: Vec<&mut dyn ApplyStep> =
        vec![&mut nft, &mut routes, &mut sysctls, &mut shaping];
    steps.extend(services.iter_mut().map(|s| &mut **s as &mut dyn ApplyStep));
    steps.push(&mut hybla);
    run_steps(&mut steps)?;
    drop(steps);

    // Success. On the first apply, a shaper of ours left by a killed daemon goes when this
    // config does not shape (only now, so a failed apply leaves the system as it found it).
    if prev.rendered.is_none() {
        shaper::remove_leftover_shaper(&new.satellite, new.shaper.is_some());
    }
    Ok(AppliedState {
        rendered: Some(new.clone()),
        sysctl_originals: sysctls.into_originals(),
        route_originals: routes.drop_removed(),
    })
}

/// Apply `steps` in order; on a failure (or an injected fault) roll back the ones applied,
/// last first.
fn run_steps(steps: &mut [&mut dyn ApplyStep]) -> Result<(), ApplyError> {
    for i in 0..steps.len() {
        let name = steps[i].name();
        let undoable = steps[i].has_rollback();
        if !undoable {
            if let Err(m) = fault::injected(name) {
                roll_back(&mut steps[..i]);
                return Err(ApplyError::at(name, m));
            }
        }
        if let Err(e) = steps[i].apply() {
            roll_back(&mut steps[..i]);
            return Err(e);
        }
        if undoable {
            if let Err(m) = fault::injected(name) {
                roll_back(&mut steps[..=i]);
                return Err(ApplyError::at(name, m));
            }
        }
    }
    Ok(())
}

fn roll_back(applied: &mut [&mut dyn ApplyStep]) {
    for s in applied.iter_mut().rev() {
        s.rollback();
    }
}

/// Remove everything an apply installed (graceful shutdown).
pub fn teardown(state: &AppliedState) {
    let _ = delete_table();
    if let Some(s) = state.rendered.as_ref().and_then(|r| r.shaper.as_ref()) {
        shaper::remove_shaper(s);
    }
    if let Some(r) = &state.rendered {
        for op in &r.routes {
            routes::remove_route(op, &state.route_originals);
        }
    }
    sysctl::restore_originals(&state.sysctl_originals);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;
    use std::rc::Rc;

    /// A step that records what was asked of it, and fails its apply when told to.
    struct Recorder {
        name: &'static str,
        fails: bool,
        undoable: bool,
        log: Rc<RefCell<Vec<String>>>,
    }

    impl ApplyStep for Recorder {
        fn name(&self) -> &'static str {
            self.name
        }
        fn apply(&mut self) -> Result<(), ApplyError> {
            self.log.borrow_mut().push(format!("apply {}", self.name));
            if self.fails {
                return Err(ApplyError {
                    step: self.name,
                    message: "refused".into(),
                    field: Some("x.y".into()),
                });
            }
            Ok(())
        }
        fn rollback(&mut self) {
            self.log
                .borrow_mut()
                .push(format!("rollback {}", self.name));
        }
        fn has_rollback(&self) -> bool {
            self.undoable
        }
    }

    /// Runs steps named `names` (the one named `failing` fails, "hybla" has no rollback) and
    /// returns the error and what each step was asked to do, in order.
    fn run(names: &[&'static str], failing: &str) -> (Option<ApplyError>, Vec<String>) {
        run_with(names, failing, "hybla")
    }

    fn run_with(
        names: &[&'static str],
        failing: &str,
        no_rollback: &str,
    ) -> (Option<ApplyError>, Vec<String>) {
        let log = Rc::new(RefCell::new(Vec::new()));
        let mut steps: Vec<Recorder> = names
            .iter()
            .map(|&name| Recorder {
                name,
                fails: name == failing,
                undoable: name != no_rollback,
                log: log.clone(),
            })
            .collect();
        let mut refs: Vec<&mut dyn ApplyStep> =
            steps.iter_mut().map(|s| s as &mut dyn ApplyStep).collect();
        let result = run_steps(&mut refs).err();
        let done = log.borrow().clone();
        (result, done)
    }

    /// The soak's hook (built with `--features fault-injection` only): a fault after a step
    /// rolls back that step too; a step without a rollback gets its fault before it runs.
    /// The step names are the test's own, so the other tests here never match the file.
    #[cfg(feature = "fault-injection")]
    #[test]
    fn an_injected_fault_rolls_back_the_step_it_follows_and_those_before() {
        let file = std::env::temp_dir().join(format!("perigee-fault-{}", std::process::id()));
        std::env::set_var("PERIGEE_FAULT_APPLY_STEP_FILE", &file);
        let names = ["fault-a", "fault-b", "fault-c"];
        std::fs::write(&file, "fault-b\n").unwrap();
        let (e, done) = run_with(&names, "", "fault-c");
        let e = e.unwrap();
        assert_eq!(
            (e.step, e.message.as_str()),
            ("fault-b", "injected fault at step fault-b")
        );
        assert_eq!(
            done,
            [
                "apply fault-a",
                "apply fault-b",
                "rollback fault-b",
                "rollback fault-a"
            ]
        );
        std::fs::write(&file, "fault-c").unwrap();
        let (e, done) = run_with(&names, "", "fault-c");
        assert_eq!(e.unwrap().step, "fault-c");
        assert_eq!(
            done,
            [
                "apply fault-a",
                "apply fault-b",
                "rollback fault-b",
                "rollback fault-a"
            ],
            "the step without a rollback never ran"
        );
        std::fs::remove_file(&file).unwrap();
    }

    const STEPS: [&str; 7] = [
        "nft", "routes", "sysctl", "shaping", "dns", "squid", "hybla",
    ];

    #[test]
    fn a_failing_step_rolls_back_the_ones_before_it_last_first() {
        let (e, done) = run(&STEPS, "dns");
        let e = e.unwrap();
        assert_eq!((e.step, e.field.as_deref()), ("dns", Some("x.y")));
        assert_eq!(
            done,
            [
                "apply nft",
                "apply routes",
                "apply sysctl",
                "apply shaping",
                "apply dns",
                "rollback shaping",
                "rollback sysctl",
                "rollback routes",
                "rollback nft",
            ],
            "the failed step undoes its own part itself, later steps never run"
        );
    }

    #[test]
    fn the_first_step_failing_rolls_back_nothing_and_the_last_everything_else() {
        let (e, done) = run(&STEPS, "nft");
        assert_eq!(e.unwrap().step, "nft");
        assert_eq!(done, ["apply nft"]);
        let (e, done) = run(&STEPS, "hybla");
        assert_eq!(e.unwrap().step, "hybla");
        let rolled: Vec<&str> = done
            .iter()
            .filter_map(|d| d.strip_prefix("rollback "))
            .collect();
        assert_eq!(
            rolled,
            ["squid", "dns", "shaping", "sysctl", "routes", "nft"]
        );
    }

    #[test]
    fn every_step_applies_in_order_when_none_fails() {
        let (e, done) = run(&STEPS, "");
        assert!(e.is_none());
        let applied: Vec<String> = STEPS.iter().map(|s| format!("apply {s}")).collect();
        assert_eq!(done, applied);
    }
}
