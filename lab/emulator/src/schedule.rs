//! The link's weather: a timed script of parameter changes (rate, delay, loss, ...) for either
//! direction, started at one instant and optionally repeated with a period. Pure and
//! clock-injected like `crate::link`: the caller asks for the next due instant, wakes, and
//! applies what [`Schedule::take_due`] hands back.
//!
//! JSON form (the control protocol's `schedule` command):
//! `{"name": "rain-fade", "repeat_ms": null | N, "steps": [{"at_ms": T, "dir": "a_to_b"|"b_to_a"|"both",
//! "params": {partial LinkParams}}, ...]}`: steps sorted by `at_ms` (equal times apply in order),
//! each `at_ms` below `repeat_ms` when it repeats.

use crate::bod::ms_to_ns;
use crate::params::Dir;
use serde_json::{json, Map, Value};

/// At most this many steps: a schedule is a script, not a trace.
pub const MAX_STEPS: usize = 10_000;
/// Longest step time or period (one day).
const MAX_SCHEDULE_MS: f64 = 86_400_000.0;

#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    /// Offset from the start of the (current) cycle.
    pub at_ns: u64,
    pub dir: Dir,
    /// A partial `LinkParams` object, validated by the caller before the schedule starts.
    pub params: Value,
}

#[derive(Debug, Clone)]
pub struct Schedule {
    name: String,
    steps: Vec<Step>,
    repeat_ns: Option<u64>,
    start: u64,
    /// Index of the next step within the cycle.
    next: usize,
    cycle: u64,
    applied: u64,
    /// Worst delay between a step's instant and its application (the shell's wake-up).
    max_lateness_ns: u64,
}

fn err(path: &str, what: &str) -> String {
    format!("field '{path}': {what}")
}

fn millis(v: Option<&Value>, path: &str) -> Result<f64, String> {
    match v.and_then(Value::as_f64) {
        Some(x) if x.is_finite() && (0.0..=MAX_SCHEDULE_MS).contains(&x) => Ok(x),
        _ => Err(err(
            path,
            &format!("must be a number in [0, {MAX_SCHEDULE_MS}] ms"),
        )),
    }
}

fn parse_step(v: &Value, path: &str) -> Result<Step, String> {
    let obj = v
        .as_object()
        .ok_or_else(|| err(path, "must be a JSON object"))?;
    if let Some(k) = obj
        .keys()
        .find(|k| !["at_ms", "dir", "params"].contains(&k.as_str()))
    {
        return Err(err(&format!("{path}.{k}"), "unknown field"));
    }
    let at_ms = millis(obj.get("at_ms"), &format!("{path}.at_ms"))?;
    let dir = obj
        .get("dir")
        .and_then(Value::as_str)
        .and_then(Dir::parse)
        .ok_or_else(|| {
            err(
                &format!("{path}.dir"),
                "must be \"a_to_b\", \"b_to_a\" or \"both\"",
            )
        })?;
    let params = obj
        .get("params")
        .filter(|p| p.is_object())
        .cloned()
        .ok_or_else(|| err(&format!("{path}.params"), "must be a JSON object"))?;
    Ok(Step {
        at_ns: ms_to_ns(at_ms),
        dir,
        params,
    })
}

impl Schedule {
    /// Parses a schedule's JSON (the request object; only `name`, `repeat_ms` and `steps` are
    /// read). The parameter objects are checked by the caller, which knows the links.
    pub fn parse(req: &Map<String, Value>, now: u64) -> Result<Schedule, String> {
        let name = match req.get("name") {
            None | Some(Value::Null) => String::new(),
            Some(Value::String(s)) if s.len() <= 64 => s.clone(),
            Some(_) => return Err(err("name", "must be a string of at most 64 bytes")),
        };
        let repeat_ns = match req.get("repeat_ms") {
            None | Some(Value::Null) => None,
            Some(v) => {
                let ms = millis(Some(v), "repeat_ms")?;
                if ms <= 0.0 {
                    return Err(err("repeat_ms", "must be > 0 (or null: no repeat)"));
                }
                Some(ms_to_ns(ms))
            }
        };
        let list = req
            .get("steps")
            .and_then(Value::as_array)
            .ok_or_else(|| err("steps", "must be a list"))?;
        if list.len() > MAX_STEPS {
            return Err(err("steps", &format!("at most {MAX_STEPS} steps")));
        }
        let mut steps = Vec::with_capacity(list.len());
        for (i, v) in list.iter().enumerate() {
            let path = format!("steps[{i}]");
            let step = parse_step(v, &path)?;
            if steps.last().is_some_and(|p: &Step| p.at_ns > step.at_ns) {
                return Err(err(&format!("{path}.at_ms"), "steps must be in time order"));
            }
            if repeat_ns.is_some_and(|r| step.at_ns >= r) {
                return Err(err(&format!("{path}.at_ms"), "must be below repeat_ms"));
            }
            steps.push(step);
        }
        if repeat_ns.is_some() && steps.is_empty() {
            return Err(err("steps", "a repeating schedule needs at least one step"));
        }
        Ok(Schedule {
            name,
            steps,
            repeat_ns,
            start: now,
            next: 0,
            cycle: 0,
            applied: 0,
            max_lateness_ns: 0,
        })
    }

    /// The steps of one cycle in order (for validating them against the links).
    pub fn steps(&self) -> &[Step] {
        &self.steps
    }

    fn cycle_start(&self) -> u64 {
        self.start + self.cycle * self.repeat_ns.unwrap_or(0)
    }

