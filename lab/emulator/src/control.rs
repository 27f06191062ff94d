//! The control protocol (newline-delimited JSON, one reply line per request line) over
//! the two link directions. Pure: the caller supplies the clock and does the socket I/O.
//!
//! Requests → replies:
//! - `{"cmd":"get"}` → `{"ok":true,"a_to_b":{params},"b_to_a":{params}}`
//! - `{"cmd":"set","dir":"a_to_b"|"b_to_a"|"both","params":{partial}}` → `{"ok":true}`
//! - `{"cmd":"stats"}` → `{"ok":true,"uptime_s":f,"a_to_b":{stats},"b_to_a":{stats}}`
//! - `{"cmd":"schedule","name":s,"repeat_ms":N|null,"steps":[{"at_ms","dir","params"}]}` → `{"ok":true}`:
//!   replaces the running schedule (`crate::schedule`), its first cycle starting now; `"steps":[]`
//!   stops it. Every step's parameters are checked against the links before anything starts.
//! - `{"cmd":"reset_counters"}` → `{"ok":true}`
//! - `{"cmd":"shutdown"}` → `{"ok":true}`, then the process exits.
//!
//! Errors are `{"ok":false,"error":"<message naming the field>"}` and change nothing.

use crate::link::Link;
use crate::params::{Dir, LinkParams};
use crate::schedule::Schedule;
use serde_json::{json, Value};

/// Both directions: a_to_b (A → B, satlab's return link) and b_to_a (forward link).
#[derive(Debug)]
pub struct Emulator {
    pub a_to_b: Link,
    pub b_to_a: Link,
    started: u64,
    schedule: Option<Schedule>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum After {
    Continue,
    Shutdown,
}

fn error(msg: impl Into<String>) -> Value {
    json!({"ok": false, "error": msg.into()})
}

impl Emulator {
    pub fn new(a_to_b: LinkParams, b_to_a: LinkParams, seed: u64, now: u64) -> Self {
        Emulator {
            a_to_b: Link::new(a_to_b, seed, now),
            // A different stream per direction so their losses are independent.
            b_to_a: Link::new(b_to_a, seed ^ 0x5A5A_5A5A_DEAD_BEEF, now),
            started: now,
            schedule: None,
        }
    }

    /// When the schedule's next step is due (None: no schedule, or a finished one).
    pub fn next_schedule_step(&self) -> Option<u64> {
        self.schedule.as_ref().and_then(Schedule::next_due)
    }

    /// Applies every schedule step due at `now` (validated when the schedule was loaded, so a
    /// merge cannot fail here; one that somehow did would leave that direction unchanged).
    pub fn run_schedule(&mut self, now: u64) {
        let Some(s) = self.schedule.as_mut() else {
            return;
        };
        for (_, step) in s.take_due(now) {
            for (on, link) in [
                (step.dir.includes_a_to_b(), &mut self.a_to_b),
                (step.dir.includes_b_to_a(), &mut self.b_to_a),
            ] {
                if let (true, Ok(p)) = (on, link.params().merged(&step.params, "params")) {
                    link.set_params(now, p);
                }
            }
        }
    }

    fn schedule_json(&self) -> Value {
        self.schedule
            .as_ref()
            .map_or(Value::Null, |s| s.to_json(self.started))
    }

    /// Handles one request line; returns the reply (without newline).
    pub fn handle_line(&mut self, now: u64, line: &str) -> (String, After) {
        let (reply, after) = match serde_json::from_str::<Value>(line) {
            Ok(v) => self.handle(now, &v),
            Err(e) => (error(format!("invalid JSON: {e}")), After::Continue),
        };
        (reply.to_string(), after)
    }

    pub fn handle(&mut self, now: u64, req: &Value) -> (Value, After) {
        let Some(obj) = req.as_object() else {
            return (error("request must be a JSON object"), After::Continue);
        };
        let cmd = match obj.get("cmd").and_then(Value::as_str) {
            Some(c) => c,
            None => {
                return (
                    error("field 'cmd': missing or not a string"),
                    After::Continue,
                )
            }
        };
        let allowed: &[&str] = match cmd {
            "set" => &["cmd", "dir", "params"],
            "schedule" => &["cmd", "name", "repeat_ms", "steps"],
            _ => &["cmd"],
        };
        if let Some(k) = obj.keys().find(|k| !allowed.contains(&k.as_str())) {
            return (
                error(format!("field '{k}': unknown field for cmd '{cmd}'")),
                After::Continue,
            );
        }
        let reply = match cmd {
            "get" => json!({
                "ok": true,
                "a_to_b": self.a_to_b.params().to_json(),
                "b_to_a": self.b_to_a.params().to_json(),
                "schedule": self.schedule_json(),
            }),
            "schedule" => match self.load_schedule(now, obj) {
                Ok(()) => json!({"ok": true}),
                Err(e) => error(e),
            },
            "set" => match self.set(now, req) {
                Ok(()) => json!({"ok": true}),
                Err(e) => error(e),
            },
            "stats" => {
                self.a_to_b.advance(now);
                self.b_to_a.advance(now);
                json!({
                    "ok": true,
                    "uptime_s": now.saturating_sub(self.started) as f64 / 1e9,
                    "a_to_b": self.a_to_b.stats_json(),
                    "b_to_a": self.b_to_a.stats_json(),
                    "schedule": self.schedule_json(),
                })
            }
            "reset_counters" => {
                self.a_to_b.advance(now);
                self.b_to_a.advance(now);
                self.a_to_b.reset_counters();
                self.b_to_a.reset_counters();
                json!({"ok": true})
            }
            "shutdown" => return (json!({"ok": true}), After::Shutdown),
            other => error(format!(
                "field 'cmd': unknown command '{other}' (get, set, schedule, stats, reset_counters, shutdown)"
            )),
        };
        (reply, After::Continue)
    }

