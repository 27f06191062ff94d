//! Atomic apply with rollback. Order: nft (one `nft -f -` transaction on stdin), routes,
//! sysctls, shaping (the satellite interface's root qdisc, see `Shaper`), the child services in
//! the order given (the resolver, then Squid, which resolves through it; see `ServiceStep`),
//! hybla (params and cwnd ceiling, see `HyblaPlan`). On a failure every step already done is
//! undone in reverse, so the previous state stays. Subprocesses get argument vectors only,
//! never shell strings.
use super::config::{CongestionControl, GatewayConfig};
use super::render::{remove_root_qdisc_argv, Rendered, RouteOp, Shaper, SHAPER_HANDLE, TABLE};
use perigee_hybla::{HyblaParams, HyblaStatus, Implementation};
use std::collections::BTreeMap;
use std::io::Write;
use std::process::{Command, Stdio};

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
    /// The config field at fault, when the step can name one (squid and dns do).
    pub field: Option<String>,
}

/// A child service's step of an apply (unbound, Squid). The master implements it around each
/// manager.
pub trait ServiceStep {
    /// The step's name in an `ApplyError` ("dns", "squid").
    fn name(&self) -> &'static str;
    /// Applies the new policy (checked by the service's own tool before it replaces anything).
    fn apply(&mut self) -> Result<(), ApplyError>;
    /// Puts the previous policy back because a later step failed.
    fn restore(&mut self);
}

impl std::fmt::Display for ApplyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} failed: {}", self.step, self.message)
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

/// What `apply` accepts for the hybla step: a full plan, or (older callers) parameters only.
pub trait IntoHyblaPlan {
    fn into_plan(self) -> Option<HyblaPlan>;
}

impl IntoHyblaPlan for Option<HyblaPlan> {
    fn into_plan(self) -> Option<HyblaPlan> {
        self
    }
}