    /// The instant the next step is due; None when a one-shot schedule has run out.
    pub fn next_due(&self) -> Option<u64> {
        self.steps
            .get(self.next)
            .map(|s| self.cycle_start() + s.at_ns)
    }

    /// Whether a one-shot schedule has applied all its steps.
    pub fn finished(&self) -> bool {
        self.next_due().is_none()
    }

    /// Every step due at `now`, in order (possibly several, possibly from several cycles when
    /// the caller woke very late), each with the instant it was due.
    pub fn take_due(&mut self, now: u64) -> Vec<(u64, Step)> {
        let mut out = Vec::new();
        while let Some(due) = self.next_due().filter(|&d| d <= now) {
            out.push((due, self.steps[self.next].clone()));
            self.applied += 1;
            self.max_lateness_ns = self.max_lateness_ns.max(now - due);
            self.next += 1;
            if self.next == self.steps.len() && self.repeat_ns.is_some() {
                self.next = 0;
                self.cycle += 1;
            }
        }
        out
    }

    /// What `get` and `stats` report: times in seconds since the emulator started.
    pub fn to_json(&self, started: u64) -> Value {
        let s = |ns: u64| ns.saturating_sub(started) as f64 / 1e9;
        json!({
            "name": self.name,
            "started_s": s(self.start),
            "steps": self.steps.len(),
            "repeat_ms": self.repeat_ns.map(|r| r as f64 / 1e6),
            "cycle": self.cycle,
            "applied": self.applied,
            "next_due_s": self.next_due().map(s),
            "max_lateness_us": self.max_lateness_ns as f64 / 1e3,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn sched(v: Value, now: u64) -> Result<Schedule, String> {
        Schedule::parse(v.as_object().unwrap(), now)
    }

    #[test]
    fn one_shot_steps_come_due_in_order_and_then_stop() {
        let mut s = sched(
            json!({"name": "fade", "steps": [
                {"at_ms": 0, "dir": "b_to_a", "params": {"rate_bps": 1}},
                {"at_ms": 5, "dir": "both", "params": {"ber": 1e-6}},
                {"at_ms": 5, "dir": "a_to_b", "params": {"ber": 0}},
            ]}),
            100 * MS,
        )
        .unwrap();
        assert_eq!(s.next_due(), Some(100 * MS));
        let due = s.take_due(100 * MS);
        assert_eq!(due.len(), 1);
        assert_eq!(due[0].1.dir, Dir::BToA);
        assert!(s.take_due(104 * MS).is_empty());
        let due = s.take_due(106 * MS);
        assert_eq!(
            due.iter().map(|d| (d.0, d.1.dir)).collect::<Vec<_>>(),
            vec![(105 * MS, Dir::Both), (105 * MS, Dir::AToB)]
        );
        assert!(s.finished());
        assert!(s.take_due(u64::MAX).is_empty());
        let j = s.to_json(0);
        assert_eq!(j["applied"], 3);
        assert_eq!(j["max_lateness_us"], 1000.0);
        assert!(j["next_due_s"].is_null());
    }

    #[test]
    fn a_repeating_schedule_cycles_from_its_start() {
        let mut s = sched(
            json!({"repeat_ms": 15000, "steps": [
                {"at_ms": 0, "dir": "both", "params": {"per": 0.5}},
                {"at_ms": 300, "dir": "both", "params": {"per": 0}},
            ]}),
            7 * MS,
        )
        .unwrap();
        let mut times = Vec::new();
        for t in (0..=46_000).step_by(50) {
            times.extend(
                s.take_due(7 * MS + t * MS)
                    .into_iter()
                    .map(|d| (d.0 - 7 * MS) / MS),
            );
        }
        assert_eq!(
            times,
            vec![0, 300, 15_000, 15_300, 30_000, 30_300, 45_000, 45_300]
        );
        assert_eq!(s.to_json(0)["cycle"], 4, "the next cycle");
        // Waking very late applies every missed step, in order, across cycles.
        let late = s.take_due(7 * MS + 90_100 * MS);
        assert_eq!(late.len(), 5, "60.0, 60.3, 75.0, 75.3, 90.0 s");
        assert!(!s.finished());
    }

    #[test]
    fn bad_schedules_name_the_field() {
        for (v, field) in [
            (json!({}), "steps"),
            (json!({"steps": 3}), "steps"),
            (json!({"steps": [1]}), "steps[0]"),
            (
                json!({"steps": [{"at_ms": -1, "dir": "both", "params": {}}]}),
                "steps[0].at_ms",
            ),
            (
                json!({"steps": [{"at_ms": 0, "dir": "up", "params": {}}]}),
                "steps[0].dir",
            ),
            (
                json!({"steps": [{"at_ms": 0, "dir": "both"}]}),
                "steps[0].params",
            ),
            (
                json!({"steps": [{"at_ms": 0, "dir": "both", "params": {}, "x": 1}]}),
                "steps[0].x",
            ),
            (
                json!({"steps": [{"at_ms": 5, "dir": "both", "params": {}},
                                 {"at_ms": 4, "dir": "both", "params": {}}]}),
                "steps[1].at_ms",
            ),
            (
                json!({"repeat_ms": 10, "steps": [{"at_ms": 10, "dir": "both", "params": {}}]}),
                "steps[0].at_ms",
            ),
            (json!({"repeat_ms": 0, "steps": []}), "repeat_ms"),
            (json!({"repeat_ms": 10, "steps": []}), "steps"),
            (json!({"name": 5, "steps": []}), "name"),
        ] {
            let e = sched(v.clone(), 0).unwrap_err();
            assert!(e.contains(&format!("'{field}'")), "{v}: {e}");
        }
    }
}