    /// Checks every step against the parameters it would meet (the steps of one cycle applied in
    /// order from the current ones), then replaces the running schedule; nothing changes on an
    /// error. The schedule's first due steps (`at_ms` 0) apply at once.
    fn load_schedule(
        &mut self,
        now: u64,
        req: &serde_json::Map<String, Value>,
    ) -> Result<(), String> {
        let sched = Schedule::parse(req, now)?;
        let (mut ab, mut ba) = (self.a_to_b.params().clone(), self.b_to_a.params().clone());
        for (i, step) in sched.steps().iter().enumerate() {
            let path = format!("steps[{i}].params");
            if step.dir.includes_a_to_b() {
                ab = ab.merged(&step.params, &path)?;
            }
            if step.dir.includes_b_to_a() {
                ba = ba.merged(&step.params, &path)?;
            }
        }
        self.schedule = (!sched.steps().is_empty()).then_some(sched);
        self.run_schedule(now);
        Ok(())
    }

    /// Validates the whole request for every affected direction before changing anything.
    fn set(&mut self, now: u64, req: &Value) -> Result<(), String> {
        let dir = match req.get("dir") {
            None => return Err("field 'dir': missing (a_to_b, b_to_a or both)".into()),
            Some(d) => d
                .as_str()
                .and_then(Dir::parse)
                .ok_or("field 'dir': must be \"a_to_b\", \"b_to_a\" or \"both\"")?,
        };
        let patch = req.get("params").ok_or("field 'params': missing")?;
        let new_ab = if dir.includes_a_to_b() {
            Some(self.a_to_b.params().merged(patch, "params")?)
        } else {
            None
        };
        let new_ba = if dir.includes_b_to_a() {
            Some(self.b_to_a.params().merged(patch, "params")?)
        } else {
            None
        };
        if let Some(p) = new_ab {
            self.a_to_b.set_params(now, p);
        }
        if let Some(p) = new_ba {
            self.b_to_a.set_params(now, p);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn emu() -> Emulator {
        Emulator::new(LinkParams::default(), LinkParams::default(), 1, 0)
    }

    fn call(e: &mut Emulator, line: &str) -> Value {
        let (r, after) = e.handle_line(0, line);
        assert_eq!(after, After::Continue);
        serde_json::from_str(&r).unwrap()
    }

    #[test]
    fn get_and_set_one_direction() {
        let mut e = emu();
        let r = call(
            &mut e,
            r#"{"cmd":"set","dir":"a_to_b","params":{"delay_ms":12.5,"bod":{}}}"#,
        );
        assert_eq!(r, json!({"ok": true}));
        let g = call(&mut e, r#"{"cmd":"get"}"#);
        assert_eq!(g["ok"], true);
        assert_eq!(g["a_to_b"]["delay_ms"], 12.5);
        assert_eq!(g["a_to_b"]["bod"]["cra_bps"], 44_000);
        assert_eq!(g["b_to_a"]["delay_ms"], 300.0);
        assert!(g["b_to_a"]["bod"].is_null());
        call(
            &mut e,
            r#"{"cmd":"set","dir":"both","params":{"rate_bps":0}}"#,
        );
        let g = call(&mut e, r#"{"cmd":"get"}"#);
        assert_eq!(g["a_to_b"]["rate_bps"], 0);
        assert_eq!(g["b_to_a"]["rate_bps"], 0);
    }

    #[test]
    fn invalid_set_changes_nothing() {
        let mut e = emu();
        let before = call(&mut e, r#"{"cmd":"get"}"#);
        for (line, field) in [
            (
                r#"{"cmd":"set","dir":"both","params":{"delay_ms":10,"per":2}}"#,
                "params.per",
            ),
            (
                r#"{"cmd":"set","dir":"both","params":{"delay_ms":-1}}"#,
                "params.delay_ms",
            ),
            (
                r#"{"cmd":"set","dir":"a_to_b","params":{"ber":-0.5}}"#,
                "params.ber",
            ),
            (
                r#"{"cmd":"set","dir":"a_to_b","params":{"rate_bps":10,"colour":1}}"#,
                "params.colour",
            ),
            (
                r#"{"cmd":"set","dir":"a_to_b","params":{"bod":{"superframe_ms":-3}}}"#,
                "params.bod.superframe_ms",
            ),
            (r#"{"cmd":"set","dir":"sideways","params":{}}"#, "dir"),
            (r#"{"cmd":"set","params":{}}"#, "dir"),
            (r#"{"cmd":"set","dir":"both"}"#, "params"),
            (r#"{"cmd":"set","dir":"both","params":{},"x":1}"#, "x"),
            (r#"{"cmd":"fly"}"#, "cmd"),
            (r#"{}"#, "cmd"),
        ] {
            let r = call(&mut e, line);
            assert_eq!(r["ok"], false, "{line}");
            let msg = r["error"].as_str().unwrap();
            assert!(msg.contains(&format!("'{field}'")), "{line}: {msg}");
        }
        assert_eq!(call(&mut e, r#"{"cmd":"get"}"#), before);
        assert_eq!(call(&mut e, "not json")["ok"], false);
        assert_eq!(call(&mut e, "[]")["ok"], false);
    }

    #[test]
    fn a_schedule_changes_the_links_at_its_times_and_a_bad_one_changes_nothing() {
        let mut e = emu();
        let (r, _) = e.handle_line(
            0,
            r#"{"cmd":"schedule","name":"fade","steps":[
                {"at_ms":0,"dir":"b_to_a","params":{"rate_bps":600000}},
                {"at_ms":2000,"dir":"both","params":{"ber":1e-6,"delay_ms":20}},
                {"at_ms":3000,"dir":"b_to_a","params":{"rate_bps":1536000,"ber":0}}]}"#,
        );
        assert_eq!(r, r#"{"ok":true}"#);
        assert_eq!(
            e.b_to_a.params().rate_bps,
            600_000,
            "at_ms 0 applies at once"
        );
        assert_eq!(e.next_schedule_step(), Some(2_000_000_000));
        e.run_schedule(1_999_000_000);
        assert_eq!(e.a_to_b.params().ber, 0.0);
        e.run_schedule(2_000_000_000);
        assert_eq!(
            (e.a_to_b.params().ber, e.a_to_b.params().delay_ms),
            (1e-6, 20.0)
        );
        assert_eq!(e.b_to_a.params().ber, 1e-6);
        e.run_schedule(3_500_000_000);
        assert_eq!(
            (e.b_to_a.params().rate_bps, e.b_to_a.params().ber),
            (1_536_000, 0.0)
        );
        assert_eq!(
            e.a_to_b.params().ber,
            1e-6,
            "a_to_b keeps what its last step set"
        );
        assert_eq!(e.next_schedule_step(), None);
        let g = call(&mut e, r#"{"cmd":"get"}"#);
        assert_eq!(g["schedule"]["name"], "fade");
        assert_eq!(g["schedule"]["applied"], 3);
        assert_eq!(g["schedule"]["max_lateness_us"], 500_000.0);

        let before = call(&mut e, r#"{"cmd":"get"}"#);
        let r = call(
            &mut e,
            r#"{"cmd":"schedule","steps":[
                {"at_ms":0,"dir":"both","params":{"ber":1e-5}},
                {"at_ms":10,"dir":"a_to_b","params":{"per":7}}]}"#,
        );
        assert_eq!(r["ok"], false);
        assert!(
            r["error"]
                .as_str()
                .unwrap()
                .contains("'steps[1].params.per'"),
            "{r}"
        );
        assert_eq!(
            call(&mut e, r#"{"cmd":"get"}"#),
            before,
            "nothing applied, old schedule kept"
        );
        assert_eq!(call(&mut e, r#"{"cmd":"schedule","steps":[]}"#)["ok"], true);
        assert!(call(&mut e, r#"{"cmd":"get"}"#)["schedule"].is_null());
    }

    #[test]
    fn stats_reset_and_shutdown() {
        let mut e = emu();
        e.a_to_b.enqueue(0, vec![0; 100]);
        let s = call(&mut e, r#"{"cmd":"stats"}"#);
        assert_eq!(s["ok"], true);
        assert_eq!(s["a_to_b"]["frames_in"], 1);
        assert_eq!(s["a_to_b"]["queue_frames"], 1);
        assert_eq!(s["b_to_a"]["frames_in"], 0);
        assert_eq!(s["a_to_b"]["rate_bps"], 1_536_000);
        assert!(s["uptime_s"].is_number());
        assert_eq!(
            call(&mut e, r#"{"cmd":"reset_counters"}"#),
            json!({"ok": true})
        );
        let s = call(&mut e, r#"{"cmd":"stats"}"#);
        assert_eq!(s["a_to_b"]["frames_in"], 0);
        let (r, after) = e.handle_line(0, r#"{"cmd":"shutdown"}"#);
        assert_eq!(after, After::Shutdown);
        assert_eq!(r, r#"{"ok":true}"#);
    }
}
