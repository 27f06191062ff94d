//! The control protocol (newline-delimited JSON, one reply line per request line) over
//! the two link directions. Pure: the caller supplies the clock and does the socket I/O.
//!
//! Requests → replies:
//! - `{"cmd":"get"}` → `{"ok":true,"a_to_b":{params},"b_to_a":{params}}`
//! - `{"cmd":"set","dir":"a_to_b"|"b_to_a"|"both","params":{partial}}` → `{"ok":true}`
//! - `{"cmd":"stats"}` → `{"ok":true,"uptime_s":f,"a_to_b":{stats},"b_to_a":{stats}}`
//! - `{"cmd":"reset_counters"}` → `{"ok":true}`
//! - `{"cmd":"shutdown"}` → `{"ok":true}`, then the process exits.
//!
//! Errors are `{"ok":false,"error":"<message naming the field>"}` and change nothing.

use crate::link::Link;
use crate::params::{Dir, LinkParams};
use serde_json::{json, Value};

/// Both directions: a_to_b (A → B, satlab's return link) and b_to_a (forward link).
#[derive(Debug)]
pub struct Emulator {
    pub a_to_b: Link,
    pub b_to_a: Link,
    started: u64,
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
        }
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
            }),
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
                "field 'cmd': unknown command '{other}' (get, set, stats, reset_counters, shutdown)"
            )),
        };
        (reply, After::Continue)
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
