//! The Prometheus text exposition format: families of labelled samples (metrics.rs and
//! host_metrics.rs write theirs through it).
use std::fmt::Write;

/// Label values come from names the config validates ([A-Za-z0-9_.:-]); escaped anyway.
fn escape(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// `{a="x",b="y"}` (empty for no labels).
pub(super) fn labels(pairs: &[(&str, &str)]) -> String {
    if pairs.is_empty() {
        return String::new();
    }
    let inner: Vec<String> = pairs
        .iter()
        .map(|(k, v)| format!("{k}=\"{}\"", escape(v)))
        .collect();
    format!("{{{}}}", inner.join(","))
}

/// The exposition text, one family at a time.
#[derive(Default)]
pub(super) struct Exposition {
    pub(super) text: String,
}

impl Exposition {
    pub(super) fn family(
        &mut self,
        name: &str,
        kind: &str,
        help: &str,
        samples: Vec<(String, f64)>,
    ) {
        let _ = writeln!(self.text, "# HELP {name} {help}\n# TYPE {name} {kind}");
        for (l, v) in samples {
            if v.fract() == 0.0 && v.abs() < 1e15 {
                let _ = writeln!(self.text, "{name}{l} {}", v as i64);
            } else {
                let _ = writeln!(self.text, "{name}{l} {v}");
            }
        }
    }

    pub(super) fn one(&mut self, name: &str, kind: &str, help: &str, v: f64) {
        self.family(name, kind, help, vec![(String::new(), v)]);
    }
}

/// A counter as a sample value (Prometheus samples are floats).
pub(super) fn n(v: u64) -> f64 {
    v as f64
}

pub(super) fn b(v: bool) -> f64 {
    if v {
        1.0
    } else {
        0.0
    }
}
