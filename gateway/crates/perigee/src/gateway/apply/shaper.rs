//! The `shaping` step: Perigee's HTB shaper as the satellite interface's root qdisc (`tc`), or
//! none. Only a root qdisc of ours is ever changed or removed; somebody else's fails the step.
use super::super::log;
use super::super::render::{remove_root_qdisc_argv, Shaper, SHAPER_HANDLE};
use super::command::{run, tc};
use super::{ApplyError, ApplyStep};

pub struct ShaperStep<'a> {
    to: Option<&'a Shaper>,
    from: Option<&'a Shaper>,
}

impl<'a> ShaperStep<'a> {
    /// From the shaper in force (`from`) to the new config's (`to`); None = no shaper.
    pub fn new(to: Option<&'a Shaper>, from: Option<&'a Shaper>) -> Self {
        ShaperStep { to, from }
    }
}

impl ApplyStep for ShaperStep<'_> {
    fn name(&self) -> &'static str {
        "shaping"
    }

    fn apply(&mut self) -> Result<(), ApplyError> {
        switch_shaper(self.to, self.from).inspect_err(|_| self.rollback())
    }

    fn rollback(&mut self) {
        restore_shaper(self.to, self.from);
    }
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
    let shaping_err = |message: String, field: Option<&str>| {
        ApplyError::new("shaping", message, field.map(String::from))
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
pub fn remove_shaper(s: &Shaper) {
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
pub fn remove_leftover_shaper(dev: &str, shaping: bool) {
    let Ok(root) = root_qdisc(dev) else { return };
    if leftover_shaper(&root, shaping) == Leftover::Remove {
        let removed = tc(&remove_root_qdisc_argv(dev));
        log::info(
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
