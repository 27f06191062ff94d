//! Atomic apply with rollback. Order: nft (one `nft -f -` transaction on stdin), routes,
//! sysctls, squid (the cache policy, see `CacheStep`), hybla params. On a failure every step already done is undone in reverse, so the
//! previous state stays. Subprocesses get argument vectors only, never shell strings.
use super::render::{Rendered, RouteOp, TABLE};
use std::collections::BTreeMap;
use std::io::Write;
use std::process::{Command, Stdio};

#[derive(Debug, Clone)]
pub struct ApplyError {
    pub step: &'static str,
    pub message: String,
    /// The config field at fault, when the step can name one (squid does).
    pub field: Option<String>,
}

/// The Squid step of an apply. The master implements it around its SquidManager.
pub trait CacheStep {
    /// Applies the new cache policy (parse-checked by Squid before it replaces anything).
    fn apply(&mut self) -> Result<(), ApplyError>;
    /// Puts the previous cache policy back because a later step failed.
    fn restore(&mut self);
}

impl std::fmt::Display for ApplyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} failed: {}", self.step, self.message)
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

/// Apply `new` on top of `prev`. On error the system is back at `prev`.
pub fn apply(
    new: &Rendered,
    prev: &AppliedState,
    hybla: Option<perigee_hybla::HyblaParams>,
    cache: &mut dyn CacheStep,
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

    // 4. Squid: never replaces a working squid.conf with one Squid rejects.
    if let Err(e) = cache.apply() {
        let mut failed = fail(e.step, e.message, undo);
        failed.field = e.field;
        return Err(failed);
    }

    // 5. Hybla parameters, when an implementation is loaded.
    if let Some(params) = hybla {
        let st = perigee_hybla::status();
        if st.loaded {
            if let Err(e) = perigee_hybla::set_params(params) {
                // A Hybla we do not own may refuse new parameters; that is only an error when
                // the ones it runs with are not what was asked for.
                if st.rtt0_ms != params.rtt0_ms || st.base_rtt_ms != params.base_rtt_ms {
                    cache.restore();
                    return Err(fail("hybla", e.to_string(), undo));
                }
            }
        }
    }

    // Success: drop satellite routes the new config no longer has.
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