impl IntoHyblaPlan for Option<HyblaParams> {
    fn into_plan(self) -> Option<HyblaPlan> {
        self.map(|params| HyblaPlan {
            params,
            cwnd_max: None,
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
    let hybla_err = |message: String, field: Option<&str>| ApplyError {
        step: "hybla",
        message,
        field: field.map(String::from),
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
        Ok(removed) => super::log::info(
            "removed the Hybla entries of namespaces that no longer exist",
            serde_json::json!({"cookies": removed}),
        ),
        Err(e) => super::log::warn(
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

/// Run `prog args...`, optionally feeding `stdin`; Ok(stdout) on exit status 0, Err(stderr) otherwise.
pub fn run(prog: &str, args: &[String], stdin: Option<&str>) -> Result<String, String> {
    let mut cmd = Command::new(prog);
    cmd.args(args).stdout(Stdio::piped()).stderr(Stdio::piped());
    cmd.stdin(if stdin.is_some() {
        Stdio::piped()
    } else {
        Stdio::null()
    });
    let mut child = cmd.spawn().map_err(|e| format!("{prog}: {e}"))?;
    if let (Some(text), Some(mut pipe)) = (stdin, child.stdin.take()) {
        pipe.write_all(text.as_bytes())
            .map_err(|e| format!("{prog} stdin: {e}"))?;
    }
    let out = child
        .wait_with_output()
        .map_err(|e| format!("{prog}: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        let err = String::from_utf8_lossy(&out.stderr).trim().to_string();
        Err(format!("{prog} {}: {err}", args.join(" ")))
    }
}

fn nft(text: &str) -> Result<(), String> {
    run("nft", &["-f".into(), "-".into()], Some(text)).map(|_| ())
}

fn ip(argv: &[String]) -> Result<(), String> {
    run("ip", argv, None).map(|_| ())
}

pub fn delete_table() -> Result<(), String> {
    nft(&format!(
        "table inet {TABLE} {{}}\ndelete table inet {TABLE}\n"
    ))
}

fn install_route(op: &RouteOp) -> Result<(), String> {
    if let RouteOp::MarkRule { .. } = op {
        // `ip rule add` is not idempotent: remove ours (by priority) first.
        for _ in 0..8 {
            if ip(&op.del_argv()).is_err() {
                break;
            }
        }
    }
    ip(&op.add_argv())
}

fn sysctl_path(key: &str) -> String {
    format!("/proc/sys/{}", key.replace('.', "/"))
}

pub fn read_sysctl(key: &str) -> Result<String, String> {
    std::fs::read_to_string(sysctl_path(key))
        .map(|s| s.trim().to_string())
        .map_err(|e| format!("{key}: {e}"))
}

fn write_sysctl(key: &str, value: &str) -> Result<(), String> {
    std::fs::write(sysctl_path(key), value).map_err(|e| format!("{key}={value}: {e}"))
}

fn tc(argv: &[String]) -> Result<(), String> {
    run("tc", argv, None).map(|_| ())
}

/// Whose root qdisc an interface has.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RootQdisc {
    /// The one the kernel attached (handle 0:): deleting ours brings it back.
    Default,
    /// Our shaper (`SHAPER_HANDLE`), e.g. left by a daemon that was killed.
    Ours,
    /// Somebody else's, described as "kind handle"; never replaced, since we could not put
    /// it back as it was.
    Foreign(String),
}

/// Classify `tc -j qdisc show dev DEV root` output.
pub fn classify_root(json: &str) -> Result<RootQdisc, String> {
    let v: serde_json::Value =
        serde_json::from_str(json).map_err(|e| format!("tc -j qdisc show: {e}"))?;
    let Some(q) = v
        .as_array()
        .and_then(|a| a.iter().find(|q| q["root"] == true))
    else {
        return Ok(RootQdisc::Default);
    };
    let kind = q["kind"].as_str().unwrap_or("?");
    Ok(match q["handle"].as_str().unwrap_or("0:") {
        "0:" => RootQdisc::Default,
        h if h == SHAPER_HANDLE && kind == "htb" => RootQdisc::Ours,
        h => RootQdisc::Foreign(format!("{kind} {h}")),
    })
}

fn root_qdisc(dev: &str) -> Result<RootQdisc, String> {
    let argv: Vec<String> = ["-j", "qdisc", "show", "dev", dev, "root"]
        .iter()
        .map(|x| x.to_string())
        .collect();
    classify_root(&run("tc", &argv, None)?)
}

/// Install `s` (or change ours in place). A failure part way leaves a half-built tree that the
/// caller's rollback removes or replaces.
fn install_shaper(s: &Shaper) -> Result<(), ApplyError> {
    let shaping_err = |message: String, field: Option<&str>| ApplyError {
        step: "shaping",
        message,
        field: field.map(String::from),
    };
    let root = root_qdisc(&s.dev).map_err(|m| shaping_err(m, None))?;
    if let RootQdisc::Foreign(what) = root {
        return Err(shaping_err(
            format!(
                "{} already has a root qdisc ({what}) that Perigee did not install; remove it \
                 (tc qdisc del dev {} root) or leave shaping disabled",
                s.dev, s.dev
            ),
            Some("shaping.enabled"),
        ));
    }
    // HTB's root has no change operation (and ours never differs): when it is already there
    // only the class and the leaf are replaced, in place.
    let skip = usize::from(root == RootQdisc::Ours);
    for argv in s.install_argvs().iter().skip(skip) {
        tc(argv).map_err(|m| shaping_err(m, None))?;
    }
    Ok(())
}

/// Remove our shaper from `s.dev`, only if the root there is ours; best effort.
fn remove_shaper(s: &Shaper) {
    if root_qdisc(&s.dev) == Ok(RootQdisc::Ours) {
        let _ = tc(&s.remove_argv());
    }
}

/// Go from `from` to `to` (either None = no shaper): install or change the new one, and take
/// the old one off an interface the new one is not on.
fn switch_shaper(to: Option<&Shaper>, from: Option<&Shaper>) -> Result<(), ApplyError> {
    if let Some(new) = to {
        install_shaper(new)?;
    }
    if let Some(old) = from {
        if to.is_none_or(|new| new.dev != old.dev) {
            remove_shaper(old);
        }
    }
    Ok(())
}

/// What the first apply after a start does about the root qdisc on the satellite interface.
/// A daemon killed by SIGKILL never runs its teardown, so its shaper stays; a restarted daemon
/// whose config does not shape would otherwise leave it there for good (no later apply has a
/// previous shaper to remove).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Leftover {
    /// Not ours: the kernel's default, or somebody else's (never touched).
    Leave,
    /// Ours and this config shapes: `install_shaper` changes it in place, as any re-apply.
    TakeOver,
    /// Ours and this config does not shape: delete it, the kernel's default comes back.
    Remove,
}

pub fn leftover_shaper(root: &RootQdisc, shaping: bool) -> Leftover {
    match (root, shaping) {
        (RootQdisc::Ours, true) => Leftover::TakeOver,
        (RootQdisc::Ours, false) => Leftover::Remove,
        (RootQdisc::Default | RootQdisc::Foreign(_), _) => Leftover::Leave,
    }
}

/// Delete the shaper a previous daemon left on `dev` when this config does not shape there;
/// best effort, like `remove_shaper` (a failure leaves the leftover, as before).
fn remove_leftover_shaper(dev: &str, shaping: bool) {
    let Ok(root) = root_qdisc(dev) else { return };
    if leftover_shaper(&root, shaping) == Leftover::Remove {
        let removed = tc(&remove_root_qdisc_argv(dev));
        super::log::info(
            "shaper left by a previous daemon",
            serde_json::json!({"dev": dev, "removed": removed.is_ok(), "error": removed.err()}),
        );
    }
}

/// Undo `switch_shaper(to, from)`: `from` back as it was, `to` gone where it was new.
fn restore_shaper(to: Option<&Shaper>, from: Option<&Shaper>) {
    if let Some(new) = to {
        if from.is_none_or(|old| old.dev != new.dev) {
            remove_shaper(new);
        }
    }
    if let Some(old) = from {
        let _ = install_shaper(old);
    }
}

/// What an apply changed, so the next apply (or its rollback) knows what to undo.
#[derive(Debug, Clone, Default)]
pub struct AppliedState {
    pub rendered: Option<Rendered>,
    /// Values the sysctls had before we first wrote them.
    pub sysctl_originals: BTreeMap<String, String>,
    /// Satellite routes as they were before we first replaced them (None: there was none).
    pub route_originals: BTreeMap<String, Option<Vec<String>>>,
}

/// The `ip` argv that recreates the main-table route to `dst` as it is now, if there is one.
fn capture_route(op: &RouteOp) -> Option<Vec<String>> {
    let RouteOp::SatRoute { dst, .. } = op else {
        return None;
    };
    let fam = if op.is_v6() { "-6" } else { "-4" };
    let out = run(
        "ip",
        &[
            "-j".into(),
            fam.into(),
            "route".into(),
            "show".into(),
            "exact".into(),
            dst.clone(),
        ],
        None,
    )
    .ok()?;
    let v: serde_json::Value = serde_json::from_str(&out).ok()?;
    let r = v.as_array()?.first()?;
    let mut argv = vec![
        fam.to_string(),
        "route".into(),
        "replace".into(),
        dst.clone(),
    ];
    if let Some(gw) = r["gateway"].as_str() {
        argv.extend(["via".into(), gw.to_string()]);
    }
    argv.extend(["dev".into(), r["dev"].as_str()?.to_string()]);
    Some(argv)
}

fn route_key(op: &RouteOp) -> Option<String> {
    match op {
        RouteOp::SatRoute { dst, .. } => Some(dst.clone()),
        _ => None,
    }
}

/// Undo one of our routes: put back what was there before, or delete it.
fn remove_route(op: &RouteOp, originals: &BTreeMap<String, Option<Vec<String>>>) {
    match route_key(op)
        .and_then(|k| originals.get(&k).cloned())
        .flatten()
    {
        Some(argv) => {
            let _ = ip(&argv);
        }
        None => {
            let _ = ip(&op.del_argv());
        }
    }
}

/// Apply `new` on top of `prev`, the child services in the order given. On error the system
/// is back at `prev`.
pub fn apply(
    new: &Rendered,
    prev: &AppliedState,
    hybla: impl IntoHyblaPlan,
    services: &mut [&mut dyn ServiceStep],
) -> Result<AppliedState, ApplyError> {
    apply_with(new, prev, hybla.into_plan(), services, &SystemHybla)
}

/// Puts back the services that were applied, last first.
fn restore_services(applied: &mut [&mut dyn ServiceStep]) {
    for s in applied.iter_mut().rev() {
        s.restore();
    }
}

/// `apply` with the Hybla implementation given (tests use a double).
pub fn apply_with(
    new: &Rendered,
    prev: &AppliedState,
    hybla: Option<HyblaPlan>,
    services: &mut [&mut dyn ServiceStep],
    hybla_ctl: &dyn HyblaControl,
) -> Result<AppliedState, ApplyError> {
    let mut undo: Vec<Box<dyn FnOnce()>> = Vec::new();
    let fail = |step: &'static str, message: String, undo: Vec<Box<dyn FnOnce()>>| {
        for u in undo.into_iter().rev() {
            u();
        }
        ApplyError {
            step,
            message,
            field: None,
        }
    };

    // 1. nftables: one transaction; it either applies whole or not at all.
    nft(&new.nft).map_err(|m| ApplyError {
        step: "nft",
        message: m,
        field: None,
    })?;
    let prev_nft = prev.rendered.as_ref().map(|r| r.nft.clone());
    undo.push(Box::new(move || {
        let _ = match prev_nft {
            Some(t) => nft(&t),
            None => delete_table(),
        };
    }));
    if let Err(m) = fault::injected("nft") {
        return Err(fail("nft", m, undo));
    }

    // 2. routes and policy rules.
    let prev_routes: Vec<RouteOp> = prev
        .rendered
        .as_ref()
        .map(|r| r.routes.clone())
        .unwrap_or_default();
    let mut route_originals = prev.route_originals.clone();
    let mut added: Vec<RouteOp> = Vec::new();
    for op in &new.routes {
        if let Some(k) = route_key(op) {
            route_originals
                .entry(k)
                .or_insert_with(|| capture_route(op));
        }
        if let Err(m) = install_route(op) {
            let (a, p, o) = (added.clone(), prev_routes.clone(), route_originals.clone());
            undo.push(Box::new(move || restore_routes(&a, &p, &o)));
            return Err(fail("routes", m, undo));
        }
        added.push(op.clone());
    }
    {
        let (a, p, o) = (added.clone(), prev_routes.clone(), route_originals.clone());
        undo.push(Box::new(move || restore_routes(&a, &p, &o)));
    }
    if let Err(m) = fault::injected("routes") {
        return Err(fail("routes", m, undo));
    }

    // 3. sysctls (allow-listed by validation).
    let mut originals = prev.sysctl_originals.clone();
    let mut written: Vec<(String, String)> = Vec::new();
    for (k, v) in &new.sysctls {
        let before = match read_sysctl(k) {
            Ok(b) => b,
            Err(m) => return Err(fail("sysctl", m, undo)),
        };
        if let Err(m) = write_sysctl(k, v) {
            let w = written.clone();
            undo.push(Box::new(move || restore_sysctls(&w)));
            return Err(fail("sysctl", m, undo));
        }
        originals.entry(k.clone()).or_insert_with(|| before.clone());
        written.push((k.clone(), before));
    }
    // Keys the previous config set and this one no longer does go back to their originals.
    if let Some(p) = &prev.rendered {
        for k in p.sysctls.keys().filter(|k| !new.sysctls.contains_key(*k)) {
            if let Some(orig) = originals.remove(k) {
                let _ = write_sysctl(k, &orig);
            }
        }
    }
    {
        let w = written.clone();
        undo.push(Box::new(move || restore_sysctls(&w)));
    }
    if let Err(m) = fault::injected("sysctl") {
        return Err(fail("sysctl", m, undo));
    }

    // 4. shaping: our root qdisc on the satellite interface, or none.
    let prev_shaper = prev.rendered.as_ref().and_then(|r| r.shaper.clone());
    {
        let (to, from) = (new.shaper.clone(), prev_shaper.clone());
        undo.push(Box::new(move || restore_shaper(to.as_ref(), from.as_ref())));
    }
    if let Err(e) = switch_shaper(new.shaper.as_ref(), prev_shaper.as_ref()) {
        let mut failed = fail(e.step, e.message, undo);
        failed.field = e.field;
        return Err(failed);
    }
    if let Err(m) = fault::injected("shaping") {
        return Err(fail("shaping", m, undo));
    }

    // 5. Child services (unbound, then Squid): neither replaces a working config with one its
    // own checker rejects; a failing one puts back those applied before it.
    for i in 0..services.len() {
        if let Err(e) = services[i].apply() {
            restore_services(&mut services[..i]);
            let mut failed = fail(e.step, e.message, undo);
            failed.field = e.field;
            return Err(failed);
        }
        let step = services[i].name();
        if let Err(m) = fault::injected(step) {
            restore_services(&mut services[..=i]);
            return Err(fail(step, m, undo));
        }
    }

    // 6. Hybla parameters and cwnd ceiling, when an implementation is loaded.
    // (apply_hybla leaves nothing written when it fails, so its fault comes before it.)
    if let Err(m) = fault::injected("hybla") {
        restore_services(services);
        return Err(fail("hybla", m, undo));
    }
    if let Some(plan) = hybla {
        if let Err(e) = apply_hybla(hybla_ctl, plan) {
            restore_services(services);
            let mut failed = fail(e.step, e.message, undo);
            failed.field = e.field;
            return Err(failed);
        }
    }

    // Success. On the first apply, a shaper of ours left by a killed daemon goes when this
    // config does not shape (only now, so a failed apply leaves the system as it found it).
    if prev.rendered.is_none() {
        remove_leftover_shaper(&new.satellite, new.shaper.is_some());
    }
    // Drop satellite routes the new config no longer has.
    for old in &prev_routes {
        if matches!(old, RouteOp::SatRoute { .. }) && !new.routes.iter().any(|n| same_route(n, old))
        {
            remove_route(old, &route_originals);
            if let Some(k) = route_key(old) {
                route_originals.remove(&k);
            }
        }
    }
    Ok(AppliedState {
        rendered: Some(new.clone()),
        sysctl_originals: originals,
        route_originals,
    })
}

fn same_route(a: &RouteOp, b: &RouteOp) -> bool {
    match (a, b) {
        (
            RouteOp::SatRoute {
                dst: d1, dev: v1, ..
            },
            RouteOp::SatRoute {
                dst: d2, dev: v2, ..
            },
        ) => d1 == d2 && v1 == v2,
        _ => a == b,
    }
}

fn restore_routes(
    added: &[RouteOp],
    prev: &[RouteOp],
    originals: &BTreeMap<String, Option<Vec<String>>>,
) {
    for op in added {
        if !prev.iter().any(|p| same_route(p, op)) {
            remove_route(op, originals);
        }
    }
    for op in prev {
        let _ = install_route(op);
    }
}

fn restore_sysctls(written: &[(String, String)]) {
    for (k, v) in written.iter().rev() {
        let _ = write_sysctl(k, v);
    }
}

/// Remove everything an apply installed (graceful shutdown).
pub fn teardown(state: &AppliedState) {
    let _ = delete_table();
    if let Some(s) = state.rendered.as_ref().and_then(|r| r.shaper.as_ref()) {
        remove_shaper(s);
    }
    if let Some(r) = &state.rendered {
        for op in &r.routes {
            remove_route(op, &state.route_originals);
        }
    }
    for (k, v) in &state.sysctl_originals {
        let _ = write_sysctl(k, v);
    }
}

/// Put `tcp` into / take it out of the overflow set (new SYNs routed unsplit while present).
pub fn set_overflow(on: bool) -> Result<(), String> {
    let verb = if on { "add" } else { "delete" };
    let text = if on {
        format!("{verb} element inet {TABLE} overflow {{ tcp }}\n")
    } else {
        format!("flush set inet {TABLE} overflow\n")
    };
    nft(&text)
}

/// Put `udp` and `tcp` into / take them out of the dns_up set: the port-53 rules toward the
/// resolver only match while they are there, so while it is down queries go where they were
/// sent.
pub fn set_dns_up(on: bool) -> Result<(), String> {
    let set = super::render::DNS_UP_SET;
    let text = if on {
        format!("add element inet {TABLE} {set} {{ udp, tcp }}\n")
    } else {
        format!("flush set inet {TABLE} {set}\n")
    };
    nft(&text)
}

/// Put `tcp` into / take it out of the cache_up set: the port-80 rules toward Squid only match
/// while it is there, so a dead Squid fails over to the splitter.
pub fn set_cache_up(on: bool) -> Result<(), String> {
    let set = super::render::CACHE_UP_SET;
    let text = if on {
        format!("add element inet {TABLE} {set} {{ tcp }}\n")
    } else {
        format!("flush set inet {TABLE} {set}\n")
    };
    nft(&text)
}

/// Named nft counter values `(packets, bytes)`.
/// Every named counter of the table: name → (packets, bytes), in one `nft` call.
pub fn read_counters() -> std::collections::HashMap<String, (u64, u64)> {
    let out = run(
        "nft",
        &[
            "-j".into(),
            "list".into(),
            "counters".into(),
            "table".into(),
            "inet".into(),
            TABLE.into(),
        ],
        None,
    );
    out.ok()
        .and_then(|o| serde_json::from_str::<serde_json::Value>(&o).ok())
        .map(|v| parse_counters(&v))
        .unwrap_or_default()
}

fn parse_counters(v: &serde_json::Value) -> std::collections::HashMap<String, (u64, u64)> {
    let mut m = std::collections::HashMap::new();
    for item in v["nftables"].as_array().into_iter().flatten() {
        if let Some(c) = item.get("counter") {
            if let (Some(n), Some(p), Some(b)) = (
                c["name"].as_str(),
                c["packets"].as_u64(),
                c["bytes"].as_u64(),
            ) {
                m.insert(n.to_string(), (p, b));
            }
        }
    }
    m
}

pub fn read_counter(name: &str) -> Option<(u64, u64)> {
    let out = run(
        "nft",
        &[
            "-j".into(),
            "list".into(),
            "counter".into(),
            "inet".into(),
            TABLE.into(),
            name.into(),
        ],
        None,
    )
    .ok()?;
    let v: serde_json::Value = serde_json::from_str(&out).ok()?;
    for item in v["nftables"].as_array()? {
        if let Some(c) = item.get("counter") {
            return Some((c["packets"].as_u64()?, c["bytes"].as_u64()?));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;

    #[test]
    fn counters_by_name_from_nft_json() {
        let v = serde_json::json!({"nftables": [
            {"metainfo": {"version": "1.0.6"}},
            {"counter": {"family": "inet", "name": "bypass", "table": "perigee", "packets": 3, "bytes": 300}},
            {"counter": {"family": "inet", "name": "bypass_entry_0", "table": "perigee", "packets": 2, "bytes": 200}},
            {"counter": {"family": "inet", "name": "broken", "table": "perigee"}}
        ]});
        let m = parse_counters(&v);
        assert_eq!(m.len(), 2);
        assert_eq!(m["bypass_entry_0"], (2, 200));
        assert!(parse_counters(&serde_json::json!({})).is_empty());
    }

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

    #[test]
    fn root_qdisc_is_default_ours_or_foreign() {
        let root = |kind: &str, handle: &str| {
            classify_root(&format!(
                r#"[{{"kind":"{kind}","handle":"{handle}","root":true,"refcnt":2,"options":{{}}}}]"#
            ))
            .unwrap()
        };
        assert_eq!(root("noqueue", "0:"), RootQdisc::Default);
        assert_eq!(root("mq", "0:"), RootQdisc::Default);
        assert_eq!(root("htb", "5047:"), RootQdisc::Ours);
        assert_eq!(root("htb", "1:"), RootQdisc::Foreign("htb 1:".into()));
        // Our handle on another kind is not ours.
        assert_eq!(root("tbf", "5047:"), RootQdisc::Foreign("tbf 5047:".into()));
        assert_eq!(classify_root("[]").unwrap(), RootQdisc::Default);
        assert!(classify_root("Cannot find device").is_err());
    }

    #[test]
    fn first_apply_removes_only_our_leftover_shaper_and_only_when_not_shaping() {
        let foreign = RootQdisc::Foreign("tbf 1:".into());
        assert_eq!(leftover_shaper(&RootQdisc::Ours, false), Leftover::Remove);
        assert_eq!(leftover_shaper(&RootQdisc::Ours, true), Leftover::TakeOver);
        for shaping in [false, true] {
            assert_eq!(
                leftover_shaper(&RootQdisc::Default, shaping),
                Leftover::Leave
            );
            assert_eq!(leftover_shaper(&foreign, shaping), Leftover::Leave);
        }
        // Our handle on a qdisc kind we never install is somebody else's: left alone.
        let tbf = classify_root(r#"[{"kind":"tbf","handle":"5047:","root":true}]"#).unwrap();
        assert_eq!(leftover_shaper(&tbf, false), Leftover::Leave);
    }

    fn plan_for(hybla: serde_json::Value) -> Option<HyblaPlan> {
        let mut j = super::super::config::example_json();
        j["hybla"] = hybla;
        HyblaPlan::for_config(&super::super::config::from_value(j).unwrap())
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
        let mut j = super::super::config::example_json();
        j["satellite"]["congestion_control"] = "cubic".into();
        j["classes"][0]["satellite"]["congestion_control"] = "bbr".into();
        let cfg = super::super::config::from_value(j).unwrap();
        assert_eq!(
            HyblaPlan::for_config(&cfg),
            None,
            "no hybla: global state untouched"
        );
        // hybla_ld reads the same parameters: a class asking for it gets the plan written.
        let mut j = super::super::config::example_json();
        j["satellite"]["congestion_control"] = "cubic".into();
        j["classes"][0]["satellite"]["congestion_control"] = "hybla_ld".into();
        let cfg = super::super::config::from_value(j).unwrap();
        assert_eq!(HyblaPlan::for_config(&cfg).unwrap().cwnd_max, Some(0));
        // Callers that pass only the parameters leave the ceiling alone.
        let p: Option<HyblaParams> = Some(HyblaParams::default());
        assert_eq!(p.into_plan().unwrap().cwnd_max, None);
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
        let p: Option<HyblaParams> = Some(HyblaParams {
            rtt0_ms: 20,
            base_rtt_ms: 0,
        });
        apply_hybla(&h, p.into_plan().unwrap()).unwrap();
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
