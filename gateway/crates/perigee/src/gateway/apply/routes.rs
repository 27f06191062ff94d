//! The `routes` step: the satellite routes and the policy rules (`ip route` / `ip rule`). A
//! satellite route replaces the main-table route to its destination; the one that was there
//! first is remembered, so undoing ours (or dropping it from a later config) puts it back.
use super::super::render::RouteOp;
use super::command::{ip, run};
use super::{ApplyError, ApplyStep};
use std::collections::BTreeMap;

/// Per destination, the `ip` argv that recreates the route there before ours (None: none was).
pub type RouteOriginals = BTreeMap<String, Option<Vec<String>>>;

pub struct RoutesStep<'a> {
    new: &'a [RouteOp],
    /// The routes of the config in force.
    prev: &'a [RouteOp],
    originals: RouteOriginals,
    /// Those of `new` installed so far.
    added: Vec<RouteOp>,
}

impl<'a> RoutesStep<'a> {
    pub fn new(new: &'a [RouteOp], prev: &'a [RouteOp], originals: RouteOriginals) -> Self {
        RoutesStep {
            new,
            prev,
            originals,
            added: Vec::new(),
        }
    }

    /// After a successful apply: drop the satellite routes the new config no longer has
    /// (the original comes back), and hand over what is remembered for the next apply.
    pub fn drop_removed(mut self) -> RouteOriginals {
        for old in self.prev {
            if matches!(old, RouteOp::SatRoute { .. })
                && !self.new.iter().any(|n| same_route(n, old))
            {
                remove_route(old, &self.originals);
                if let Some(k) = route_key(old) {
                    self.originals.remove(&k);
                }
            }
        }
        self.originals
    }
}

impl ApplyStep for RoutesStep<'_> {
    fn name(&self) -> &'static str {
        "routes"
    }

    fn apply(&mut self) -> Result<(), ApplyError> {
        for op in self.new {
            if let Some(k) = route_key(op) {
                self.originals.entry(k).or_insert_with(|| capture_route(op));
            }
            if let Err(m) = install_route(op) {
                self.rollback();
                return Err(ApplyError::at("routes", m));
            }
            self.added.push(op.clone());
        }
        Ok(())
    }

    fn rollback(&mut self) {
        for op in &self.added {
            if !self.prev.iter().any(|p| same_route(p, op)) {
                remove_route(op, &self.originals);
            }
        }
        for op in self.prev {
            let _ = install_route(op);
        }
    }
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
pub fn remove_route(op: &RouteOp, originals: &RouteOriginals) {
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
